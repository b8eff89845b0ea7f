/* conv2d_dw_avx512.c - the 3x3 stride-1 and stride-2 depthwise planes with AVX-512, straight
 * from the unpadded planes: blocks of four output rows (eight at stride 2) by sixteen columns, the
 * nine weights in registers, each input row loaded once for the output rows it feeds (stride 1:
 * one vector and the columns either side of it as single floats, the three taps made by lane
 * shifts; stride 2: two vectors, the even and odd columns separated by two permutes). The padding
 * is never copied: each load is masked to the lanes whose column lies inside the row (masked-off
 * lanes read as zero and are not accessed), and a row above or below the plane is a zero vector;
 * blocks whose rows all lie inside the plane skip those checks. Independent accumulators of 16
 * lanes; the taps are summed in the order ky, kx, as the padded kernels do. The epilogue (bias,
 * residual, clamp-type activation) is applied before the store, the row's tail through a masked
 * store. A thread's planes go in one call, so the per-plane work is the nine broadcasts (a 14x14
 * plane costs about 90 ns, against 150 when each plane was a call that rebuilt its state). A
 * band of rows can also be run from a buffer holding only the rows it reads (conv2d_pwdw.c).
 * Compiled with -mavx512f; called only when the CPU has it (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx512.h"

/* Where a column block reads: the tap vectors of an input row are columns b + kx + s * j, j < 16.
 * The block loads whole vectors from column b + 1 on (stride 1: one, columns b + 1 .. b + 16;
 * stride 2: two, b + 1 .. b + 32), masked to the row (m[]), and the one or two columns left
 * over (b, and for stride 1 b + 17) as single floats, when they lie inside the row (left, right):
 * with the padding of one column of mobilenet's layers, b + 1 is the block's first output column
 * times the stride, so on rows that start on a cache line (widths of 16k) the vector loads do
 * not straddle two lines, which three loads from columns b, b + 1, b + 2 did (a 3x3 stride-1
 * block ran 1.5x slower so). */
typedef struct dw_cols {
    int64_t b;
    __mmask16 m[2];
    bool left, right;
} dw_cols;

static inline dw_cols cols_at(int64_t ox, int s, int64_t pl, int64_t w)
{
    dw_cols k;
    k.b = ox * s - pl;
    k.m[0] = (__mmask16)ki_lane_mask16(k.b + 1, w);
    k.m[1] = (__mmask16)ki_lane_mask16(k.b + 17, w);
    k.left = k.b >= 0 && k.b < w;
    k.right = k.b + 17 >= 0 && k.b + 17 < w;
    return k;
}

/* The float at p when `inside`, else zero, in every lane (never reading p otherwise). */
static inline __m512 lone(const float *p, bool inside)
{
    return inside ? _mm512_set1_ps(*p) : _mm512_setzero_ps();
}

static inline __m512 shift_in_low(__m512 v, __m512 lo)
{
    /* lane 0 = lo's lane 15, lanes 1..15 = v's lanes 0..14 */
    return _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(v), _mm512_castps_si512(lo), 15));
}

static inline __m512 shift_in_high(__m512 v, __m512 hi)
{
    /* lanes 0..14 = v's lanes 1..15, lane 15 = hi's lane 0 */
    return _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(hi), _mm512_castps_si512(v), 1));
}

/* What a plane's blocks share: the plane, its output and residual, the nine weights, the bias and
 * the clamp bounds, each weight broadcast once per plane. */
typedef struct dw_plane {
    const float *x, *res;
    float *o;
    int64_t h, w, ow;
    int64_t row0; /* the input row x holds first (0 for a whole plane, a band's first row) */
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
    const float *p = d->x + (iy - d->row0) * d->w + k->b;
    if (s == 1) {
        v[1] = _mm512_maskz_loadu_ps(k->m[0], p + 1);
        v[0] = shift_in_low(v[1], lone(p, k->left));
        v[2] = shift_in_high(v[1], lone(p + 17, k->right));
        return;
    }
    /* stride 2: columns b + 2j + 1 and b + 2j + 2 for j < 16 are the even and odd lanes of the
     * 32 from b + 1; b + 2j is the odd lanes moved up one, column b coming in at the bottom */
    const __m512i even = ki_even_idx(), odd = ki_odd_idx();
    const __m512 lo = _mm512_maskz_loadu_ps(k->m[0], p + 1),
                 hi = _mm512_maskz_loadu_ps(k->m[1], p + 17);
    v[1] = _mm512_permutex2var_ps(lo, even, hi);
    v[2] = _mm512_permutex2var_ps(lo, odd, hi);
    v[0] = shift_in_low(v[2], lone(p, k->left));
}

