/* image.h - decoding images into normalised CHW float tensors: JPEG with kinfer's own decoder
 * (cli/jpeg.c, libjpeg-turbo's pixels, as Pillow and torchvision see them), everything else and
 * the JPEG kinds it leaves out (progressive, arithmetic-coded, CMYK, 12-bit) with stb_image. */
#ifndef KI_IMAGE_H
#define KI_IMAGE_H

#include <stdbool.h>

#include "../core/kinfer.h"

#define KI_IMAGE_MAX_PIXELS ((int64_t)1 << 28)

typedef struct ki_image_prep {
    int channels;      /* 1 (gray) or 3 (RGB) */
    int height, width; /* network input size */
    bool letterbox;    /* keep aspect ratio, pad with 114/255 */
    float mean[3], std[3];
    /* torchvision's way (Resize then CenterCrop, bit-exact with a PIL image), when center_crop:
     * the image is resized with Pillow's antialiased bilinear filter to resize_w x resize_h, or
     * its shorter side to resize_short (none when all three are 0), then its centre width x
     * height is taken (zero-padded if smaller) */
    bool center_crop;
    int resize_w, resize_h, resize_short;
    bool bgr; /* feed the channels as B, G, R */
} ki_image_prep;

typedef struct ki_image_info {
    int orig_w, orig_h;
    float scale;        /* network pixels per original pixel (across) */
    float pad_x, pad_y; /* letterbox offsets in network pixels */
    float scale_y;      /* with center_crop: down; then pad_x/y is where pixel 0 lands */
} ki_image_info;

/* Pixels decoded from an image file; ki_image_pixels_free releases them. */
typedef struct ki_image_pixels {
    unsigned char *px; /* h rows of w pixels of the channels asked for, interleaved */
    int w, h;
    bool stb; /* from stb_image, which has its own free */
} ki_image_pixels;

/* Decodes the file path to 8-bit pixels of `channels` (1 or 3) channels: JPEG through
 * cli/jpeg.c, anything else (and the JPEG kinds it leaves out) through stb_image. Sizes are
 * checked against KI_IMAGE_MAX_PIXELS; messages name the file. */
ki_status ki_image_decode(const char *path, int channels, ki_image_pixels *out, ki_error *err);
void ki_image_pixels_free(ki_image_pixels *p);

/* Decodes path and writes channels*height*width floats to dst. */
ki_status ki_image_load(const char *path, const ki_image_prep *prep, float *dst,
                        ki_image_info *info, ki_error *err);
bool ki_image_is_image_path(const char *path);

#endif
