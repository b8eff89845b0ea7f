/* simd_avx2.h - AVX2 pieces shared by the kernels: the even / odd floats of a 16-float window
 * (stride-2 columns of the direct path, the max pool and the stride-2 packing), the lane mask
 * of a row's columns (masked loads at a row's ends), a run's first floats stored, and an 8x8
 * transpose in registers. Include only from files compiled with -mavx2. */
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

/* Transposes the 8x8 block r0..r7 (rows) in registers: r<o> becomes column o (the OV path's tile
 * store, the two-phase Winograd's columns step). */
static inline __attribute__((always_inline)) void ki_tr8(__m256 *r0, __m256 *r1, __m256 *r2,
                                                         __m256 *r3, __m256 *r4, __m256 *r5,
                                                         __m256 *r6, __m256 *r7)
{
    __m256 t0 = _mm256_unpacklo_ps(*r0, *r1), t1 = _mm256_unpackhi_ps(*r0, *r1);
    __m256 t2 = _mm256_unpacklo_ps(*r2, *r3), t3 = _mm256_unpackhi_ps(*r2, *r3);
    __m256 t4 = _mm256_unpacklo_ps(*r4, *r5), t5 = _mm256_unpackhi_ps(*r4, *r5);
    __m256 t6 = _mm256_unpacklo_ps(*r6, *r7), t7 = _mm256_unpackhi_ps(*r6, *r7);
    __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    *r0 = _mm256_permute2f128_ps(s0, s4, 0x20), *r1 = _mm256_permute2f128_ps(s1, s5, 0x20);
    *r2 = _mm256_permute2f128_ps(s2, s6, 0x20), *r3 = _mm256_permute2f128_ps(s3, s7, 0x20);
    *r4 = _mm256_permute2f128_ps(s0, s4, 0x31), *r5 = _mm256_permute2f128_ps(s1, s5, 0x31);
    *r6 = _mm256_permute2f128_ps(s2, s6, 0x31), *r7 = _mm256_permute2f128_ps(s3, s7, 0x31);
}

#endif
