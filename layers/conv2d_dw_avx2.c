/* conv2d_dw_avx2.c - the 3x3 and 5x5, stride-1 and stride-2 depthwise planes with AVX2+FMA,
 * straight from the unpadded planes: the AVX-512 kernel (conv2d_dw_avx512.c) with eight-lane
 * vectors, its loops over bands and blocks shared (conv2d_dw3_loops.h). Blocks of four output rows
 * by eight columns: a 3x3 kernel's nine weights, four accumulators and the taps of one input row
 * fill the sixteen registers (a 5x5 kernel's weights are broadcast from memory). Each input row is
 * loaded once for the output rows it feeds. Stride 1: a load per tap, at columns b + kx (AVX2 has
 * no lane shift across the 128-bit halves that would be cheaper than a load). Stride 2:
 * columns b + 2t .. b + 2t + 15 for 2t < kk, their even and odd floats taken by in-lane shuffles,
 * which leave the eight outputs in the order 0 1 4 5 2 3 6 7; the accumulators keep that order and
 * one 64-bit permute puts each output row right at the store. The padding is never copied: a column
 * block whose loads reach outside the row loads through _mm256_maskload_ps, masked to the columns
 * inside it (masked-off lanes read as zero and are not accessed), and a row above or below the
 * plane is a zero vector. The taps of each output row are summed in the order ky, kx (a 5x5
 * kernel's odd rows in a second chain, added at the end, as the AVX-512 kernel does), then the
 * bias, the residual, the clamp and any other activation (ki_vact_avx2, the epilogue's formulas),
 * the row's tail stored through _mm256_maskstore_ps. Compiled with -mavx2 -mfma; called only when
 * the CPU has them (ki_conv2d_set_isa). */
#include <immintrin.h>
#include <string.h>

#include "../core/team.h"
#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx2.h"
#include "vexp_avx2.h"

#define DW_LANES       8
#define DW_FLAT_3X3_OW 16 /* two vectors (conv2d_dw3_loops.h: dw_flat_ok) */
#define DW_SET1        _mm256_set1_ps
#define DW_ROWS_S2     4
#define DW_ROW_MAJOR   1

/* A block's store: its lanes, and whether that is all eight (a plain store). */
typedef struct dw_mask {
    __m256i m;
    bool all;
} dw_mask;

static inline dw_mask out_mask(int64_t n)
{
    dw_mask k = { _mm256_setzero_si256(), n >= 8 };
    if (!k.all) {
        k.m = ki_lanes_in8(0, n);
    }
    return k;
}

/* Where a column block reads: the tap vectors of an input row are columns b + kx + s * j, j < 8.
 * Stride 1 loads at b + kx (kx < kk); stride 2 at b + 2t, b + 2t + 8 (the taps kx = 2t and
 * 2t + 1) for t <= kk / 2. When every loaded column lies inside the row (full) the loads are
 * plain; otherwise each is masked to the row (m[], in that order). */
typedef struct dw_cols {
    int64_t b;
    bool full;
    __m256i m[6];
} dw_cols;

static inline dw_cols cols_at(int64_t ox, int s, int kk, int64_t pl, int64_t w)
{
    dw_cols k;
    k.b = ox * s - pl;
    k.full = k.b >= 0 && k.b + (s == 1 ? kk + 7 : kk + 15) <= w;
#pragma GCC unroll 6
    for (int i = 0; i < 6; i++) { /* most blocks (full) make no masks */
        k.m[i] = k.full || i >= (s == 1 ? kk : kk + 1)
                     ? _mm256_setzero_si256()
                     : ki_lanes_in8(k.b + (s == 1 ? i : i / 2 * 2 + i % 2 * 8), w);
    }
    return k;
}

/* What a plane's blocks share (as in the AVX-512 kernel): the plane, its output and residual, the
 * weights (a 3x3 kernel's nine as k0 .. k8, row by row, broadcast once per plane; a 5x5 kernel's
 * 25 broadcast once per plane into w25, in memory, as the sixteen registers would not hold them),
 * the bias, the clamp bounds and the activation after the clamp (act; vact when it is not a
 * clamp). Named vectors for the nine: GCC keeps an array of __m256 in memory. */
typedef struct dw_plane {
    const float *x, *res;
    float *o;
    int64_t h, w, ow;
    int64_t row0; /* the input row x holds first (0 for a whole plane, a band's first row) */
    const float *pf_in, *pf_out; /* the next plane's input and output to ask for, or NULL */
    /* a 5x5 kernel's weights broadcast once per plane, for the products to read (a broadcast
     * instruction before each product was a fifth of the layer's instructions) */
    __m256 w25[25];
    __m256 k0, k1, k2, k3, k4, k5, k6, k7, k8, vb, lo, hi;
    ki_act act;
    bool vact;
} dw_plane;

/* Weight i (kk * ky + kx); i and kk are constants at each use. */
static inline __attribute__((always_inline)) __m256 wt(const dw_plane *d, int kk, int i)
{
    if (kk != 3) {
        return d->w25[i];
    }
    switch (i) {
    case 0:
        return d->k0;
    case 1:
        return d->k1;
    case 2:
        return d->k2;
    case 3:
        return d->k3;
    case 4:
        return d->k4;
    case 5:
        return d->k5;
    case 6:
        return d->k6;
    case 7:
        return d->k7;
    default:
        return d->k8;
    }
}

static inline __attribute__((always_inline)) __m256 load_at(const float *p, __m256i m, bool full)
{
    return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

/* The kk tap vectors v[0..kk) of input row iy for the column block k (see dw_cols). When checked,
 * a row above or below the plane is zero vectors (never loaded). */
static inline __attribute__((always_inline)) void row_taps(const dw_plane *d, int64_t iy,
                                                           const dw_cols *k, int s, int kk,
                                                           bool checked, bool full, __m256 v[5])
{
    if (checked && (iy < 0 || iy >= d->h)) {
#pragma GCC unroll 6
        for (int i = 0; i < kk; i++) {
            v[i] = _mm256_setzero_ps();
        }
        return;
    }
    const float *p = d->x + (iy - d->row0) * d->w + k->b;
    if (s == 1) {
#pragma GCC unroll 6
        for (int i = 0; i < kk; i++) {
            v[i] = load_at(p + i, k->m[i], full);
        }
        return;
    }
    /* per 128-bit half, shuffle 0x88 takes floats 0 and 2 of each operand, 0xDD floats 1 and 3:
     * columns b + 2t + {0, 2, 8, 10 | 4, 6, 12, 14} (+ 1 for the odd ones) */
#pragma GCC unroll 6
    for (int t = 0; 2 * t < kk; t++) {
        const __m256 lo = load_at(p + 2 * t, k->m[2 * t], full),
                     hi = load_at(p + 2 * t + 8, k->m[2 * t + 1], full);
        v[2 * t] = _mm256_shuffle_ps(lo, hi, 0x88);
        if (2 * t + 1 < kk) {
            v[2 * t + 1] = _mm256_shuffle_ps(lo, hi, 0xDD);
        }
    }
}

/* a + the taps of weight row ky (0 <= ky < kk, else a unchanged), in the order kx. */
static inline __attribute__((always_inline)) __m256 taps(const dw_plane *d, int kk, int ky,
                                                         const __m256 v[5], __m256 a)
{
    if (ky < 0 || ky >= kk) {
        return a;
    }
#pragma GCC unroll 6
    for (int kx = 0; kx < kk; kx++) {
        a = _mm256_fmadd_ps(wt(d, kk, kk * ky + kx), v[kx], a);
    }
    return a;
}

/* The taps of weight row ky into *a, or for an odd row of a 5x5 kernel into *b, a second chain
 * (as the AVX-512 kernel and the flat planes sum them: DW_ODD_CHAIN), added to *a at the end. */
static inline __attribute__((always_inline)) void taps_to(const dw_plane *d, int kk, int ky,
                                                          const __m256 v[5], __m256 *a, __m256 *b)
{
    if (kk == 5 && (ky & 1)) {
        *b = taps(d, kk, ky, v, *b);
    } else {
        *a = taps(d, kk, ky, v, *a);
    }
}

/* The taps v of input row i into the sums of the `rows` (1, 2 or 4, a constant) output rows it
 * feeds: row r takes kernel row i - r * s, into a_r (a 5x5 kernel's odd rows into b_r). */
static inline __attribute__((always_inline)) void
feed_rows(const dw_plane *d, int kk, int s, int rows, int i, const __m256 v[5], __m256 *a0,
          __m256 *a1, __m256 *a2, __m256 *a3, __m256 *b0, __m256 *b1, __m256 *b2, __m256 *b3)
{
    taps_to(d, kk, i, v, a0, b0);
    if (rows > 1) {
        taps_to(d, kk, i - s, v, a1, b1);
    }
    if (rows > 2) {
        taps_to(d, kk, i - 2 * s, v, a2, b2);
        taps_to(d, kk, i - 3 * s, v, a3, b3);
    }
}

/* Output row y's values at `at` from the block's sums a (bias, residual, clamp, activation; at
 * stride 2 the lanes put in order first). */
static inline __attribute__((always_inline)) __m256 finish_row(const dw_plane *d, int64_t at,
                                                               dw_mask sm, int s, __m256 a)
{
    __m256 v = _mm256_add_ps(a, d->vb);
    if (s == 2) { /* 64-bit pieces (0 1)(4 5)(2 3)(6 7) -> (0 1)(2 3)(4 5)(6 7) */
        v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8));
    }
    if (d->res) {
        v = _mm256_add_ps(v, sm.all ? _mm256_loadu_ps(d->res + at)
                                    : _mm256_maskload_ps(d->res + at, sm.m));
    }
    /* max(lo, v) returns a NaN v (second operand), as the scalar form keeps it */
    v = _mm256_min_ps(d->hi, _mm256_max_ps(d->lo, v));
    /* mobilenet_v3's Hardswish with its kind a constant: ki_vact_avx2 on the run-time kind stays
     * a jump through its switch per vector at -O2, and a copy of this always-inlined kernel per
     * kind would multiply its size; the rarer kinds keep the switch */
    if (d->vact && d->act.kind == KI_ACT_HARDSWISH) {
        const ki_act hs = { KI_ACT_HARDSWISH, 0.0f, 0.0f };
        v = ki_vact_avx2(&hs, v);
    } else if (d->vact) { /* the activation when it is not a clamp, as the epilogue computes it */
        v = ki_vact_avx2(&d->act, v);
    }
    return v;
}

