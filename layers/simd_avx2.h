/* simd_avx2.h - AVX2 pieces shared by the kernels: the even / odd floats of a 16-float window
 * (stride-2 columns of the direct path, the max pool and the stride-2 packing) and the lane mask
 * of a row's columns (masked loads at a row's ends). Include only from files compiled with
 * -mavx2. */
#ifndef KI_SIMD_AVX2_H
#define KI_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

/* The even (odd = 0) or odd (odd = 1) floats of the sixteen at lo, hi, in order. */
static inline __m256 ki_deint8(__m256 lo, __m256 hi, int odd)
{
    const __m256 t = odd ? _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))
                         : _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Lanes i with 0 <= b + i < w, as a vector mask (for _mm256_maskload_ps / _mm256_maskstore_ps). */
static inline __m256i ki_lanes_in8(int64_t b, int64_t w)
{
    int64_t lo = b < 0 ? -b : 0, hi = w - b < 8 ? w - b : 8;
    lo = lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi;
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), idx),
                            _mm256_cmpgt_epi32(idx, _mm256_set1_epi32((int)lo - 1)));
}

/* Lanes 0 .. n - 1 of v into d[0 .. n - 1] (0 <= n <= 8) and nothing past them, by a 16-, an 8-
 * and a 4-byte store as n's bits ask (for a run's last floats, where a masked store would do:
 * AMD's Zen cores run vmaskmovps stores as microcode, docs/performance.md). */
static inline void ki_store_first8(float *d, __m256 v, int64_t n)
{
    if (n >= 8) {
        _mm256_storeu_ps(d, v);
        return;
    }
    __m128 h = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(d, h);
        h = _mm256_extractf128_ps(v, 1);
        d += 4;
    }
    if (n & 2) {
        _mm_storel_pi((__m64 *)d, h);
        h = _mm_movehl_ps(h, h);
        d += 2;
    }
    if (n & 1) {
        _mm_store_ss(d, h);
    }
}

#endif
