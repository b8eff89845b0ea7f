/* epilogue_avx512.c - the convolution epilogue (bias, residual, activation) for SiLU, Sigmoid and
 * GELU with AVX-512: sixteen lanes a step and the row's tail through masked loads and stores. The
 * operations are those of the AVX2 version lane by lane (vexp_avx512.h), so both give the same
 * bits. Half the instructions of the AVX2 loop: SiLU after every convolution is about 7 % of
 * yolov5s, GELU follows a transformer's first MLP layer. Other activations go to
 * ki_cv_epilogue_avx2. Compiled with -mavx512f; chosen only when the CPU has it. */
#include <immintrin.h>

#include "conv_common.h"
#include "vexp_avx512.h"

/* v + bias (+ the residual) through SiLU, Sigmoid or GELU (kind), lanes m of p; the residual is
 * added after the activation instead when after is true. */
static inline __attribute__((always_inline)) void step16(float *p, const float *res, __mmask16 m,
                                                         __m512 bv, ki_act_kind kind, bool after)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, p), bv);
    v = res && !after ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res)) : v;
    if (kind == KI_ACT_GELU) {
        v = ki_vgelu_avx512(v);
    } else {
        v = ki_vsig_mul_avx512(kind == KI_ACT_SILU ? v : one, v);
    }
    v = res && after ? _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res)) : v;
    _mm512_mask_storeu_ps(p, m, v);
}

/* The loop for one kind, a compile-time constant in each call below. */
static inline __attribute__((always_inline)) void run16(float *p, const float *res, size_t n,
                                                        __m512 bv, ki_act_kind kind, bool after)
{
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        step16(p + i, res ? res + i : NULL, 0xFFFF, bv, kind, after);
    }
    if (i < n) { /* masked-off lanes are neither read nor written */
        step16(p + i, res ? res + i : NULL, (__mmask16)((1u << (n - i)) - 1u), bv, kind, after);
    }
}

void ki_cv_epilogue_avx512(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p,
                           size_t n)
{
    const ki_act_kind k = ep->act.kind;
    const __m512 bv = _mm512_set1_ps(ep->bias ? ep->bias[ch] : 0.0f);
    const bool after = ep->res_after;
    if (k == KI_ACT_SILU) {
        run16(p, res, n, bv, KI_ACT_SILU, after);
    } else if (k == KI_ACT_SIGMOID) {
        run16(p, res, n, bv, KI_ACT_SIGMOID, after);
    } else if (k == KI_ACT_GELU) {
        run16(p, res, n, bv, KI_ACT_GELU, after);
    } else {
        ki_cv_epilogue_avx2(ep, res, ch, p, n);
    }
}