/* Stores output row y of the block at ox from its sums a (finish_row). */
static inline __attribute__((always_inline)) void store_row(const dw_plane *d, int64_t y,
                                                            int64_t ox, dw_mask sm, int s, __m256 a)
{
    const int64_t at = y * d->ow + ox;
    const __m256 v = finish_row(d, at, sm, s, a);
    if (sm.all) {
        _mm256_storeu_ps(d->o + at, v);
    } else {
        _mm256_maskstore_ps(d->o + at, sm.m, v);
    }
}

/* Output rows y0 + first .. y0 + rows - 1 (rows 1 or 4) of the column block at ox, from input rows
 * iy0 .. iy0 + (rows - 1) * s + kk - 1, each loaded once for the output rows it feeds (row r
 * takes input row i with ky = i - r * s). s, kk, rows, checked and full are constants in each
 * copy. */
static inline __attribute__((always_inline)) void block_v(const dw_plane *d, int64_t y0, int first,
                                                          int64_t iy0, int64_t ox, const dw_cols *k,
                                                          dw_mask sm, int s, int kk, int rows,
                                                          bool checked, bool full)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
#pragma GCC unroll 11
    for (int i = 0; i < (rows - 1) * s + kk; i++) {
        __m256 v[5];
        row_taps(d, iy0 + i, k, s, kk, checked, full, v);
        feed_rows(d, kk, s, rows, i, v, &a0, &a1, &a2, &a3, &b0, &b1, &b2, &b3);
        if (kk == 5) {
            __asm__("" : "+x"(b0), "+x"(b1), "+x"(b2), "+x"(b3));
        }
        /* the four sums in registers after every input row: GCC otherwise spilled the rows'
         * taps and ran each output row's products as one chain of kk * kk FMAs after another
         * (25 dependent FMAs at 4 cycles each for a 5x5 kernel), instead of the four chains
         * side by side */
        __asm__("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3));
    }
    if (kk == 5) {
        a0 = _mm256_add_ps(a0, b0), a1 = _mm256_add_ps(a1, b1);
        a2 = _mm256_add_ps(a2, b2), a3 = _mm256_add_ps(a3, b3);
    }
    if (first <= 0) {
        store_row(d, y0, ox, sm, s, a0);
    }
    if (rows > 1) {
        if (first <= 1) {
            store_row(d, y0 + 1, ox, sm, s, a1);
        }
        if (first <= 2) {
            store_row(d, y0 + 2, ox, sm, s, a2);
        }
        store_row(d, y0 + 3, ox, sm, s, a3);
    }
}

/* The block of the shared loops (conv2d_dw3_loops.h): plain or masked loads, by its columns. */
static inline __attribute__((always_inline)) void block(const dw_plane *d, int64_t y0, int first,
                                                        int64_t iy0, int64_t ox, const dw_cols *k,
                                                        dw_mask sm, int s, int kk, int rows,
                                                        bool checked)
{
    if (k->full) {
        block_v(d, y0, first, iy0, ox, k, sm, s, kk, rows, checked, true);
    } else {
        block_v(d, y0, first, iy0, ox, k, sm, s, kk, rows, checked, false);
    }
}

/* Channel ch's weights (a 3x3 kernel's broadcast) and bias into d. */
static inline __attribute__((always_inline)) void plane_channel(dw_plane *d, const ki_conv2d *c,
                                                                int64_t ch)
{
    const float *w = c->weight + ch * c->kh * c->kw;
    for (int i = 0; c->kh == 5 && i < 25; i++) {
        d->w25[i] = _mm256_set1_ps(w[i]);
    }
    d->vb = _mm256_set1_ps(c->ep.bias ? c->ep.bias[ch] : 0.0f);
    /* (a 5x5 kernel's first nine too: unused, but GCC cannot tell) */
    d->k0 = _mm256_set1_ps(w[0]), d->k1 = _mm256_set1_ps(w[1]), d->k2 = _mm256_set1_ps(w[2]);
    d->k3 = _mm256_set1_ps(w[3]), d->k4 = _mm256_set1_ps(w[4]), d->k5 = _mm256_set1_ps(w[5]);
    d->k6 = _mm256_set1_ps(w[6]), d->k7 = _mm256_set1_ps(w[7]), d->k8 = _mm256_set1_ps(w[8]);
}

/* The pieces of a plane taken whole (conv2d_dw3_loops.h: flat_plane). */
typedef __m256 dw_vec;
typedef __m256i dw_lmask;

static inline dw_lmask flat_lmask(uint32_t bits)
{
    const __m256i bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    return _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)bits), bit), bit);
}

static inline __attribute__((always_inline)) __m256 flat_load(const float *p, __m256i m)
{
    return _mm256_maskload_ps(p, m);
}

#define flat_zero _mm256_setzero_ps
#define flat_fma  _mm256_fmadd_ps
#define flat_add  _mm256_add_ps
/* the flat planes keep GCC's schedule here (holding the sums in registers after each kernel row
 * was 1.02-1.06x slower on 14x14 and 7x7 planes) */
#define DW_KEEP(x)   ((void)0)
#define DW_ODD_CHAIN 1

static inline __attribute__((always_inline)) __m256 flat_wt(const dw_plane *d, int kk, int i)
{
    return wt(d, kk, i);
}

static inline __attribute__((always_inline)) void flat_store(const dw_plane *d, int64_t at,
                                                             int64_t n, __m256 v)
{
    store_row(d, 0, at, out_mask(n), 1, v);
}

/* the loops over bands and blocks, shared with the AVX-512 kernel, over the pieces above */
/* Which edges of the plane a block of rows4_full touches: its first input row above the plane
 * (top), its last below it (bottom), column -1 (left), column w (right). */
enum { E_TOP = 1, E_BOTTOM = 2, E_LEFT = 4, E_RIGHT = 8, E_TAIL = 16 };

/* The four rows' sums of a rows4 block into q (rows ow apart): the bias, at stride 2 the lanes
 * put in order (0 1 4 5 2 3 6 7 -> 0 .. 7, as finish_row), the clamp; with E_TAIL in e only the
 * rows from `first` on (those before belong to the block above). */
static inline __attribute__((always_inline)) void rows4_store(float *q, int64_t ow, __m256 a0,
                                                              __m256 a1, __m256 a2, __m256 a3,
                                                              __m256 vb, __m256 lo, __m256 hi,
                                                              int first, const int e, const int s)
{
    const __m256 a[4] = { a0, a1, a2, a3 };
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++) {
        __m256 v = _mm256_add_ps(a[r], vb);
        if (s == 2) {
            v = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xD8));
        }
        if (!(e & E_TAIL) || first <= r) {
            _mm256_storeu_ps(q + r * ow, _mm256_min_ps(hi, _mm256_max_ps(lo, v)));
        }
    }
}

/* One column block of rows4_full: output rows y .. y + 3 at q from input rows y - 1 .. y + 4, x
 * being row y's column ox (the block's first); with E_TAIL only the rows from y + first are
 * stored (those before belong to the block above). Taps outside the plane (e, a constant: E_*)
 * are zero vectors, as block_v reads them (a row outside: zeros; a column outside: a masked
 * lane), made from the row's middle taps at a column edge and never loaded. */
static inline __attribute__((always_inline)) void rows4_block(const float *x, int64_t w, float *q,
                                                              int64_t ow, const __m256 *k,
                                                              __m256 vb, __m256 lo, __m256 hi,
                                                              int first, const int e)
{
    const __m256 k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6];
    const __m256 k7 = k[7], k8 = k[8];
    const __m256i up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
    const __m256i down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
    __m256 a0, a1, a2, a3, l, m, r;
#define DW_TAPS(i)                                                                                 \
    do {                                                                                           \
        const float *p = x + ((i)-1) * w;                                                          \
        if (((e & E_TOP) && (i) == 0) || ((e & E_BOTTOM) && (i) == 5)) {                           \
            l = m = r = _mm256_setzero_ps();                                                       \
            break;                                                                                 \
        }                                                                                          \
        m = _mm256_loadu_ps(p);                                                                    \
        l = (e & E_LEFT)                                                                           \
                ? _mm256_blend_ps(_mm256_permutevar8x32_ps(m, up), _mm256_setzero_ps(), 1)         \
                : _mm256_loadu_ps(p - 1);                                                          \
        r = (e & E_RIGHT)                                                                          \
                ? _mm256_blend_ps(_mm256_permutevar8x32_ps(m, down), _mm256_setzero_ps(), 0x80)    \
                : _mm256_loadu_ps(p + 1);                                                          \
    } while (0)
#define DW_ROW(a, ka, kb, kc)                                                                      \
    do {                                                                                           \
        a = _mm256_fmadd_ps(kc, r, _mm256_fmadd_ps(kb, m, _mm256_fmadd_ps(ka, l, a)));             \
        __asm__("" : "+x"(a));                                                                     \
    } while (0)
    DW_TAPS(0);
    a0 = _mm256_setzero_ps();
    DW_ROW(a0, k0, k1, k2);
    DW_TAPS(1);
    DW_ROW(a0, k3, k4, k5);
    a1 = _mm256_setzero_ps();
    DW_ROW(a1, k0, k1, k2);
    DW_TAPS(2);
    DW_ROW(a0, k6, k7, k8);
    DW_ROW(a1, k3, k4, k5);
    a2 = _mm256_setzero_ps();
    DW_ROW(a2, k0, k1, k2);
    DW_TAPS(3);
    DW_ROW(a1, k6, k7, k8);
    DW_ROW(a2, k3, k4, k5);
    a3 = _mm256_setzero_ps();
    DW_ROW(a3, k0, k1, k2);
    DW_TAPS(4);
    DW_ROW(a2, k6, k7, k8);
    DW_ROW(a3, k3, k4, k5);
    DW_TAPS(5);
    DW_ROW(a3, k6, k7, k8);
