/* conv2d_wino_avx2.c - the Winograd transforms of wino_xform.h compiled with AVX2 + FMA: its
 * tile-row, in-register variant (wino_rows.h) with 8-lane vectors; the same operations in the same
 * order as the reference (C11 mode does not contract a * b + c into an FMA), so the same bits.
 * And the forming of F(2x2) U from float32 weights (wino_form_u.h), eight output channels a
 * vector.
 * Called only when the CPU has AVX2 (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx2
#include "wino_xform.h"

/* The forming of U (wino_form_u.h) from float32 weights on 8-lane vectors. */
#define FU_VEC   __m256
#define FU_LANES 8
#define FU_ADD   _mm256_add_ps
#define FU_SUB   _mm256_sub_ps
#define FU_MUL   _mm256_mul_ps
#define FU_SET1  _mm256_set1_ps
#define FU_STORE _mm256_storeu_ps

static inline __attribute__((always_inline)) __m256 fu_load(const void *g, int64_t i,
                                                            const bool b16)
{
    (void)b16; /* float32 only at this level */
    return _mm256_loadu_ps((const float *)g + i);
}

#include "wino_form_u.h"

void ki_wino_fu_avx2(const float *g, int64_t kc, float *restrict u, int64_t pstride)
{
    form_u(g, kc, u, pstride, false);
}
