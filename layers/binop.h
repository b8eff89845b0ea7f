/* binop.h - the elementwise sum or product of two runs of floats, o[i] = a[i * sa] op b[i * sb]
 * for i < n, op '+' or '*', each step 0 (one float repeated: a broadcast operand) or 1 (a run):
 * pnnx.Expression's add(@0,@1) and mul(@0,@1) (mobilenet_v3's channel scalings, residual sums).
 * One IEEE operation per element in the order a op b, so every version gives the reference's
 * floats. o may be a's or b's run (in place). */
#ifndef KI_BINOP_H
#define KI_BINOP_H

#include <stddef.h>

#include "../core/cpu.h"

typedef void (*ki_binop_fn)(char op, const float *a, int sa, const float *b, int sb, size_t n,
                            float *o);

void ki_binop_ref(char op, const float *a, int sa, const float *b, int sb, size_t n, float *o);
/* binop_avx2.c: call only when the CPU has AVX2. */
void ki_binop_avx2(char op, const float *a, int sa, const float *b, int sb, size_t n, float *o);
/* The version for isa (at most the CPU's level: core/cpu.h). */
ki_binop_fn ki_binop_for(ki_isa isa);

#endif
