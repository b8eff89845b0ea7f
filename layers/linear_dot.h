/* linear_dot.h - the end of nn.Linear's vector dot products (linear_avx2.c, linear_avx512.c): the
 * four 8-lane accumulators summed in one fixed order, so the float32 and the binary16 weight rows
 * give the same result. Include only from files compiled for AVX2 or AVX-512. */
#ifndef KI_LINEAR_DOT_H
#define KI_LINEAR_DOT_H

#include <immintrin.h>

static inline float ki_linear_dot_sum(__m256 s0, __m256 s1, __m256 s2, __m256 s3)
{
    __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

#endif
