/* simd_avx2.h - AVX2 pieces shared by the kernels: the even / odd floats of a 16-float window
 * (stride-2 columns of the direct path and the max pool). Include only from files compiled with
 * -mavx2. */
#ifndef KI_SIMD_AVX2_H
#define KI_SIMD_AVX2_H

#include <immintrin.h>

/* The even (odd = 0) or odd (odd = 1) floats of the sixteen at lo, hi, in order. */
static inline __m256 ki_deint8(__m256 lo, __m256 hi, int odd)
{
    const __m256 t = odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
                         : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

#endif
