/* conv2d_dw3_loops.h - the loops of the 3x3 and 5x5 depthwise kernels (conv2d_dw_avx512.c,
 * conv2d_dw_avx2.c) that do not depend on the vector width or the kernel size: bands of output
 * rows, column blocks across them, blocks of rows down them (the tail a block of the last rows),
 * the prefetches of the next plane, and the two entries (whole planes; a band of rows from a
 * buffer). Each ISA file defines, before including this header, its vector pieces:
 *   DW_LANES             columns a block covers (16 or 8);
 *   DW_ROWS_S2           rows of a stride-2 block when the rows allow (8 or 4; stride 1: 4);
 *   dw_plane             the plane's state: x, res, o, h, w, ow, row0, pf_in, pf_out and the
 *                        weights, bias, clamp bounds and activation;
 *   dw_cols, dw_mask     a column block's load masks, a block's store mask;
 *   cols_at(ox, s, kk, pl, w), out_mask(n) (lanes below n),
 *   block(d, y0, first, iy0, ox, k, sm, s, kk, rows, checked): the vector block (see block_at)
 *                        of a kk x kk kernel (3 or 5),
 *   DW_SET1              the width's set1 (the clamp bounds' broadcast in plane_init);
 *   DW_FLAT_3X3_OW       the widest rows of a small 3x3 plane taken whole (flat_plane);
 *   plane_channel(d, c, ch): a channel's weights and bias;
 * and for small planes taken whole (flat_plane): dw_vec, dw_lmask (a load mask), flat_lmask(bits),
 * flat_load(p, m) (masked lanes read as zero, not accessed), flat_zero(), flat_fma(w, x, a),
 * flat_add(a, b), DW_ODD_CHAIN (1 when block() sums a 5x5 kernel's odd rows apart),
 * DW_KEEP(v) (an empty asm holding the sum v in a register, or nothing),
 * flat_wt(d, kk, i) (weight i broadcast) and flat_store(d, at, n, v) (the epilogue and the store
 * of the n <= DW_LANES outputs from at).
 * DW_ROW_MAJOR (1: planes over 32 output columns, and those the ISA file's row runs take, go a row
 * of blocks at a time across the row), and with it DW_FULL_OK(d, c, s) (whether the ISA file's own
 * 3x3 row runs take the plane) and DW_FULL_ROWS(d, s, oy, y1) (those runs for the output rows from
 * oy, returning the row after them).
 * Everything here is static inline and always inlined into the ISA file's entries, so s, kk,
 * rows and checked are constants in each block. Thread-safe: each call writes only its own
 * planes' rows. */
#ifndef KI_CONV2D_DW3_LOOPS_H
#define KI_CONV2D_DW3_LOOPS_H

#include "conv2d.h"
#include "conv_common.h"

/* Output rows a band holds on planes of up to 32 columns, whose band's input rows (34 at
 * stride 2) stay in L1 while each column block walks down them. Wider planes go eight rows at a
 * time across all columns, reading their rows in order. */
#define DW_BAND 16

/* d's plane geometry and clamp bounds for layer c on geometry g, its input's first row row0; no
 * residual and nothing to ask for until the caller says so. */
static inline __attribute__((always_inline)) void plane_init(dw_plane *d, const ki_conv2d *c,
                                                             const ki_conv2d_geom *g, int64_t row0)
{
    ki_gemm_fin f;
    d->vact = !ki_gemm_fin_of(&c->ep, 0, NULL, &f); /* then lo, hi are -inf, inf */
    d->act = c->ep.act;
    d->h = g->in.h, d->w = g->in.w, d->ow = g->ow, d->row0 = row0;
    d->lo = DW_SET1(f.lo), d->hi = DW_SET1(f.hi);
    d->res = NULL, d->pf_in = d->pf_out = NULL;
}

/* Of a plane of `floats`, the share of output rows [yb, ye) of oh: from *at (a whole line from
 * the share before's start), the count returned. */
