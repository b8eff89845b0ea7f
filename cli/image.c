/* image.c - image decoding, channel conversion, bilinear resize, letterbox and normalisation. */
#include "image.h"

#include <limits.h>
#include <math.h>
#include <stb_image.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/io.h"
#include "image_resample.h"
#include "jpeg.h"

/* The whole file is read into memory; stb_image takes its length as an int. */
#define KI_IMAGE_MAX_FILE ((size_t)INT_MAX)

bool ki_image_is_image_path(const char *path)
{
    static const char *const ext[] = { ".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga",
                                       ".pgm", ".ppm", ".pnm",  ".psd", ".hdr", ".pic" };
    const char *dot = strrchr(path, '.');
    for (size_t i = 0; dot && i < sizeof ext / sizeof ext[0]; i++) {
        if (strcasecmp(dot, ext[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* Bilinear sample of an 8-bit HWC image at (y, x) in source pixels (half-pixel centres). */
static float sample(const unsigned char *img, int w, int h, int c, int ch, float y, float x)
{
    y = y < 0 ? 0 : (y > h - 1 ? (float)(h - 1) : y);
    x = x < 0 ? 0 : (x > w - 1 ? (float)(w - 1) : x);
    int y0 = (int)y, x0 = (int)x;
    int y1 = y0 + 1 < h ? y0 + 1 : y0, x1 = x0 + 1 < w ? x0 + 1 : x0;
    float fy = y - (float)y0, fx = x - (float)x0;
    float a = img[((size_t)y0 * w + x0) * c + ch], b = img[((size_t)y0 * w + x1) * c + ch];
    float p = img[((size_t)y1 * w + x0) * c + ch], q = img[((size_t)y1 * w + x1) * c + ch];
    return (a * (1 - fx) + b * fx) * (1 - fy) + (p * (1 - fx) + q * fx) * fy;
}

static void resize_into(const unsigned char *img, int w, int h, const ki_image_prep *p, float *dst,
                        ki_image_info *info)
{
    int c = p->channels;
    float sx = (float)p->width / (float)w, sy = (float)p->height / (float)h;
    int nw = p->width, nh = p->height;
    float ox = 0, oy = 0;
    if (p->letterbox) {
        float s = sx < sy ? sx : sy;
        sx = sy = s;
        nw = (int)lroundf((float)w * s);
        nh = (int)lroundf((float)h * s);
        ox = (float)(p->width - nw) / 2.0f;
        oy = (float)(p->height - nh) / 2.0f;
    }
    info->scale = sx;
    info->pad_x = ox;
    info->pad_y = oy;
    int x0 = (int)floorf(ox), y0 = (int)floorf(oy);
    for (int ch = 0; ch < c; ch++) {
        float *plane = dst + (size_t)ch * p->height * p->width;
        const int from = p->bgr && c == 3 ? 2 - ch : ch;
        for (int y = 0; y < p->height; y++) {
            for (int x = 0; x < p->width; x++) {
                float v;
                if (x < x0 || x >= x0 + nw || y < y0 || y >= y0 + nh) {
                    v = 114.0f;
                } else if (nw == w && nh == h) {
                    v = img[((size_t)(y - y0) * w + (x - x0)) * c + from];
                } else {
                    float syf = ((float)(y - y0) + 0.5f) * (float)h / (float)nh - 0.5f;
                    float sxf = ((float)(x - x0) + 0.5f) * (float)w / (float)nw - 0.5f;
                    v = sample(img, w, h, c, from, syf, sxf);
                }
                plane[(size_t)y * p->width + x] = (v / 255.0f - p->mean[ch]) / p->std[ch];
            }
        }
    }
}

/* An 8-bit image of exactly the network's size into normalised planes, as ToTensor + Normalize
 * compute them in float32. */
static void planes_from(const ki_u8_image *im, const ki_image_prep *p, float *dst)
{
    const size_t hw = (size_t)p->height * p->width;
    for (int ch = 0; ch < im->c; ch++) {
        int from = p->bgr && im->c == 3 ? 2 - ch : ch;
        for (size_t i = 0; i < hw; i++) {
            float v = (float)im->px[i * im->c + from];
            dst[ch * hw + i] = (v / 255.0f - p->mean[ch]) / p->std[ch];
        }
    }
}

/* torchvision's Resize + CenterCrop (see image_resample.c), then the planes. */
static ki_status center_crop_into(unsigned char *img, int w, int h, const ki_image_prep *p,
                                  float *dst, ki_image_info *info, ki_error *err)
{
    ki_u8_image src = { img, w, h, p->channels }, sized = { 0 }, crop = { 0 };
    int rw = p->resize_w, rh = p->resize_h;
    if (p->resize_short > 0) {
        ki_image_short_side(w, h, p->resize_short, &rw, &rh);
    }
    ki_status st = KI_OK;
    if (rw > 0 && (rw != w || rh != h)) {
        st = ki_image_resize_aa(&src, rw, rh, &sized, err);
    } else {
        sized = src;
    }
    if (st == KI_OK) {
        st = ki_image_center_crop(&sized, p->width, p->height, &crop, err);
    }
    if (st == KI_OK) {
        planes_from(&crop, p, dst);
        info->scale = (float)sized.w / (float)w;
        info->scale_y = (float)sized.h / (float)h;
        info->pad_x = (float)ki_image_crop_offset(sized.w, p->width);
        info->pad_y = (float)ki_image_crop_offset(sized.h, p->height);
    }
    if (sized.px != img) {
        free(sized.px);
    }
    free(crop.px);
    return st;
}

/* stb_image on the file's bytes, with its size checked before it decodes. */
static ki_status stb_decode(const char *path, const unsigned char *buf, size_t len, int channels,
                            ki_image_pixels *out, ki_error *err)
{
    int w, h, comp;
    if (!stbi_info_from_memory(buf, (int)len, &w, &h, &comp)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: cannot decode image: %s", path,
                       stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
    }
    if (w <= 0 || h <= 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: invalid image size %dx%d", path, w, h);
    }
    if ((int64_t)w * h > KI_IMAGE_MAX_PIXELS) {
        return KI_FAIL(err, KI_ERR_LIMIT, "%s: %dx%d pixels is more than kinfer accepts (%lld)",
                       path, w, h, (long long)KI_IMAGE_MAX_PIXELS);
    }
    unsigned char *px = stbi_load_from_memory(buf, (int)len, &w, &h, &comp, channels);
    if (!px) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: cannot decode image: %s", path,
                       stbi_failure_reason() ? stbi_failure_reason() : "unknown error");
    }
    *out = (ki_image_pixels){ px, w, h, true };
    return KI_OK;
}

ki_status ki_image_decode(const char *path, int channels, ki_image_pixels *out, ki_error *err)
{
    unsigned char *buf;
    size_t len;
    ki_status st = ki_file_read(path, KI_IMAGE_MAX_FILE, &buf, &len, err);
    if (st != KI_OK) {
        return st;
    }
    st = KI_ERR_UNSUPPORTED;
    if (ki_jpeg_is_jpeg(buf, len)) {
        ki_jpeg_image im;
        st = ki_jpeg_decode(buf, len, channels, &im, err);
        if (st == KI_OK) {
            *out = (ki_image_pixels){ im.px, im.w, im.h, false };
        } else if (st == KI_ERR_FORMAT) {
            ki_error_prefix(err, "%s: cannot decode image", path);
        } else if (st != KI_ERR_UNSUPPORTED) {
            ki_error_prefix(err, "%s", path);
        }
    }
    if (st == KI_ERR_UNSUPPORTED) { /* not a JPEG, or a kind jpeg.c leaves to stb_image */
        st = stb_decode(path, buf, len, channels, out, err);
    }
    free(buf);
    return st;
}

void ki_image_pixels_free(ki_image_pixels *p)
{
    if (p->stb) {
        stbi_image_free(p->px);
    } else {
        free(p->px);
    }
    p->px = NULL;
}

ki_status ki_image_load(const char *path, const ki_image_prep *prep, float *dst,
                        ki_image_info *info, ki_error *err)
{
    if (prep->channels != 1 && prep->channels != 3) {
        return KI_FAIL(err, KI_ERR_SHAPE, "%s: the model input has %d channels; images give 1 or 3",
                       path, prep->channels);
    }
    ki_image_pixels im;
    ki_status st = ki_image_decode(path, prep->channels, &im, err);
    if (st != KI_OK) {
        return st;
    }
    info->orig_w = im.w;
    info->orig_h = im.h;
    if (prep->center_crop) {
        st = center_crop_into(im.px, im.w, im.h, prep, dst, info, err);
        if (st != KI_OK) {
            ki_error_prefix(err, "%s", path);
        }
    } else {
        resize_into(im.px, im.w, im.h, prep, dst, info);
    }
    ki_image_pixels_free(&im);
    return st;
}
