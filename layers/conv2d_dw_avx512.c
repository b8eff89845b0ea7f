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
 * The loops over bands, column blocks and row blocks are conv2d_dw3_loops.h's, shared with the
 * AVX2 kernel (conv2d_dw_avx2.c); this file holds the 16-lane pieces. Compiled with -mavx512f;
 * called only when the CPU has it (ki_conv2d_set_isa). */
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
#define DW_LANES   16
#define DW_ROWS_S2 8
typedef __mmask16 dw_mask;

/* The store mask of a block with n columns left. */
static inline dw_mask out_mask(int64_t n)
{
    return (__mmask16)ki_lane_mask16(0, n);
}

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

/* the loops over bands and blocks, shared with the AVX2 kernel, over the pieces above */
#include "conv2d_dw3_loops.h"

void ki_conv2d_dw3_planes_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 int64_t p0, int64_t p1, float *restrict out)
{
    dw3_planes(c, g, in, p0, p1, out);
}

void ki_conv2d_dw3_band_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                               int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                               int64_t y1, float *restrict out)
{
    dw3_band(c, g, band, row0, cstride, c0, c1, y0, y1, out);
}