static inline int64_t band_share(int64_t floats, int64_t yb, int64_t ye, int64_t oh, int64_t *at)
{
    *at = floats * yb / oh / 16 * 16;
    return floats * ye / oh - *at;
}

/* The block of `rows` output rows that stores the rows from oy: from row *yf = oy, or when fewer
 * than `rows` are left before y1 from the last `rows` rows, storing only those from oy on (*first
 * rows in). Returns whether its input rows (from *yf * s - pt) reach past the plane's top or
 * bottom (h rows), so that it must check its rows. */
static inline bool dw_rows_block(int64_t oy, int64_t y1, int rows, int s, int kk, int64_t pt,
                                 int64_t h, int64_t *yf, int *first)
{
    *yf = y1 - oy >= rows ? oy : y1 - rows;
    *first = (int)(oy - *yf);
    const int64_t iy0 = *yf * s - pt;
    return iy0 < 0 || iy0 + (rows - 1) * s + kk > h;
}

/* The block of `rows` output rows from oy (or, when fewer are left before y1, the block of the last
 * rows, storing only the rows from oy on), at column block ox; returns the row after it. Only a
 * block that reaches past the plane's top or bottom checks its rows. */
static inline __attribute__((always_inline)) int64_t block_at(const dw_plane *d, const ki_conv2d *c,
                                                              const dw_cols *k, dw_mask sm, int s,
                                                              int kk, int rows, int64_t oy,
                                                              int64_t y1, int64_t ox)
{
    int64_t yf;
    int first;
    const bool checked = dw_rows_block(oy, y1, rows, s, kk, c->pt, d->h, &yf, &first);
    const int64_t iy0 = yf * s - c->pt;
    if (!checked) {
        block(d, yf, first, iy0, ox, k, sm, s, kk, rows, false);
    } else {
        block(d, yf, first, iy0, ox, k, sm, s, kk, rows, true);
    }
    return yf + rows;
}

/* Output rows [y0, y1) of the plane of d (of oh rows), in bands of DW_BAND rows (8 over 32
 * columns); in a band, with DW_ROW_MAJOR a row of blocks at a time (or the ISA file's row runs),
 * else a column block at a time (its masks computed once) down the rows in blocks of four (at
 * stride 2 DW_ROWS_S2 when there are as many: AVX-512, one thread, eight rows 16-25 % faster there,
 * 10-20 % slower at stride 1 on 14x14 / 28x28 planes). Only blocks that reach past the plane's top
 * or bottom check their rows. Fewer than four rows go a row at a time. */
