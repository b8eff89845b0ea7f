/* conv2d_wino_avx512.c - the Winograd transforms of wino_xform.h compiled with AVX-512 (its
 * tile-row, in-register variant) and the forming of F(2x2) U from binary16 or float32 weights;
 * called only
 * when the CPU has it (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx512
#include "wino_xform.h"

/* ki_wino_hu_ref / ki_wino_fu_ref on two vectors of 16 output channels per input channel: the
 * same operations; g holds binary16 (half) or float32 weights. */
static inline __attribute__((always_inline)) void
form_u(const void *g, int64_t kc, float *restrict u, int64_t pstride, const bool b16)
{
    const __m512 half = _mm512_set1_ps(0.5f);
    for (int64_t q = 0; q < kc; q++) {
#pragma GCC unroll 2
        for (int h = 0; h < KI_OV_MV; h += 16) {
            __m512 w[9], t[4][3];
#pragma GCC unroll 9
            for (int k = 0; k < 9; k++) {
                const int64_t i = (q * 9 + k) * KI_OV_MV + h;
                w[k] = b16 ? _mm512_cvtph_ps(_mm256_loadu_si256(
                                 (const __m256i *)(const void *)((const uint16_t *)g + i)))
                           : _mm512_loadu_ps((const float *)g + i);
            }
#pragma GCC unroll 3
            for (int k = 0; k < 3; k++) { /* t = G g */
                __m512 a = _mm512_add_ps(w[k], w[6 + k]);
                t[0][k] = w[k];
                t[1][k] = _mm512_mul_ps(_mm512_add_ps(a, w[3 + k]), half);
                t[2][k] = _mm512_mul_ps(_mm512_sub_ps(a, w[3 + k]), half);
                t[3][k] = w[6 + k];
            }
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) { /* U = t G^T */
                __m512 b = _mm512_add_ps(t[i][0], t[i][2]);
                float *d = u + i * 4 * pstride + q * KI_OV_MV + h;
                _mm512_storeu_ps(d, t[i][0]);
                _mm512_storeu_ps(d + pstride, _mm512_mul_ps(_mm512_add_ps(b, t[i][1]), half));
                _mm512_storeu_ps(d + 2 * pstride, _mm512_mul_ps(_mm512_sub_ps(b, t[i][1]), half));
                _mm512_storeu_ps(d + 3 * pstride, t[i][2]);
            }
        }
    }
}

void ki_wino_hu_avx512(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride)
{
    form_u(g, kc, u, pstride, true);
}

void ki_wino_fu_avx512(const float *g, int64_t kc, float *restrict u, int64_t pstride)
{
    form_u(g, kc, u, pstride, false);
}
