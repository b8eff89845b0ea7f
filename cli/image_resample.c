/* image_resample.c - torchvision's preprocessing of a PIL image, bit for bit: the antialiased
 * bilinear resize of Pillow (a separable triangle filter stretched by the scale factor, fixed-point
 * coefficients with 22 fraction bits, a horizontal pass then a vertical one, each rounded to 8
 * bits) and transforms.CenterCrop (zero padding when the crop is larger, offsets rounded half to
 * even as Python's round()). Reimplemented from the behaviour described in Pillow's
 * documentation and checked against torchvision's tensors in tests/unit/test_cli.c. */
#include "image_resample.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"

#define FRAC_BITS 22 /* 32 bits minus 8 for the value and 2 for filter overshoot */

/* Coefficients of one axis: out positions x [lo[x], lo[x] + n[x]) with weights k[x * ksize ..]. */
typedef struct axis_coeffs {
    int ksize;
    int *lo, *n;
    int32_t *k;
} axis_coeffs;

static void axis_free(axis_coeffs *a)
{
    free(a->lo);
    free(a->n);
    free(a->k);
}

static double triangle(double x)
{
    x = x < 0 ? -x : x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* The triangle filter of support 1 stretched to the scale when shrinking; each output's weights
 * normalised to sum 1 in double, then rounded to fixed point away from zero. */
static ki_status axis_make(int in_size, int out_size, axis_coeffs *a, ki_error *err)
{
    double scale = (double)(float)in_size / out_size, fs = scale < 1.0 ? 1.0 : scale;
    double support = 1.0 * fs, inv = 1.0 / fs;
    int ksize = (int)ceil(support) * 2 + 1;
    size_t nk;
    *a = (axis_coeffs){ ksize, NULL, NULL, NULL };
    if (!ki_ckd_mul(&nk, (size_t)out_size, (size_t)ksize) || nk > ((size_t)1 << 28)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "resize from %d to %d needs too many coefficients",
                       in_size, out_size);
    }
    a->lo = malloc((size_t)out_size * sizeof *a->lo);
    a->n = malloc((size_t)out_size * sizeof *a->n);
    a->k = calloc(nk, sizeof *a->k);
    double *w = malloc((size_t)ksize * sizeof *w);
    if (!a->lo || !a->n || !a->k || !w) {
        free(w);
        axis_free(a);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for resize coefficients");
    }
    for (int x = 0; x < out_size; x++) {
        double center = (x + 0.5) * scale, sum = 0.0;
        int lo = (int)(center - support + 0.5), hi = (int)(center + support + 0.5);
        lo = lo < 0 ? 0 : lo;
        hi = hi > in_size ? in_size : hi;
        int n = hi - lo;
        for (int j = 0; j < n; j++) {
            w[j] = triangle((j + lo - center + 0.5) * inv);
            sum += w[j];
        }
        for (int j = 0; j < n; j++) {
            double v = sum != 0.0 ? w[j] / sum : w[j];
            double f = v * (double)(1 << FRAC_BITS);
            a->k[(size_t)x * ksize + j] = (int32_t)(v < 0 ? f - 0.5 : f + 0.5);
        }
        a->lo[x] = lo;
        a->n[x] = n;
    }
    free(w);
    return KI_OK;
}

static unsigned char clip8(int32_t v)
{
    int32_t q = v >> FRAC_BITS; /* arithmetic shift: floor */
    return (unsigned char)(q < 0 ? 0 : q > 255 ? 255 : q);
}

/* Rows [y0, y0 + rows) of in, resampled along x to out (ow wide, rows tall). */
static void pass_x(const ki_u8_image *in, int y0, int rows, const axis_coeffs *a, int ow,
                   unsigned char *out)
{
    const int c = in->c;
    for (int y = 0; y < rows; y++) {
        const unsigned char *src = in->px + (size_t)(y0 + y) * in->w * c;
        unsigned char *dst = out + (size_t)y * ow * c;
        for (int x = 0; x < ow; x++) {
            const int32_t *k = a->k + (size_t)x * a->ksize;
            const unsigned char *s = src + (size_t)a->lo[x] * c;
            for (int ch = 0; ch < c; ch++) {
                int32_t acc = 1 << (FRAC_BITS - 1);
                for (int j = 0; j < a->n[x]; j++) {
                    acc += (int32_t)s[(size_t)j * c + ch] * k[j];
                }
                dst[(size_t)x * c + ch] = clip8(acc);
            }
        }
    }
}