#undef DW_TAPS
#undef DW_ROW
    rows4_store(q, ow, a0, a1, a2, a3, vb, lo, hi, first, e, 1);
}

/* Stride 2: one column block of output rows y .. y + 3 at q (its lanes in the order 0 1 4 5 2 3 6 7
 * until the store, as block_v's) from input rows 2y - 1 .. 2y + 7, x being row 2y's column 2ox:
 * per input row the taps kx = 0 and 1 from columns 2ox - 1 .. 2ox + 14 (two loads, two
 * shuffles), kx = 2 from 2ox + 1 .. 2ox + 16. At the left edge (E_LEFT) column -1 and at the
 * right (E_RIGHT, 2ox + 16 = w) column w are zero lanes, never loaded; at the top (E_TOP) row
 * -1 is zeros. With E_TAIL only the rows from y + first are stored. */
static inline __attribute__((always_inline)) void
rows4_block_s2(const float *x, int64_t w, float *q, int64_t ow, const __m256 *k, __m256 vb,
               __m256 lo, __m256 hi, int first, const int e)
{
    const __m256 k0 = k[0], k1 = k[1], k2 = k[2], k3 = k[3], k4 = k[4], k5 = k[5], k6 = k[6];
    const __m256 k7 = k[7], k8 = k[8];
    const __m256i up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6);
    const __m256i down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v0, v1, v2;
#define DW2_TAPS(i)                                                                                \
    do {                                                                                           \
        const float *p = x + ((i)-1) * w;                                                          \
        if ((e & E_TOP) && (i) == 0) {                                                             \
            v0 = v1 = v2 = _mm256_setzero_ps();                                                    \
            break;                                                                                 \
        }                                                                                          \
        const __m256 l = (e & E_LEFT)                                                              \
                             ? _mm256_blend_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(p), up),   \
                                               _mm256_setzero_ps(), 1)                             \
                             : _mm256_loadu_ps(p - 1);                                             \
        const __m256 h = _mm256_loadu_ps(p + 7);                                                   \
        v0 = _mm256_shuffle_ps(l, h, 0x88);                                                        \
        v1 = _mm256_shuffle_ps(l, h, 0xDD);                                                        \
        const __m256 l2 = _mm256_loadu_ps(p + 1);                                                  \
        const __m256 h2 =                                                                          \
            (e & E_RIGHT)                                                                          \
                ? _mm256_blend_ps(_mm256_permutevar8x32_ps(_mm256_loadu_ps(p + 8), down),          \
                                  _mm256_setzero_ps(), 0x80)                                       \
                : _mm256_loadu_ps(p + 9);                                                          \
        v2 = _mm256_shuffle_ps(l2, h2, 0x88);                                                      \
    } while (0)
#define DW2_ROW(a, ka, kb, kc)                                                                     \
    do {                                                                                           \
        a = _mm256_fmadd_ps(kc, v2, _mm256_fmadd_ps(kb, v1, _mm256_fmadd_ps(ka, v0, a)));          \
        __asm__("" : "+x"(a));                                                                     \
    } while (0)
    DW2_TAPS(0);
    DW2_ROW(a0, k0, k1, k2);
    DW2_TAPS(1);
    DW2_ROW(a0, k3, k4, k5);
    DW2_TAPS(2);
    DW2_ROW(a0, k6, k7, k8);
    DW2_ROW(a1, k0, k1, k2);
    DW2_TAPS(3);
    DW2_ROW(a1, k3, k4, k5);
    DW2_TAPS(4);
    DW2_ROW(a1, k6, k7, k8);
    DW2_ROW(a2, k0, k1, k2);
    DW2_TAPS(5);
    DW2_ROW(a2, k3, k4, k5);
    DW2_TAPS(6);
    DW2_ROW(a2, k6, k7, k8);
    DW2_ROW(a3, k0, k1, k2);
    DW2_TAPS(7);
    DW2_ROW(a3, k3, k4, k5);
    DW2_TAPS(8);
    DW2_ROW(a3, k6, k7, k8);
#undef DW2_TAPS
#undef DW2_ROW
    rows4_store(q, ow, a0, a1, a2, a3, vb, lo, hi, first, e, 2);
}

/* rows4_full's blocks along one row of blocks (stride s, a constant) with the row edges and tail
 * re (a constant), x being input row s * y's column 0: the block at the left edge, blocks of
 * eight, and the block of the last eight output columns, which ends at input column w - 1 (it
 * overlaps the one before when the row is no multiple of eight: the columns both hold get the
 * same sums twice, as in the pair blocks). */
static inline __attribute__((always_inline)) void
rows4_run(const dw_plane *d, const float *x, float *o, int first, const int re, const int s)
{
    const __m256 k[9] = { d->k0, d->k1, d->k2, d->k3, d->k4, d->k5, d->k6, d->k7, d->k8 };
    const __m256 vb = d->vb, lo = d->lo, hi = d->hi;
    const int64_t w = d->w, ow = d->ow;
#define ROWS4_AT(c, e)                                                                             \
    (s == 1 ? rows4_block(x + (c), w, o + (c), ow, k, vb, lo, hi, first, e)                        \
            : rows4_block_s2(x + 2 * (c), w, o + (c), ow, k, vb, lo, hi, first, e))
    ROWS4_AT(0, re | E_LEFT);
    for (int64_t ox = 8; ox + 8 < ow; ox += 8) {
        ROWS4_AT(ox, re);
    }
    ROWS4_AT(ow - 8, re | E_RIGHT);
#undef ROWS4_AT
}

/* rows4_run with the row edges re known at compile time (first > 0: a tail, at run time). */
static inline __attribute__((always_inline)) void
rows4_edges(const dw_plane *d, const float *x, float *o, int first, int re, const int s)
{
    if (first > 0) {
        rows4_run(d, x, o, first, re | E_TAIL, s); /* rare: the row edges at run time */
    } else if (re == 0) {
        rows4_run(d, x, o, 0, 0, s);
    } else if (re == E_TOP) {
        rows4_run(d, x, o, 0, E_TOP, s);
    } else if (re == E_BOTTOM) {
        rows4_run(d, x, o, 0, E_BOTTOM, s);
    } else {
        rows4_run(d, x, o, 0, E_TOP | E_BOTTOM, s);
    }
}

/* 3x3 padded by 1 at stride 1, or at stride 2 on even sides (ow = w / 2, oh = h / 2: the bottom
 * padding row is never read); a clamp-type activation and no residual; output rows more than
 * two vectors wide (up to two, the pair blocks and the flat planes were faster:
 * docs/performance.md): output rows y0 .. y0 + 3 of d's plane (storing the rows from y0 +
 * first) across the whole row (rows4_run). The nine weights stay in registers beside the four
 * sums and a row's three tap vectors (all sixteen), one column block after another with nothing
 * between them to wait on (block_v's row blocks, a column block of eight rows at a time, kept the
 * weights in memory and stopped after each block; the pair blocks of narrower planes went two
 * rows at a time). Each output sums its taps in block_v's order, then the bias and the clamp as
 * finish_row: the same bits. */
static __attribute__((noinline)) void rows4_full(const dw_plane *d, int64_t y0, int first, int s)
{
    const float *x = d->x + (s * y0 - d->row0) * d->w; /* input row s * y0 */
    float *o = d->o + y0 * d->ow;
    const int re = (y0 == 0 ? E_TOP : 0) | (s == 1 && y0 + 4 == d->h ? E_BOTTOM : 0);
    if (s == 2) {
        rows4_edges(d, x, o, first, re, 2);
    } else {
        rows4_edges(d, x, o, first, re, 1);
    }
}

/* Whether rows4_full takes a plane of layer c at stride s (w x h in, ow wide out; res: a
 * residual; vact: an activation that is no clamp). */
static inline bool rows4_fits(const ki_conv2d *c, int s, int64_t w, int64_t h, int64_t ow, bool res,
                              bool vact)
{
    if (c->kh != 3 || c->pt != 1 || c->pl != 1 || res || vact) {
        return false;
    }
    if (s == 2) {
        return w % 2 == 0 && h % 2 == 0 && ow == w / 2 && ow > 16 && h >= 8;
    }
    return s == 1 && c->pb == 1 && ow == w && w > 16 && h >= 4;
}

/* Whether rows4_full takes c's planes in place at stride 1, before the pair blocks. */
static inline bool rows4_ok(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    ki_gemm_fin f;
    return c->sw == 1 && rows4_fits(c, 1, g->in.w, g->in.h, g->ow, c->res != NULL,
                                    !ki_gemm_fin_of(&c->ep, 0, NULL, &f));
}

/* rows4_fits for d's plane at stride s (its state holds the residual and the activation). */
static inline bool dw_full_ok(const dw_plane *d, const ki_conv2d *c, int s)
{
    return rows4_fits(c, s, d->w, d->h, d->ow, d->res != NULL, d->vact);
}

/* The output rows from oy (before y1, at least four in the call) through rows4_full: a tail of
 * fewer than four as the block of the last four rows. Returns the row after them. */
static inline int64_t dw_full_rows(const dw_plane *d, int s, int64_t oy, int64_t y1)
{
    const int64_t yf = y1 - oy < 4 ? y1 - 4 : oy;
    rows4_full(d, yf, (int)(oy - yf), s);
    return yf + 4;
}
#define DW_FULL_OK   dw_full_ok
#define DW_FULL_ROWS dw_full_rows

