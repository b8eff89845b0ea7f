/* transpose_avx2.c - the matrix transpose of transpose.h in 8 x 8 blocks: eight rows of eight
 * columns loaded, transposed in registers (unpacks, shuffles and 128-bit permutes), stored as
 * eight rows of the destination; blocks at the matrix's edges go through the reference loops.
 * The same values copied. Compiled with -mavx2; called only when the CPU has it
 * (ki_transpose_best). */
#include <immintrin.h>

#include "transpose.h"

/* One full 8 x 8 block: d[j * ldd + i] = s[i * lds + j]. */
static inline void block8(const float *s, int64_t lds, float *restrict d, int64_t ldd)
{
    __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds);
    __m256 r2 = _mm256_loadu_ps(s + 2 * lds), r3 = _mm256_loadu_ps(s + 3 * lds);
    __m256 r4 = _mm256_loadu_ps(s + 4 * lds), r5 = _mm256_loadu_ps(s + 5 * lds);
    __m256 r6 = _mm256_loadu_ps(s + 6 * lds), r7 = _mm256_loadu_ps(s + 7 * lds);
    __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
    _mm256_storeu_ps(d + ldd, _mm256_permute2f128_ps(u1, u5, 0x20));
    _mm256_storeu_ps(d + 2 * ldd, _mm256_permute2f128_ps(u2, u6, 0x20));
    _mm256_storeu_ps(d + 3 * ldd, _mm256_permute2f128_ps(u3, u7, 0x20));
    _mm256_storeu_ps(d + 4 * ldd, _mm256_permute2f128_ps(u0, u4, 0x31));
    _mm256_storeu_ps(d + 5 * ldd, _mm256_permute2f128_ps(u1, u5, 0x31));
    _mm256_storeu_ps(d + 6 * ldd, _mm256_permute2f128_ps(u2, u6, 0x31));
    _mm256_storeu_ps(d + 7 * ldd, _mm256_permute2f128_ps(u3, u7, 0x31));
}

void ki_transpose_avx2(const float *src, int64_t lds, int64_t rows, int64_t cols,
                       float *restrict dst, int64_t ldd)
{
    const int64_t r8 = rows / 8 * 8, c8 = cols / 8 * 8;
    for (int64_t i0 = 0; i0 < r8; i0 += 8) {
        for (int64_t j0 = 0; j0 < c8; j0 += 8) {
            block8(src + i0 * lds + j0, lds, dst + j0 * ldd + i0, ldd);
        }
    }
    /* the edges: the columns past c8 of every row, then the rows past r8 */
    ki_transpose_ref(src + c8, lds, r8, cols - c8, dst + c8 * ldd, ldd);
    ki_transpose_ref(src + r8 * lds, lds, rows - r8, cols, dst + r8, ldd);
}
