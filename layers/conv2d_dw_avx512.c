/* conv2d_dw_avx512.c - the 3x3 stride-1 and stride-2 depthwise planes with AVX-512, straight
 * from the unpadded planes: blocks of four output rows by sixteen columns, the nine weights in
 * registers, each input row loaded once for the output rows it feeds (three shifted vectors; at
 * stride 2 the even and odd columns separated by two permutes). The padding is never copied:
 * each load is masked to the lanes whose column lies inside the row (masked-off lanes read as
 * zero and are not accessed), and a row above or below the plane is a zero vector; blocks whose
 * rows all lie inside the plane skip those checks. Four independent accumulators of 16 lanes; the
 * taps are summed in the order ky, kx, as the padded kernels do. The epilogue (bias, residual,
 * clamp-type activation) is applied before the store, the row's tail through a masked store. A
 * thread's planes go in one call, so the per-plane work is the nine broadcasts (a 14x14 plane
 * costs about 90 ns, against 150 when each plane was a call that rebuilt its state). Compiled
 * with -mavx512f; called only when the CPU has it (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx512.h"

/* Where a column block reads: for stride 1 the three tap vectors start at columns b + kx; for
 * stride 2 a window of 32 columns starts at b (even lanes: tap 0, odd: tap 1; tap 2 is tap 0 moved
 * down a lane with column b + 32 added). m[] are the masks of the three loads (stride 2: the two
 * halves of the window and the one column after it). */
typedef struct dw_cols {
    int64_t b;
    __mmask16 m[3];
} dw_cols;

static inline dw_cols cols_at(int64_t ox, int s, int64_t pl, int64_t w)
{
    dw_cols k;
    k.b = ox * s - pl;
    if (s == 1) {
        k.m[0] = (__mmask16)ki_lane_mask16(k.b, w), k.m[1] = (__mmask16)ki_lane_mask16(k.b + 1, w),
        k.m[2] = (__mmask16)ki_lane_mask16(k.b + 2, w);
    } else {
        k.m[0] = (__mmask16)ki_lane_mask16(k.b, w), k.m[1] = (__mmask16)ki_lane_mask16(k.b + 16, w);
        k.m[2] = (__mmask16)(ki_lane_mask16(k.b + 32, w) & 1u);
    }
    return k;
}

/* What a plane's blocks share: the plane, its output and residual, the nine weights, the bias and
 * the clamp bounds, each weight broadcast once per plane. */
typedef struct dw_plane {
    const float *x, *res;
    float *o;
    int64_t h, w, ow;
    const float *pf_in, *pf_out; /* the next plane's input and output to ask for, or NULL */
    __m512 w9[9], vb, lo, hi;
} dw_plane;

/* The three tap vectors v[0..2] of input row iy for the column block k. When checked, a row above
 * or below the plane is three zero vectors (never loaded); unchecked callers know it is inside. */
static inline __attribute__((always_inline)) void
row_taps(const dw_plane *d, int64_t iy, const dw_cols *k, int s, bool checked, __m512 v[3])
{
    if (checked && (iy < 0 || iy >= d->h)) {
        v[0] = v[1] = v[2] = _mm512_setzero_ps();
        return;
    }
    const float *p = d->x + iy * d->w + k->b;
    if (s == 1) {
        v[0] = _mm512_maskz_loadu_ps(k->m[0], p);
        v[1] = _mm512_maskz_loadu_ps(k->m[1], p + 1);
        v[2] = _mm512_maskz_loadu_ps(k->m[2], p + 2);
        return;
    }
    /* stride 2: columns b + 2j and b + 2j + 1 for j < 16 are the even and odd lanes of the 32
     * at b; b + 2j + 2 is the even lanes moved down one, column b + 32 coming in at the top */
    const __m512i even = ki_even_idx(), odd = ki_odd_idx();
    const __m512 lo = _mm512_maskz_loadu_ps(k->m[0], p),
                 hi = _mm512_maskz_loadu_ps(k->m[1], p + 16);
    v[0] = _mm512_permutex2var_ps(lo, even, hi);
    v[1] = _mm512_permutex2var_ps(lo, odd, hi);
    v[2] = _mm512_castsi512_ps(_mm512_alignr_epi32(
        _mm512_castps_si512(_mm512_maskz_loadu_ps(k->m[2], p + 32)), _mm512_castps_si512(v[0]), 1));
}

/* Output rows y0 + first .. y0 + rows - 1 of the column block at ox, from input rows
 * iy0 .. iy0 + (rows - 1) * s + 2, each loaded once for the output rows it feeds; every output
 * row sums its taps in the order ky, kx, as the padded kernels do, then adds the bias. s, rows
 * and checked are constants at each call, so the loops unroll and a[] lives in registers. */
static inline __attribute__((always_inline)) void block(const dw_plane *d, int64_t y0, int first,
                                                        int64_t iy0, int64_t ox, const dw_cols *k,
                                                        __mmask16 sm, int s, int rows, bool checked)
{
    __m512 a[4], v[3];
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        a[r] = _mm512_setzero_ps();
    }
