/* layernorm.h - one LayerNorm row, y = (x - mean) / sqrt(var + eps) * w + b (w, b may be NULL):
 * the reference (norm_layer.c: mean and biased variance in double, two passes) and AVX2 /
 * AVX-512 versions (the same double sums in vector lanes, the row in float vectors), within a
 * few units in the last place of the reference. */
#ifndef KI_LAYERNORM_H
#define KI_LAYERNORM_H

#include <stdint.h>

#include "../core/cpu.h"

typedef void (*ki_ln_row_fn)(const float *x, int64_t n, float eps, const float *w, const float *b,
                             float *y);

void ki_ln_row_ref(const float *x, int64_t n, float eps, const float *w, const float *b, float *y);
/* norm_avx2.c / norm_avx512.c: call only when the CPU has that level. */
void ki_ln_row_avx2(const float *x, int64_t n, float eps, const float *w, const float *b, float *y);
void ki_ln_row_avx512(const float *x, int64_t n, float eps, const float *w, const float *b,
                      float *y);
/* The version for isa (at most the CPU's level). */
ki_ln_row_fn ki_ln_row_for(ki_isa isa);

#endif
