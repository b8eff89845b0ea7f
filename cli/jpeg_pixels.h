/* jpeg_pixels.h - the sample stages of the JPEG decoder (cli/jpeg.c): the inverse DCT, chroma
 * upsampling and YCbCr -> RGB, each giving exactly what libjpeg-turbo 2.1 gives with its default
 * settings (JDCT_ISLOW, do_fancy_upsampling) - Pillow's decoder. Written from the algorithms
 * (Loeffler-Ligtenberg-Moschytz IDCT in 13-bit fixed point, triangle-filter upsampling, 16-bit
 * fixed-point colour tables); no code of libjpeg's. The caller owns every buffer; no state;
 * thread-safe. */
#ifndef KI_JPEG_PIXELS_H
#define KI_JPEG_PIXELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Inputs within +-KI_JPEG_IDCT_SMALL take the IDCT's fast (32-bit) path. */
#define KI_JPEG_IDCT_SMALL 8191

/* The 8x8 samples of one block from its dequantised coefficients (natural order, each the
 * product of a 16-bit coefficient and a 16-bit quantiser) into out, rows stride bytes apart.
 * small: every coefficient is within +-KI_JPEG_IDCT_SMALL (the results are the same either
 * way). */
void ki_jpeg_idct(const int32_t *coef, bool small, uint8_t *out, size_t stride);
/* The same for a block whose AC coefficients are all zero: 64 equal samples. */
void ki_jpeg_idct_dc(int32_t dc, uint8_t *out, size_t stride);

/* One component's decoded samples and how they map onto the image. */
typedef struct ki_jpeg_plane {
    const uint8_t *px; /* rows of `stride` bytes */
    size_t stride;
    int dw, dh; /* valid samples: ceil(width * h / hmax) x ceil(height * v / vmax) */
    int fh, fv; /* upsampling factors hmax / h and vmax / v, 1 or 2 */
} ki_jpeg_plane;

/* Row y of the component brought to the full image size: the plane's own row when it is not
 * subsampled, else buf (which holds at least 2 * dw + 1 bytes) filled with the upsampled row. */
const uint8_t *ki_jpeg_upsample_row(const ki_jpeg_plane *p, int y, uint8_t *buf);

/* libjpeg's YCbCr -> RGB tables (16-bit fixed point), and a clamp to 0..255 of -256..511. */
typedef struct ki_jpeg_ycc {
    int32_t cr_r[256], cb_b[256], cr_g[256], cb_g[256];
    uint8_t clamp[768];
} ki_jpeg_ycc;

void ki_jpeg_ycc_init(ki_jpeg_ycc *t);
/* n pixels of Y, Cb, Cr rows into interleaved RGB. */
void ki_jpeg_ycc_to_rgb(const ki_jpeg_ycc *t, const uint8_t *y, const uint8_t *cb,
                        const uint8_t *cr, int n, uint8_t *rgb);

#endif
