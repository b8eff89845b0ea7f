/* gemm_avx2.c - the AVX2+FMA SGEMM micro-kernel. Sixteen ymm registers cannot hold an 8 x 32
 * tile, so it runs rows 0..5 in two 16-column halves (12 accumulators) and rows 6..7 across the
 * 32 columns (8), reading the L1-resident B sub-panel three times. The k loops are unrolled by two
 * (GCC does not at -O2): the loop's four bookkeeping instructions beside 20 loads and FMAs kept
 * the kernel at 94 % of the FMA peak in a harness (103 of 110 GFLOP/s), 99 % unrolled
 * (docs/performance.md). Compiled with -mavx2 -mfma; called only when the CPU has both
 * (ki_gemm_ukernel_for). */
#include <immintrin.h>

#include "gemm.h"

/* v + bias + residual (row r, columns 8h..8h+7 of the 16 being stored), then min(hi, max(lo, .)):
 * see ki_gemm_fin. */
static inline __m256 finish(__m256 v, const ki_gemm_fin *fin, int64_t ldc, int r, int h)
{
    if (fin->bias) {
        v = _mm256_add_ps(v, _mm256_set1_ps(fin->bias[r]));
    }
    if (fin->res) {
        v = _mm256_add_ps(v, _mm256_loadu_ps(fin->res + r * ldc + 8 * h));
    }
    return _mm256_min_ps(_mm256_set1_ps(fin->hi), _mm256_max_ps(_mm256_set1_ps(fin->lo), v));
}

/* fin for the part of the tile from row r, column j: its bias and residual moved there. */
static inline ki_gemm_fin fin_at(const ki_gemm_fin *fin, int r, int j, int64_t ldc)
{
    return (ki_gemm_fin){ fin->bias ? fin->bias + r : NULL, fin->lo, fin->hi,
                          fin->res ? fin->res + r * ldc + j : NULL };
}

/* Stores one row of 16 columns (two vectors) after the finishing step. */
static inline void store_row(float *c, int64_t ldc, int r, __m256 v0, __m256 v1,
                             const ki_gemm_fin *fin)
{
    if (fin) {
        v0 = finish(v0, fin, ldc, r, 0);
        v1 = finish(v1, fin, ldc, r, 1);
    }
    _mm256_storeu_ps(c + r * ldc, v0);
    _mm256_storeu_ps(c + r * ldc + 8, v1);
}

/* Rows 0..nr-1 (nr 4 or 6, a constant in each caller) x 16 columns: 2 nr accumulators (named
 * variables, not arrays: GCC kept arrays on the stack and stored every accumulator back each k
 * step), 2 B loads and nr broadcasts per k; with six rows, the two B vectors and the broadcast,
 * 15 of the 16 registers. */
static inline __attribute__((always_inline)) void rows16(int64_t kc, const float *const *a,
                                                         const float *b, int64_t ldb, float *c,
                                                         int64_t ldc, bool acc,
                                                         const ki_gemm_fin *fin, const int nr)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const float *a4 = nr > 4 ? a[4] : a0, *a5 = nr > 4 ? a[5] : a0;
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
    if (acc) {
        c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
        c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
        if (nr > 4) {
            c40 = _mm256_loadu_ps(c + 4 * ldc), c41 = _mm256_loadu_ps(c + 4 * ldc + 8);
            c50 = _mm256_loadu_ps(c + 5 * ldc), c51 = _mm256_loadu_ps(c + 5 * ldc + 8);
        }
    }
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
        __m256 v = _mm256_broadcast_ss(a0 + k);
        c00 = _mm256_fmadd_ps(v, b0, c00);
        c01 = _mm256_fmadd_ps(v, b1, c01);
        v = _mm256_broadcast_ss(a1 + k);
        c10 = _mm256_fmadd_ps(v, b0, c10);
        c11 = _mm256_fmadd_ps(v, b1, c11);
        v = _mm256_broadcast_ss(a2 + k);
        c20 = _mm256_fmadd_ps(v, b0, c20);
        c21 = _mm256_fmadd_ps(v, b1, c21);
        v = _mm256_broadcast_ss(a3 + k);
        c30 = _mm256_fmadd_ps(v, b0, c30);
        c31 = _mm256_fmadd_ps(v, b1, c31);
        if (nr > 4) {
            v = _mm256_broadcast_ss(a4 + k);
            c40 = _mm256_fmadd_ps(v, b0, c40);
            c41 = _mm256_fmadd_ps(v, b1, c41);
            v = _mm256_broadcast_ss(a5 + k);
            c50 = _mm256_fmadd_ps(v, b0, c50);
            c51 = _mm256_fmadd_ps(v, b1, c51);
        }
    }
    store_row(c, ldc, 0, c00, c01, fin);
    store_row(c, ldc, 1, c10, c11, fin);
    store_row(c, ldc, 2, c20, c21, fin);
    store_row(c, ldc, 3, c30, c31, fin);
    if (nr > 4) {
        store_row(c, ldc, 4, c40, c41, fin);
        store_row(c, ldc, 5, c50, c51, fin);
    }
}

/* Rows 0..5 x 16 columns (12 accumulators) and rows 0..3 x 16 (8), each register-allocated on
 * its own. */
static void rows6(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                  int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    rows16(kc, a, b, ldb, c, ldc, acc, fin, 6);
}

static void rows4_16(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                     int64_t ldc, bool acc)
{
    rows16(kc, a, b, ldb, c, ldc, acc, NULL, 4);
}

