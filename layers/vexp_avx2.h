/* vexp_avx2.h - exp(x) of eight floats with AVX2+FMA, and the activations on eight floats
 * (ki_vact_avx2), for the *_avx2.c files (include it only from those and vexp_avx512.h; static
 * inline functions only).
 *
 * x = n*ln2 + r with |r| <= ln2/2 (ln2 split in two for an exact reduction), e^r by its degree-7
 * Taylor polynomial (truncation below 0.1 ulp), then scaled by 2^n in two steps so results in
 * the subnormal range and overflow to +inf come out right. About 1 ulp against expf over the
 * whole float range; exp(+inf) = inf, exp(-inf) = 0, NaN stays NaN. */
#ifndef KI_VEXP_AVX2_H
#define KI_VEXP_AVX2_H

#include <immintrin.h>

#include "activation.h"

/* e^r for |r| <= ln2/2 by the degree-7 Taylor polynomial in Horner form, for a vector type whose
 * fused multiply-add is FMA(a, b, c) = a*b + c and broadcast SET1 (shared by the AVX2 and
 * AVX-512 exp, so both compute the same values lane by lane). */
#define KI_VEXP_POLY(FMA, SET1, r)                                                                 \
    FMA(FMA(FMA(FMA(FMA(FMA(FMA(SET1(1.0f / 5040.0f), r, SET1(1.0f / 720.0f)), r,                  \
                            SET1(1.0f / 120.0f)),                                                  \
                        r, SET1(1.0f / 24.0f)),                                                    \
                    r, SET1(1.0f / 6.0f)),                                                         \
                r, SET1(0.5f)),                                                                    \
            r, SET1(1.0f)),                                                                        \
        r, SET1(1.0f))

/* The reduction x = n*ln2 + r of a vector type with min MIN, max MAX, multiply MUL,
 * rounding ROUND(v, mode), FNMADD(a, b, c) = c - a*b and broadcast SET1 (shared like
 * KI_VEXP_POLY): x clamped where exp is inf / rounds to 0 (min/max keep a NaN in x: second
 * operand), ln2 split in two so that n*ln2 is exact. */
#define KI_VEXP_REDUCE(MIN, MAX, MUL, ROUND, FNMADD, SET1, x, n, r)                                \
    do {                                                                                           \
        x = MAX(SET1(-104.0f), MIN(SET1(89.0f), x));                                               \
        n = ROUND(MUL(x, SET1(1.44269504088896341f)),                                              \
                  _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);                                  \
        r = FNMADD(n, SET1(1.428606765330187e-06f), FNMADD(n, SET1(0.693145751953125f), x));       \
    } while (0)

static inline __attribute__((always_inline)) __m256 ki_vexp_avx2(__m256 x)
{
    __m256 n, r;
    KI_VEXP_REDUCE(_mm256_min_ps, _mm256_max_ps, _mm256_mul_ps, _mm256_round_ps, _mm256_fnmadd_ps,
                   _mm256_set1_ps, x, n, r);
    __m256 p = KI_VEXP_POLY(_mm256_fmadd_ps, _mm256_set1_ps, r);
    /* 2^n = 2^n1 * 2^n2 with n1 = n >> 1, both factors normal for n in [-150, 129]. */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* e^(-x) for the Sigmoid family, with operations the AVX2 and AVX-512 versions share lane by lane
 * (so both levels give the same bits). x is first clamped to [-KI_VSIG_HI, 87] (min, then max:
 * a NaN x stays, the second operand). -8x log2(e) rounds once, through KI_VSIG_SHIFT, to an
 * integer n held in the low mantissa bits of t; r = x + n ln2/8 (ln2/8 in two parts, so n ln2/8
 * is exact) is within ln2/16, and e^(-x) = 2^(n/8) e^(-r) = KI_VSIG_TAB[n mod 8] 2^(n div 8)
 * e^(-r): vpermps picks the table entry by t's low three bits, 2^(n div 8) is added into the
 * entry's exponent as an integer, and e^(-r) is the degree-3 polynomial fitted for least
 * relative error on [-ln2/16, ln2/16] (2e-8). At x = -KI_VSIG_HI (-128 ln2) n = 1024 and the sum
 * is +inf's bits, so below it x / (1 + e) is -0, and NaN at -inf, as the scalar x / (1 + expf(-x));
 * at 87, 1 + e rounds to 1. Against a double reference: 2.1e-7 relative at most for SiLU and
 * Sigmoid (the degree-6 polynomial over ln2/2 with a blend on the sign that it replaced: 2.2e-7),
 * in about two thirds of the time (docs/performance.md). */
#define KI_VSIG_HI    88.72283935546875f /* 128 ln2: n = 1024 */
#define KI_VSIG_SHIFT 12582912.0f        /* 1.5 * 2^23 */
/* 2^(j/8), j < 8, rounded to float */
#define KI_VSIG_TAB(SETR)                                                                          \
    SETR(1.0f, 1.0905077326652577f, 1.1892071150027210f, 1.2968395546510096f, 1.4142135623730951f, \
         1.5422108254079408f, 1.6817928305074290f, 1.8340080864093424f)
/* t (the rounded -8x log2(e) in its low bits) and p = e^(-r) of a vector type whose fused
 * multiply-add is FMA(a, b, c) = a*b + c, with MIN, MAX, SUB and broadcast SET1. */
#define KI_VSIG_REDUCE(MIN, MAX, FMA, SUB, SET1, x, t, p)                                          \
    do {                                                                                           \
        const __typeof__(x) xc_ = MAX(SET1(-KI_VSIG_HI), MIN(SET1(87.0f), x));                     \
        t = FMA(xc_, SET1(-11.541560327111707f), SET1(KI_VSIG_SHIFT));                             \
        const __typeof__(t) n_ = SUB(t, SET1(KI_VSIG_SHIFT));                                      \
        const __typeof__(t) r_ =                                                                   \
            FMA(n_, SET1(1.7857584566627338e-07f), FMA(n_, SET1(0.086643218994140625f), xc_));     \
        p = FMA(FMA(FMA(SET1(-1.666507125e-01f), r_, SET1(5.000797510e-01f)), r_, SET1(-1.0f)),    \
                r_, SET1(1.0f));                                                                   \
    } while (0)

/* e = p 2^(n/8) from KI_VSIG_REDUCE's t and p (tab: KI_VSIG_TAB). */
static inline __attribute__((always_inline)) __m256 ki_vsig_scale_avx2(__m256 p, __m256 t,
                                                                       __m256 tab)
{
    const __m256i ti = _mm256_castps_si256(t);
    const __m256 f = _mm256_permutevar8x32_ps(tab, ti);                /* 2^(j/8) for j = n mod 8 */
    const __m256i e = _mm256_slli_epi32(_mm256_srli_epi32(ti, 3), 23); /* n div 8, as bits */
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(f), e)));
}