#pragma GCC unroll 9
    for (int i = 0; i < (rows - 1) * s + 3; i++) {
        row_taps(d, iy0 + i, k, s, checked, v);
        /* keeps GCC from hoisting all the rows' loads ahead of the products (at stride 2 nine
         * rows of three vectors spill) */
        __asm__("" : "+v"(v[0]), "+v"(v[1]), "+v"(v[2]));
#pragma GCC unroll 4
        for (int r = 0; r < rows; r++) {
            const int ky = i - r * s;
            if (ky >= 0 && ky < 3) {
                a[r] = _mm512_fmadd_ps(d->w9[3 * ky], v[0], a[r]);
                a[r] = _mm512_fmadd_ps(d->w9[3 * ky + 1], v[1], a[r]);
                a[r] = _mm512_fmadd_ps(d->w9[3 * ky + 2], v[2], a[r]);
            }
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        if (r >= first) {
            const int64_t at = (y0 + r) * d->ow + ox;
            ki_store16_fin(d->o + at, sm, _mm512_add_ps(a[r], d->vb), d->res ? d->res + at : NULL,
                           d->lo, d->hi);
        }
    }
}

bool ki_conv2d_dw3_avx512_ok(const ki_conv2d *c)
{
    ki_gemm_fin f;
    const int64_t s = c->sw;
    return c->kh == 3 && c->kw == 3 && c->sh == s && (s == 1 || s == 2) && c->dh == 1 &&
           c->dw == 1 && c->pad_mode == KI_CONV_PAD_ZEROS && ki_gemm_fin_of(&c->ep, 0, NULL, &f);
}

/* Output rows a band holds on planes of up to two column blocks, whose band's input rows (34 at
 * stride 2) stay in L1 while each column block walks down them. Wider planes go one block of four
 * rows at a time across all columns, reading their rows in order. */
#define DW_BAND 16

/* Of a plane of `floats`, the share of output rows [yb, ye) of oh: from *at (a whole line from
 * the share before's start), the count returned. */
static inline int64_t band_share(int64_t floats, int64_t yb, int64_t ye, int64_t oh, int64_t *at)
{
    *at = floats * yb / oh / 16 * 16;
    return floats * ye / oh - *at;
}

/* The output plane of d, in bands of DW_BAND rows; in a band, a column block of 16 at a time (its
 * masks computed once) down the rows in blocks of four. Only blocks that reach past the plane's
 * top or bottom check their rows. */
static inline __attribute__((always_inline)) void plane(const dw_plane *d, const ki_conv2d *c,
                                                        int64_t oh, int s)
{
    const int64_t ow = d->ow, span = 3 * s + 3, band = ow > 32 ? 4 : DW_BAND;
    for (int64_t yb = 0; yb < oh; yb += band) {
        const int64_t ye = oh - yb > band ? yb + band : oh;
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
        for (int64_t ox = 0; ox < ow; ox += 16) {
            const __mmask16 sm = (__mmask16)ki_lane_mask16(0, ow - ox);
            const dw_cols k = cols_at(ox, s, c->pl, d->w);
            if (oh < 4) { /* planes of fewer than four rows go a row at a time */
                for (int64_t oy = 0; oy < oh; oy++) {
                    block(d, oy, 0, oy * s - c->pt, ox, &k, sm, s, 1, true);
                }
                continue;
            }
            for (int64_t oy = yb; oy < ye;) {
                /* a tail of fewer than four rows is the block of the last four, storing only
                 * its new rows (nothing is written twice, so an output that shares the
                 * residual's buffer is safe) */
                const int64_t y0 = oh - oy >= 4 ? oy : oh - 4;
                const int first = (int)(oy - y0);
                const int64_t iy0 = y0 * s - c->pt;
                if (iy0 >= 0 && iy0 + span <= d->h) {
                    block(d, y0, first, iy0, ox, &k, sm, s, 4, false);
                } else {
                    block(d, y0, first, iy0, ox, &k, sm, s, 4, true);
                }
                oy = y0 + 4;
            }
        }
    }
}

void ki_conv2d_dw3_planes_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 int64_t p0, int64_t p1, float *restrict out)
{
    ki_gemm_fin f;
    ki_gemm_fin_of(&c->ep, 0, NULL, &f);
    const int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    const int s = c->sw == 2 ? 2 : 1;
    const bool big_out = g->in.n * c->in_ch * ohw >= KI_CV_PREFETCH_OUT_MIN;
    dw_plane d;
    d.h = g->in.h, d.w = g->in.w, d.ow = g->ow;
    d.lo = _mm512_set1_ps(f.lo), d.hi = _mm512_set1_ps(f.hi);
    for (int64_t p = p0; p < p1; p++) {
        const int64_t ch = p % c->in_ch;
        const float *wt = c->weight + ch * 9;
        for (int i = 0; i < 9; i++) {
            d.w9[i] = _mm512_set1_ps(wt[i]);
        }
        d.vb = _mm512_set1_ps(c->ep.bias ? c->ep.bias[ch] : 0.0f);
        d.x = in + p * hw, d.o = out + p * ohw;
        d.res = c->res ? c->res + p * ohw : NULL;
        d.pf_in = p + 1 < p1 ? d.x + hw : NULL;
        d.pf_out = p + 1 < p1 && big_out ? d.o + ohw : NULL;
        if (s == 1) {
            plane(&d, c, g->oh, 1);
        } else {
            plane(&d, c, g->oh, 2);
        }
    }
}
