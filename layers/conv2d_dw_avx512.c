/* conv2d_dw_avx512.c - the 3x3 stride-1 and stride-2 depthwise plane with AVX-512: blocks of four
 * output rows by sixteen columns, the nine weights in registers, each input row loaded once (three
 * shifted vectors; at stride 2 the even and odd columns separated by two permutes) for the output
 * rows it feeds; four independent accumulators of 16 lanes. Works on the zero-padded copy of the
 * plane that ki_conv2d_forward_dw makes (no borders; the slack after it covers the last vector of a
 * row). The epilogue (bias, residual, clamp-type activation) is applied before the store, the row's
 * tail through a masked store. Compiled with -mavx512f; called only when the CPU has it
 * (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"

/* acc += the three taps of kernel row ky over the shifted input vectors v0..v2. */
#define DW3_ROW(acc, ky)                                                                           \
    acc = _mm512_fmadd_ps(w[3 * (ky)], v0, acc);                                                   \
    acc = _mm512_fmadd_ps(w[3 * (ky) + 1], v1, acc);                                               \
    acc = _mm512_fmadd_ps(w[3 * (ky) + 2], v2, acc)
#define DW3_LOAD(i)                                                                                \
    v0 = _mm512_loadu_ps(r + (i)*wp), v1 = _mm512_loadu_ps(r + (i)*wp + 1),                        \
    v2 = _mm512_loadu_ps(r + (i)*wp + 2)

/* Four output rows by sixteen columns from r (the padded plane at the block's first input row
 * and column): each input row loaded once, taps summed in the order ky, kx per output row. */
static inline void block4(const float *r, int64_t wp, const __m512 w[9], __m512 acc[4])
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v0, v1, v2;
    DW3_LOAD(0);
    DW3_ROW(a0, 0);
    DW3_LOAD(1);
    DW3_ROW(a0, 1);
    DW3_ROW(a1, 0);
    DW3_LOAD(2);
    DW3_ROW(a0, 2);
    DW3_ROW(a1, 1);
    DW3_ROW(a2, 0);
    DW3_LOAD(3);
    DW3_ROW(a1, 2);
    DW3_ROW(a2, 1);
    DW3_ROW(a3, 0);
    DW3_LOAD(4);
    DW3_ROW(a2, 2);
    DW3_ROW(a3, 1);
    DW3_LOAD(5);
    DW3_ROW(a3, 2);
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* One output row (the plane's last rows), same order of operations. */
static inline __m512 block1(const float *r, int64_t wp, const __m512 w[9])
{
    __m512 a = _mm512_setzero_ps(), v0, v1, v2;
    DW3_LOAD(0);
    DW3_ROW(a, 0);
    DW3_LOAD(1);
    DW3_ROW(a, 1);
    DW3_LOAD(2);
    DW3_ROW(a, 2);
    return a;
}

/* Stride 2: the columns 2j, 2j+1 and 2j+2 of r for j < 16, from 34 floats (the padded plane's
 * slack covers the reads past the row). */
#define DW3_LOAD_S2(i)                                                                             \
    do {                                                                                           \
        const float *p_ = r + (i)*wp;                                                              \
        __m512 lo_ = _mm512_loadu_ps(p_), hi_ = _mm512_loadu_ps(p_ + 16);                          \
        v0 = _mm512_permutex2var_ps(lo_, even, hi_);                                               \
        v1 = _mm512_permutex2var_ps(lo_, odd, hi_);                                                \
        v2 = _mm512_permutex2var_ps(_mm512_loadu_ps(p_ + 2), even, _mm512_loadu_ps(p_ + 18));      \
    } while (0)

/* Stride 2: four output rows by sixteen columns read input rows 0..8 of r; each is loaded once
 * for the one or two output rows it feeds, taps summed in the order ky, kx per output row. */
static inline void block4_s2(const float *r, int64_t wp, const __m512 w[9], __m512 acc[4])
{
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v0, v1, v2;
    DW3_LOAD_S2(0);
    DW3_ROW(a0, 0);
    DW3_LOAD_S2(1);
    DW3_ROW(a0, 1);
    DW3_LOAD_S2(2);
    DW3_ROW(a0, 2);
    DW3_ROW(a1, 0);
    DW3_LOAD_S2(3);
    DW3_ROW(a1, 1);
    DW3_LOAD_S2(4);
    DW3_ROW(a1, 2);
    DW3_ROW(a2, 0);
    DW3_LOAD_S2(5);
    DW3_ROW(a2, 1);
    DW3_LOAD_S2(6);
    DW3_ROW(a2, 2);
    DW3_ROW(a3, 0);
    DW3_LOAD_S2(7);
    DW3_ROW(a3, 1);
    DW3_LOAD_S2(8);
    DW3_ROW(a3, 2);
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

static inline __m512 block1_s2(const float *r, int64_t wp, const __m512 w[9])
{
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 a = _mm512_setzero_ps(), v0, v1, v2;
    DW3_LOAD_S2(0);
    DW3_ROW(a, 0);
    DW3_LOAD_S2(1);
    DW3_ROW(a, 1);
    DW3_LOAD_S2(2);
    DW3_ROW(a, 2);
    return a;
}

bool ki_conv2d_dw3_plane_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *xp,
                                int64_t ch, const float *res, float *restrict o)
{
    ki_gemm_fin f;
    const int64_t s = c->sw;
    if (c->kh != 3 || c->kw != 3 || c->sh != s || (s != 1 && s != 2) || c->dh != 1 || c->dw != 1 ||
        !ki_gemm_fin_of(&c->ep, ch, NULL, &f)) {
        return false; /* other shapes and activations: the AVX2 kernels */
    }
    const int64_t wp = g->in.w + c->pl + c->pr, oh = g->oh, ow = g->ow;
    const float *wt = c->weight + ch * 9;
    __m512 w[9];
    for (int i = 0; i < 9; i++) {
        w[i] = _mm512_set1_ps(wt[i]);
    }
    const __m512 vb = _mm512_set1_ps(f.bias ? f.bias[0] : 0.0f);
    const __m512 lo = _mm512_set1_ps(f.lo), hi = _mm512_set1_ps(f.hi);
    for (int64_t oy = 0; oy < oh;) {
        const int rows = oh - oy >= 4 ? 4 : 1;
        for (int64_t ox = 0; ox < ow; ox += 16) {
            const __mmask16 m =
                ow - ox >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (ow - ox)) - 1u);
            __m512 acc[4];
            const float *r = xp + oy * s * wp + ox * s;
            if (s == 2) {
                if (rows == 4) {
                    block4_s2(r, wp, w, acc);
                } else {
                    acc[0] = block1_s2(r, wp, w);
                }
            } else if (rows == 4) {
                block4(r, wp, w, acc);
            } else {
                acc[0] = block1(r, wp, w);
            }
            for (int q = 0; q < rows; q++) {
                const int64_t at = (oy + q) * ow + ox;
                __m512 v = _mm512_add_ps(acc[q], vb);
                if (res) {
                    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + at));
                }
                /* max(lo, v): a NaN v is returned (second operand), as the scalar form keeps it */
                v = _mm512_min_ps(hi, _mm512_max_ps(lo, v));
                _mm512_mask_storeu_ps(o + at, m, v);
            }
        }
        oy += rows;
    }
    return true;
}
