/* conv2d_wino_avx512.c - the Winograd transforms of wino_xform.h compiled with AVX-512 (its
 * tile-row, in-register variant); called only when the CPU has it (ki_conv2d_set_isa). */
#define KI_WINO_SUFFIX _avx512
#include "wino_xform.h"
