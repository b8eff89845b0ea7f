/* conv2d_ov_avx512.c - the OV micro-kernel (conv2d.h) with AVX-512: the 32 output channels of a
 * tile are two zmm vectors, each of the pw pixels a broadcast, 2 * pw accumulators over one k
 * block. One copy per pw (1..12), so the accumulators stay in registers. And the tile's
 * transposing store: each half of 16 channels transposed in registers, one masked store of the
 * pixels per channel. Compiled with -mavx512f;
 * called only when the CPU has it (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "simd_avx512.h"

/* Sixteen weights from element i of a block: float32, or binary16 widened (vcvtph2ps, exact). */
static inline __attribute__((always_inline)) __m512 load_a(const void *a, int64_t i,
                                                           const bool half)
{
    return half ? _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)((const uint16_t *)a + i)))
                : _mm512_load_ps((const float *)a + i);
}

static inline __attribute__((always_inline)) void
ov_tile(int64_t k, const void *a, const float *b, const int pw, int64_t ldb, bool acc,
        const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf, const bool half)
{
    __m512 c0[KI_OV_PW_MAX], c1[KI_OV_PW_MAX];
#pragma GCC unroll 12
    for (int j = 0; j < pw; j++) {
        c0[j] = acc ? _mm512_loadu_ps(t + j * KI_OV_MV) : _mm512_setzero_ps();
        c1[j] = acc ? _mm512_loadu_ps(t + j * KI_OV_MV + 16) : _mm512_setzero_ps();
    }
#define TILE_STEP()                                                                                \
    do {                                                                                           \
        __m512 a0 = load_a(a, q * KI_OV_MV, half), a1 = load_a(a, q * KI_OV_MV + 16, half);        \
        const float *bq = b + q * ldb;                                                             \
        _Pragma("GCC unroll 12") for (int j = 0; j < pw; j++)                                      \
        {                                                                                          \
            __m512 bv = _mm512_set1_ps(bq[j]);                                                     \
            c0[j] = _mm512_fmadd_ps(a0, bv, c0[j]);                                                \
            c1[j] = _mm512_fmadd_ps(a1, bv, c1[j]);                                                \
        }                                                                                          \
    } while (0)
    KI_OV_K_LOOP(pf, k, TILE_STEP());
#undef TILE_STEP
    __m512 b0 = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
    __m512 b1 = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 12
    for (int j = 0; j < pw; j++) {
        /* max(lo, v) then min(hi, .): a NaN v is kept (second operand) */
        __m512 v0 = bias ? _mm512_add_ps(c0[j], b0) : c0[j];
        __m512 v1 = bias ? _mm512_add_ps(c1[j], b1) : c1[j];
        _mm512_storeu_ps(t + j * KI_OV_MV, _mm512_min_ps(vhi, _mm512_max_ps(vlo, v0)));
        _mm512_storeu_ps(t + j * KI_OV_MV + 16, _mm512_min_ps(vhi, _mm512_max_ps(vlo, v1)));
    }
}

#define OV_CASE(J, HALF)                                                                           \
    case J:                                                                                        \
        ov_tile(k, a, b, J, ldb, acc, bias, lo, hi, t, pf, HALF);                                  \
        break

/* One copy of the tile per pw (1..KI_OV_PW_MAX), so its accumulators stay in registers. */
#define OV_SWITCH(HALF, REF)                                                                       \
    switch (pw) {                                                                                  \
        OV_CASE(1, HALF);                                                                          \
        OV_CASE(2, HALF);                                                                          \
        OV_CASE(3, HALF);                                                                          \
        OV_CASE(4, HALF);                                                                          \
        OV_CASE(5, HALF);                                                                          \
        OV_CASE(6, HALF);                                                                          \
        OV_CASE(7, HALF);                                                                          \
        OV_CASE(8, HALF);                                                                          \
        OV_CASE(9, HALF);                                                                          \
        OV_CASE(10, HALF);                                                                         \
        OV_CASE(11, HALF);                                                                         \
        OV_CASE(12, HALF);                                                                         \
    default:                                                                                       \
        REF(k, a, b, pw, ldb, acc, bias, lo, hi, t, pf);                                           \
        break;                                                                                     \
    }

void ki_ov_ukernel_avx512(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                          const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf)
{
    OV_SWITCH(false, ki_ov_ukernel_ref)
}

void ki_ov_ukernel_h_avx512(int64_t k, const uint16_t *a, const float *b, int pw, int64_t ldb,
                            bool acc, const float *bias, float lo, float hi, float *restrict t,
                            ki_ov_pf pf)
{
    OV_SWITCH(true, ki_ov_ukernel_h_ref)
}

void ki_ov_tile_store_avx512(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                             const float *res, float lo, float hi)
{
    const __mmask16 m = (__mmask16)ki_lane_mask16(0, nr);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (int64_t h = 0; h < rows; h += 16) {
        __m512 r[16];
        for (int64_t j = 0; j < 16; j++) {
            r[j] = j < nr ? _mm512_loadu_ps(t + j * KI_OV_MV + h) : _mm512_setzero_ps();
        }
        ki_tr16(r); /* r[o] lane j: pixel j of channel h + o */
        for (int64_t o = 0; o < 16 && h + o < rows; o++) {
            ki_store16_fin(d + (h + o) * ld, m, r[o], res ? res + (h + o) * ld : NULL, vlo, vhi);
        }
    }
}