#include "conv2d_dw3_loops.h"

/* Planes of at most PAIR_MAX_OW output columns (the mobilenets' 14x14 and 28x28 layers, and
 * their stride-2 layers into them) as column blocks of eight outputs from columns 0, 8, 16, ...
 * and the last one from ow - 8 (it overlaps the one before it unless ow is a multiple of 8, and
 * the shared columns get the same sums twice), two blocks by two output rows at a time (four
 * accumulators, eight with a 5x5 kernel's odd rows apart), each input row loaded once for both
 * rows it feeds. Every store is a whole vector, and only the first block's loads that start
 * before the row and the last block's that end past it have lanes to clear: a plain load and an
 * AND, which reads the neighbouring row's floats there, except in the plane's first and last
 * rows, which load those lanes through the mask so nothing outside the plane is read. The row
 * blocks (conv2d_dw3_loops.h) mask every load of such a block and the store of a part-filled one,
 * and a 3x3 plane of up to 16 columns taken whole masks every load: AVX2 ran 14x14 planes and
 * stride-2 layers at half the AVX-512 kernel's speed on a CPU with the same FMA peak at both
 * levels (docs/performance.md). The taps come as in the row blocks (stride 2: the even and odd
 * floats of two loads by in-lane shuffles, the lanes put in order at the store), each output sums
 * them in the order ky, kx (a 5x5 kernel's odd rows in a chain of their own), rows outside the
 * plane as zero vectors, as the row blocks do, so the bits are theirs. */

/* Widest output rows taken: wider planes keep the row blocks, which walk them in bands of rows
 * and ask for the next plane's lines (conv2d_dw3_loops.h; 56 and 112 columns were level or slower
 * as pairs, docs/performance.md). */
#define PAIR_MAX_OW 32

/* The loads of an input row for a block: stride 1 one per tap (load i from column i - p past the
 * block's first input column), stride 2 two per pair of taps (load 2t from column 2t - p, load
 * 2t + 1 from 2t + 8 - p). */
static inline int pair_nloads(int s, int kk)
{
    return s == 1 ? kk : 2 * ((kk + 1) / 2);
}

static inline int pair_off(int s, int kk, int i)
{
    const int p = (kk - 1) / 2;
    return s == 1 ? i - p : i / 2 * 2 + i % 2 * 8 - p;
}

/* The blocks of a row: the first (from output column 0: its loads starting before the row
 * cleared), one inside the row, the last (ending at output column ow - 1: its loads that may end
 * past the row, from offset 1 at stride 1 and 8 at stride 2, cleared), or the only one of a row of
 * at most eight outputs (narrow_plane: every load cleared). */
enum { PAIR_FIRST, PAIR_INSIDE, PAIR_LAST, PAIR_BOTH };

static inline bool pair_clears(int kind, int s, int off)
{
    return kind == PAIR_BOTH ||
           (kind == PAIR_FIRST ? off < 0 : kind == PAIR_LAST && off >= (s == 1 ? 1 : 8));
}

/* Whether the block at output column ox, of kind `kind`, reads only inside the row but for the
 * loads it clears. */
static bool pair_block_ok(int64_t ox, int kind, int s, int kk, int64_t w)
{
    for (int i = 0; i < pair_nloads(s, kk); i++) {
        const int off = pair_off(s, kk, i);
        const int64_t c0 = s * ox + off;
        if (!pair_clears(kind, s, off) && (c0 < 0 || c0 + 7 > w - 1)) {
            return false;
        }
    }
    return true;
}

/* Whether c's planes go as pairs of column blocks (pair_plane): 3x3 or 5x5, stride 1 or 2,
 * padding (kk - 1) / 2 all round, at least 9 and at most PAIR_MAX_OW output columns, at least
 * two output rows, every block reading inside the row but for the loads it clears, and no
 * residual (the shared columns are stored twice, and an output in the residual's place would add
 * it twice). */
static bool pair_ok(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    const int kk = (int)c->kh, s = (int)c->sw, p = (kk - 1) / 2;
    const int64_t ow = g->ow, w = g->in.w, nb = (ow + 7) / 8;
    if (c->pl != p || c->pt != p || ow < 9 || ow > PAIR_MAX_OW || g->oh < 2 || c->res) {
        return false;
    }
    bool ok = pair_block_ok(0, PAIR_FIRST, s, kk, w) && pair_block_ok(ow - 8, PAIR_LAST, s, kk, w);
    for (int64_t j = 1; j + 1 < nb; j++) {
        ok = ok && pair_block_ok(8 * j, PAIR_INSIDE, s, kk, w);
    }
    return ok && (nb == 2 || pair_block_ok(ow - 16, PAIR_INSIDE, s, kk, w));
}

/* The eight floats from p, the lanes off in m cleared when `clear`: through the mask in the
 * plane's first and last rows (edge: nothing outside the plane is read), else a plain load and an
 * AND. */
static inline __attribute__((always_inline)) __m256 pair_load(const float *p, bool clear, bool edge,
                                                              __m256i m)
{
    if (!clear) {
        return _mm256_loadu_ps(p);
    }
    return edge ? _mm256_maskload_ps(p, m)
                : _mm256_and_ps(_mm256_loadu_ps(p), _mm256_castsi256_ps(m));
}

/* The kk taps of input row iy for the block of kind `kind` at output column ox into v, the
 * loads' cleared lanes by the masks m[i]; a row outside the plane is zero vectors. kind, s and kk
 * are constants. */
static inline __attribute__((always_inline)) void pair_taps(const dw_plane *d, int64_t iy,
                                                            int64_t ox, int s, int kk, bool checked,
                                                            const __m256i *m, int kind, __m256 v[5])
{
    if (checked && (iy < 0 || iy >= d->h)) {
#pragma GCC unroll 5
        for (int i = 0; i < kk; i++) {
            v[i] = _mm256_setzero_ps();
        }
        return;
    }
    const float *r = d->x + (iy - d->row0) * d->w + s * ox;
    /* the plane's first and last rows load the cleared lanes through the mask: nothing outside
     * the plane is read */
    const bool edge = iy == 0 || iy == d->h - 1;
    __m256 l[6];
#pragma GCC unroll 6
    for (int i = 0; i < pair_nloads(s, kk); i++) {
        const int off = pair_off(s, kk, i);
        __m256 *t = s == 1 ? &v[i] : &l[i]; /* stride 1: the loads are the taps */
        *t = pair_load(r + off, pair_clears(kind, s, off), edge, m[i]);
    }
#pragma GCC unroll 5
    for (int i = 0; s == 2 && i < kk; i++) { /* as row_taps */
        v[i] = i % 2 == 0 ? _mm256_shuffle_ps(l[i], l[i + 1], 0x88)
                          : _mm256_shuffle_ps(l[i - 1], l[i], 0xDD);
    }
}

/* Output rows y0 and y0 + 1 (stored from row y0 + first, first 0 or 1) of the blocks at output
 * columns oa and ob, of kinds ka and kb (constants, as s, kk and checked); ma and mb: the first
 * and the last block's masks. */
static inline __attribute__((always_inline)) void pair_rows(const dw_plane *d, int64_t y0,
                                                            int first, int s, int kk, bool checked,
                                                            int64_t oa, int ka, int64_t ob, int kb,
                                                            const __m256i *ma, const __m256i *mb)
{
    const int64_t iy0 = y0 * s - (kk - 1) / 2;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0; /* rows 0, 1 of block A, B */
    __m256 a0o = a0, a1o = a0, b0o = a0, b1o = a0;              /* their odd kernel rows */
    const __m256i *mka = ka == PAIR_LAST ? mb : ma, *mkb = kb == PAIR_FIRST ? ma : mb;
    if (s == 1 && kk == 5) {
#pragma GCC unroll 6
        for (int i = 0; i < 6; i++) {
            /* a 5x5 kernel at stride 1 a tap column at a time, both blocks, so each weight (a
             * memory operand: 25 do not fit the registers) is loaded once for both blocks' products
             * with it; each sum gets its products in the same order */
            const int64_t iy = iy0 + i;
            const bool out = checked && (iy < 0 || iy >= d->h), edge = iy == 0 || iy == d->h - 1;
            const float *r = d->x + (out ? 0 : (iy - d->row0) * d->w) - 2;
#pragma GCC unroll 5
            for (int kx = 0; kx < 5; kx++) {
                const __m256 ta =
                    out ? _mm256_setzero_ps()
                        : pair_load(r + oa + kx, pair_clears(ka, 1, kx - 2), edge, mka[kx]);
                const __m256 tb =
                    out ? _mm256_setzero_ps()
                        : pair_load(r + ob + kx, pair_clears(kb, 1, kx - 2), edge, mkb[kx]);
                if (i < 5) {
                    const __m256 wv = wt(d, 5, 5 * i + kx);
                    if (i & 1) {
                        a0o = _mm256_fmadd_ps(wv, ta, a0o), b0o = _mm256_fmadd_ps(wv, tb, b0o);
                    } else {
                        a0 = _mm256_fmadd_ps(wv, ta, a0), b0 = _mm256_fmadd_ps(wv, tb, b0);
                    }
                }
                if (i >= 1) {
                    const __m256 wv = wt(d, 5, 5 * (i - 1) + kx);
                    if ((i - 1) & 1) {
                        a1o = _mm256_fmadd_ps(wv, ta, a1o), b1o = _mm256_fmadd_ps(wv, tb, b1o);
                    } else {
                        a1 = _mm256_fmadd_ps(wv, ta, a1), b1 = _mm256_fmadd_ps(wv, tb, b1);
                    }
                }
            }
            __asm__("" : "+x"(a0o), "+x"(a1o), "+x"(b0o), "+x"(b1o));
            __asm__("" : "+x"(a0), "+x"(a1), "+x"(b0), "+x"(b1));
        }
    } else {
#pragma GCC unroll 7
        for (int i = 0; i < kk + s; i++) {
            __m256 v[5];
            pair_taps(d, iy0 + i, oa, s, kk, checked, mka, ka, v);
            feed_rows(d, kk, s, 2, i, v, &a0, &a1, NULL, NULL, &a0o, &a1o, NULL, NULL);
            pair_taps(d, iy0 + i, ob, s, kk, checked, mkb, kb, v);
            feed_rows(d, kk, s, 2, i, v, &b0, &b1, NULL, NULL, &b0o, &b1o, NULL, NULL);
            if (kk == 5) {
                __asm__("" : "+x"(a0o), "+x"(a1o), "+x"(b0o), "+x"(b1o));
            }
            __asm__("" : "+x"(a0), "+x"(a1), "+x"(b0), "+x"(b1));
        }
    }
    if (kk == 5) {
        a0 = _mm256_add_ps(a0, a0o), a1 = _mm256_add_ps(a1, a1o);
        b0 = _mm256_add_ps(b0, b0o), b1 = _mm256_add_ps(b1, b1o);
    }
    const dw_mask all = { _mm256_setzero_si256(), true };
    if (first == 0) {
        store_row(d, y0, oa, all, s, a0);
        store_row(d, y0, ob, all, s, b0);
    }
    store_row(d, y0 + 1, oa, all, s, a1);
    store_row(d, y0 + 1, ob, all, s, b1);
}

