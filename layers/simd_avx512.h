/* simd_avx512.h - AVX-512 pieces shared by the kernels: a 16 x 16 float transpose in registers
 * (the Winograd gathers and scatters, the OV path's transposing store), the even / odd lane
 * indices of a 32-float window (stride-2 columns of the depthwise and direct kernels), and the
 * finishing store of one output vector. Include only from files compiled with -mavx512f. */
#ifndef KI_SIMD_AVX512_H
#define KI_SIMD_AVX512_H

#include <immintrin.h>

/* Transposes the 16 x 16 matrix r (r[i] is row i) in registers. */
static inline __attribute__((always_inline)) void ki_tr16(__m512 r[16])
{
    __m512 t[16], s[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    /* s[4g+c], 128-bit lane k: column 4k+c of rows 4g..4g+3 */
    for (int g = 0; g < 16; g += 4) {
        s[g] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
        s[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
        s[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        s[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) { /* a 4 x 4 transpose of 128-bit lanes */
        __m512 u0 = _mm512_shuffle_f32x4(s[c], s[4 + c], 0x44);
        __m512 u1 = _mm512_shuffle_f32x4(s[c], s[4 + c], 0xEE);
        __m512 u2 = _mm512_shuffle_f32x4(s[8 + c], s[12 + c], 0x44);
        __m512 u3 = _mm512_shuffle_f32x4(s[8 + c], s[12 + c], 0xEE);
        r[c] = _mm512_shuffle_f32x4(u0, u2, 0x88);
        r[4 + c] = _mm512_shuffle_f32x4(u0, u2, 0xDD);
        r[8 + c] = _mm512_shuffle_f32x4(u1, u3, 0x88);
        r[12 + c] = _mm512_shuffle_f32x4(u1, u3, 0xDD);
    }
}

/* Lane indices 0, 2, .., 30 and 1, 3, .., 31 for _mm512_permutex2var_ps(lo, idx, hi): the even
 * and odd floats of the 32 at lo, hi. */
static inline __m512i ki_even_idx(void)
{
    return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
}

static inline __m512i ki_odd_idx(void)
{
    return _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

/* Lane indices 0, 1, .., 15. */
static inline __m512i ki_lane_idx(void)
{
    return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
}

/* Stores the lanes m of v to d after adding the residual res (masked load; NULL for none) and
 * clamping to [lo, hi]: max(lo, v) returns a NaN v (second operand), as the scalar form keeps
 * it. */
static inline __attribute__((always_inline)) void
ki_store16_fin(float *d, __mmask16 m, __m512 v, const float *res, __m512 lo, __m512 hi)
{
    if (res) {
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res));
    }
    _mm512_mask_storeu_ps(d, m, _mm512_min_ps(hi, _mm512_max_ps(lo, v)));
}

#endif