static inline __attribute__((always_inline)) void
plane(const dw_plane *d, const ki_conv2d *c, int64_t y0, int64_t y1, int64_t oh, int s, int kk)
{
    const int64_t ow = d->ow, band = ow > 32 ? 8 : DW_BAND;
#if DW_ROW_MAJOR
    const bool full = kk == 3 && DW_FULL_OK(d, c, s); /* the ISA file's row runs take the plane */
#endif
    for (int64_t yb = y0; yb < y1; yb += band) {
        const int64_t ye = y1 - yb > band ? yb + band : y1;
        /* this band's share of the next plane: asked for all at once at the start of a plane,
         * hundreds of lines overran the queue of misses (mobilenet_v2's 112 x 112 depthwise
         * layers, 2 threads, in the network: 150 -> 82 us and 64 -> 51 us) */
        int64_t a, n;
        if (d->pf_in) {
            n = band_share(d->h * d->w, yb, ye, oh, &a);
            ki_cv_prefetch_l2(d->pf_in + a, n);
        }
        if (d->pf_out) {
            n = band_share(oh * ow, yb, ye, oh, &a);
            ki_cv_prefetch_out(d->pf_out + a, n);
        }
#if DW_ROW_MAJOR
        if ((ow > 32 || full) && y1 - y0 >= 4) { /* row blocks across the row */
            for (int64_t oy = yb; oy < ye;) {
                if (full) {
                    oy = DW_FULL_ROWS(d, s, oy, y1);
                    continue;
                }
                int64_t next = oy;
                for (int64_t ox = 0; ox < ow; ox += DW_LANES) {
                    const dw_mask sm = out_mask(ow - ox);
                    const dw_cols k = cols_at(ox, s, kk, c->pl, d->w);
                    next = block_at(d, c, &k, sm, s, kk, 4, oy, y1, ox);
                }
                oy = next;
            }
            continue;
        }
#endif
        for (int64_t ox = 0; ox < ow; ox += DW_LANES) {
            const dw_mask sm = out_mask(ow - ox);
            const dw_cols k = cols_at(ox, s, kk, c->pl, d->w);
            if (y1 - y0 < 4) {
                for (int64_t oy = y0; oy < y1; oy++) {
                    block(d, oy, 0, oy * s - c->pt, ox, &k, sm, s, kk, 1, true);
                }
                continue;
            }
            for (int64_t oy = yb; oy < ye;) {
                /* a tail shorter than a block is the block of the last rows, storing only its
                 * new rows (nothing is written twice, so an output that shares the residual's
                 * buffer is safe) */
                if (s == 2 && DW_ROWS_S2 == 8 && y1 - y0 >= 8) {
                    oy = block_at(d, c, &k, sm, s, kk, DW_ROWS_S2, oy, y1, ox);
                } else {
                    oy = block_at(d, c, &k, sm, s, kk, 4, oy, y1, ox);
                }
            }
        }
    }
}

/* Output rows [y0, y1) of d's plane, with the stride and kernel size of c constants in each copy
 * (ki_conv2d_dw3_ok: 3x3 or 5x5, stride 1 or 2). */
static inline __attribute__((always_inline)) void plane_of(const dw_plane *d, const ki_conv2d *c,
                                                           int64_t y0, int64_t y1, int64_t oh)
{
    if (c->kh == 5 && c->sw == 2) {
        plane(d, c, y0, y1, oh, 2, 5);
    } else if (c->kh == 5) {
        plane(d, c, y0, y1, oh, 1, 5);
    } else if (c->sw == 2) {
        plane(d, c, y0, y1, oh, 2, 3);
    } else {
        plane(d, c, y0, y1, oh, 1, 3);
    }
}

/* Small planes at stride 1 whose output rows are as wide as the input's (the padding adds kw - 1
 * columns) are taken whole: their oh x ow outputs as one run, DW_LANES a vector (a 7x7 plane fills
 * 49 of 64 lanes in four vectors of 16, where the row blocks used 7 of 16 per row and paid their
 * per-row setup on every plane), tap (ky, kx) reading the input run at the fixed offset
 * (ky - pt) * w + (kx - pl) from each output, through a mask of the lanes whose input lies inside
 * the plane (the masks per vector and tap made once per call). Each output sums its taps in the
 * order ky, kx, as the row blocks do. Up to DW_FLAT_MAX outputs, DW_FLAT_G vectors at a time; for
 * rows of at most half a vector, where the row blocks leave more than half their lanes empty:
 * with AVX-512 mobilenet_v3_small's 5x5 layers at 7x7 0.62-0.70x of the time, mobilenet_v2's 3x3
 * ones 0.89x to level, but its 14x14 ones 1.34-1.54x (14 of 16 lanes used by the row blocks, whose
 * taps share their loads); with AVX2 at 7x7 (7 of 8 lanes) 0.91-1.06x (docs/performance.md).
 * 3x3 kernels also take rows up to DW_FLAT_3X3_OW wide whole: with AVX2 (two vectors), where
 * the row blocks' four accumulator chains wait on the FMA latency, mobilenet_v2's 14x14 layers
 * 0.052 -> 0.043 ms and its 7x7 ones 0.037 -> 0.034 ms at one thread (5x5 kernels, whose
 * weights do not fit the registers, were slower whole). */
