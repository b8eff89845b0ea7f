/* conv2d_wino_avx512.c - the Winograd transforms of wino_xform.h compiled with AVX-512 (its
 * tile-row, in-register variant) and the forming of F(2x2) U from binary16 or float32 weights
 * (wino_form_u.h); called only when the CPU has it (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx512
#include "wino_xform.h"

/* The forming of U (wino_form_u.h) on 16-lane vectors, from binary16 (vcvtph2ps, exact) or
 * float32 weights. */
#define FU_VEC   __m512
#define FU_LANES 16
#define FU_ADD   _mm512_add_ps
#define FU_SUB   _mm512_sub_ps
#define FU_MUL   _mm512_mul_ps
#define FU_SET1  _mm512_set1_ps
#define FU_STORE _mm512_storeu_ps

static inline __attribute__((always_inline)) __m512 fu_load(const void *g, int64_t i,
                                                            const bool b16)
{
    return b16 ? _mm512_cvtph_ps(
                     _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)g + i)))
               : _mm512_loadu_ps((const float *)g + i);
}

#include "wino_form_u.h"

void ki_wino_hu_avx512(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride)
{
    form_u(g, kc, u, pstride, true);
}

void ki_wino_fu_avx512(const float *g, int64_t kc, float *restrict u, int64_t pstride)
{
    form_u(g, kc, u, pstride, false);
}
