/* vexp_avx512.h - exp(x) of sixteen floats with AVX-512 and the activations built on it, for the
 * *_avx512.c files (include it only from those; static inline functions only). The operations
 * are those of vexp_avx2.h lane by lane (the same reduction and polynomial, KI_VEXP_POLY; 2^n
 * applied by one vscalefps, which rounds once as the AVX2 version's two exact power-of-two
 * products do), so both levels give the same bits; the other activations are activation.h's
 * formulas operation for operation, as conv2d_avx2.c's. */
#ifndef KI_VEXP_AVX512_H
#define KI_VEXP_AVX512_H

#include <immintrin.h>

#include "activation.h"
#include "vexp_avx2.h"

static inline __attribute__((always_inline)) __m512 ki_vexp_avx512(__m512 x)
{
    __m512 n, r;
    KI_VEXP_REDUCE(_mm512_min_ps, _mm512_max_ps, _mm512_mul_ps, _mm512_roundscale_ps,
                   _mm512_fnmadd_ps, _mm512_set1_ps, x, n, r);
    return _mm512_scalef_ps(KI_VEXP_POLY(_mm512_fmadd_ps, _mm512_set1_ps, r), n);
}

/* e^(-x): ki_vexpneg_avx2's operations lane by lane (the same bits; the table twice, as
 * vpermps on zmm reads four index bits). */
static inline __attribute__((always_inline)) __m512 ki_vexpneg_avx512(__m512 x)
{
    const __m512 tab =
        _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_castps_pd(KI_VSIG_TAB(_mm256_setr_ps))));
    __m512 t, p;
    KI_VSIG_REDUCE(_mm512_min_ps, _mm512_max_ps, _mm512_fmadd_ps, _mm512_sub_ps, _mm512_set1_ps, x,
                   t, p);
    const __m512i ti = _mm512_castps_si512(t);
    const __m512 f = _mm512_permutexvar_ps(ti, tab);
    const __m512i e = _mm512_slli_epi32(_mm512_srli_epi32(ti, 3), 23);
    return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(f), e)));
}

/* num * sigmoid(x): ki_vsig_mul_avx2 lane by lane (the same bits). SiLU with num = x, Sigmoid
 * with num = 1. */
static inline __attribute__((always_inline)) __m512 ki_vsig_mul_avx512(__m512 num, __m512 x)
{
    return _mm512_div_ps(num, _mm512_add_ps(_mm512_set1_ps(1.0f), ki_vexpneg_avx512(x)));
}

/* GELU, erf form: ki_vgelu_avx2's operations lane by lane (the same bits). */
static inline __attribute__((always_inline)) __m512 ki_vgelu_avx512(__m512 x)
{
    const __m512 a = _mm512_abs_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.70710678118654752f)));
    const __m512 t = _mm512_div_ps(
        _mm512_set1_ps(1.0f), _mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), a, _mm512_set1_ps(1.0f)));
    __m512 q = _mm512_fmadd_ps(_mm512_set1_ps(1.061405429f), t, _mm512_set1_ps(-1.453152027f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(1.421413741f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(-0.284496736f));
    q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(0.254829592f));
    q = _mm512_mul_ps(_mm512_mul_ps(q, t),
                      ki_vexp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(a, a))));
    const __mmask16 neg = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ);
    const __m512 one_plus_erf =
        _mm512_mask_blend_ps(neg, _mm512_sub_ps(_mm512_set1_ps(2.0f), q), q);
    return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(0.5f)), one_plus_erf);
}

/* One vector of activation a, for the kinds conv2d_avx2.c's epilogue vectorises (ReLU, ReLU6,
 * Hardtanh, LeakyReLU, Hardswish, Hardsigmoid, SiLU, Sigmoid); any other kind returns v.
 * max(0, v) and min(6, .) return a NaN v (second operand), as the scalar comparisons keep it. */
static inline __attribute__((always_inline)) __m512 ki_vact_avx512(const ki_act *a, __m512 v)
{
    const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
    switch (a->kind) {
    case KI_ACT_RELU:
        return _mm512_max_ps(zero, v);
    case KI_ACT_RELU6:
        return _mm512_min_ps(six, _mm512_max_ps(zero, v));
    case KI_ACT_HARDTANH:
        return _mm512_min_ps(_mm512_set1_ps(a->b), _mm512_max_ps(_mm512_set1_ps(a->a), v));
    case KI_ACT_LEAKY_RELU:
        return _mm512_mask_mul_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_NGT_UQ), v,
                                  _mm512_set1_ps(a->a));
    case KI_ACT_HARDSWISH: {
        __m512 t = _mm512_min_ps(six, _mm512_max_ps(zero, _mm512_add_ps(v, _mm512_set1_ps(3.0f))));
        return _mm512_div_ps(_mm512_mul_ps(v, t), six);
    }
    case KI_ACT_HARDSIGMOID: {
        __m512 t = _mm512_min_ps(six, _mm512_max_ps(zero, _mm512_add_ps(v, _mm512_set1_ps(3.0f))));
        return _mm512_div_ps(t, six);
    }
    case KI_ACT_SILU:
        return ki_vsig_mul_avx512(v, v);
    case KI_ACT_SIGMOID:
        return ki_vsig_mul_avx512(_mm512_set1_ps(1.0f), v);
    default:
        return v;
    }
}

#endif