/* Output rows y0 + first .. y0 + rows - 1 of the column block at ox, from input rows
 * iy0 .. iy0 + (rows - 1) * s + 2, each loaded once for the output rows it feeds; every output
 * row sums its taps in the order ky, kx, as the padded kernels do, then adds the bias. s, rows
 * and checked are constants at each call, so the loops unroll and a[] lives in registers. */
static inline __attribute__((always_inline)) void block(const dw_plane *d, int64_t y0, int first,
                                                        int64_t iy0, int64_t ox, const dw_cols *k,
                                                        __mmask16 sm, int s, int rows, bool checked)
{
    __m512 a[8], v[3];
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        a[r] = _mm512_setzero_ps();
    }
#pragma GCC unroll 17
    for (int i = 0; i < (rows - 1) * s + 3; i++) {
        row_taps(d, iy0 + i, k, s, checked, v);
        /* keeps GCC from hoisting all the rows' loads ahead of the products (at stride 2 nine
         * rows of three vectors spill) */
        __asm__("" : "+v"(v[0]), "+v"(v[1]), "+v"(v[2]));
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const int ky = i - r * s;
            if (ky >= 0 && ky < 3) {
                a[r] = _mm512_fmadd_ps(d->w9[3 * ky], v[0], a[r]);
                a[r] = _mm512_fmadd_ps(d->w9[3 * ky + 1], v[1], a[r]);
                a[r] = _mm512_fmadd_ps(d->w9[3 * ky + 2], v[2], a[r]);
            }
        }
    }
#pragma GCC unroll 8
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
 * stride 2) stay in L1 while each column block walks down them. Wider planes go eight rows at a
 * time across all columns, reading their rows in order. */
#define DW_BAND 16

/* Of a plane of `floats`, the share of output rows [yb, ye) of oh: from *at (a whole line from
 * the share before's start), the count returned. */
static inline int64_t band_share(int64_t floats, int64_t yb, int64_t ye, int64_t oh, int64_t *at)
{
    *at = floats * yb / oh / 16 * 16;
    return floats * ye / oh - *at;
}

/* The block of `rows` output rows from oy (or, when fewer are left before y1, the block of the last
 * rows, storing only the rows from oy on), at column block ox; returns the row after it. Only a
 * block that reaches past the plane's top or bottom checks its rows. */
static inline __attribute__((always_inline)) int64_t block_at(const dw_plane *d, const ki_conv2d *c,
                                                              const dw_cols *k, __mmask16 sm, int s,
                                                              int rows, int64_t oy, int64_t y1,
                                                              int64_t ox)
{
    const int64_t yf = y1 - oy >= rows ? oy : y1 - rows;
    const int first = (int)(oy - yf);
    const int64_t iy0 = yf * s - c->pt;
    if (iy0 >= 0 && iy0 + (rows - 1) * s + 3 <= d->h) {
        block(d, yf, first, iy0, ox, k, sm, s, rows, false);
    } else {
        block(d, yf, first, iy0, ox, k, sm, s, rows, true);
    }
    return yf + rows;
}

/* Output rows [y0, y1) of the plane of d (of oh rows), in bands of DW_BAND rows; in a band, a
 * column block of 16 at a time (its masks computed once) down the rows in blocks of four (at
 * stride 2 eight when there are as many: one thread, 16-25 % faster there, 10-20 % slower at
 * stride 1 on 14x14 / 28x28 planes). Only blocks that reach past the plane's top or bottom check
 * their rows. Fewer than four rows go a row at a time. */
