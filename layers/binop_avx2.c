/* binop_avx2.c - ki_binop (binop.h) on eight floats at a time: a load of each run (or the
 * broadcast float), one add or multiply, one store; the last n % 8 as the reference does them.
 * Compiled with -mavx2 -mfma; chosen only when the CPU has AVX2 (ki_binop_for). */
#include <immintrin.h>

#include "binop.h"

/* The vector part of o = a OP b (OP an _mm256 add or mul) for the steps sa, sb; i ends at the
 * first element the vectors left. */
#define BINOP_VECTORS(OP)                                                                          \
    do {                                                                                           \
        if (sa && sb) {                                                                            \
            for (; i + 8 <= n; i += 8) {                                                           \
                _mm256_storeu_ps(o + i, OP(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));       \
            }                                                                                      \
        } else if (sb) {                                                                           \
            const __m256 va = _mm256_set1_ps(a[0]);                                                \
            for (; i + 8 <= n; i += 8) {                                                           \
                _mm256_storeu_ps(o + i, OP(va, _mm256_loadu_ps(b + i)));                           \
            }                                                                                      \
        } else if (sa) {                                                                           \
            const __m256 vb = _mm256_set1_ps(b[0]);                                                \
            for (; i + 8 <= n; i += 8) {                                                           \
                _mm256_storeu_ps(o + i, OP(_mm256_loadu_ps(a + i), vb));                           \
            }                                                                                      \
        }                                                                                          \
    } while (0)

void ki_binop_avx2(char op, const float *a, int sa, const float *b, int sb, size_t n, float *o)
{
    size_t i = 0;
    if (op == '+') {
        BINOP_VECTORS(_mm256_add_ps);
    } else {
        BINOP_VECTORS(_mm256_mul_ps);
    }
    if (i < n) {
        ki_binop_ref(op, a + i * (size_t)sa, sa, b + i * (size_t)sb, sb, n - i, o + i);
    }
}