/* in (w wide, its first row is source row y0) resampled along y to out (oh tall). */
static void pass_y(const unsigned char *in, int w, int c, int y0, const axis_coeffs *a, int oh,
                   unsigned char *out)
{
    const size_t row = (size_t)w * c;
    for (int y = 0; y < oh; y++) {
        const int32_t *k = a->k + (size_t)y * a->ksize;
        const unsigned char *s = in + (size_t)(a->lo[y] - y0) * row;
        unsigned char *dst = out + (size_t)y * row;
        for (size_t i = 0; i < row; i++) {
            int32_t acc = 1 << (FRAC_BITS - 1);
            for (int j = 0; j < a->n[y]; j++) {
                acc += (int32_t)s[(size_t)j * row + i] * k[j];
            }
            dst[i] = clip8(acc);
        }
    }
}

static ki_status image_alloc(int w, int h, int c, ki_u8_image *out, ki_error *err)
{
    size_t n;
    if (w <= 0 || h <= 0 || !ki_ckd_mul(&n, (size_t)w, (size_t)h) ||
        n > (size_t)KI_IMAGE_MAX_PIXELS || !ki_ckd_mul(&n, n, (size_t)c)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "image of %dx%d is out of range", w, h);
    }
    out->px = malloc(n);
    if (!out->px) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for a %dx%d image", w, h);
    }
    out->w = w, out->h = h, out->c = c;
    return KI_OK;
}

ki_status ki_image_resize_aa(const ki_u8_image *in, int ow, int oh, ki_u8_image *out, ki_error *err)
{
    axis_coeffs ax = { 0 }, ay = { 0 };
    unsigned char *tmp = NULL;
    ki_status st = image_alloc(ow, oh, in->c, out, err);
    if (st != KI_OK) {
        return st;
    }
    st = axis_make(in->w, ow, &ax, err);
    if (st == KI_OK) {
        st = axis_make(in->h, oh, &ay, err);
    }
    if (st != KI_OK) {
        axis_free(&ax);
        free(out->px);
        out->px = NULL;
        return st;
    }
    /* as Pillow: a pass runs only when its side changes; the horizontal pass covers just the
     * source rows the vertical one reads */
    const unsigned char *rows = in->px;
    int y0 = 0;
    if (ow != in->w) {
        int first = ay.lo[0], last = ay.lo[oh - 1] + ay.n[oh - 1];
        if (oh == in->h) {
            first = 0, last = in->h;
        }
        tmp = malloc((size_t)ow * (size_t)(last - first) * (size_t)in->c);
        if (!tmp) {
            st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory for a %dx%d image", ow, last - first);
        } else {
            pass_x(in, first, last - first, &ax, ow, tmp);
            rows = tmp, y0 = first;
        }
    }
    if (st == KI_OK) {
        if (oh != in->h) {
            pass_y(rows, ow, in->c, y0, &ay, oh, out->px);
        } else {
            memcpy(out->px, rows, (size_t)ow * oh * in->c);
        }
    }
    free(tmp);
    axis_free(&ax);
    axis_free(&ay);
    if (st != KI_OK) {
        free(out->px);
        out->px = NULL;
    }
    return st;
}

void ki_image_short_side(int w, int h, int s, int *ow, int *oh)
{
    int shorter = w <= h ? w : h, longer = w <= h ? h : w;
    /* torchvision: int(s * long / short), a double quotient truncated */
    double l = (double)((int64_t)s * longer) / (double)shorter;
    int nl = l > (double)INT32_MAX ? INT32_MAX : (int)l;
    *ow = w <= h ? s : nl;
    *oh = w <= h ? nl : s;
}

int ki_image_crop_offset(int in, int crop)
{
    /* zero padding to at least the crop (left/top get the smaller half), then the centre at
     * round((padded - crop) / 2), rounded half to even as Python's round() */
    int pad = crop > in ? (crop - in) / 2 : 0, padded = crop > in ? crop : in;
    return pad - (int)rint((padded - crop) / 2.0);
}

ki_status ki_image_center_crop(const ki_u8_image *in, int cw, int chh, ki_u8_image *out,
                               ki_error *err)
{
    ki_status st = image_alloc(cw, chh, in->c, out, err);
    if (st != KI_OK) {
        return st;
    }
    const int ox = ki_image_crop_offset(in->w, cw), oy = ki_image_crop_offset(in->h, chh);
    const int c = in->c;
    for (int y = 0; y < chh; y++) {
        for (int x = 0; x < cw; x++) {
            int sy = y - oy, sx = x - ox;
            bool inside = sy >= 0 && sy < in->h && sx >= 0 && sx < in->w;
            for (int k = 0; k < c; k++) {
                out->px[((size_t)y * cw + x) * c + k] =
                    inside ? in->px[((size_t)sy * in->w + sx) * c + k] : 0;
            }
        }
    }
    return KI_OK;
}
