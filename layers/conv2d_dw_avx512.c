/* conv2d_dw_avx512.c - the 3x3 and 5x5, stride-1 and stride-2 depthwise planes with AVX-512,
 * straight from the unpadded planes: blocks of four output rows (eight at stride 2) by sixteen
 * columns, a 3x3 kernel's nine weights in registers (a 5x5 kernel's broadcast from memory by
 * each product), each input row loaded once for the output rows it feeds (stride 1: one vector
 * and the columns either side of it as single floats, the other taps made by lane shifts;
 * stride 2: two vectors, the even and odd columns separated by two permutes). The padding
 * is never copied: each load is masked to the lanes whose column lies inside the row (masked-off
 * lanes read as zero and are not accessed), and a row above or below the plane is a zero vector;
 * blocks whose rows all lie inside the plane skip those checks. Independent accumulators of 16
 * lanes; the taps are summed in the order ky, kx, as the padded kernels do (a 5x5 kernel's even
 * and odd rows in two chains, then added: 13 % faster). The epilogue (bias, residual, the
 * activation: a clamp, or the vector epilogue's formulas of vexp_avx512.h) is applied before
 * the store, the row's tail through a masked store. A thread's planes go in one call, so the
 * per-plane work is the nine broadcasts (a 14x14 plane costs about 90 ns, against 150 when each
 * plane was a call that rebuilt its state). A band of rows can also be run from a buffer holding
 * only the rows it reads (conv2d_pwdw.c). The loops over bands, column blocks and row blocks are
 * conv2d_dw3_loops.h's, shared with the AVX2 kernel (conv2d_dw_avx2.c); this file holds the 16-lane
 * pieces. Compiled with -mavx512f; called only when the CPU has it (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx512.h"
#include "vexp_avx512.h"

/* Where a column block reads: the tap vectors of an input row are columns b + kx + s * j, j < 16.
 * The block loads whole vectors from column b + h on, h = kk / 2 (stride 1: one, columns
 * b + h .. b + h + 15; stride 2: two, b + h .. b + h + 31), masked to the row (m[]), and the
 * columns left over (3x3: b, and for stride 1 b + 17; see row_taps) as single floats, when they
 * lie inside the row (left, right): with the padding of h columns of mobilenet's layers, b + h is
 * the block's first output column times the stride, so on rows that start on a cache line (widths
 * of 16k) the vector loads do not straddle two lines, which three loads from columns b, b + 1, b +
 * 2 did (a 3x3 stride-1 block ran 1.5x slower so). */
#define DW_LANES       16
#define DW_FLAT_3X3_OW 8 /* half a vector, as other kernels (conv2d_dw3_loops.h: dw_flat_ok) */
#define DW_SET1        _mm512_set1_ps
#define DW_ROWS_S2     8
#define DW_ROW_MAJOR   0
typedef __mmask16 dw_mask;

/* The store mask of a block with n columns left. */
static inline dw_mask out_mask(int64_t n)
{
    return (__mmask16)ki_lane_mask16(0, n);
}

typedef struct dw_cols {
    int64_t b;
    __mmask16 m[2];
    bool left[2], right[2]; /* the lone columns (see row_taps) inside the row */
} dw_cols;

static inline bool col_in(int64_t x, int64_t w)
{
    return x >= 0 && x < w;
}