/* Every pair of the oh output rows of the blocks at oa and ob (kinds ka, kb), the last pair the
 * plane's last two rows (storing only its new row when oh is odd); only pairs reaching past the
 * plane's top or bottom check their rows. */
static inline __attribute__((always_inline)) void pair_cols(const dw_plane *d, int64_t oh, int s,
                                                            int kk, int64_t oa, int ka, int64_t ob,
                                                            int kb, const __m256i *ma,
                                                            const __m256i *mb)
{
    for (int64_t y = 0; y < oh; y += 2) {
        int64_t yf;
        int first;
        if (dw_rows_block(y, oh, 2, s, kk, (kk - 1) / 2, d->h, &yf, &first)) {
            pair_rows(d, yf, first, s, kk, true, oa, ka, ob, kb, ma, mb);
        } else {
            pair_rows(d, yf, first, s, kk, false, oa, ka, ob, kb, ma, mb);
        }
    }
}

/* d's plane (oh output rows) as column blocks from 0, 8, 16, ... and the last from ow - 8, two at
 * a time (with an odd count the last two overlap by a block, recomputed), s and kk constants. */
static inline __attribute__((always_inline)) void
pair_plane(const dw_plane *d, int64_t oh, int s, int kk, const __m256i *ma, const __m256i *mb)
{
    const int64_t ow = d->ow, nb = (ow + 7) / 8;
    if (nb == 2) {
        pair_cols(d, oh, s, kk, 0, PAIR_FIRST, ow - 8, PAIR_LAST, ma, mb);
        return;
    }
    pair_cols(d, oh, s, kk, 0, PAIR_FIRST, 8, PAIR_INSIDE, ma, mb);
    for (int64_t j = 2; j + 2 < nb; j += 2) {
        pair_cols(d, oh, s, kk, 8 * j, PAIR_INSIDE, 8 * j + 8, PAIR_INSIDE, ma, mb);
    }
    /* the last block with the one before it (the block before that when nb is odd) */
    pair_cols(d, oh, s, kk, ow - 16, PAIR_INSIDE, ow - 8, PAIR_LAST, ma, mb);
}

/* Planes of 4 to 8 output columns (the mobilenets' 7x7 layers and their stride-2 layers into
 * them), one column block from column 0 by four output rows at a time (the last four rows of the
 * plane as the last block, storing only its new rows), each load cleared to the row's columns as
 * in pair_taps: the row blocks masked all of them. Each row is stored by a whole vector, whose
 * lanes past the row land in the next row before that row's own store; the plane's last row by a
 * 16-, an 8- and a 4-byte store (ki_store_first8), so nothing past the plane is written. */
static bool narrow_ok(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    const int kk = (int)c->kh, s = (int)c->sw, p = (kk - 1) / 2;
    const int64_t w = g->in.w;
    if (c->pl != p || c->pt != p || g->ow < 4 || g->ow > 8 || g->oh < 4 || c->res) {
        return false;
    }
    for (int i = 0; i < pair_nloads(s, kk); i++) { /* loads reach no further than the next row */
        if (pair_off(s, kk, i) + 7 > 2 * w - 1) {
            return false;
        }
    }
    return true;
}

/* Output rows y0 .. y0 + 3 (stored from row y0 + first) of the plane's column block; s, kk and
 * checked constants. */
static inline __attribute__((always_inline)) void narrow_rows(const dw_plane *d, int64_t oh,
                                                              int64_t y0, int first, int s, int kk,
                                                              bool checked, const __m256i *m)
{
    const int64_t iy0 = y0 * s - (kk - 1) / 2, ow = d->ow;
    __m256 a[4];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0; /* rows 0 .. 3 */
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;                  /* their odd kernel rows */
#pragma GCC unroll 11
    for (int i = 0; i < kk + 3 * s; i++) {
        __m256 v[5];
        pair_taps(d, iy0 + i, 0, s, kk, checked, m, PAIR_BOTH, v);
        feed_rows(d, kk, s, 4, i, v, &a0, &a1, &a2, &a3, &b0, &b1, &b2, &b3);
        if (kk == 5) {
            __asm__("" : "+x"(b0), "+x"(b1), "+x"(b2), "+x"(b3));
        }
        __asm__("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3));
    }
    a[0] = kk == 5 ? _mm256_add_ps(a0, b0) : a0, a[1] = kk == 5 ? _mm256_add_ps(a1, b1) : a1;
    a[2] = kk == 5 ? _mm256_add_ps(a2, b2) : a2, a[3] = kk == 5 ? _mm256_add_ps(a3, b3) : a3;
    const dw_mask all = { _mm256_setzero_si256(), true };
#pragma GCC unroll 4
    for (int r = first; r < 4; r++) {
        const int64_t y = y0 + r;
        if (y == oh - 1) {
            ki_store_first8(d->o + y * ow, finish_row(d, y * ow, all, s, a[r]), ow);
        } else {
            store_row(d, y, 0, all, s, a[r]);
        }
    }
}

/* d's plane (oh output rows) as one column block by four rows, s and kk constants. */
static inline __attribute__((always_inline)) void narrow_plane(const dw_plane *d, int64_t oh, int s,
                                                               int kk, const __m256i *m)
{
    for (int64_t y = 0; y < oh; y += 4) {
        int64_t yf;
        int first;
        if (dw_rows_block(y, oh, 4, s, kk, (kk - 1) / 2, d->h, &yf, &first)) {
            narrow_rows(d, oh, yf, first, s, kk, true, m);
        } else {
            narrow_rows(d, oh, yf, first, s, kk, false, m);
        }
    }
}

/* The planes p0 <= p < p1 as pairs of column blocks (pair_ok) or, when `narrow`, as one block each
 * (narrow_ok); s, kk and narrow constants (each combination a function of its own: GCC's register
 * allocation of one stride-kernel pair changed with the others inlined beside it, by up to 10 %).
 */
static inline __attribute__((always_inline)) void
blocks_planes_of(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t p0,
                 int64_t p1, float *restrict out, const int s, const int kk, const bool narrow)
{
    const int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow, w = g->in.w, ow = g->ow;
    __m256i ma[6], mb[6]; /* the lanes of each load inside the row: first block, last block */
    for (int i = 0; i < pair_nloads(s, kk); i++) {
        ma[i] = ki_lanes_in8(pair_off(s, kk, i), w);
        mb[i] = narrow ? ma[i] : ki_lanes_in8(s * (ow - 8) + pair_off(s, kk, i), w);
    }
    dw_plane d;
    plane_init(&d, c, g, 0);
    for (int64_t p = p0; p < p1; p++) {
        plane_channel(&d, c, p % c->in_ch);
        d.x = in + p * hw, d.o = out + p * ohw;
        if (narrow) {
            narrow_plane(&d, g->oh, s, kk, ma);
        } else {
            pair_plane(&d, g->oh, s, kk, ma, mb);
        }
    }
}

typedef void (*blocks_planes_fn)(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 int64_t p0, int64_t p1, float *restrict out);

#define BLOCKS_PLANES(name, S, KK, NARROW)                                                         \
    static __attribute__((noinline)) void name(const ki_conv2d *c, const ki_conv2d_geom *g,        \
                                               const float *in, int64_t p0, int64_t p1,            \
                                               float *restrict out)                                \
    {                                                                                              \
        blocks_planes_of(c, g, in, p0, p1, out, S, KK, NARROW);                                    \
    }
BLOCKS_PLANES(pair_planes_s1k3, 1, 3, false)
BLOCKS_PLANES(pair_planes_s2k3, 2, 3, false)
BLOCKS_PLANES(pair_planes_s1k5, 1, 5, false)
BLOCKS_PLANES(pair_planes_s2k5, 2, 5, false)
BLOCKS_PLANES(narrow_planes_s1k3, 1, 3, true)
BLOCKS_PLANES(narrow_planes_s2k3, 2, 3, true)
BLOCKS_PLANES(narrow_planes_s1k5, 1, 5, true)
BLOCKS_PLANES(narrow_planes_s2k5, 2, 5, true)

/* c's planes as pairs of column blocks or, when `narrow`, as one block each: the function for c's
 * stride and kernel. */
static void blocks_planes(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t p0,
                          int64_t p1, float *restrict out, bool narrow)
{
    static const blocks_planes_fn fns[8] = { pair_planes_s1k3,   pair_planes_s2k3,
                                             pair_planes_s1k5,   pair_planes_s2k5,
                                             narrow_planes_s1k3, narrow_planes_s2k3,
                                             narrow_planes_s1k5, narrow_planes_s2k5 };
    fns[4 * narrow + 2 * (c->kh == 5) + (c->sw == 2)](c, g, in, p0, p1, out);
}

/* Small 3x3 planes eight channels at a time (ki_conv2d_dw3_ch8_avx2): the eight planes transposed into a zero-padded
 * block of pixels, each pixel's eight channels a vector (ki_tr8 on eight pixels at a time), the
 * depthwise products there (a vector of eight channels per output pixel, the weights a vector per
 * tap, no edge lanes to clear: a 14x14 plane's rows fill 14 of 16 lanes in the row blocks, a 7x7
 * plane's 49 outputs 49 of 56 in the flat runs, and those pay their edge masks and per-plane setup
 * on every plane), then the outputs transposed back. Each output sums its taps in the order ky,
 * kx from zero, a tap in the padding a product with zero, then the bias and the clamp: the flat,
 * pair and narrow planes' sums, so the bits are theirs. */

/* Floats of the two blocks (padded input, output), at most CH8_MAX_FLOATS: together at most half
 * of L1 (ki_conv2d_dw3_ch8_avx2). */
#define CH8_MAX_FLOATS 8192

static int64_t ch8_floats(const ki_conv2d_geom *g)
{
    return ((g->in.h + 2) * (g->in.w + 2) + g->oh * g->ow) * 8;
}

/* Of ki_conv2d_dw3_ok's layers: 3x3, padded by at most one (one on the top and the left),
 * a clamp-type activation and no residual; at least eight pixels in and out (a block of eight
 * for ki_tr8). */
bool ki_conv2d_dw3_ch8_shape_avx2(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    ki_gemm_fin f;
    return ki_conv2d_dw3_ok(c) && c->kh == 3 && c->pt == 1 && c->pl == 1 && c->pb <= 1 &&
           c->pr <= 1 && !c->res && ki_gemm_fin_of(&c->ep, 0, NULL, &f) &&
           g->in.h * g->in.w >= 8 && g->oh * g->ow >= 8;
}

/* Those whose two blocks fit in half of L1. */
bool ki_conv2d_dw3_ch8_avx2(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    const int64_t n = ch8_floats(g);
    return ki_conv2d_dw3_ch8_shape_avx2(c, g) && n <= CH8_MAX_FLOATS &&
           n * (int64_t)sizeof(float) <= (int64_t)ki_cpu_get()->l1d / 2;
}

/* Outputs per run of ch8_row: four sums beside the nine weights, the bias and the clamp bounds
 * (sixteen registers, each tap a memory operand of its FMA); with seven GCC kept some weights and
 * the bounds on the stack (mobilenet_v2's 14x14 and 7x7 layers 2-3 % slower, docs/performance.md). */
#define CH8_RUN 4

/* Outputs ox .. ox + N - 1 of an output row (N 1..CH8_RUN, a constant) from its three input rows
 * r[ky], each given at its column -1 (the left padding), pixels ps floats apart (8: the padded
 * blocks; 32: an OV block's tiles, ovdw_body), stride s. With `left` (the run starts the row) the
 * first output's column -1 taps, with `right` (the run ends it and the last output reads column
 * w) the last output's column w taps, multiply a zero instead of loading: what the padded blocks'
 * zero columns hold. */
static inline __attribute__((always_inline)) void
ch8_run(const float *const r[3], const int ps, int s, int64_t ox, const __m256 *wv, __m256 bias,
        __m256 lo, __m256 hi, float *o, const int N, const bool left, const bool right)
{
    __m256 a[CH8_RUN];
#pragma GCC unroll 4
    for (int j = 0; j < N; j++) {
        a[j] = _mm256_setzero_ps();
    }
#pragma GCC unroll 3
    for (int ky = 0; ky < 3; ky++) {
        const float *q = r[ky] + s * ox * ps;
#pragma GCC unroll 3
        for (int kx = 0; kx < 3; kx++) {
#pragma GCC unroll 4
            for (int j = 0; j < N; j++) {
                const bool zero = (left && j == 0 && kx == 0) || (right && j == N - 1 && kx == 2);
                const __m256 v = zero ? _mm256_setzero_ps() : _mm256_load_ps(q + (s * j + kx) * ps);
                a[j] = _mm256_fmadd_ps(wv[3 * ky + kx], v, a[j]);
            }
        }
    }
#pragma GCC unroll 4
    for (int j = 0; j < N; j++) {
        _mm256_store_ps(o + j * 8, _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(a[j], bias))));
    }
}

