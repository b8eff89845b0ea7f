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
static inline uint8_t range_limit(int32_t v)
{
    int32_t s = ((v & 1023) ^ 512) - 512 + 128;
    return (uint8_t)(s < 0 ? 0 : (s > 255 ? 255 : s));
}

/* Output k of column c, descaled, stored and range-checked (inside IDCT_COLUMNS). */
#define IDCT_OUT(k, x)                                                                             \
    do {                                                                                           \
        int32_t o_ = (int32_t)((x) >> shift);                                                      \
        out[(k)*8 + c] = o_;                                                                       \
        big |= (uint32_t)o_ + KI_JPEG_IDCT_SMALL > 2 * KI_JPEG_IDCT_SMALL;                         \
    } while (0)

/* 1-D IDCTs of 8 columns at once: in[i * 8 + c] is input i of column c, out[k * 8 + c] output k,
 * descaled by `shift` and truncated to 32 bits (as libjpeg's int workspace holds pass 1; pass 2
 * only keeps the low 10 bits). T is the arithmetic type: int32_t when every input is within
 * +-KI_JPEG_IDCT_SMALL, so that no intermediate overflows (the largest sum of products is 178219
 * times the largest input) and the loop runs in vector registers; int64_t (libjpeg's JLONG)
 * otherwise. Returns whether an output is outside +-KI_JPEG_IDCT_SMALL. The even part rotates
 * x2, x6 and butterflies x0, x4; the odd part takes x1, x3, x5, x7 through the 12-multiply
 * network. */
#define IDCT_COLUMNS(name, T)                                                                      \
    static bool name(const int32_t *restrict in, int32_t *restrict out, int shift)                 \
    {                                                                                              \
        const T round = (T)1 << (shift - 1);                                                       \
        uint32_t big = 0;                                                                          \
        for (int c = 0; c < 8; c++) {                                                              \
            T x0 = in[c], x1 = in[8 + c], x2 = in[16 + c], x3 = in[24 + c];                        \
            T x4 = in[32 + c], x5 = in[40 + c], x6 = in[48 + c], x7 = in[56 + c];                  \
            T z1 = (x2 + x6) * C_0_541;                                                            \
            T t2 = z1 - x6 * C_1_847, t3 = z1 + x2 * C_0_765;                                      \
            T t0 = (x0 + x4) * (1 << CONST_BITS) + round;                                          \
            T t1 = (x0 - x4) * (1 << CONST_BITS) + round;                                          \
            T e10 = t0 + t3, e13 = t0 - t3, e11 = t1 + t2, e12 = t1 - t2;                          \
            T s3 = x7 + x3, s4 = x5 + x1;                                                          \
            T z5 = (s3 + s4) * C_1_175;                                                            \
            z1 = (x7 + x1) * -C_0_899;                                                             \
            T z2 = (x5 + x3) * -C_2_562;                                                           \
            T z3 = s3 * -C_1_961 + z5, z4 = s4 * -C_0_390 + z5;                                    \
            T p0 = x7 * C_0_298 + z1 + z3, p1 = x5 * C_2_053 + z2 + z4;                            \
            T p2 = x3 * C_3_072 + z2 + z3, p3 = x1 * C_1_501 + z1 + z4;                            \
            IDCT_OUT(0, e10 + p3);                                                                 \
            IDCT_OUT(1, e11 + p2);                                                                 \
            IDCT_OUT(2, e12 + p1);                                                                 \
            IDCT_OUT(3, e13 + p0);                                                                 \
            IDCT_OUT(4, e13 - p0);                                                                 \
            IDCT_OUT(5, e12 - p1);                                                                 \
            IDCT_OUT(6, e11 - p2);                                                                 \
            IDCT_OUT(7, e10 - p3);                                                                 \
        }                                                                                          \
        return big != 0;                                                                           \
    }

IDCT_COLUMNS(idct_columns32, int32_t)
IDCT_COLUMNS(idct_columns64, int64_t)

void ki_jpeg_idct(const int32_t *coef, bool small, uint8_t *out, size_t stride)
{
    int32_t ws[64], wt[64], o[64];
    /* pass 1 down the columns; pass 2 along the rows, which are ws's columns once transposed */
    bool big = small ? idct_columns32(coef, ws, CONST_BITS - PASS1_BITS)
                     : idct_columns64(coef, ws, CONST_BITS - PASS1_BITS);
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 8; j++) {
            wt[j * 8 + i] = ws[i * 8 + j];
        }
    }
    if (big) {
        idct_columns64(wt, o, CONST_BITS + PASS1_BITS + 3);
    } else {
        idct_columns32(wt, o, CONST_BITS + PASS1_BITS + 3);
    }
    uint8_t px[64];
    for (int i = 0; i < 64; i++) {
        px[i] = range_limit(o[i]);
    }
    /* px[k * 8 + r] is the sample at row r, column k */
    for (int r = 0; r < 8; r++) {
        uint8_t *dst = out + (size_t)r * stride;
        for (int k = 0; k < 8; k++) {
            dst[k] = px[k * 8 + r];
        }
    }
}

void ki_jpeg_idct_dc(int32_t dc, uint8_t *out, size_t stride)
{
    int32_t w0 = (int32_t)((int64_t)dc * (1 << PASS1_BITS));
    uint8_t v = range_limit((int32_t)descale(w0, PASS1_BITS + 3));
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
    for (int i = 0; i < 768; i++) {
        t->clamp[i] = (uint8_t)(i < 256 ? 0 : (i > 511 ? 255 : i - 256));
    }
}

void ki_jpeg_ycc_to_rgb(const ki_jpeg_ycc *t, const uint8_t *y, const uint8_t *cb,
                        const uint8_t *cr, int n, uint8_t *rgb)
{
    /* Y plus a term within [-227, 226]: inside the clamp table's -256..511 */
    const uint8_t *clamp = t->clamp + 256;
    for (int i = 0; i < n; i++) {
        int l = y[i], u = cb[i], v = cr[i];
        rgb[3 * i] = clamp[l + t->cr_r[v]];
        rgb[3 * i + 1] = clamp[l + ((t->cb_g[u] + t->cr_g[v]) >> 16)];
        rgb[3 * i + 2] = clamp[l + t->cb_b[u]];
    }
}
