/* jpeg_pixels.c - inverse DCT, chroma upsampling and YCbCr -> RGB, bit-exact with libjpeg-turbo
 * 2.1's defaults (see jpeg_pixels.h). */
#include "jpeg_pixels.h"

#include <stdbool.h>
#include <string.h>

/* The islow IDCT: the Loeffler-Ligtenberg-Moschytz factorisation (12 multiplies per 1-D pass)
 * with its constants in CONST_BITS fixed point. Pass 1 (columns) keeps PASS1_BITS extra bits;
 * pass 2 (rows) removes them and the factor 8 of the 2-D transform. The products and the
 * rounding points must be libjpeg's exactly: other factorisations round differently. */
#define CONST_BITS 13
#define PASS1_BITS 2
#define C_0_298    2446  /* FIX(0.298631336) */
#define C_0_390    3196  /* FIX(0.390180644) */
#define C_0_541    4433  /* FIX(0.541196100) */
#define C_0_765    6270  /* FIX(0.765366865) */
#define C_0_899    7373  /* FIX(0.899976223) */
#define C_1_175    9633  /* FIX(1.175875602) */
#define C_1_501    12299 /* FIX(1.501321110) */
#define C_1_847    15137 /* FIX(1.847759065) */
#define C_1_961    16069 /* FIX(1.961570560) */
#define C_2_053    16819 /* FIX(2.053119869) */
#define C_2_562    20995 /* FIX(2.562915447) */
#define C_3_072    25172 /* FIX(3.072711026) */

/* x / 2^n rounded half up (the shift of a negative value is arithmetic, as in libjpeg). */
static inline int64_t descale(int64_t x, int n)
{
    return (x + ((int64_t)1 << (n - 1))) >> n;
}

/* libjpeg's post-IDCT range limit: the value's low 10 bits read as a signed number, plus 128,
 * clamped to a byte. Values in [-512, 511] clamp; larger ones wrap, as its table does. */
static inline uint8_t range_limit(int64_t v)
{
    int32_t s = (int32_t)((v & 1023) ^ 512) - 512 + 128;
    return (uint8_t)(s < 0 ? 0 : (s > 255 ? 255 : s));
}

/* One 1-D pass over 8 values x[0], x[step], ...: the even and odd parts, results o[0..7] before
 * descaling (the caller descales by its pass's bits). */
static inline void idct_1d(const int64_t x[8], int64_t o[8])
{
    int64_t z1 = (x[2] + x[6]) * C_0_541;
    int64_t t2 = z1 - x[6] * C_1_847, t3 = z1 + x[2] * C_0_765;
    int64_t t0 = (x[0] + x[4]) * (1 << CONST_BITS), t1 = (x[0] - x[4]) * (1 << CONST_BITS);
    int64_t e10 = t0 + t3, e13 = t0 - t3, e11 = t1 + t2, e12 = t1 - t2;

    int64_t p0 = x[7], p1 = x[5], p2 = x[3], p3 = x[1];
    int64_t z3 = p0 + p2, z4 = p1 + p3;
    int64_t z5 = (z3 + z4) * C_1_175;
    z1 = (p0 + p3) * -C_0_899;
    int64_t z2 = (p1 + p2) * -C_2_562;
    z3 = z3 * -C_1_961 + z5;
    z4 = z4 * -C_0_390 + z5;
    p0 = p0 * C_0_298 + z1 + z3;
    p1 = p1 * C_2_053 + z2 + z4;
    p2 = p2 * C_3_072 + z2 + z3;
    p3 = p3 * C_1_501 + z1 + z4;

    o[0] = e10 + p3;
    o[7] = e10 - p3;
    o[1] = e11 + p2;
    o[6] = e11 - p2;
    o[2] = e12 + p1;
    o[5] = e12 - p1;
    o[3] = e13 + p0;
    o[4] = e13 - p0;
}

void ki_jpeg_idct(const int32_t *coef, uint8_t *out, size_t stride)
{
    int32_t ws[64]; /* libjpeg's int workspace: pass 1 results are truncated to 32 bits */
    int64_t x[8], o[8];
    for (int c = 0; c < 8; c++) {
        const int32_t *in = coef + c;
        if ((in[8] | in[16] | in[24] | in[32] | in[40] | in[48] | in[56]) == 0) {
            /* no AC in this column: the full pass gives dc << PASS1_BITS in every row */
            int32_t dc = (int32_t)((int64_t)in[0] * (1 << PASS1_BITS));
            for (int r = 0; r < 8; r++) {
                ws[r * 8 + c] = dc;
            }
            continue;
        }
        for (int r = 0; r < 8; r++) {
            x[r] = in[r * 8];
        }
        idct_1d(x, o);
        for (int r = 0; r < 8; r++) {
            ws[r * 8 + c] = (int32_t)descale(o[r], CONST_BITS - PASS1_BITS);
        }
    }
    for (int r = 0; r < 8; r++) {
        const int32_t *w = ws + r * 8;
        uint8_t *dst = out + (size_t)r * stride;
        if ((w[1] | w[2] | w[3] | w[4] | w[5] | w[6] | w[7]) == 0) {
            /* the full pass gives the same: w[0] << CONST_BITS descaled */
            memset(dst, range_limit(descale(w[0], PASS1_BITS + 3)), 8);
            continue;
        }
        for (int i = 0; i < 8; i++) {
            x[i] = w[i];
        }
        idct_1d(x, o);
        for (int i = 0; i < 8; i++) {
            dst[i] = range_limit(descale(o[i], CONST_BITS + PASS1_BITS + 3));
        }
    }
}

