/* softmax_avx2.c - a softmax row with AVX2+FMA (softmax.h): eight lanes at a time, the last
 * partial vector through a buffer padded with -inf (exp gives 0 there). */
#include <immintrin.h>
#include <math.h>

#include "softmax.h"
#include "vexp_avx2.h"

void ki_softmax_row_avx2(float *row, int64_t n)
{
    const int64_t full = n & ~(int64_t)7;
    _Alignas(32) float tail[8];
    for (int i = 0; i < 8; i++) {
        tail[i] = full + i < n ? row[full + i] : -INFINITY;
    }
    __m256 vmax = _mm256_load_ps(tail);
    for (int64_t j = 0; j < full; j += 8) {
        vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + j));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const __m256 vm = _mm256_broadcastss_ps(m4);
    __m256 vsum = _mm256_setzero_ps();
    for (int64_t j = 0; j < full; j += 8) {
        const __m256 e = ki_vexp_avx2(_mm256_sub_ps(_mm256_loadu_ps(row + j), vm));
        _mm256_storeu_ps(row + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    const __m256 et = ki_vexp_avx2(_mm256_sub_ps(_mm256_load_ps(tail), vm));
    _mm256_store_ps(tail, et);
    vsum = _mm256_add_ps(vsum, et);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(vsum), _mm256_extractf128_ps(vsum, 1));
    s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    s4 = _mm_add_ss(s4, _mm_shuffle_ps(s4, s4, 1));
    const __m256 inv = _mm256_set1_ps(1.0f / _mm_cvtss_f32(s4));
    for (int64_t j = 0; j < full; j += 8) {
        _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
    }
    for (int64_t j = full; j < n; j++) {
        row[j] = tail[j - full] * _mm256_cvtss_f32(inv);
    }
}
