/* conv2d_direct_avx512.c - the AVX-512 row kernel of the direct path (conv2d_direct.c). Each
 * output row is computed in blocks of sixteen output channels by sixteen columns: for every
 * kernel tap the sixteen input columns it reads are one vector (masked to the row, so the padding
 * is never materialised; at stride 2 the even or odd lanes of a 32-column window), multiplied
 * into sixteen accumulators by the taps' weights ([block][tap][16], one block of the packing).
 * Taps are summed in the order (input channel, ky, kx), as the reference does. Compiled with
 * -mavx512f; chosen only when the CPU has it (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx512.h"
#include "vexp_avx512.h"

#define OC_BLOCK KI_DIRECT_OC

/* a_o += w[o] * v for the sixteen channels of a block (named accumulators: GCC keeps an array of
 * them in memory across the loops). */
#define TAP16(v, w)                                                                                \
    do {                                                                                           \
        const float *w_ = (w);                                                                     \
        const __m512 v_ = (v);                                                                     \
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(w_[0]), v_, a0);                                       \
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(w_[1]), v_, a1);                                       \
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(w_[2]), v_, a2);                                       \
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(w_[3]), v_, a3);                                       \
        a4 = _mm512_fmadd_ps(_mm512_set1_ps(w_[4]), v_, a4);                                       \
        a5 = _mm512_fmadd_ps(_mm512_set1_ps(w_[5]), v_, a5);                                       \
        a6 = _mm512_fmadd_ps(_mm512_set1_ps(w_[6]), v_, a6);                                       \
        a7 = _mm512_fmadd_ps(_mm512_set1_ps(w_[7]), v_, a7);                                       \
        a8 = _mm512_fmadd_ps(_mm512_set1_ps(w_[8]), v_, a8);                                       \
        a9 = _mm512_fmadd_ps(_mm512_set1_ps(w_[9]), v_, a9);                                       \
        a10 = _mm512_fmadd_ps(_mm512_set1_ps(w_[10]), v_, a10);                                    \
        a11 = _mm512_fmadd_ps(_mm512_set1_ps(w_[11]), v_, a11);                                    \
        a12 = _mm512_fmadd_ps(_mm512_set1_ps(w_[12]), v_, a12);                                    \
        a13 = _mm512_fmadd_ps(_mm512_set1_ps(w_[13]), v_, a13);                                    \
        a14 = _mm512_fmadd_ps(_mm512_set1_ps(w_[14]), v_, a14);                                    \
        a15 = _mm512_fmadd_ps(_mm512_set1_ps(w_[15]), v_, a15);                                    \
    } while (0)

/* One block: sixteen output channels (weights wb) by the sixteen columns ox.. of output row oy of
 * image x, into acc. */