#define DW_FLAT_MAX 256
#define DW_FLAT_NV  (DW_FLAT_MAX / DW_LANES)
#define DW_FLAT_G   (DW_LANES == 16 ? 13 : 8)

static inline bool dw_flat_ok(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    return c->sw == 1 && g->ow == g->in.w && g->oh * g->ow <= DW_FLAT_MAX &&
           (g->ow <= DW_LANES / 2 || (c->kh == 3 && g->ow <= DW_FLAT_3X3_OW));
}

/* m[v * kk * kk + ky * kk + kx]: the lanes of output vector v whose tap (ky, kx) lies inside the
 * plane (and whose output exists). */
static inline void flat_masks(const ki_conv2d *c, const ki_conv2d_geom *g, dw_lmask *m)
{
    const int64_t n = g->oh * g->ow, nv = (n + DW_LANES - 1) / DW_LANES, kk = c->kh;
    for (int64_t v = 0; v < nv; v++) {
        uint32_t rows[5] = { 0 }, cols[5] = { 0 };
        for (int64_t l = 0; l < DW_LANES && v * DW_LANES + l < n; l++) {
            const int64_t y = (v * DW_LANES + l) / g->ow, x = (v * DW_LANES + l) % g->ow;
            for (int64_t t = 0; t < kk; t++) {
                const int64_t iy = y + t - c->pt, ix = x + t - c->pl;
                rows[t] |= (uint32_t)(iy >= 0 && iy < g->in.h) << l;
                cols[t] |= (uint32_t)(ix >= 0 && ix < g->in.w) << l;
            }
        }
        for (int64_t ky = 0; ky < kk; ky++) {
            for (int64_t kx = 0; kx < kk; kx++) {
                m[(v * kk + ky) * kk + kx] = flat_lmask(rows[ky] & cols[kx]);
            }
        }
    }
}

/* d's plane taken whole (n outputs in nv vectors), kk (3 or 5) a constant. */
static inline __attribute__((always_inline)) void flat_plane(const dw_plane *d, const ki_conv2d *c,
                                                             const dw_lmask *m, int64_t nv,
                                                             int64_t n, const int kk)
{
    for (int64_t v0 = 0; v0 < nv; v0 += DW_FLAT_G) {
        const int64_t cnt = nv - v0 < DW_FLAT_G ? nv - v0 : DW_FLAT_G;
        /* b: a 5x5 kernel's odd rows, when the row blocks keep them in a chain of their own
         * (DW_ODD_CHAIN), so that both give the same bits */
        const bool two = kk == 5 && DW_ODD_CHAIN;
        dw_vec a[DW_FLAT_G], b[DW_FLAT_G];
#pragma GCC unroll 16
        for (int j = 0; j < DW_FLAT_G; j++) {
            a[j] = b[j] = flat_zero();
        }
#pragma GCC unroll 5
        for (int ky = 0; ky < kk; ky++) {
#pragma GCC unroll 5
            for (int kx = 0; kx < kk; kx++) {
                const dw_vec wv = flat_wt(d, kk, ky * kk + kx);
                const float *p = d->x + v0 * DW_LANES + (ky - c->pt) * d->w + (kx - c->pl);
                const dw_lmask *mt = m + v0 * kk * kk + ky * kk + kx;
#pragma GCC unroll 16
                for (int j = 0; j < DW_FLAT_G; j++) {
                    if (j < cnt && two && ky % 2) {
                        b[j] = flat_fma(wv, flat_load(p + j * DW_LANES, mt[j * kk * kk]), b[j]);
                    } else if (j < cnt) {
                        a[j] = flat_fma(wv, flat_load(p + j * DW_LANES, mt[j * kk * kk]), a[j]);
                    }
                }
            }
            /* a 5x5 kernel's sums held in registers after each kernel row (DW_KEEP) */
#pragma GCC unroll 16
            for (int j = 0; kk == 5 && j < DW_FLAT_G; j++) {
                DW_KEEP(a[j]);
                if (two) {
                    DW_KEEP(b[j]);
                }
            }
        }
#pragma GCC unroll 16
        for (int j = 0; j < DW_FLAT_G; j++) {
            if (j < cnt) {
                flat_store(d, (v0 + j) * DW_LANES, n - (v0 + j) * DW_LANES,
                           two ? flat_add(a[j], b[j]) : a[j]);
            }
        }
    }
}

