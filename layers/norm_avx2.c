/* norm_avx2.c - a LayerNorm row with AVX2+FMA (layernorm.h): the sums in double, four lanes per
 * half vector; the last partial vector through a zero-padded buffer, left out of the variance. */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "layernorm.h"

static inline double hsum(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

void ki_ln_row_avx2(const float *x, int64_t n, float eps, const float *w, const float *b, float *y)
{
    const int64_t full = n & ~(int64_t)7;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    for (int64_t i = 0; i < full; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
    }
    double s = hsum(_mm256_add_pd(s0, s1));
    for (int64_t i = full; i < n; i++) {
        s += x[i];
    }
    const double m = s / (double)n;
    const __m256d vm = _mm256_set1_pd(m);
    s0 = s1 = _mm256_setzero_pd();
    for (int64_t i = 0; i < full; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256d lo = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vm);
        const __m256d hi = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vm);
        s0 = _mm256_fmadd_pd(lo, lo, s0), s1 = _mm256_fmadd_pd(hi, hi, s1);
    }
    double ss = hsum(_mm256_add_pd(s0, s1));
    for (int64_t i = full; i < n; i++) {
        const double d = x[i] - m;
        ss += d * d;
    }
    const float mf = (float)m, rf = (float)(1.0 / sqrt(ss / (double)n + eps));
    const __m256 mean = _mm256_set1_ps(mf), rstd = _mm256_set1_ps(rf);
    for (int64_t i = 0; i < full; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mean), rstd);
        if (w) {
            v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        }
        if (b) {
            v = _mm256_add_ps(v, _mm256_loadu_ps(b + i));
        }
        _mm256_storeu_ps(y + i, v);
    }
    for (int64_t i = full; i < n; i++) {
        const float v = (x[i] - mf) * rf;
        y[i] = (w ? v * w[i] : v) + (b ? b[i] : 0.0f);
    }
}