static inline __attribute__((always_inline)) void
block(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t oy, int64_t ox,
      const float *wb, const int s, __m512 acc[OC_BLOCK], const int64_t kw, const bool inner)
{
    const int64_t h = g->in.h, w = g->in.w, kh = c->kh, b = ox * s - c->pl;
    const __m512i even = ki_even_idx(), odd = ki_odd_idx();
    __mmask16 m[2 * (KI_DIRECT_MAX_K + 1)];
    /* stride 2 reads one window past kx = kw - 1; an inner block needs no masks */
    for (int64_t kx = 0; kx < kw + 1 && !inner; kx++) {
        m[2 * kx] = (__mmask16)ki_lane_mask16(b + kx, w);
        m[2 * kx + 1] = (__mmask16)ki_lane_mask16(b + kx + 16, w);
    }
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512 a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    for (int64_t ic = 0; ic < c->in_ch; ic++) {
        for (int64_t ky = 0; ky < kh; ky++) {
            const int64_t iy = oy * s - c->pt + ky;
            const float *wt = wb + (ic * kh + ky) * kw * OC_BLOCK;
            if (iy < 0 || iy >= h) {
                continue; /* a zero row of the padding */
            }
            const float *r = x + (ic * h + iy) * w;
            if (s == 1) {
                for (int64_t kx = 0; kx < kw; kx++) {
                    const __m512 v =
                        inner ? _mm512_loadu_ps(r + b + kx)
                              : _mm512_maskz_loadu_ps(m[2 * kx], m[2 * kx] ? r + b + kx : r);
                    TAP16(v, wt + kx * OC_BLOCK);
                }
                continue;
            }
            for (int64_t kx = 0; kx < kw; kx += 2) {
                const __mmask16 ml = m[2 * kx], mh = m[2 * kx + 1];
                const __m512 lo = inner ? _mm512_loadu_ps(r + b + kx)
                                        : _mm512_maskz_loadu_ps(ml, ml ? r + b + kx : r);
                const __m512 hi = inner ? _mm512_loadu_ps(r + b + kx + 16)
                                        : _mm512_maskz_loadu_ps(mh, mh ? r + b + kx + 16 : r);
                const __m512 ve = _mm512_permutex2var_ps(lo, even, hi);
                TAP16(ve, wt + kx * OC_BLOCK);
                if (kx + 1 < kw) {
                    const __m512 vo = _mm512_permutex2var_ps(lo, odd, hi);
                    TAP16(vo, wt + (kx + 1) * OC_BLOCK);
                }
            }
        }
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6;
    acc[7] = a7, acc[8] = a8, acc[9] = a9, acc[10] = a10, acc[11] = a11, acc[12] = a12;
    acc[13] = a13, acc[14] = a14, acc[15] = a15;
}

/* block() with the stride and, for the common widths, the kernel width as constants (the taps
 * unrolled), and without masks when every column the block reads lies inside the input row
 * (stride 2 reads 32 columns from each even tap, stride 1 sixteen from each tap). */
#define BLOCK_KW(S, KW)                                                                            \
    do {                                                                                           \
        if (inner) {                                                                               \
            block(c, g, x, oy, ox, wb, S, acc, KW, true);                                          \
        } else {                                                                                   \
            block(c, g, x, oy, ox, wb, S, acc, KW, false);                                         \
        }                                                                                          \
    } while (0)

static void blocks(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t oy,
                   int64_t ox, const float *wb, __m512 acc[OC_BLOCK])
{
    const int64_t s = c->sw, b = ox * s - c->pl, kw = c->kw;
    const bool inner = b >= 0 && b + kw + (s == 2 ? 31 : 15) <= g->in.w;
    if (s == 2 && kw == 3) {
        BLOCK_KW(2, 3);
    } else if (s == 2 && kw == 6) {
        BLOCK_KW(2, 6);
    } else if (s == 2 && kw == 7) {
        BLOCK_KW(2, 7);
    } else if (s == 2) {
        BLOCK_KW(2, kw);
    } else {
        BLOCK_KW(1, kw);
    }
}

void ki_conv2d_direct_row_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                                 const float *wp, int64_t oy, const ki_conv2d_direct_dst *d)
{
    const int64_t ow = g->ow, k = c->in_ch * c->kh * c->kw;
    const ki_gemm_fin *f = d->fin;
    const __m512 lo = _mm512_set1_ps(f ? f->lo : 0.0f), hi = _mm512_set1_ps(f ? f->hi : 0.0f);
    for (int64_t ox = 0; ox < ow; ox += 16) {
        const __mmask16 mo = (__mmask16)ki_lane_mask16(0, ow - ox);
        for (int64_t oc0 = 0; oc0 < c->out_ch; oc0 += OC_BLOCK) {
            const int64_t noc = c->out_ch - oc0 < OC_BLOCK ? c->out_ch - oc0 : OC_BLOCK;
            const float *wb = wp + oc0 * k;
            __m512 acc[OC_BLOCK];
            blocks(c, g, x, oy, ox, wb, acc);
            for (int64_t o = 0; o < noc; o++) {
                const int64_t at = (oc0 + o) * d->cstride + ox;
                if (f) {
                    __m512 v =
                        _mm512_add_ps(acc[o], _mm512_set1_ps(f->bias ? f->bias[oc0 + o] : 0.0f));
                    const float *r = d->res ? d->res + at : NULL;
                    if (d->act) { /* as ki_store16_fin, then the activation */
                        v = r ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(mo, r)) : v;
                        v = ki_vact_avx512(d->act, _mm512_min_ps(hi, _mm512_max_ps(lo, v)));
                        _mm512_mask_storeu_ps(d->dst + at, mo, v);
                    } else {
                        ki_store16_fin(d->dst + at, mo, v, r, lo, hi);
                    }
                } else {
                    _mm512_mask_storeu_ps(d->dst + at, mo, acc[o]);
                }
            }
        }
    }
}