void ki_jpeg_idct_dc(int32_t dc, uint8_t *out, size_t stride)
{
    int32_t w0 = (int32_t)((int64_t)dc * (1 << PASS1_BITS));
    uint8_t v = range_limit(descale(w0, PASS1_BITS + 3));
    for (int r = 0; r < 8; r++) {
        memset(out + (size_t)r * stride, v, 8);
    }
}

/* Horizontal 2x: each input sample becomes two, weighted 3:1 with its nearer neighbour, the
 * first and last output samples copies; biases 1 and 2 alternate so that rounding is unbiased.
 * libjpeg uses this "fancy" form only for rows of more than 2 samples. */
static void h2v1(const uint8_t *in, int dw, uint8_t *out)
{
    if (dw <= 2) {
        for (int i = 0; i < dw; i++) {
            out[2 * i] = out[2 * i + 1] = in[i];
        }
        return;
    }
    out[0] = in[0];
    out[1] = (uint8_t)((in[0] * 3 + in[1] + 2) >> 2);
    for (int i = 1; i < dw - 1; i++) {
        int v = in[i] * 3;
        out[2 * i] = (uint8_t)((v + in[i - 1] + 1) >> 2);
        out[2 * i + 1] = (uint8_t)((v + in[i + 1] + 2) >> 2);
    }
    int v = in[dw - 1] * 3;
    out[2 * dw - 2] = (uint8_t)((v + in[dw - 2] + 1) >> 2);
    out[2 * dw - 1] = in[dw - 1];
}

/* 2x both ways: the vertical 3:1 sums of the nearest row and the neighbour row (above for the
 * upper output row, below for the lower), then 3:1 horizontally, in 4-bit fixed point with
 * biases 8 and 7. Rows of at most 2 samples are replicated. */
static void h2v2(const uint8_t *in, const uint8_t *nb, int dw, uint8_t *out)
{
    if (dw <= 2) {
        h2v1(in, dw, out);
        return;
    }
    int last = in[0] * 3 + nb[0], cur = last, next = in[1] * 3 + nb[1];
    out[0] = (uint8_t)((cur * 4 + 8) >> 4);
    out[1] = (uint8_t)((cur * 3 + next + 7) >> 4);
    for (int i = 1; i < dw - 1; i++) {
        last = cur;
        cur = next;
        next = in[i + 1] * 3 + nb[i + 1];
        out[2 * i] = (uint8_t)((cur * 3 + last + 8) >> 4);
        out[2 * i + 1] = (uint8_t)((cur * 3 + next + 7) >> 4);
    }
    out[2 * dw - 2] = (uint8_t)((next * 3 + cur + 8) >> 4);
    out[2 * dw - 1] = (uint8_t)((next * 4 + 7) >> 4);
}

/* Vertical 2x (libjpeg-turbo >= 2.1): 3:1 with the neighbour row, bias 1 above and 2 below. */
static void h1v2(const uint8_t *in, const uint8_t *nb, int dw, int bias, uint8_t *out)
{
    for (int i = 0; i < dw; i++) {
        out[i] = (uint8_t)((in[i] * 3 + nb[i] + bias) >> 2);
    }
}

const uint8_t *ki_jpeg_upsample_row(const ki_jpeg_plane *p, int y, uint8_t *buf)
{
    int r = p->fv == 2 ? y >> 1 : y;
    const uint8_t *in = p->px + (size_t)r * p->stride;
    if (p->fv == 1) {
        if (p->fh == 1) {
            return in;
        }
        h2v1(in, p->dw, buf);
        return buf;
    }
    /* the row above the first is the first, the row below the last valid one is that one */
    bool upper = (y & 1) == 0;
    int n = upper ? (r > 0 ? r - 1 : 0) : (r + 1 < p->dh ? r + 1 : p->dh - 1);
    const uint8_t *nb = p->px + (size_t)n * p->stride;
    if (p->fh == 1) {
        h1v2(in, nb, p->dw, upper ? 1 : 2, buf);
    } else {
        h2v2(in, nb, p->dw, buf);
    }
    return buf;
}

void ki_jpeg_ycc_init(ki_jpeg_ycc *t)
{
    /* FIX(x) = x in 16-bit fixed point, rounded; ONE_HALF rounds the red and blue terms here and
     * the green sum when it is shifted down */
    const int32_t f_cr_r = 91881, f_cb_b = 116130, f_cr_g = 46802, f_cb_g = 22554;
    const int32_t half = 1 << 15;
    for (int i = 0; i < 256; i++) {
        int32_t x = i - 128;
        t->cr_r[i] = (f_cr_r * x + half) >> 16;
        t->cb_b[i] = (f_cb_b * x + half) >> 16;
        t->cr_g[i] = -f_cr_g * x;
        t->cb_g[i] = -f_cb_g * x + half;
    }
}

static inline uint8_t clamp255(int32_t v)
{
    return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
}

void ki_jpeg_ycc_to_rgb(const ki_jpeg_ycc *t, const uint8_t *y, const uint8_t *cb,
                        const uint8_t *cr, int n, uint8_t *rgb)
{
    for (int i = 0; i < n; i++) {
        int32_t l = y[i];
        int u = cb[i], v = cr[i];
        rgb[3 * i] = clamp255(l + t->cr_r[v]);
        rgb[3 * i + 1] = clamp255(l + ((t->cb_g[u] + t->cr_g[v]) >> 16));
        rgb[3 * i + 2] = clamp255(l + t->cb_b[u]);
    }
}
