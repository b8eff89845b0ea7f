/* linear_avx2.c - the level's dot product (ki_dot_for, gemm.h): nn.Linear's one-row path (a
 * classifier's y = W x is a pass over the weight: bandwidth, not arithmetic) and the RNNs' steps
 * at batch 1 or 2. Four independent accumulators hide the FMA latency; the summation order is
 * fixed, so results do not depend on threads. Compiled with -mavx2 -mfma; called only when the
 * CPU has both. */
#include <immintrin.h>
#include <stdint.h>

#include "gemm.h"
#include "linear_dot.h"

float ki_linear_dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    }
    float r = ki_linear_dot_sum(s0, s1, s2, s3);
    for (; i < n; i++) {
        r += a[i] * b[i];
    }
    return r;
}