/* Outputs ox0 .. ox1 - 1 of a row, CH8_RUN at a time, then the rest (ps and s constants). */
static inline __attribute__((always_inline)) void ch8_span(const float *const r[3], const int ps,
                                                           const int s, int64_t ox0, int64_t ox1,
                                                           const __m256 *wv, __m256 bias, __m256 lo,
                                                           __m256 hi, float *o)
{
    int64_t ox = ox0;
    for (; ox + CH8_RUN <= ox1; ox += CH8_RUN) {
        ch8_run(r, ps, s, ox, wv, bias, lo, hi, o + ox * 8, CH8_RUN, false, false);
    }
    _Static_assert(CH8_RUN == 4, "the rest: 1 to 3 outputs");
#define CH8_REST(N)                                                                                \
    case N:                                                                                        \
        ch8_run(r, ps, s, ox, wv, bias, lo, hi, o + ox * 8, N, false, false);                      \
        break;
    switch (ox1 - ox) {
        CH8_REST(3)
        CH8_REST(2)
        CH8_REST(1)
    default:
        break;
    }
#undef CH8_REST
}

/* Output row oy of the padded block xp (row stride wp pixels), stride s (a constant). */
static inline __attribute__((always_inline)) void ch8_row(const float *xp, int64_t wp, const int s,
                                                          int64_t oy, int64_t ow, const __m256 *wv,
                                                          __m256 bias, __m256 lo, __m256 hi,
                                                          float *o)
{
    const float *const r[3] = { xp + s * oy * wp * 8, xp + (s * oy + 1) * wp * 8,
                                xp + (s * oy + 2) * wp * 8 };
    ch8_span(r, 8, s, 0, ow, wv, bias, lo, hi, o);
}

/* Output row oy from an OV block's tiles tb (pixel i's eight floats at tb + 32 i, the rows w
 * pixels long, h of them; zr: a row of zeros for the rows outside), stride s (a constant): a
 * first run of up to CH8_RUN outputs from the left edge, runs inside the row, and a last run of
 * 1 .. CH8_RUN to the right edge (the same runs as ch8_span's, the first and last outputs'
 * taps outside the row zero products). */
static inline __attribute__((always_inline)) void
ch8t_row(const float *tb, const float *zr, int64_t h, int64_t w, const int s, int64_t oy,
         int64_t ow, const __m256 *wv, __m256 bias, __m256 lo, __m256 hi, float *o)
{
    const float *r[3];
    for (int ky = 0; ky < 3; ky++) {
        const int64_t iy = s * oy + ky - 1;
        r[ky] = (iy >= 0 && iy < h ? tb + iy * w * 32 : zr) - 32;
    }
    const bool redge = s * (ow - 1) + 1 >= w; /* the last output reads column w */
    _Static_assert(CH8_RUN == 4, "runs of 1 to 4 outputs");
#define CH8_ONE(N, L, R) ch8_run(r, 32, s, ox, wv, bias, lo, hi, o + ox * 8, N, L, R)
#define CH8_END(N, L)                                                                              \
    case N:                                                                                        \
        if (redge) {                                                                               \
            CH8_ONE(N, L, true);                                                                   \
        } else {                                                                                   \
            CH8_ONE(N, L, false);                                                                  \
        }                                                                                          \
        break;
    int64_t ox = 0;
    if (ow <= CH8_RUN) { /* one run, both edges */
        switch (ow) {
            CH8_END(4, true)
            CH8_END(3, true)
            CH8_END(2, true)
            CH8_END(1, true)
        default:
            break;
        }
        return;
    }
    CH8_ONE(CH8_RUN, true, false);
    const int64_t m = ow - CH8_RUN, n = m % CH8_RUN ? m % CH8_RUN : CH8_RUN; /* n: the last run */
    for (ox = CH8_RUN; ox < ow - n; ox += CH8_RUN) {
        CH8_ONE(CH8_RUN, false, false);
    }
    switch (n) {
        CH8_END(4, false)
        CH8_END(3, false)
        CH8_END(2, false)
        CH8_END(1, false)
    default:
        break;
    }
#undef CH8_END
#undef CH8_ONE
}

/* Eight floats from each of the planes src + c * stride (c < 8) at pixel i, transposed: v[j] holds
 * pixel i + j's eight channels. */
