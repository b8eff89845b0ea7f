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

static void quarter(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                    int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    __m256 c0[2], c1[2], c2[2], c3[2];
    for (int h = 0; h < 2; h++) {
        c0[h] = acc ? _mm256_loadu_ps(c + 8 * h) : _mm256_setzero_ps();
        c1[h] = acc ? _mm256_loadu_ps(c + ldc + 8 * h) : _mm256_setzero_ps();
        c2[h] = acc ? _mm256_loadu_ps(c + 2 * ldc + 8 * h) : _mm256_setzero_ps();
        c3[h] = acc ? _mm256_loadu_ps(c + 3 * ldc + 8 * h) : _mm256_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0 = _mm256_loadu_ps(b + k * ldb), b1 = _mm256_loadu_ps(b + k * ldb + 8);
        __m256 v = _mm256_broadcast_ss(a0 + k);
        c0[0] = _mm256_fmadd_ps(v, b0, c0[0]);
        c0[1] = _mm256_fmadd_ps(v, b1, c0[1]);
        v = _mm256_broadcast_ss(a1 + k);
        c1[0] = _mm256_fmadd_ps(v, b0, c1[0]);
        c1[1] = _mm256_fmadd_ps(v, b1, c1[1]);
        v = _mm256_broadcast_ss(a2 + k);
        c2[0] = _mm256_fmadd_ps(v, b0, c2[0]);
        c2[1] = _mm256_fmadd_ps(v, b1, c2[1]);
        v = _mm256_broadcast_ss(a3 + k);
        c3[0] = _mm256_fmadd_ps(v, b0, c3[0]);
        c3[1] = _mm256_fmadd_ps(v, b1, c3[1]);
    }
    for (int h = 0; fin && h < 2; h++) {
        c0[h] = finish(c0[h], fin, ldc, 0, h);
        c1[h] = finish(c1[h], fin, ldc, 1, h);
        c2[h] = finish(c2[h], fin, ldc, 2, h);
        c3[h] = finish(c3[h], fin, ldc, 3, h);
    }
    for (int h = 0; h < 2; h++) {
        _mm256_storeu_ps(c + 8 * h, c0[h]);
        _mm256_storeu_ps(c + ldc + 8 * h, c1[h]);
        _mm256_storeu_ps(c + 2 * ldc + 8 * h, c2[h]);
        _mm256_storeu_ps(c + 3 * ldc + 8 * h, c3[h]);
    }
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
