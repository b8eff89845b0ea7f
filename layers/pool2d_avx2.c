/* pool2d_avx2.c - the AVX2 row kernel of max pooling (see ki_pool_rowmax_ref in conv_common.h).
 * Compiled with -mavx2 -mfma; pool2d.c calls it only when the CPU has AVX2. */
#include <immintrin.h>

#include "conv_common.h"

/* Eight values s[0], s[sw], ..., s[7*sw] for sw 1 or 2; reads s[0 .. 7*sw] only (for sw 2 the
 * second load starts at s[7], its odd lanes holding s[8], s[10], ...). */
static inline __m256 load8(const float *s, int64_t sw)
{
    if (sw == 1) {
        return _mm256_loadu_ps(s);
    }
    __m256 lo = _mm256_loadu_ps(s), hi = _mm256_loadu_ps(s + 7);
    __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* d[i..i+7] = max(v, d) for the eight values at s[i*sw]; NaN lanes or-ed into *nan. */
static inline void step8(const float *s, int64_t sw, float *restrict d, int64_t i, __m256 *nan)
{
    __m256 v = load8(s + i * sw, sw);
    *nan = _mm256_or_ps(*nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    /* max_ps(v, d) is v > d ? v : d */
    _mm256_storeu_ps(d + i, _mm256_max_ps(v, _mm256_loadu_ps(d + i)));
}

int ki_pool_rowmax_avx2(const float *s, int64_t sw, float *restrict d, int64_t n)
{
    __m256 nan = _mm256_setzero_ps();
    if (n < 8) {
        return ki_pool_rowmax_ref(s, sw, d, n);
    }
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        step8(s, sw, d, i, &nan);
    }
    if (n % 8 != 0) {
        /* the tail as one vector overlapping the last: max(v, max(v, d)) == max(v, d) */
        step8(s, sw, d, n - 8, &nan);
    }
    return _mm256_movemask_ps(nan);
}