static inline __attribute__((always_inline)) void ch8_tr_load(const float *src, int64_t stride,
                                                              int64_t i, __m256 v[8])
{
#pragma GCC unroll 8
    for (int c = 0; c < 8; c++) {
        v[c] = _mm256_loadu_ps(src + c * stride + i);
    }
    ki_tr8(&v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
}

/* The vectors of channels ch .. ch + 7 of c (ki_conv2d_dw3_ch8_avx2: a clamp): the nine taps'
 * weights, the bias (zero without one) and the clamp's bounds. */
typedef struct ch8_wts {
    __m256 wv[9], bias, lo, hi;
} ch8_wts;

static void ch8_wts_of(const ki_conv2d *c, int64_t ch, ch8_wts *k)
{
    /* the group made at create (when ch starts one), else the weights gathered here */
    const float *w = c->weight + ch * 9;
    const float *w8 = c->dw_w8 && ch % 8 == 0 ? c->dw_w8 + ch * 9 : NULL;
    for (int t = 0; t < 9; t++) {
        k->wv[t] = w8 ? _mm256_loadu_ps(w8 + 8 * t)
                      : _mm256_setr_ps(w[t], w[9 + t], w[18 + t], w[27 + t], w[36 + t], w[45 + t],
                                       w[54 + t], w[63 + t]);
    }
    ki_gemm_fin f;
    ki_gemm_fin_of(&c->ep, 0, NULL, &f);
    k->bias = c->ep.bias ? _mm256_loadu_ps(c->ep.bias + ch) : _mm256_setzero_ps();
    k->lo = _mm256_set1_ps(f.lo), k->hi = _mm256_set1_ps(f.hi);
}

/* The output block xo (ohw pixels of eight channels) into the eight planes at out, eight pixels
 * at a time transposed (the last eight from ohw - 8: they overlap the ones before unless ohw is a
 * multiple of eight; the shared pixels get the same values twice). */
static void ch8_to_planes(const float *xo, int64_t ohw, float *restrict out)
{
    for (int64_t i = 0; i < ohw; i += 8) {
        const int64_t b = i + 8 <= ohw ? i : ohw - 8;
        __m256 v[8];
        ch8_tr_load(xo + b * 8, 8, 0, v); /* v[j]: pixels b .. b + 7 of channel j */
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            _mm256_storeu_ps(out + j * ohw + b, v[j]);
        }
    }
}

/* Channels ch .. ch + 7 of the padded block xp (their input, zero borders) through the output block
 * xo into their planes at out: the nine taps, the bias and the clamp, then the transposes. */
static void ch8_finish(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t ch, const float *xp,
                       float *xo, float *restrict out)
{
    const int64_t ow = g->ow, wp = g->in.w + 2;
    ch8_wts k;
    ch8_wts_of(c, ch, &k);
    for (int64_t oy = 0; oy < g->oh; oy++) {
        if (c->sw == 1) {
            ch8_row(xp, wp, 1, oy, ow, k.wv, k.bias, k.lo, k.hi, xo + oy * ow * 8);
        } else {
            ch8_row(xp, wp, 2, oy, ow, k.wv, k.bias, k.lo, k.hi, xo + oy * ow * 8);
        }
    }
    ch8_to_planes(xo, g->oh * ow, out);
}

/* As ch8_finish, from an OV block's tiles tb (ch8t_row; zr a row of zeros); out NULL: xo is where
 * the group goes (the input of an absorbed projection, in eight-channel groups), no transposes. */
static void ch8t_finish(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t ch, const float *tb,
                        const float *zr, float *xo, float *restrict out)
{
    const int64_t ow = g->ow, h = g->in.h, w = g->in.w;
    ch8_wts k;
    ch8_wts_of(c, ch, &k);
    for (int64_t oy = 0; oy < g->oh; oy++) {
        if (c->sw == 1) {
            ch8t_row(tb, zr, h, w, 1, oy, ow, k.wv, k.bias, k.lo, k.hi, xo + oy * ow * 8);
        } else {
            ch8t_row(tb, zr, h, w, 2, oy, ow, k.wv, k.bias, k.lo, k.hi, xo + oy * ow * 8);
        }
    }
    if (out) {
        ch8_to_planes(xo, g->oh * ow, out);
    }
}

/* The planes p .. p + 7 (one image's channels ch .. ch + 7) of in into out through the blocks xp
 * (padded input, its border zeros) and xo (output); at[i]: pixel i's place in xp. A block of eight
 * pixels from pixel i, the last one from n - 8 (as in ch8_finish). */
static void ch8_group(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t ch,
                      float *restrict out, float *xp, float *xo, const int32_t *at)
{
    const int64_t hw = g->in.h * g->in.w;
    for (int64_t i = 0; i < hw; i += 8) {
        const int64_t b = i + 8 <= hw ? i : hw - 8;
        __m256 v[8];
        ch8_tr_load(in, hw, b, v);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) {
            _mm256_store_ps(xp + at[b + j] * 8, v[j]);
        }
    }
    ch8_finish(c, g, ch, xp, xo, out);
}

/* Each pixel's place in the zero-padded planes of ch8 blocks (one more row and column on each
 * side) of geometry g. */
static void ch8_places(const ki_conv2d_geom *g, int32_t *at)
{
    const int64_t w = g->in.w;
    for (int64_t y = 0, i = 0; y < g->in.h; y++) {
        for (int64_t x = 0; x < w; x++, i++) {
            at[i] = (int32_t)((y + 1) * (w + 2) + x + 1);
        }
    }
}

/* The planes p0 <= p < p1 (batch-major) in groups of eight of one image (ch8_group), the planes
 * left at the end of an image's run through `rest`. */
static void ch8_planes(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t p0,
                       int64_t p1, float *restrict out,
                       void (*rest)(const ki_conv2d *, const ki_conv2d_geom *, const float *,
                                    int64_t, int64_t, float *restrict))
{
    _Alignas(32) float buf[CH8_MAX_FLOATS];
    int32_t at[CH8_MAX_FLOATS / 8];
    const int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow, w = g->in.w;
    const int64_t np = (g->in.h + 2) * (w + 2), nch = c->in_ch;
    float *xp = buf, *xo = buf + np * 8;
    memset(xp, 0, (size_t)np * 8 * sizeof *xp);
    ch8_places(g, at);
    for (int64_t p = p0; p < p1;) {
        const int64_t img_end = p - p % nch + nch, end = img_end < p1 ? img_end : p1;
        for (; p + 8 <= end; p += 8) {
            ch8_group(c, g, in + p * hw, p % nch, out + p * ohw, xp, xo, at);
        }
        if (p < end) {
            rest(c, g, in, p, end, out);
            p = end;
        }
    }
}

/* One 32-channel block ob of image img of c (k input planes at x, hw pixels) on its OV weights,
 * pixel block by pixel block into the tile t, each finished tile handed to put, or with put NULL
 * each tile at its pixels' place in t (pixel j's 32 floats at t + 32 j) (c's bias and clamp
 * applied in the kernel, on the last k block): the sums of c's GEMM tiles, in the same k order. */
typedef struct ovdw_block {
    const ki_conv2d *c;
    const float *x;
    int64_t ob, nob, k, hw, pw;
    const float *bias; /* 32 values, zero past the block's channels, or NULL */
    float lo, hi;
} ovdw_block;

static inline __attribute__((always_inline)) void
ovdw_tiles(const ovdw_block *b, float *t, void (*put)(void *, const float *, int64_t, int64_t),
           void *ctx)
{
    /* the next block's weights come from L2 or memory: each pixel block's kernel calls ask for a
     * share of the same k block's lines of them (ki_ov_pf), as the OV path does */
    const int64_t nb = (b->hw + b->pw - 1) / b->pw, nx = (b->ob + 1) % b->nob;
    for (int64_t j0 = 0, pb = 0; j0 < b->hw; j0 += b->pw, pb++) {
        const int64_t nr = b->hw - j0 < b->pw ? b->hw - j0 : b->pw;
        for (int64_t k0 = 0; k0 < b->k; k0 += KI_OV_KC) {
            const int64_t kc = b->k - k0 < KI_OV_KC ? b->k - k0 : KI_OV_KC;
            const bool last = k0 + kc >= b->k;
            const int64_t lines = kc * KI_OV_MV * (int64_t)sizeof(float) / 64;
            const int64_t q0 = pb * lines / nb, q1 = (pb + 1) * lines / nb;
            const float *na = b->c->ov_a + ki_ov_block_at(k0, kc, b->nob, nx);
            const ki_ov_pf pf = { (const char *)na + q0 * 64, q1 - q0 };
            b->c->ov_uk(kc, b->c->ov_a + ki_ov_block_at(k0, kc, b->nob, b->ob),
                        b->x + k0 * b->hw + j0, (int)nr, b->hw, k0 > 0, last ? b->bias : NULL,
                        last ? b->lo : -INFINITY, last ? b->hi : INFINITY,
                        put ? t : t + j0 * KI_OV_MV, pf);
        }
        if (put) {
            put(ctx, t, j0, nr);
        }
    }
}

/* On the other path: the tile as the block's planes (row stride hw). */
typedef struct ovdw_planes {
    float *y;
    int64_t rows, hw;
} ovdw_planes;

static void ovdw_put_planes(void *ctx, const float *t, int64_t j0, int64_t nr)
{
    const ovdw_planes *p = ctx;
    ki_ov_tile_store_avx2(t, p->rows, nr, p->y + j0, p->hw, NULL, -INFINITY, INFINITY);
}

