/* conv2d_dw_avx512.c - the 3x3 stride-1 and stride-2 depthwise plane with AVX-512, straight from
 * the unpadded plane: blocks of four output rows by sixteen columns, the nine weights in
 * registers, each input row loaded once for the output rows it feeds (three shifted vectors; at
 * stride 2 the even and odd columns separated by two permutes). The padding is never copied:
 * each load is masked to the lanes whose column lies inside the row (masked-off lanes read as
 * zero and are not accessed), and a row above or below the plane is a zero vector. Four
 * independent accumulators of 16 lanes; the taps are summed in the order ky, kx, as the padded
 * kernels do. The epilogue (bias, residual, clamp-type activation) is applied before the store,
 * the row's tail through a masked store. Compiled with -mavx512f; called only when the CPU has it
 * (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "simd_avx512.h"

/* Where a column block reads: for stride 1 the three tap vectors start at columns b + kx; for
 * stride 2 two windows of 32 columns start at b and b + 2 (even lanes: taps 0 and 2; odd: tap 1).
 * m[] are the masks of the four (stride 2) or three (stride 1) 16-lane loads. */
typedef struct dw_cols {
    int64_t b;
    __mmask16 m[4];
} dw_cols;

static inline dw_cols cols_at(int64_t ox, int s, int64_t pl, int64_t w)
{
    dw_cols k;
    k.b = ox * s - pl;
    if (s == 1) {
        k.m[0] = (__mmask16)ki_lane_mask16(k.b, w), k.m[1] = (__mmask16)ki_lane_mask16(k.b + 1, w),
        k.m[2] = (__mmask16)ki_lane_mask16(k.b + 2, w);
        k.m[3] = 0;
    } else {
        k.m[0] = (__mmask16)ki_lane_mask16(k.b, w), k.m[1] = (__mmask16)ki_lane_mask16(k.b + 16, w);
        k.m[2] = (__mmask16)ki_lane_mask16(k.b + 2, w),
        k.m[3] = (__mmask16)ki_lane_mask16(k.b + 18, w);
    }
    return k;
}

/* The three tap vectors v0..v2 of input row iy0 + i (zeros outside the plane: a row above or
 * below it loads with every lane masked off, and such a load's address is never dereferenced). */
#define ROW_AT(i, mk)                                                                              \
    const int64_t iy_ = iy0 + (i);                                                                 \
    const bool in_ = iy_ >= 0 && iy_ < h;                                                          \
    const float *p_ = x + (in_ ? iy_ * w + k->b : 0);                                              \
    const __mmask16 mk = in_ ? 0xFFFF : 0
#define LOAD_S1(i)                                                                                 \
    do {                                                                                           \
        ROW_AT(i, rm_);                                                                            \
        v0 = _mm512_maskz_loadu_ps(k->m[0] & rm_, p_);                                             \
        v1 = _mm512_maskz_loadu_ps(k->m[1] & rm_, p_ + 1);                                         \
        v2 = _mm512_maskz_loadu_ps(k->m[2] & rm_, p_ + 2);                                         \
    } while (0)
/* Stride 2: the columns b + 2j, b + 2j + 1 and b + 2j + 2 for j < 16 from two 32-float windows. */
#define LOAD_S2(i)                                                                                 \
    do {                                                                                           \
        ROW_AT(i, rm_);                                                                            \
        __m512 lo_ = _mm512_maskz_loadu_ps(k->m[0] & rm_, p_);                                     \
        __m512 hi_ = _mm512_maskz_loadu_ps(k->m[1] & rm_, p_ + 16);                                \
        v0 = _mm512_permutex2var_ps(lo_, even, hi_);                                               \
        v1 = _mm512_permutex2var_ps(lo_, odd, hi_);                                                \
        v2 = _mm512_permutex2var_ps(_mm512_maskz_loadu_ps(k->m[2] & rm_, p_ + 2), even,            \
                                    _mm512_maskz_loadu_ps(k->m[3] & rm_, p_ + 18));                \
    } while (0)
#define TAPS(acc, ky)                                                                              \
    acc = _mm512_fmadd_ps(w9[3 * (ky)], v0, acc);                                                  \
    acc = _mm512_fmadd_ps(w9[3 * (ky) + 1], v1, acc);                                              \
    acc = _mm512_fmadd_ps(w9[3 * (ky) + 2], v2, acc)
#define EVEN_ODD const __m512i even = ki_even_idx(), odd = ki_odd_idx()

/* Four output rows from input rows iy0..iy0+5 (stride 1), each loaded once for the output rows it
 * feeds, taps summed in the order ky, kx per output row. */
