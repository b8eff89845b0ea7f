/* softmax.h - one softmax row in place, y = exp(x - max x) / sum: the reference (softmax.c:
 * expf, a double sum) and AVX2 / AVX-512 versions (vexp_*.h's exp, the sum in vector lanes,
 * then one reciprocal), within a few units in the last place of the reference. Used by the
 * attention layers and by softmax over the last dim. A row of -inf gives NaN, as PyTorch. */
#ifndef KI_SOFTMAX_H
#define KI_SOFTMAX_H

#include <stdint.h>

#include "../core/cpu.h"

typedef void (*ki_softmax_row_fn)(float *row, int64_t n);

void ki_softmax_row_ref(float *row, int64_t n);
/* softmax_avx2.c / softmax_avx512.c: call only when the CPU has that level. */
void ki_softmax_row_avx2(float *row, int64_t n);
void ki_softmax_row_avx512(float *row, int64_t n);
/* The version for isa (at most the CPU's level: core/cpu.h). */
ki_softmax_row_fn ki_softmax_row_for(ki_isa isa);

#endif