/* The team's blocks (image, 32-channel block of c's output), taken as they come free (ki_share). */
static void ovdw_body(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c, *d = c->dwf;
    const ki_conv2d_geom *g = j->g;
    ki_conv2d_geom dg;
    if (ki_conv2d_pwdw_geom(c, g, &dg, NULL) != KI_OK) {
        return; /* conv_forward checked the workspace */
    }
    const bool fast = ki_conv2d_ovdw_ok(c, d, &dg);
    const int64_t ch = c->out_ch, k = c->in_ch, hw = g->in.h * g->in.w, ohw = dg.oh * dg.ow;
    const int64_t nob = (ch + KI_OV_MV - 1) / KI_OV_MV;
    float *ws = ki_exec_slice(j->ex, pt->tid);
    ws = (float *)(void *)((char *)ws + (64 - (uintptr_t)ws % 64) % 64);
    /* the fast path's block of tiles (a pixel's 32 channels, then the next pixel's), one pixel on
     * from the slice's start (ch8t_row points a pixel before each row), then a row of zeros and
     * the depthwise output of a group */
    float *tb = ws + KI_OV_MV, *zr = tb + hw * KI_OV_MV + KI_OV_MV, *xo = zr + dg.in.w * KI_OV_MV;
    float *t = fast ? tb : ws + KI_OV_MV * hw;
    if (fast) {
        memset(zr, 0, (size_t)(dg.in.w * KI_OV_MV) * sizeof *zr);
    }
    ki_gemm_fin f;
    ki_gemm_fin_of(&c->ep, 0, NULL, &f); /* ki_conv2d_ovdw_ok: a clamp */
    const int64_t pw = ki_conv2d_ov_pw(c, hw);
    ki_share_begin(pt, g->in.n * nob);
    for (int64_t it = ki_share_take(pt->share, pt->tid); it >= 0;
         it = ki_share_take(pt->share, pt->tid)) {
        const int64_t img = it / nob, ob = it % nob, oc0 = ob * KI_OV_MV;
        const int64_t rows = ch - oc0 < KI_OV_MV ? ch - oc0 : KI_OV_MV;
        float buf[KI_OV_MV];
        const ovdw_block b = { .c = c,
                               .x = j->in + img * k * hw,
                               .ob = ob,
                               .nob = nob,
                               .k = k,
                               .hw = hw,
                               .pw = pw,
                               .bias = ki_conv2d_ov_bias(c, oc0, rows, buf),
                               .lo = f.lo,
                               .hi = f.hi };
        float *out = j->out + (img * ch + oc0) * ohw;
        if (fast) {
            ovdw_tiles(&b, t, NULL, NULL); /* straight into the block */
            for (int64_t q = 0; q < rows / 8; q++) { /* c->out8: group oc0 / 8 + q at its place */
                float *o = out + q * 8 * ohw;
                ch8t_finish(d, &dg, oc0 + q * 8, tb + q * 8, zr + q * 8, c->out8 ? o : xo,
                            c->out8 ? NULL : o);
            }
        } else { /* the block's planes, then the depthwise kernel on them as a layer of its own */
            ovdw_planes pl = { ws, rows, hw };
            ovdw_tiles(&b, t, ovdw_put_planes, &pl);
            ki_conv2d dd = *d;
            dd.weight = d->weight + oc0 * d->kh * d->kw;
            dd.dw_w8 = d->dw_w8 ? d->dw_w8 + oc0 * 9 : NULL;
            dd.ep.bias = d->ep.bias ? d->ep.bias + oc0 : NULL;
            dd.in_ch = dd.out_ch = dd.groups = rows;
            ki_conv2d_geom bg = dg;
            bg.in.n = 1, bg.in.c = rows;
            d->dw3_planes(&dd, &bg, ws, 0, rows, out);
        }
    }
}

void ki_conv2d_forward_ovdw_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 float *restrict out, const ki_exec *ex)
{
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, ovdw_body, &j);
}

static void dw3_other_planes(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                             int64_t p0, int64_t p1, float *restrict out);

void ki_conv2d_dw3_planes_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                               int64_t p0, int64_t p1, float *restrict out)
{
    if (ki_conv2d_dw3_ch8_on(c, g)) { /* the choice the in-place path's granule follows too */
        ch8_planes(c, g, in, p0, p1, out, dw3_other_planes);
        return;
    }
    dw3_other_planes(c, g, in, p0, p1, out);
}

/* Planes of other shapes, and those ch8_planes leaves. */
static void dw3_other_planes(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                             int64_t p0, int64_t p1, float *restrict out)
{
    const bool pair = !rows4_ok(c, g) && pair_ok(c, g); /* narrow_ok: rows of at most 8 */
    if (pair || narrow_ok(c, g)) {
        blocks_planes(c, g, in, p0, p1, out, !pair);
        return;
    }
    dw3_planes(c, g, in, p0, p1, out);
}

/* The narrow planes alone (narrow_ok), for the AVX-512 kernel's 3x3 stride-1 planes of at most
 * eight columns; false, and nothing done, for other planes. */
bool ki_conv2d_dw3_narrow_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                               int64_t p0, int64_t p1, float *restrict out)
{
    if (!narrow_ok(c, g)) {
        return false;
    }
    blocks_planes(c, g, in, p0, p1, out, true);
    return true;
}

void ki_conv2d_dw3_band_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                             int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                             int64_t y1, float *restrict out)
{
    dw3_band(c, g, band, row0, cstride, c0, c1, y0, y1, out, NULL);
}

/* Stride 2 from rows in the even / odd order (ki_conv2d_pwdw_eo): input row p holds columns 0, 2,
 * .., w - 2 at p[0 .. ow) and 1, 3, .., w - 1 at p[ow .. w) (ow = w / 2), so output columns ox ..
 * ox + 7 take kx = 0 from p + ow + ox - 1 (at ox = 0 its first lane, column -1, is cleared), kx = 1
 * from p + ox and kx = 2 from p + ow + ox: three loads a row and no shuffles, where rows in order
 * take four loads and three shuffles (rows4_block_s2). The taps and sums are rows4_block_s2's in
 * its order (a row outside the plane is zero vectors, multiplied as there), so the bits are its. */
static inline __attribute__((always_inline)) void eo_taps(const float *p, int64_t ow, bool left,
                                                          __m256 *v0, __m256 *v1, __m256 *v2)
{
    const __m256 before = _mm256_loadu_ps(p + ow - 1);
    *v0 = left ? _mm256_blend_ps(before, _mm256_setzero_ps(), 1) : before;
    *v1 = _mm256_loadu_ps(p);
    *v2 = _mm256_loadu_ps(p + ow);
}

/* a + kernel row ky's taps (rows4_block_s2's DW2_ROW), or a unchanged when ky is no kernel row. */
static inline __attribute__((always_inline)) __m256 eo_row(const __m256 *k, int ky, __m256 v0,
                                                           __m256 v1, __m256 v2, __m256 a)
{
    if (ky < 0 || ky > 2) {
        return a;
    }
    return _mm256_fmadd_ps(k[3 * ky + 2], v2,
                           _mm256_fmadd_ps(k[3 * ky + 1], v1, _mm256_fmadd_ps(k[3 * ky], v0, a)));
}

/* Output rows y0 .. y0 + rows - 1 (rows 1..4, left and checked constants) at output column ox of
 * d's plane: input rows 2 y0 - 1 .. 2 y0 + 2 rows - 1, those outside the plane zeros when
 * checked. */
static inline __attribute__((always_inline)) void eo_block(const dw_plane *d, const __m256 *k,
                                                           int64_t y0, int64_t ox, const int rows,
                                                           const bool left, const bool checked)
{
    /* d's fields read once: a store through a float pointer may alias *d, so GCC otherwise read
     * them again, and formed each row's address anew, after every store */
    const int64_t ow = d->ow, w = d->w, h = d->h, at0 = (2 * y0 - 1 - d->row0) * w + ox;
    const float *x = d->x;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
#pragma GCC unroll 9
    for (int i = 0; i < 2 * rows + 1; i++) {
        const int64_t iy = 2 * y0 - 1 + i;
        __m256 v0, v1, v2;
        if (checked && (iy < 0 || iy >= h)) {
            v0 = v1 = v2 = _mm256_setzero_ps();
        } else {
            eo_taps(x + (at0 + i * w), ow, left, &v0, &v1, &v2); /* at0 < 0 above the band */
        }
        a0 = eo_row(k, i, v0, v1, v2, a0);
        if (rows > 1) {
            a1 = eo_row(k, i - 2, v0, v1, v2, a1);
        }
        if (rows > 2) {
            a2 = eo_row(k, i - 4, v0, v1, v2, a2);
        }
        if (rows > 3) {
            a3 = eo_row(k, i - 6, v0, v1, v2, a3);
        }
    }
    const __m256 a[4] = { a0, a1, a2, a3 };
    float *q = d->o + y0 * ow + ox;
#pragma GCC unroll 4
    for (int r = 0; r < rows; r++) {
        const __m256 v = _mm256_add_ps(a[r], d->vb);
        _mm256_storeu_ps(q + r * ow, _mm256_min_ps(d->hi, _mm256_max_ps(d->lo, v)));
    }
}

/* Output rows y0 .. y0 + rows - 1 across the row: the block at column 0, blocks of eight, and the
 * block of the last eight columns (overlapping the one before when ow is no multiple of eight;
 * the columns both hold get the same sums twice). */
static inline __attribute__((always_inline)) void eo_run(const dw_plane *d, int64_t y0,
                                                         const int rows, const bool checked)
{
    const __m256 k[9] = { d->k0, d->k1, d->k2, d->k3, d->k4, d->k5, d->k6, d->k7, d->k8 };
    const int64_t ow = d->ow;
    eo_block(d, k, y0, 0, rows, true, checked);
    for (int64_t ox = 8; ox + 8 < ow; ox += 8) {
        eo_block(d, k, y0, ox, rows, false, checked);
    }
    if (ow > 8) {
        eo_block(d, k, y0, ow - 8, rows, false, checked);
    }
}

#define EO_RUN(R)                                                                                  \
    static __attribute__((noinline)) void eo_run##R(const dw_plane *d, int64_t y0, bool checked)   \
    {                                                                                              \
        if (checked) {                                                                             \
            eo_run(d, y0, R, true);                                                                \
        } else {                                                                                   \
            eo_run(d, y0, R, false);                                                               \
        }                                                                                          \
    }
EO_RUN(1)
EO_RUN(2)
EO_RUN(3)
EO_RUN(4)

/* A channel's output rows [y0, y1) from its band, four at a time (a last run of fewer). */
static void eo_rows(const dw_plane *d, int64_t y0, int64_t y1)
{
    static void (*const runs[4])(const dw_plane *, int64_t, bool) = { eo_run1, eo_run2, eo_run3,
                                                                      eo_run4 };
    for (int64_t y = y0; y < y1; y += 4) {
        const int rows = y1 - y < 4 ? (int)(y1 - y) : 4;
        runs[rows - 1](d, y, 2 * y - 1 < 0 || 2 * (y + rows) - 1 >= d->h);
    }
}

void ki_conv2d_dw3_band_eo_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                                int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                                int64_t y1, float *restrict out)
{
    dw3_band(c, g, band, row0, cstride, c0, c1, y0, y1, out, eo_rows);
}
