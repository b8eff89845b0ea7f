/* epilogue_avx512.c - the convolution epilogue (bias, residual, activation) for SiLU and Sigmoid
 * with AVX-512: sixteen lanes a step and the row's tail through masked loads and stores. The
 * operations are those of the AVX2 version lane by lane (the same reduction and polynomial,
 * KI_VEXP_POLY; 2^n applied by one vscalefps, which rounds once as the AVX2 version's two exact
 * power-of-two products do), so both give the same bits. Half the instructions of the AVX2
 * loop: SiLU after every convolution is about 7 % of yolov5s. Other activations go to
 * ki_cv_epilogue_avx2. Compiled with -mavx512f; chosen only when the CPU has it
 * (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv_common.h"
#include "vexp_avx2.h"

/* as ki_vexp_avx2: the shared reduction and polynomial, then the scaling by 2^n */
static inline __attribute__((always_inline)) __m512 vexp16(__m512 x)
{
    __m512 n, r;
    KI_VEXP_REDUCE(_mm512_min_ps, _mm512_max_ps, _mm512_mul_ps, _mm512_roundscale_ps,
                   _mm512_fnmadd_ps, _mm512_set1_ps, x, n, r);
    return _mm512_scalef_ps(KI_VEXP_POLY(_mm512_fmadd_ps, _mm512_set1_ps, r), n);
}

/* v + bias (+ the residual) through SiLU (silu true) or Sigmoid, lanes m of p; the residual is
 * added after the activation instead when after is true. */
static inline __attribute__((always_inline)) void step16(float *p, const float *res, __mmask16 m,
                                                         __m512 bv, bool silu, bool after)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), bv);
    v = res && !after ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res)) : v;
    __m512 d = _mm512_add_ps(one, vexp16(_mm512_sub_ps(_mm512_setzero_ps(), v)));
    v = _mm512_div_ps(silu ? v : one, d);
    v = res && after ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res)) : v;
    _mm512_mask_storeu_ps(p, m, v);
}

void ki_cv_epilogue_avx512(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p,
                           size_t n)
{
    const ki_act_kind k = ep->act.kind;
    if (k != KI_ACT_SILU && k != KI_ACT_SIGMOID) {
        ki_cv_epilogue_avx2(ep, res, ch, p, n);
        return;
    }
    const __m512 bv = _mm512_set1_ps(ep->bias ? ep->bias[ch] : 0.0f);
    const bool after = ep->res_after;
    size_t i = 0;
    if (k == KI_ACT_SILU) {
        for (; i + 16 <= n; i += 16) {
            step16(p + i, res ? res + i : NULL, 0xFFFF, bv, true, after);
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            step16(p + i, res ? res + i : NULL, 0xFFFF, bv, false, after);
        }
    }
    if (i < n) { /* masked-off lanes are neither read nor written */
        step16(p + i, res ? res + i : NULL, (__mmask16)((1u << (n - i)) - 1u), bv, k == KI_ACT_SILU,
               after);
    }
}
