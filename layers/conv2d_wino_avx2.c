/* conv2d_wino_avx2.c - the Winograd transforms of wino_xform.h compiled with AVX2 + FMA: its
 * tile-row, in-register variant (wino_rows.h) with 8-lane vectors; the same operations in the same
 * order as the reference (C11 mode does not contract a * b + c into an FMA), so the same bits.
 * And the forming of F(2x2) U from float32 weights, eight output channels a vector.
 * Called only when the CPU has AVX2 (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx2
#include "wino_xform.h"

/* ki_wino_fu_ref on four vectors of 8 output channels per input channel: the same operations. */
void ki_wino_fu_avx2(const float *g, int64_t kc, float *restrict u, int64_t pstride)
{
    const __m256 half = _mm256_set1_ps(0.5f);
    for (int64_t q = 0; q < kc; q++) {
#pragma GCC unroll 4
        for (int h = 0; h < KI_OV_MV; h += 8) {
            __m256 w[9], t[4][3];
#pragma GCC unroll 9
            for (int k = 0; k < 9; k++) {
                w[k] = _mm256_loadu_ps(g + (q * 9 + k) * KI_OV_MV + h);
            }
#pragma GCC unroll 3
            for (int k = 0; k < 3; k++) { /* t = G g */
                __m256 a = _mm256_add_ps(w[k], w[6 + k]);
                t[0][k] = w[k];
                t[1][k] = _mm256_mul_ps(_mm256_add_ps(a, w[3 + k]), half);
                t[2][k] = _mm256_mul_ps(_mm256_sub_ps(a, w[3 + k]), half);
                t[3][k] = w[6 + k];
            }
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) { /* U = t G^T */
                __m256 b = _mm256_add_ps(t[i][0], t[i][2]);
                float *d = u + i * 4 * pstride + q * KI_OV_MV + h;
                _mm256_storeu_ps(d, t[i][0]);
                _mm256_storeu_ps(d + pstride, _mm256_mul_ps(_mm256_add_ps(b, t[i][1]), half));
                _mm256_storeu_ps(d + 2 * pstride, _mm256_mul_ps(_mm256_sub_ps(b, t[i][1]), half));
                _mm256_storeu_ps(d + 3 * pstride, t[i][2]);
            }
        }
    }
}
