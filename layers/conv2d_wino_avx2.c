/* conv2d_wino_avx2.c - the Winograd transforms of wino_xform.h compiled with AVX2 + FMA: its
 * tile-row, in-register variant (wino_rows.h) with 8-lane vectors; the same operations in the same
 * order as the reference (C11 mode does not contract a * b + c into an FMA), so the same bits.
 * Called only when the CPU has AVX2 (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx2
#include "wino_xform.h"
