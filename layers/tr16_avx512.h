/* tr16_avx512.h - a 16 x 16 float transpose in AVX-512 registers, for the kernels that turn
 * lanes into rows (the Winograd gathers and scatters, the OV path's transposing store). Include
 * only from files compiled with -mavx512f. */
#ifndef KI_TR16_AVX512_H
#define KI_TR16_AVX512_H

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

#endif
