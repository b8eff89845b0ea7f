/* image.h - decoding images (stb_image) into normalised CHW float tensors. */
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

/* Decodes path and writes channels*height*width floats to dst. */
ki_status ki_image_load(const char *path, const ki_image_prep *prep, float *dst,
                        ki_image_info *info, ki_error *err);
bool ki_image_is_image_path(const char *path);

#endif