static inline void block4_s1(const float *x, int64_t h, int64_t w, int64_t iy0, const dw_cols *k,
                             const __m512 w9[9], __m512 acc[4])
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v0, v1, v2;
    LOAD_S1(0);
    TAPS(a0, 0);
    LOAD_S1(1);
    TAPS(a0, 1);
    TAPS(a1, 0);
    LOAD_S1(2);
    TAPS(a0, 2);
    TAPS(a1, 1);
    TAPS(a2, 0);
    LOAD_S1(3);
    TAPS(a1, 2);
    TAPS(a2, 1);
    TAPS(a3, 0);
    LOAD_S1(4);
    TAPS(a2, 2);
    TAPS(a3, 1);
    LOAD_S1(5);
    TAPS(a3, 2);
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

static inline __m512 block1_s1(const float *x, int64_t h, int64_t w, int64_t iy0, const dw_cols *k,
                               const __m512 w9[9])
{
    __m512 a = _mm512_setzero_ps(), v0, v1, v2;
    LOAD_S1(0);
    TAPS(a, 0);
    LOAD_S1(1);
    TAPS(a, 1);
    LOAD_S1(2);
    TAPS(a, 2);
    return a;
}

/* Stride 2: four output rows from input rows iy0..iy0+8. */
static inline void block4_s2(const float *x, int64_t h, int64_t w, int64_t iy0, const dw_cols *k,
                             const __m512 w9[9], __m512 acc[4])
{
    EVEN_ODD;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v0, v1, v2;
    LOAD_S2(0);
    TAPS(a0, 0);
    LOAD_S2(1);
    TAPS(a0, 1);
    LOAD_S2(2);
    TAPS(a0, 2);
    TAPS(a1, 0);
    LOAD_S2(3);
    TAPS(a1, 1);
    LOAD_S2(4);
    TAPS(a1, 2);
    TAPS(a2, 0);
    LOAD_S2(5);
    TAPS(a2, 1);
    LOAD_S2(6);
    TAPS(a2, 2);
    TAPS(a3, 0);
    LOAD_S2(7);
    TAPS(a3, 1);
    LOAD_S2(8);
    TAPS(a3, 2);
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

static inline __m512 block1_s2(const float *x, int64_t h, int64_t w, int64_t iy0, const dw_cols *k,
                               const __m512 w9[9])
{
    EVEN_ODD;
    __m512 a = _mm512_setzero_ps(), v0, v1, v2;
    LOAD_S2(0);
    TAPS(a, 0);
    LOAD_S2(1);
    TAPS(a, 1);
    LOAD_S2(2);
    TAPS(a, 2);
    return a;
}

bool ki_conv2d_dw3_avx512_ok(const ki_conv2d *c)
{
    ki_gemm_fin f;
    const int64_t s = c->sw;
    return c->kh == 3 && c->kw == 3 && c->sh == s && (s == 1 || s == 2) && c->dh == 1 &&
           c->dw == 1 && c->pad_mode == KI_CONV_PAD_ZEROS && ki_gemm_fin_of(&c->ep, 0, NULL, &f);
}

void ki_conv2d_dw3_plane_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                                int64_t ch, const float *res, float *restrict o)
{
    ki_gemm_fin f;
    ki_gemm_fin_of(&c->ep, ch, NULL, &f);
    const int64_t h = g->in.h, w = g->in.w, oh = g->oh, ow = g->ow;
    const int s = c->sw == 2 ? 2 : 1;
    const float *wt = c->weight + ch * 9;
    __m512 wv[9];
    for (int i = 0; i < 9; i++) {
        wv[i] = _mm512_set1_ps(wt[i]);
    }
    const __m512 vb = _mm512_set1_ps(f.bias ? f.bias[0] : 0.0f);
    const __m512 lo = _mm512_set1_ps(f.lo), hi = _mm512_set1_ps(f.hi);
    for (int64_t oy = 0; oy < oh;) {
        /* a tail of fewer than four rows is the block of the last four, storing only its new
         * rows (nothing is written twice, so an output that shares the residual's buffer is
         * safe); planes of fewer than four rows go a row at a time */
        const int rows = oh >= 4 ? 4 : 1;
        const int64_t y0 = oh - oy >= rows ? oy : oh - rows;
        const int first = (int)(oy - y0);
        const int64_t iy0 = y0 * s - c->pt;
        for (int64_t ox = 0; ox < ow; ox += 16) {
            const __mmask16 m = (__mmask16)ki_lane_mask16(0, ow - ox);
            const dw_cols k = cols_at(ox, s, c->pl, w);
            __m512 acc[4];
            if (s == 1 && rows == 4) {
                block4_s1(x, h, w, iy0, &k, wv, acc);
            } else if (s == 1) {
                acc[0] = block1_s1(x, h, w, iy0, &k, wv);
            } else if (rows == 4) {
                block4_s2(x, h, w, iy0, &k, wv, acc);
            } else {
                acc[0] = block1_s2(x, h, w, iy0, &k, wv);
            }
            for (int q = first; q < rows; q++) {
                const int64_t at = (y0 + q) * ow + ox;
                ki_store16_fin(o + at, m, _mm512_add_ps(acc[q], vb), res ? res + at : NULL, lo, hi);
            }
        }
        oy = y0 + rows;
    }
}
