/* conv2d_wino_avx2.c - the Winograd transforms of wino_xform.h (its lane-loop variant) compiled
 * with AVX2 + FMA, so GCC vectorises the 16-lane loops as two ymm vectors instead of four SSE
 * ones; the same operations in the same order (C11 mode does not contract a * b + c into an FMA),
 * so the same bits as the reference. Called only when the CPU has AVX2 (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx2
#include "wino_xform.h"
