/* gemm_avx2.c - the AVX2+FMA SGEMM micro-kernel. Sixteen ymm registers cannot hold an 8 x 32
 * tile, so it runs four 4 x 16 quarters (8 accumulators, 2 B loads and 4 broadcasts per k),
 * reading the L1-resident B sub-panel twice. Compiled with -mavx2 -mfma; called only when the
 * CPU has both (ki_gemm_ukernel_for). */
#include <immintrin.h>

#include "gemm.h"

/* v + bias + residual (row r, columns 8h..8h+7 of the quarter), then min(hi, max(lo, .)): see
 * ki_gemm_fin. */
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

/* Stores one row of the quarter (two vectors) after the finishing step. */
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

/* One 4 x 16 quarter. The accumulators are named variables, not arrays: GCC kept arrays on the
 * stack and stored every accumulator back each k step (53 % of the FMA peak instead of ~95 %). */
static void quarter(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                    int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
           c30 = c00, c31 = c00;
    if (acc) {
        c00 = _mm256_loadu_ps(c), c01 = _mm256_loadu_ps(c + 8);
        c10 = _mm256_loadu_ps(c + ldc), c11 = _mm256_loadu_ps(c + ldc + 8);
        c20 = _mm256_loadu_ps(c + 2 * ldc), c21 = _mm256_loadu_ps(c + 2 * ldc + 8);
        c30 = _mm256_loadu_ps(c + 3 * ldc), c31 = _mm256_loadu_ps(c + 3 * ldc + 8);
    }
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
    }
    store_row(c, ldc, 0, c00, c01, fin);
    store_row(c, ldc, 1, c10, c11, fin);
    store_row(c, ldc, 2, c20, c21, fin);
    store_row(c, ldc, 3, c30, c31, fin);
}

void ki_gemm_ukernel_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                          int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    for (int rh = 0; rh < 2; rh++) {
        for (int ch = 0; ch < 2; ch++) {
            ki_gemm_fin f = { fin && fin->bias ? fin->bias + 4 * rh : NULL, fin ? fin->lo : 0.0f,
                              fin ? fin->hi : 0.0f,
                              fin && fin->res ? fin->res + 4 * rh * ldc + 16 * ch : NULL };
            quarter(kc, a + 4 * rh, b + 16 * ch, ldb, c + 4 * rh * ldc + 16 * ch, ldc, acc,
                    fin ? &f : NULL);
        }
    }
}