static inline __attribute__((always_inline)) void plane(const dw_plane *d, const ki_conv2d *c,
                                                        int64_t y0, int64_t y1, int64_t oh, int s)
{
    const int64_t ow = d->ow, band = ow > 32 ? 8 : DW_BAND;
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
        for (int64_t ox = 0; ox < ow; ox += 16) {
            const __mmask16 sm = (__mmask16)ki_lane_mask16(0, ow - ox);
            const dw_cols k = cols_at(ox, s, c->pl, d->w);
            if (y1 - y0 < 4) {
                for (int64_t oy = y0; oy < y1; oy++) {
                    block(d, oy, 0, oy * s - c->pt, ox, &k, sm, s, 1, true);
                }
                continue;
            }
            for (int64_t oy = yb; oy < ye;) {
                /* a tail shorter than a block is the block of the last rows, storing only its
                 * new rows (nothing is written twice, so an output that shares the residual's
                 * buffer is safe) */
                if (s == 2 && y1 - y0 >= 8) {
                    oy = block_at(d, c, &k, sm, s, 8, oy, y1, ox);
                } else {
                    oy = block_at(d, c, &k, sm, s, 4, oy, y1, ox);
                }
            }
        }
    }
}

/* d's plane geometry and clamp bounds for layer c on geometry g, its input's first row row0; no
 * residual and nothing to ask for until the caller says so. */
static inline __attribute__((always_inline)) void plane_init(dw_plane *d, const ki_conv2d *c,
                                                             const ki_conv2d_geom *g, int64_t row0)
{
    ki_gemm_fin f;
    ki_gemm_fin_of(&c->ep, 0, NULL, &f);
    d->h = g->in.h, d->w = g->in.w, d->ow = g->ow, d->row0 = row0;
    d->lo = _mm512_set1_ps(f.lo), d->hi = _mm512_set1_ps(f.hi);
    d->res = NULL, d->pf_in = d->pf_out = NULL;
}

/* Channel ch's nine weights and bias, broadcast into d. */
static inline __attribute__((always_inline)) void plane_channel(dw_plane *d, const ki_conv2d *c,
                                                                int64_t ch)
{
    const float *wt = c->weight + ch * 9;
    for (int i = 0; i < 9; i++) {
        d->w9[i] = _mm512_set1_ps(wt[i]);
    }
    d->vb = _mm512_set1_ps(c->ep.bias ? c->ep.bias[ch] : 0.0f);
}

void ki_conv2d_dw3_planes_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 int64_t p0, int64_t p1, float *restrict out)
{
    const int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    const int s = c->sw == 2 ? 2 : 1;
    const bool big_out = g->in.n * c->in_ch * ohw >= KI_CV_PREFETCH_OUT_MIN;
    dw_plane d;
    plane_init(&d, c, g, 0);
    for (int64_t p = p0; p < p1; p++) {
        plane_channel(&d, c, p % c->in_ch);
        d.x = in + p * hw, d.o = out + p * ohw;
        d.res = c->res ? c->res + p * ohw : NULL;
        d.pf_in = p + 1 < p1 ? d.x + hw : NULL;
        d.pf_out = p + 1 < p1 && big_out ? d.o + ohw : NULL;
        if (s == 1) { /* the stride a constant in each call */
            plane(&d, c, 0, g->oh, g->oh, 1);
        } else {
            plane(&d, c, 0, g->oh, g->oh, 2);
        }
    }
}

void ki_conv2d_dw3_band_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                               int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                               int64_t y1, float *restrict out)
{
    const int64_t ohw = g->oh * g->ow, n = (y1 - y0) * g->ow;
    const int s = c->sw == 2 ? 2 : 1;
    const bool big_out = g->in.n * c->in_ch * ohw >= KI_CV_PREFETCH_OUT_MIN;
    dw_plane d;
    plane_init(&d, c, g, row0);
    for (int64_t ch = c0; ch < c1; ch++) {
        plane_channel(&d, c, ch);
        d.x = band + ch * cstride, d.o = out + ch * ohw;
        if (big_out && ch + 1 < c1) { /* the next channel's rows of this band */
            ki_cv_prefetch_out(d.o + ohw + y0 * g->ow, n);
        }
        if (s == 1) {
            plane(&d, c, y0, y1, g->oh, 1);
        } else {
            plane(&d, c, y0, y1, g->oh, 2);
        }
    }
}
