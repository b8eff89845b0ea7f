/* norm_avx512.c - a LayerNorm row with AVX-512 (layernorm.h): the sums in double, eight lanes per
 * half vector, the last partial vector masked. */
#include <immintrin.h>
#include <math.h>

#include "layernorm.h"

/* The two double halves of 16 floats. */
static inline void halves(__m512 v, __m512d *lo, __m512d *hi)
{
    *lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    *hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

void ki_ln_row_avx512(const float *x, int64_t n, float eps, const float *w, const float *b,
                      float *y)
{
    const int64_t full = n & ~(int64_t)15;
    const __mmask16 mt = (__mmask16)((1u << (n - full)) - 1u);
    const __mmask8 mlo = (__mmask8)(mt & 0xFF), mhi = (__mmask8)(mt >> 8);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), lo, hi;
    for (int64_t i = 0; i < full; i += 16) {
        halves(_mm512_loadu_ps(x + i), &lo, &hi);
        s0 = _mm512_add_pd(s0, lo), s1 = _mm512_add_pd(s1, hi);
    }
    halves(_mm512_maskz_loadu_ps(mt, x + full), &lo, &hi);
    s0 = _mm512_add_pd(s0, lo), s1 = _mm512_add_pd(s1, hi);
    const double m = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1)) / (double)n;
    const __m512d vm = _mm512_set1_pd(m);
    s0 = s1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < full; i += 16) {
        halves(_mm512_loadu_ps(x + i), &lo, &hi);
        lo = _mm512_sub_pd(lo, vm), hi = _mm512_sub_pd(hi, vm);
        s0 = _mm512_fmadd_pd(lo, lo, s0), s1 = _mm512_fmadd_pd(hi, hi, s1);
    }
    halves(_mm512_maskz_loadu_ps(mt, x + full), &lo, &hi);
    lo = _mm512_maskz_sub_pd(mlo, lo, vm), hi = _mm512_maskz_sub_pd(mhi, hi, vm);
    s0 = _mm512_fmadd_pd(lo, lo, s0), s1 = _mm512_fmadd_pd(hi, hi, s1);
    const double ss = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
    const __m512 mean = _mm512_set1_ps((float)m);
    const __m512 rstd = _mm512_set1_ps((float)(1.0 / sqrt(ss / (double)n + eps)));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = i + 16 <= n ? (__mmask16)0xFFFF : mt;
        __m512 v = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mean), rstd);
        if (w) {
            v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i));
        }
        if (b) {
            v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, b + i));
        }
        _mm512_mask_storeu_ps(y + i, k, v);
    }
}
