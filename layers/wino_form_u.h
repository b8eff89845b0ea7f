/* wino_form_u.h - U = G g G^T of F(2x2) for kc input channels of one 32-channel block of the
 * original weights (g: [kc][9][32]) into u[pos * pstride + q * 32 + r], in vectors of output
 * channels: the float operations of the plain version (conv2d_wino.c, wino_u_of) on every lane,
 * so the same bits. The including ISA file defines, before including it:
 *   FU_VEC, FU_LANES          its vector type and width;
 *   FU_ADD, FU_SUB, FU_MUL, FU_SET1, FU_STORE   the vector operations;
 *   fu_load(g, i, b16)        the FU_LANES weights from element i of g, binary16 (b16) or float32.
 * form_u is static inline and always inlined into the file's entries, so b16 is a constant in
 * each. */
#ifndef KI_WINO_FORM_U_H
#define KI_WINO_FORM_U_H

#include <stdint.h>

#include "conv2d.h"

static inline __attribute__((always_inline)) void
form_u(const void *g, int64_t kc, float *restrict u, int64_t pstride, const bool b16)
{
    const FU_VEC half = FU_SET1(0.5f);
    for (int64_t q = 0; q < kc; q++) {
#pragma GCC unroll 4
        for (int h = 0; h < KI_OV_MV; h += FU_LANES) {
            FU_VEC w[9], t[4][3];
#pragma GCC unroll 9
            for (int k = 0; k < 9; k++) {
                w[k] = fu_load(g, (q * 9 + k) * KI_OV_MV + h, b16);
            }
#pragma GCC unroll 3
            for (int k = 0; k < 3; k++) { /* t = G g */
                FU_VEC a = FU_ADD(w[k], w[6 + k]);
                t[0][k] = w[k];
                t[1][k] = FU_MUL(FU_ADD(a, w[3 + k]), half);
                t[2][k] = FU_MUL(FU_SUB(a, w[3 + k]), half);
                t[3][k] = w[6 + k];
            }
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) { /* U = t G^T */
                FU_VEC b = FU_ADD(t[i][0], t[i][2]);
                float *d = u + i * 4 * pstride + q * KI_OV_MV + h;
                FU_STORE(d, t[i][0]);
                FU_STORE(d + pstride, FU_MUL(FU_ADD(b, t[i][1]), half));
                FU_STORE(d + 2 * pstride, FU_MUL(FU_SUB(b, t[i][1]), half));
                FU_STORE(d + 3 * pstride, t[i][2]);
            }
        }
    }
}

#endif