/* e^(-x) as above (x clamped to [-KI_VSIG_HI, 87]); NaN stays NaN. */
static inline __attribute__((always_inline)) __m256 ki_vexpneg_avx2(__m256 x)
{
    const __m256 tab = KI_VSIG_TAB(_mm256_setr_ps);
    __m256 t, p;
    KI_VSIG_REDUCE(_mm256_min_ps, _mm256_max_ps, _mm256_fmadd_ps, _mm256_sub_ps, _mm256_set1_ps, x,
                   t, p);
    return ki_vsig_scale_avx2(p, t, tab);
}

/* num * sigmoid(x) = num / (1 + e^(-x)): SiLU with num = x, Sigmoid with num = 1. Checked against
 * the scalar x / (1 + expf(-x)) and 1 / (1 + expf(-x)) over magnitudes from the subnormal range to
 * 1e4 and the special values (test_gemm.c); NaN stays NaN. */
static inline __attribute__((always_inline)) __m256 ki_vsig_mul_avx2(__m256 num, __m256 x)
{
    return _mm256_div_ps(num, _mm256_add_ps(_mm256_set1_ps(1.0f), ki_vexpneg_avx2(x)));
}

/* Two vectors side by side (ki_vsig_mul2_avx2): each operation of the exponential applied to
 * both before the next, so their dependency chains interleave in the instruction stream (GCC
 * does not schedule x86 code, and one vector's chain of about 20 operations at a time left the
 * out-of-order window short of independent work). The same operations per lane as
 * ki_vsig_mul_avx2, so the same bits. */
typedef struct ki_v2x8 {
    __m256 a, b;
} ki_v2x8;

#define KI_V2_OP2(name, op)                                                                        \
    static inline __attribute__((always_inline)) ki_v2x8 name(ki_v2x8 x, ki_v2x8 y)                \
    {                                                                                              \
        return (ki_v2x8){ op(x.a, y.a), op(x.b, y.b) };                                            \
    }
KI_V2_OP2(ki_v2_sub, _mm256_sub_ps)
KI_V2_OP2(ki_v2_min, _mm256_min_ps)
KI_V2_OP2(ki_v2_max, _mm256_max_ps)
#undef KI_V2_OP2

static inline __attribute__((always_inline)) ki_v2x8 ki_v2_fmadd(ki_v2x8 x, ki_v2x8 y, ki_v2x8 z)
{
    return (ki_v2x8){ _mm256_fmadd_ps(x.a, y.a, z.a), _mm256_fmadd_ps(x.b, y.b, z.b) };
}

static inline __attribute__((always_inline)) ki_v2x8 ki_v2_set1(float f)
{
    const __m256 v = _mm256_set1_ps(f);
    return (ki_v2x8){ v, v };
}