static inline dw_cols cols_at(int64_t ox, int s, int kk, int64_t pl, int64_t w)
{
    const int h = kk / 2;
    dw_cols k;
    k.b = ox * s - pl;
    k.m[0] = (__mmask16)ki_lane_mask16(k.b + h, w);
    k.m[1] = (__mmask16)ki_lane_mask16(k.b + h + 16, w);
#pragma GCC unroll 6
    for (int i = 0; i < 2; i++) {
        k.left[i] = col_in(k.b + i, w);
        k.right[i] = col_in(k.b + (s == 1 ? 16 : 32) + h + i, w);
    }
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

/* What a plane's blocks share: the plane, its output and residual, the weights (a 3x3 kernel's
 * nine broadcast once per plane, in registers; a 5x5 kernel's 25 broadcast from memory at each
 * product, as registers would not hold them), the bias, the clamp bounds and the activation
 * applied after the clamp (act; vact when it is not a clamp). */
typedef struct dw_plane {
    const float *x, *res;
    float *o;
    int64_t h, w, ow;
    int64_t row0; /* the input row x holds first (0 for a whole plane, a band's first row) */
    const float *pf_in, *pf_out; /* the next plane's input and output to ask for, or NULL */
    const float *wk;             /* the channel's kk * kk weights */
    __m512 w9[9], vb, lo, hi;
    ki_act act;
    bool vact;
} dw_plane;

/* The kk tap vectors v[0..kk) of input row iy for the column block k: columns b + kx + s * j.
 * One vector load at column b + kk / 2 (stride 2: two, their even and odd lanes the taps
 * kx = kk / 2 and kk / 2 + 1); the other taps are those shifted by a lane, the column coming in
 * loaded alone (lone: b + kx at the low end; at the high end b + 15 + kx, stride 2 b + 30 + kx).
 * When checked, a row above or below the plane is zero vectors (never loaded); unchecked callers
 * know it is inside. */
static inline __attribute__((always_inline)) void
row_taps(const dw_plane *d, int64_t iy, const dw_cols *k, int s, int kk, bool checked, __m512 v[5])
{
    const int h = kk / 2;
    if (checked && (iy < 0 || iy >= d->h)) {
#pragma GCC unroll 6
        for (int i = 0; i < kk; i++) {
            v[i] = _mm512_setzero_ps();
        }
        return;
    }
    const float *p = d->x + (iy - d->row0) * d->w + k->b;
    if (s == 1) {
        v[h] = _mm512_maskz_loadu_ps(k->m[0], p + h);
#pragma GCC unroll 6
        for (int i = h - 1; i >= 0; i--) {
            v[i] = shift_in_low(v[i + 1], lone(p + i, k->left[i]));
        }
#pragma GCC unroll 6
        for (int i = h + 1; i < kk; i++) {
            v[i] = shift_in_high(v[i - 1], lone(p + 15 + i, k->right[i - h - 1]));
        }
        return;
    }
    /* stride 2: columns b + h + 2j and b + h + 1 + 2j for j < 16 are the even and odd lanes of
     * the 32 from b + h; the taps either side are those moved by a lane */
    const __m512i even = ki_even_idx(), odd = ki_odd_idx();
    const __m512 lo = _mm512_maskz_loadu_ps(k->m[0], p + h),
                 hi = _mm512_maskz_loadu_ps(k->m[1], p + h + 16);
    v[h] = _mm512_permutex2var_ps(lo, even, hi);
    v[h + 1] = _mm512_permutex2var_ps(lo, odd, hi);
#pragma GCC unroll 6
    for (int i = h - 1; i >= 0; i--) {
        v[i] = shift_in_low(v[i + 2], lone(p + i, k->left[i]));
    }
#pragma GCC unroll 6
    for (int i = h + 2; i < kk; i++) {
        v[i] = shift_in_high(v[i - 2], lone(p + 30 + i, k->right[i - h - 2]));
    }
}

/* Weight i (kk * ky + kx) of the plane, a 5x5 kernel's from wk; i and kk are constants at each
 * use. */
static inline __attribute__((always_inline)) __m512 wt(const dw_plane *d, const float *wk, int kk,
                                                       int i)
{
    return kk == 3 ? d->w9[i] : _mm512_set1_ps(wk[i]);
}

/* Stores output row vector v (the taps' sum) at `at`: + bias, + the residual, the clamp, then
 * the activation when it is not a clamp (ki_vact_avx512, the epilogue's formulas). */
static inline __attribute__((always_inline)) void store(const dw_plane *d, int64_t at, __mmask16 sm,
                                                        __m512 v)
{
    v = _mm512_add_ps(v, d->vb);
    if (d->res) {
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(sm, d->res + at));
    }
    v = _mm512_min_ps(d->hi, _mm512_max_ps(d->lo, v));
    if (d->vact) {
        v = ki_vact_avx512(&d->act, v);
    }
    _mm512_mask_storeu_ps(d->o + at, sm, v);
}

/* Output rows y0 + first .. y0 + rows - 1 of the column block at ox, from input rows
 * iy0 .. iy0 + (rows - 1) * s + kk - 1, each loaded once for the output rows it feeds; every
 * output row sums its taps in the order ky, kx, as the padded kernels do, then adds the bias.
 * s, kk, rows and checked are constants at each call, so the loops unroll and a[] lives in
 * registers. */
static inline __attribute__((always_inline)) void block(const dw_plane *d, int64_t y0, int first,
                                                        int64_t iy0, int64_t ox, const dw_cols *k,
                                                        __mmask16 sm, int s, int kk, int rows,
                                                        bool checked)
{
    __m512 a[8], b[8], v[5]; /* b: a 5x5 kernel's odd rows, a second chain */
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        a[r] = b[r] = _mm512_setzero_ps();
    }
