/* image_resample.h - torchvision's Resize (Pillow's antialiased bilinear) and CenterCrop on 8-bit
 * interleaved images, bit-exact. */
#ifndef KI_IMAGE_RESAMPLE_H
#define KI_IMAGE_RESAMPLE_H

#include "image.h"

typedef struct ki_u8_image {
    unsigned char *px; /* h rows of w pixels of c interleaved channels */
    int w, h, c;
} ki_u8_image;

/* in resized to ow x oh into out->px (allocated here, free() it). */
ki_status ki_image_resize_aa(const ki_u8_image *in, int ow, int oh, ki_u8_image *out,
                             ki_error *err);
/* The size torchvision's Resize(s) gives a w x h image: the shorter side becomes s. */
void ki_image_short_side(int w, int h, int s, int *ow, int *oh);
/* Where pixel 0 of a side of `in` pixels lands in its centre crop of `crop` (negative when the
 * crop starts inside it): crop pixel = source pixel + offset. */
int ki_image_crop_offset(int in, int crop);
/* The centre cw x ch of in (zero-padded when larger) into out->px (allocated here). */
ki_status ki_image_center_crop(const ki_u8_image *in, int cw, int ch, ki_u8_image *out,
                               ki_error *err);

#endif