/* ki_vsig_mul_avx2 of (num.a, x.a) and of (num.b, x.b). */
static inline __attribute__((always_inline)) ki_v2x8 ki_vsig_mul2_avx2(ki_v2x8 num, ki_v2x8 x)
{
    const __m256 tab = KI_VSIG_TAB(_mm256_setr_ps), one = _mm256_set1_ps(1.0f);
    ki_v2x8 t, p;
    KI_VSIG_REDUCE(ki_v2_min, ki_v2_max, ki_v2_fmadd, ki_v2_sub, ki_v2_set1, x, t, p);
    const __m256 ea = ki_vsig_scale_avx2(p.a, t.a, tab), eb = ki_vsig_scale_avx2(p.b, t.b, tab);
    return (ki_v2x8){ _mm256_div_ps(num.a, _mm256_add_ps(one, ea)),
                      _mm256_div_ps(num.b, _mm256_add_ps(one, eb)) };
}

/* 1 / (1 + exp(-x)), as KI_ACT_SIGMOID. */
static inline __attribute__((always_inline)) __m256 ki_vsigmoid_avx2(__m256 x)
{
    return ki_vsig_mul_avx2(_mm256_set1_ps(1.0f), x);
}

/* x / (1 + exp(-x)), as KI_ACT_SILU. */
static inline __attribute__((always_inline)) __m256 ki_vsilu_avx2(__m256 x)
{
    return ki_vsig_mul_avx2(x, x);
}

/* GELU (approximate='none'): x/2 * (1 + erf(x / sqrt(2))), with erfc(|z|) of Abramowitz and
 * Stegun 7.1.26 (t = 1 / (1 + p|z|), a degree-5 polynomial in t times exp(-z^2); absolute error
 * of erf under 1.5e-7 plus float rounding): 1 + erf(z) is that erfc for z < 0 and 2 minus it
 * otherwise, so negative inputs lose nothing to cancellation. Within ~4e-7 absolute of the
 * scalar erff formula; NaN stays NaN. */
static inline __attribute__((always_inline)) __m256 ki_vgelu_avx2(__m256 x)
{
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f),
                                      _mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752f)));
    const __m256 t = _mm256_div_ps(
        _mm256_set1_ps(1.0f), _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, _mm256_set1_ps(1.0f)));
    __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(1.061405429f), t, _mm256_set1_ps(-1.453152027f));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(1.421413741f));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(-0.284496736f));
    q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(0.254829592f));
    q = _mm256_mul_ps(_mm256_mul_ps(q, t),
                      ki_vexp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(a, a))));
    const __m256 neg = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 one_plus_erf = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(2.0f), q), q, neg);
    return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.5f)), one_plus_erf);
}

/* One vector of activation a, for the kinds conv2d_avx2.c's epilogue vectorises (ReLU, ReLU6,
 * Hardtanh, LeakyReLU, Hardswish, Hardsigmoid, SiLU, Sigmoid, GELU); any other kind returns v. The
 * formulas are activation.h's operation for operation (max(0, v) keeps a NaN v, its second
 * operand), except SiLU's and Sigmoid's exp. */
static inline __attribute__((always_inline)) __m256 ki_vact_avx2(const ki_act *a, __m256 v)
{
    const __m256 zero = _mm256_setzero_ps(), six = _mm256_set1_ps(6.0f);
    switch (a->kind) {
    case KI_ACT_RELU:
        return _mm256_max_ps(zero, v);
    case KI_ACT_RELU6:
        return _mm256_min_ps(six, _mm256_max_ps(zero, v));
    case KI_ACT_HARDTANH:
        return _mm256_min_ps(_mm256_set1_ps(a->b), _mm256_max_ps(_mm256_set1_ps(a->a), v));
    case KI_ACT_LEAKY_RELU:
        return _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(a->a)), v,
                                _mm256_cmp_ps(v, zero, _CMP_GT_OQ));
    case KI_ACT_HARDSWISH: {
        __m256 t = _mm256_min_ps(six, _mm256_max_ps(zero, _mm256_add_ps(v, _mm256_set1_ps(3.0f))));
        return _mm256_div_ps(_mm256_mul_ps(v, t), six);
    }
    case KI_ACT_HARDSIGMOID: {
        __m256 t = _mm256_min_ps(six, _mm256_max_ps(zero, _mm256_add_ps(v, _mm256_set1_ps(3.0f))));
        return _mm256_div_ps(t, six);
    }
    case KI_ACT_SILU:
        return ki_vsilu_avx2(v);
    case KI_ACT_SIGMOID:
        return ki_vsigmoid_avx2(v);
    case KI_ACT_GELU:
        return ki_vgelu_avx2(v);
    default:
        return v;
    }
}

#endif