#pragma GCC unroll 19
    for (int i = 0; i < (rows - 1) * s + kk; i++) {
        row_taps(d, iy0 + i, k, s, kk, checked, v);
        /* keeps GCC from hoisting all the rows' loads ahead of the products (at stride 2 nine
         * rows of three vectors spill) */
        const float *wk = d->wk;
        if (kk == 3) {
            __asm__("" : "+v"(v[0]), "+v"(v[1]), "+v"(v[2]));
        } else {
            /* and, the weights' address hidden from it once per input row, from keeping the 25
             * broadcast weights across rows (they spill); each is used once per row, so it
             * becomes the product's broadcast operand */
            __asm__("" : "+v"(v[0]), "+v"(v[1]), "+v"(v[2]), "+v"(v[3]), "+v"(v[4]), "+r"(wk));
        }
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            const int ky = i - r * s;
            if (ky >= 0 && ky < kk && (kk == 3 || ky % 2 == 0)) {
#pragma GCC unroll 5
                for (int kx = 0; kx < kk; kx++) {
                    a[r] = _mm512_fmadd_ps(wt(d, wk, kk, kk * ky + kx), v[kx], a[r]);
                }
            } else if (ky >= 0 && ky < kk) {
#pragma GCC unroll 5
                for (int kx = 0; kx < kk; kx++) {
                    b[r] = _mm512_fmadd_ps(wt(d, wk, kk, kk * ky + kx), v[kx], b[r]);
                }
            }
        }
        /* the sums in registers after every input row, as in the AVX2 kernel: a 5x5 kernel's
         * output rows otherwise ran as one chain of FMAs after another */
#pragma GCC unroll 8
        for (int r = 0; r < rows; r++) {
            __asm__("" : "+v"(a[r]));
            if (kk == 5) {
                __asm__("" : "+v"(b[r]));
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < rows; r++) {
        if (r >= first) {
            store(d, (y0 + r) * d->ow + ox, sm, kk == 3 ? a[r] : _mm512_add_ps(a[r], b[r]));
        }
    }
}

/* Channel ch's weights (a 3x3 kernel's broadcast) and bias into d. */
static inline __attribute__((always_inline)) void plane_channel(dw_plane *d, const ki_conv2d *c,
                                                                int64_t ch)
{
    d->wk = c->weight + ch * c->kh * c->kw;
    if (c->kh == 3) {
        for (int i = 0; i < 9; i++) {
            d->w9[i] = _mm512_set1_ps(d->wk[i]);
        }
    }
    d->vb = _mm512_set1_ps(c->ep.bias ? c->ep.bias[ch] : 0.0f);
}

/* The pieces of a plane taken whole (conv2d_dw3_loops.h: flat_plane). */
typedef __m512 dw_vec;
typedef __mmask16 dw_lmask;

static inline dw_lmask flat_lmask(uint32_t bits)
{
    return (__mmask16)bits;
}

static inline __attribute__((always_inline)) __m512 flat_load(const float *p, __mmask16 m)
{
    return _mm512_maskz_loadu_ps(m, p);
}

#define flat_zero _mm512_setzero_ps
#define flat_fma  _mm512_fmadd_ps
#define flat_add  _mm512_add_ps
/* the flat planes' sums held in registers after each kernel row (conv2d_dw3_loops.h) */
#define DW_KEEP(x)   __asm__("" : "+v"(x))
#define DW_ODD_CHAIN 1

static inline __attribute__((always_inline)) __m512 flat_wt(const dw_plane *d, int kk, int i)
{
    return wt(d, d->wk, kk, i);
}

static inline __attribute__((always_inline)) void flat_store(const dw_plane *d, int64_t at,
                                                             int64_t n, __m512 v)
{
    store(d, at, out_mask(n), v);
}

/* the loops over bands and blocks, shared with the AVX2 kernel, over the pieces above */
#include "conv2d_dw3_loops.h"

void ki_conv2d_dw3_planes_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 int64_t p0, int64_t p1, float *restrict out)
{
    if (ki_conv2d_dw3_ch8_on(c, g)) { /* the AVX2 kernel's eight-channel blocks */
        ki_conv2d_dw3_planes_avx2(c, g, in, p0, p1, out);
        return;
    }
    /* other 3x3 stride-1 planes of at most eight columns go as the AVX2 kernel's narrow blocks (8
     * lanes, four rows at a time), which were faster than the flat plane of 16 lanes there; for
     * 5x5 kernels and stride 2 they were not (docs/performance.md, thirty-fourth session) */
    if (c->kh == 3 && c->sw == 1 && ki_conv2d_dw3_narrow_avx2(c, g, in, p0, p1, out)) {
        return;
    }
    dw3_planes(c, g, in, p0, p1, out);
}

void ki_conv2d_dw3_band_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                               int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                               int64_t y1, float *restrict out)
{
    dw3_band(c, g, band, row0, cstride, c0, c1, y0, y1, out, NULL);
}