/* Rows 6 and 7 x all 32 columns: 8 accumulators, 4 B loads and 2 broadcasts per k. */
static void rows2(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                  int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    const float *a0 = a[0], *a1 = a[1];
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c02 = c00, c03 = c00, c10 = c00, c11 = c00,
           c12 = c00, c13 = c00;
    if (acc) {
        c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
        c02 = _mm256_loadu_ps(c + 16), c03 = _mm256_loadu_ps(c + 24);
        c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
        c12 = _mm256_loadu_ps(c + ldc + 16), c13 = _mm256_loadu_ps(c + ldc + 24);
    }
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        const float *bk = b + k * ldb;
        __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + 8);
        __m256 b2 = _mm256_loadu_ps(bk + 16), b3 = _mm256_loadu_ps(bk + 24);
        __m256 v = _mm256_broadcast_ss(a0 + k);
        c00 = _mm256_fmadd_ps(v, b0, c00);
        c01 = _mm256_fmadd_ps(v, b1, c01);
        c02 = _mm256_fmadd_ps(v, b2, c02);
        c03 = _mm256_fmadd_ps(v, b3, c03);
        v = _mm256_broadcast_ss(a1 + k);
        c10 = _mm256_fmadd_ps(v, b0, c10);
        c11 = _mm256_fmadd_ps(v, b1, c11);
        c12 = _mm256_fmadd_ps(v, b2, c12);
        c13 = _mm256_fmadd_ps(v, b3, c13);
    }
    const ki_gemm_fin f = fin ? fin_at(fin, 0, 16, ldc) : (ki_gemm_fin){ 0 }; /* columns 16.. */
    store_row(c, ldc, 0, c00, c01, fin);
    store_row(c, ldc, 1, c10, c11, fin);
    store_row(c + 16, ldc, 0, c02, c03, fin ? &f : NULL);
    store_row(c + 16, ldc, 1, c12, c13, fin ? &f : NULL);
}

/* The 8 x 32 tile as rows 0..5 in two 16-column halves (12 accumulators each, enough
 * independent FMA chains for two ports of 4 or 5 cycles' latency; 4 x 16 quarters had 8 and ran
 * at ~88 % of the FMA peak in L1) and rows 6..7 across all 32 columns. Every value is the same
 * sum in the same k order as before. */
void ki_gemm_ukernel_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                          int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    for (int ch = 0; ch < 2; ch++) {
        const ki_gemm_fin f = fin ? fin_at(fin, 0, 16 * ch, ldc) : (ki_gemm_fin){ 0 };
        rows6(kc, a, b + 16 * ch, ldb, c + 16 * ch, ldc, acc, fin ? &f : NULL);
    }
    const ki_gemm_fin f = fin ? fin_at(fin, 6, 0, ldc) : (ki_gemm_fin){ 0 };
    rows2(kc, a + 6, b, ldb, c + 6 * ldc, ldc, acc, fin ? &f : NULL);
}

/* The low 16 columns of the 8 x 32 tile, no epilogue (a partial tile of at most 16 columns: the
 * last panel of resnet18's 56x56 Winograd layers holds 4 tiles), as two 4-row blocks: 8 cycles
 * per k step where the full kernel takes 16, the same operations per value. */
void ki_gemm_ukernel16_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                            float *c, int64_t ldc, bool acc)
{
    rows4_16(kc, a, b, ldb, c, ldc, acc);
    rows4_16(kc, a + 4, b, ldb, c + 4 * ldc, ldc, acc);
}

/* The low 8 columns of the 8 x 32 tile, no epilogue (a partial tile of at most 8 columns: the
 * last panel of resnet18's 56x56 Winograd layers holds 4 tiles, that of a 14x14 1x1 layer 4
 * pixels): eight accumulators, one B load and eight broadcasts per k step, 4 cycles where the
 * 16-column kernel takes 8; the same operations per value. */
void ki_gemm_ukernel8_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                           int64_t ldc, bool acc)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    const float *a4 = a[4], *a5 = a[5], *a6 = a[6], *a7 = a[7];
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    if (acc) {
        c0 = _mm256_loadu_ps(c), c1 = _mm256_loadu_ps(c + ldc);
        c2 = _mm256_loadu_ps(c + 2 * ldc), c3 = _mm256_loadu_ps(c + 3 * ldc);
        c4 = _mm256_loadu_ps(c + 4 * ldc), c5 = _mm256_loadu_ps(c + 5 * ldc);
        c6 = _mm256_loadu_ps(c + 6 * ldc), c7 = _mm256_loadu_ps(c + 7 * ldc);
    }
#pragma GCC unroll 2
    for (int64_t k = 0; k < kc; k++) {
        const __m256 bv = _mm256_loadu_ps(b + k * ldb);
        c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a0 + k), bv, c0);
        c1 = _mm256_fmadd_ps(_mm256_broadcast_ss(a1 + k), bv, c1);
        c2 = _mm256_fmadd_ps(_mm256_broadcast_ss(a2 + k), bv, c2);
        c3 = _mm256_fmadd_ps(_mm256_broadcast_ss(a3 + k), bv, c3);
        c4 = _mm256_fmadd_ps(_mm256_broadcast_ss(a4 + k), bv, c4);
        c5 = _mm256_fmadd_ps(_mm256_broadcast_ss(a5 + k), bv, c5);
        c6 = _mm256_fmadd_ps(_mm256_broadcast_ss(a6 + k), bv, c6);
        c7 = _mm256_fmadd_ps(_mm256_broadcast_ss(a7 + k), bv, c7);
    }
    _mm256_storeu_ps(c, c0), _mm256_storeu_ps(c + ldc, c1);
    _mm256_storeu_ps(c + 2 * ldc, c2), _mm256_storeu_ps(c + 3 * ldc, c3);
    _mm256_storeu_ps(c + 4 * ldc, c4), _mm256_storeu_ps(c + 5 * ldc, c5);
    _mm256_storeu_ps(c + 6 * ldc, c6), _mm256_storeu_ps(c + 7 * ldc, c7);
}