/* The planes p0 <= p < p1 taken whole (dw_flat_ok). A function of its own: inlined into
 * dw3_planes it changed how GCC compiled the row blocks (AVX2 depthwise layers 6-16 % slower). */
static __attribute__((noinline)) void dw3_flat_planes(const ki_conv2d *c, const ki_conv2d_geom *g,
                                                      const float *in, int64_t p0, int64_t p1,
                                                      float *restrict out)
{
    const int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    const int64_t nv = (ohw + DW_LANES - 1) / DW_LANES;
    dw_lmask m[DW_FLAT_NV * 25];
    dw_plane d;
    plane_init(&d, c, g, 0);
    flat_masks(c, g, m);
    for (int64_t p = p0; p < p1; p++) {
        plane_channel(&d, c, p % c->in_ch);
        d.x = in + p * hw, d.o = out + p * ohw;
        d.res = c->res ? c->res + p * ohw : NULL;
        if (c->kh == 5) {
            flat_plane(&d, c, m, nv, ohw, 5);
        } else {
            flat_plane(&d, c, m, nv, ohw, 3);
        }
    }
}

/* The planes p0 <= p < p1 of in (batch-major, channel p % in_ch) into out, with the epilogue. */
static inline __attribute__((always_inline)) void dw3_planes(const ki_conv2d *c,
                                                             const ki_conv2d_geom *g,
                                                             const float *in, int64_t p0,
                                                             int64_t p1, float *restrict out)
{
    const int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    const bool big_out = g->in.n * c->in_ch * ohw >= ki_cv_prefetch_out_min();
    if (dw_flat_ok(c, g)) {
        dw3_flat_planes(c, g, in, p0, p1, out);
        return;
    }
    dw_plane d;
    plane_init(&d, c, g, 0);
    for (int64_t p = p0; p < p1; p++) {
        plane_channel(&d, c, p % c->in_ch);
        d.x = in + p * hw, d.o = out + p * ohw;
        d.res = c->res ? c->res + p * ohw : NULL;
        d.pf_in = p + 1 < p1 ? d.x + hw : NULL;
        d.pf_out = p + 1 < p1 && big_out ? d.o + ohw : NULL;
        plane_of(&d, c, 0, g->oh, g->oh);
    }
}

/* Output rows [y0, y1) of channels [c0, c1) from a band of rows (see ki_conv2d_dw3_band_fn), each
 * channel's rows by plane_of or, when `rows` is not NULL (a constant at each call), by rows (the
 * ISA file's kernel for a band in another order). */
static inline __attribute__((always_inline)) void
dw3_band(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band, int64_t row0,
         int64_t cstride, int64_t c0, int64_t c1, int64_t y0, int64_t y1, float *restrict out,
         void (*rows)(const dw_plane *d, int64_t y0, int64_t y1))
{
    const int64_t ohw = g->oh * g->ow, n = (y1 - y0) * g->ow;
    const bool big_out = g->in.n * c->in_ch * ohw >= ki_cv_prefetch_out_min();
    dw_plane d;
    plane_init(&d, c, g, row0);
    for (int64_t ch = c0; ch < c1; ch++) {
        plane_channel(&d, c, ch);
        d.x = band + ch * cstride, d.o = out + ch * ohw;
        if (big_out && ch + 1 < c1) { /* the next channel's rows of this band */
            ki_cv_prefetch_out(d.o + ohw + y0 * g->ow, n);
        }
        if (rows) {
            rows(&d, y0, y1);
        } else {
            plane_of(&d, c, y0, y1, g->oh);
        }
    }
}

#endif
