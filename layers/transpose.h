/* transpose.h - a plain matrix transpose, dst[j * ldd + i] = src[i * lds + j] for i < rows and
 * j < cols (the YOLO head turns its channel-major convolution output into rows of a box's
 * values with it): the reference loops and AVX2 / AVX-512 versions in 8 x 8 / 16 x 16 blocks,
 * which copy the same values. */
#ifndef KI_TRANSPOSE_H
#define KI_TRANSPOSE_H

#include <stdint.h>

typedef void (*ki_transpose_fn)(const float *src, int64_t lds, int64_t rows, int64_t cols,
                                float *restrict dst, int64_t ldd);

void ki_transpose_ref(const float *src, int64_t lds, int64_t rows, int64_t cols,
                      float *restrict dst, int64_t ldd);
/* transpose_avx512.c; call only when the CPU has AVX-512 (ki_transpose_best). */
void ki_transpose_avx512(const float *src, int64_t lds, int64_t rows, int64_t cols,
                         float *restrict dst, int64_t ldd);
/* transpose_avx2.c: the same in 8 x 8 blocks; call only when the CPU has AVX2. */
void ki_transpose_avx2(const float *src, int64_t lds, int64_t rows, int64_t cols,
                       float *restrict dst, int64_t ldd);
/* The fastest version this CPU runs. */
ki_transpose_fn ki_transpose_best(void);

#endif
