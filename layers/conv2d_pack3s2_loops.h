/* conv2d_pack3s2_loops.h - the loops of the im2col of 3-wide, stride-2 kernels (zero padding, no
 * column dilation) that do not depend on the vector width (conv2d_pack_avx512.c,
 * conv2d_pack_avx2.c): the column-matrix rows in (channel, ky) groups of three (kx = 0, 1, 2),
 * each group's columns in runs along the output rows, a run in steps of PACK3_STEP pixels, and the
 * zeros past the panel's pixels; the input rows are those a ki_conv2d_rows holds (a whole image,
 * or a band of the rows before it in conv2d_pwdw.c), any other row padding. Each ISA file defines,
 * before including this header:
 *   PACK3_STEP           output pixels one call of run3 covers (32 or 8);
 *   run3(row, w, base, len, pw, d): rows d, d + pw, d + 2 * pw at the step's len <= PACK3_STEP
 *                        pixels from input column base of row `row` (NULL: a row in the padding).
 * The loops ask for the next panel's four lines of each input row a panel ahead (the column
 * matrix walks 3 * kh rows per channel, far apart, which the hardware prefetchers do not follow).
 * Included into the ISA file, so run3 inlines. */
#ifndef KI_CONV2D_PACK3S2_LOOPS_H
#define KI_CONV2D_PACK3S2_LOOPS_H

#include <string.h>

#include "conv2d.h"

static inline __attribute__((always_inline)) void pack3s2(const ki_conv2d *c,
                                                          const ki_conv2d_geom *g,
                                                          const ki_conv2d_rows *src, int64_t j0,
                                                          int64_t nr, int64_t k, int64_t pw,
                                                          float *restrict dst)
{
    const int64_t w = g->in.w, ow = g->ow, y0 = src->y0, y1 = src->y1;
    int64_t r = 0;
    for (int64_t ch = 0; r < k; ch++) {
        const float *plane = src->x + ch * src->cs;
        for (int64_t ky = 0; ky < c->kh; ky++, r += 3) {
            float *d = dst + r * pw;
            for (int64_t j = 0, oy = j0 / ow, ox = j0 % ow; j < nr; oy++, ox = 0) {
                const int64_t iy = oy * c->sh - c->pt + ky * c->dh;
                /* rows outside those held are the padding */
                const float *row = iy >= y0 && iy < y1 ? plane + (iy - y0) * w : NULL;
                int64_t len = nr - j < ow - ox ? nr - j : ow - ox;
                if (row) { /* the next panel's columns of this row */
                    const float *nx = row + (ox + len) * 2 - c->pl;
                    for (int64_t b = 0; b < 64; b += 16) {
                        __builtin_prefetch(nx + b, 0, 3);
                    }
                }
                for (int64_t q = 0; q < len;) {
                    const int64_t b = (ox + q) * 2 - c->pl;
#ifdef PACK3_INNER
                    /* whole steps of n pixels whose reads, columns b .. b + 2n + 1, all lie
                     * inside the row */
                    int64_t fit = row && b >= 0 && w - 2 - b >= 0 ? (w - 2 - b) / 2 : 0;
                    fit = (fit < len - q ? fit : len - q) / PACK3_STEP * PACK3_STEP;
                    if (fit > 0) {
                        PACK3_INNER(row + b, fit, pw, d + j + q);
                        q += fit;
                        continue;
                    }
#endif
                    const int64_t n = len - q < PACK3_STEP ? len - q : PACK3_STEP;
                    run3(row, w, b, n, pw, d + j + q);
                    q += n;
                }
                j += len;
            }
            for (int kx = 0; kx < 3 && pw > nr; kx++) {
                memset(d + kx * pw + nr, 0, (size_t)(pw - nr) * sizeof *d);
            }
        }
    }
}

#endif
