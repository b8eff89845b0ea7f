/* conv2d_ws2_avx2.c - the two-phase stride-2 Winograd transforms (ws2_xform.h) compiled with AVX2:
 * eight lanes a ymm register, and the columns step of eight tiles from a transposed 8x8 block.
 * Called only when the CPU has AVX2 (ki_conv2d_set_isa). */
#define KI_WS2_SUFFIX _avx2
#include "ws2_xform.h"
