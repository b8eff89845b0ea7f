/* linear_avx512.c - the dot product under nn.Linear's one-row path with the weight row kept as
 * binary16 (every weight exactly such a value: an export that stores f16 weights): half the bytes
 * to stream per run. Each value is widened exactly (vcvtph2ps) and the products are summed in the
 * order of ki_linear_dot_avx2 (four accumulators of eight lanes, the same reduction, the same
 * scalar tail), so the result is the same float. Compiled with -mavx512f; linear.c calls it only
 * when the CPU has it. */
#include <immintrin.h>
#include <stdint.h>

#include "../core/half.h"
#include "linear_dot.h"

float ki_linear_dot_h_avx512(const uint16_t *a, const float *b, int64_t n);

static inline __m256 lo8(__m512 v)
{
    return _mm512_castps512_ps256(v);
}

static inline __m256 hi8(__m512 v)
{
    return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

float ki_linear_dot_h_avx512(const uint16_t *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i)));
        const __m512 y = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(a + i + 16)));
        s0 = _mm256_fmadd_ps(lo8(x), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(hi8(x), _mm256_loadu_ps(b + i + 8), s1);
        s2 = _mm256_fmadd_ps(lo8(y), _mm256_loadu_ps(b + i + 16), s2);
        s3 = _mm256_fmadd_ps(hi8(y), _mm256_loadu_ps(b + i + 24), s3);
    }
    for (; i + 8 <= n; i += 8) {
        const __m512 x =
            _mm512_cvtph_ps(_mm256_zextsi128_si256(_mm_loadu_si128((const __m128i *)(a + i))));
        s0 = _mm256_fmadd_ps(lo8(x), _mm256_loadu_ps(b + i), s0);
    }
    float r = ki_linear_dot_sum(s0, s1, s2, s3);
    for (; i < n; i++) {
        r += ki_half_to_float(a[i]) * b[i];
    }
    return r;
}
