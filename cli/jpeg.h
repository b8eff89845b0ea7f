/* jpeg.h - a JPEG decoder whose pixels are libjpeg-turbo 2.1's with its default settings (islow
 * IDCT, fancy upsampling, RGB output): Pillow's, and so torchvision's. It covers what cameras and
 * encoders commonly write: baseline and extended sequential Huffman (SOF0, SOF1), 8-bit samples,
 * 1 (gray) or 3 (YCbCr, or RGB when the file says so) components, sampling factors 1 or 2 per
 * axis (4:4:4, 4:2:2, 4:2:0, 4:4:0, ...), restart intervals, interleaved and single-component
 * scans. Progressive, lossless, hierarchical and arithmetic-coded files, 12-bit samples, 2 or 4
 * components (CMYK, YCCK) and sampling factors of 3 or 4 are KI_ERR_UNSUPPORTED: the caller
 * decodes those another way (cli/image.c: stb_image).
 *
 * Every input is untrusted: lengths are checked against the bytes there are, sizes against
 * KI_IMAGE_MAX_PIXELS. Entropy data that ends early (a truncated file, a corrupt segment) is
 * handled as libjpeg does: the block being decoded gets zero bits, the rest of the restart
 * interval is mid-gray (128). No state; thread-safe. */
#ifndef KI_JPEG_H
#define KI_JPEG_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/kinfer.h"

typedef struct ki_jpeg_image {
    unsigned char *px; /* h rows of w pixels of `channels` interleaved bytes; malloc'd */
    int w, h, channels;
} ki_jpeg_image;

/* Whether buf starts like a JPEG file (the SOI marker FF D8). */
bool ki_jpeg_is_jpeg(const unsigned char *buf, size_t len);

/* Decodes the JPEG file in buf to `channels` (1 or 3) bytes per pixel into out (set only on
 * success; free out->px). Three channels from a gray file repeat it (Pillow's convert("RGB"));
 * one channel from a YCbCr file is Y itself (libjpeg's and stb_image's gray output), from an RGB
 * file stb_image's (77 R + 150 G + 29 B) >> 8. Fails with KI_ERR_UNSUPPORTED for the kinds above,
 * KI_ERR_FORMAT for malformed files, KI_ERR_LIMIT for too many pixels, KI_ERR_NOMEM; the
 * message does not name the file. */
ki_status ki_jpeg_decode(const unsigned char *buf, size_t len, int channels, ki_jpeg_image *out,
                         ki_error *err);

#endif
