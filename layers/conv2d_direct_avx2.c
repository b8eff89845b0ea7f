/* conv2d_direct_avx2.c - the AVX2 row kernel of the direct path (conv2d_direct.c). A row goes in
 * chunks of up to CHUNK output columns: the input rows a chunk reads are first copied to the stack,
 * zero-padded past either end and, at stride 2, split into their even and odd columns, so that
 * every kernel tap reads its columns as plain consecutive vectors. The chunk is then computed in
 * blocks of four output channels by three vectors of eight columns: per tap three loads and four
 * broadcasts feed twelve named accumulators (the sixteen ymm registers hold them, the three inputs
 * and a broadcast; a broadcast per FMA, as with eight channels by one vector, would leave the
 * loads, not the FMAs, the limit). Taps are summed in the order (input channel, ky, kx), as the
 * reference does. Compiled with -mavx2 -mfma; chosen only when the CPU has them
 * (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx2.h"
#include "vexp_avx2.h"

#define OC_GROUP 4   /* output channels a block */
#define NV_MAX   3   /* column vectors a block */
#define CHUNK    120 /* output columns a chunk: 5 blocks (docs/performance.md) */
/* Floats of one staged input row: at stride 2 its even columns, then from PAR its odd ones. */
#define PAR      (CHUNK + KI_DIRECT_MAX_K)
#define TAP_ROWS (KI_DIRECT_MAX_IN * KI_DIRECT_MAX_K)

/* The input row r (w columns) from column b as the taps of a chunk read it (n staged columns,
 * per parity at stride 2): d[j] = r[b + j], or at stride 2 d[j] = r[b + 2j] and
 * d[PAR + j] = r[b + 2j + 1]; zero outside the row. */
static void stage(const float *r, int64_t b, int64_t w, int s, int64_t n, float *restrict d)
{
    int64_t j = 0;
    if (s == 1) {
        for (; j < n && b + j < 0; j++) {
            d[j] = 0.0f;
        }
        for (; j + 8 <= n && b + j + 8 <= w; j += 8) {
            _mm256_storeu_ps(d + j, _mm256_loadu_ps(r + b + j));
        }
        for (; j < n; j++) {
            d[j] = b + j < w ? r[b + j] : 0.0f;
        }
        return;
    }
    for (; j < n && b + 2 * j < 0; j++) { /* b + 2j + 1 is at most 0 there */
        d[j] = 0.0f;
        d[PAR + j] = b + 2 * j + 1 == 0 ? r[0] : 0.0f;
    }
    for (; j + 8 <= n && b + 2 * j + 16 <= w; j += 8) {
        const __m256 lo = _mm256_loadu_ps(r + b + 2 * j), hi = _mm256_loadu_ps(r + b + 2 * j + 8);
        _mm256_storeu_ps(d + j, ki_deint8(lo, hi, 0));
        _mm256_storeu_ps(d + PAR + j, ki_deint8(lo, hi, 1));
    }
    for (; j < n; j++) {
        d[j] = b + 2 * j < w ? r[b + 2 * j] : 0.0f;
        d[PAR + j] = b + 2 * j + 1 < w ? r[b + 2 * j + 1] : 0.0f;
    }
}

/* a_o_v += w[o] * v_v for channel o of a block and its NV vectors: one broadcast live at a time
 * (twelve accumulators, three inputs and it fill the sixteen registers). */
#define TAP1(o, w)                                                                                 \
    do {                                                                                           \
        const __m256 w_ = _mm256_broadcast_ss(w);                                                  \
        a##o##0 = _mm256_fmadd_ps(w_, v0, a##o##0);                                                \
        if (NV > 1) {                                                                              \
            a##o##1 = _mm256_fmadd_ps(w_, v1, a##o##1);                                            \
        }                                                                                          \
        if (NV > 2) {                                                                              \
            a##o##2 = _mm256_fmadd_ps(w_, v2, a##o##2);                                            \
        }                                                                                          \
    } while (0)

/* The sums of a whole block (OC_GROUP channels by NV_MAX vectors) to d's rows of channels oc0..
 * at column ox, through store8's steps (d->fin NULL: as they are) and then act (NULL: none), the
 * bounds broadcast once and the bias once a channel. */
static inline __attribute__((always_inline)) void store_whole(const ki_conv2d_direct_dst *d,
                                                              const __m256 sums[OC_GROUP][NV_MAX],
                                                              int64_t oc0, int64_t ox,
                                                              const ki_act *act)
{
    const ki_gemm_fin *f = d->fin;
    const __m256 lo = _mm256_set1_ps(f ? f->lo : 0.0f), hi = _mm256_set1_ps(f ? f->hi : 0.0f);
#pragma GCC unroll 4
    for (int o = 0; o < OC_GROUP; o++) {
        float *q = d->dst + (oc0 + o) * d->cstride + ox;
        const __m256 b = _mm256_set1_ps(f && f->bias ? f->bias[oc0 + o] : 0.0f);
#pragma GCC unroll 3
        for (int v = 0; v < NV_MAX; v++) {
            __m256 y = sums[o][v];
            if (f) {
                y = _mm256_min_ps(hi, _mm256_max_ps(lo, _mm256_add_ps(y, b)));
                y = act ? ki_vact_avx2(act, y) : y;
            }
            _mm256_storeu_ps(q + 8 * v, y);
        }
    }
}

/* The sums of one block: four channels (weights wg: tap t at wg + t * KI_DIRECT_OC) by NV vectors
 * of columns, reading the staged rows st[i] (tap row ti[i], i < nrows) from column x0; into
 * acc[o][v], or with `full` (a whole block: NV_MAX vectors, OC_GROUP channels; no residual)
 * stored to full's rows by store_whole (through acc and store8 per vector, the stores took about
 * a tenth of a 3x3 stem's time; docs/performance.md). */
static inline __attribute__((always_inline)) void
block(const float (*st)[2 * PAR], const int64_t *ti, int64_t nrows, const float *wg, int64_t x0,
      const int s, const int64_t kw, const int NV, __m256 acc[OC_GROUP][NV_MAX],
      const ki_conv2d_direct_dst *full, int64_t oc0, int64_t ox)
{
    __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a10 = a00, a11 = a00, a12 = a00;
    __m256 a20 = a00, a21 = a00, a22 = a00, a30 = a00, a31 = a00, a32 = a00;
    for (int64_t i = 0; i < nrows; i++) {
        const float *r = st[i] + x0, *wt = wg + ti[i] * kw * KI_DIRECT_OC;
#pragma GCC unroll 8
        for (int64_t kx = 0; kx < kw; kx++) {
            const float *p = r + (s == 2 ? (kx & 1) * PAR + (kx >> 1) : kx);
            const __m256 v0 = _mm256_loadu_ps(p);
            const __m256 v1 = NV > 1 ? _mm256_loadu_ps(p + 8) : v0;
            const __m256 v2 = NV > 2 ? _mm256_loadu_ps(p + 16) : v0;
            const float *wk = wt + kx * KI_DIRECT_OC;
            TAP1(0, wk + 0);
            TAP1(1, wk + 1);
            TAP1(2, wk + 2);
            TAP1(3, wk + 3);
        }
    }
    if (NV == NV_MAX && full) {
        const __m256 sums[OC_GROUP][NV_MAX] = {
            { a00, a01, a02 }, { a10, a11, a12 }, { a20, a21, a22 }, { a30, a31, a32 }
        };
        /* the activation's kind a constant in each copy (as store_block) */
        const ki_act_kind k = full->act ? full->act->kind : KI_ACT_NONE;
        if (k == KI_ACT_HARDSWISH) {
            const ki_act hs = { KI_ACT_HARDSWISH, 0.0f, 0.0f };
            store_whole(full, sums, oc0, ox, &hs);
        } else if (k == KI_ACT_HARDSIGMOID) {
            const ki_act hg = { KI_ACT_HARDSIGMOID, 0.0f, 0.0f };
            store_whole(full, sums, oc0, ox, &hg);
        } else if (k == KI_ACT_LEAKY_RELU) {
            const ki_act lr = { KI_ACT_LEAKY_RELU, full->act->a, 0.0f };
            store_whole(full, sums, oc0, ox, &lr);
        } else {
            store_whole(full, sums, oc0, ox, full->act);
        }
        return;
    }
    acc[0][0] = a00, acc[0][1] = a01, acc[0][2] = a02, acc[1][0] = a10, acc[1][1] = a11;
    acc[1][2] = a12, acc[2][0] = a20, acc[2][1] = a21, acc[2][2] = a22, acc[3][0] = a30;
    acc[3][1] = a31, acc[3][2] = a32;
}

/* block() with the stride, the vector count and, for the common stems, the kernel width as
 * constants (KW 0: kw at run time), each a function of its own: GCC allocates the registers of
 * each loop alone, where with every copy inlined into one function a change elsewhere in it
 * reshaped the loops (one way the 7x7 stem 3 % slower, the other the 6x6 one 13 %;
 * docs/performance.md). */
#define BLOCK_FN(S, KW, NV)                                                                        \
    static __attribute__((noinline)) void block_##S##_##KW##_##NV(                                 \
        const float(*st)[2 * PAR], const int64_t *ti, int64_t nrows, const float *wg, int64_t x0,  \
        int64_t kw, __m256 acc[OC_GROUP][NV_MAX], const ki_conv2d_direct_dst *full, int64_t oc0,   \
        int64_t ox)                                                                                \
    {                                                                                              \
        block(st, ti, nrows, wg, x0, S, KW ? KW : kw, NV, acc, full, oc0, ox);                     \
    }
#define BLOCK_FNS(S, KW) BLOCK_FN(S, KW, 1) BLOCK_FN(S, KW, 2) BLOCK_FN(S, KW, 3)
BLOCK_FNS(2, 3)
BLOCK_FNS(2, 6)
BLOCK_FNS(2, 7)
BLOCK_FNS(2, 0)
BLOCK_FNS(1, 0)

typedef void (*block_fn)(const float (*st)[2 * PAR], const int64_t *ti, int64_t nrows,
                         const float *wg, int64_t x0, int64_t kw, __m256 acc[OC_GROUP][NV_MAX],
                         const ki_conv2d_direct_dst *full, int64_t oc0, int64_t ox);

/* The block function for stride s, kernel width kw and nv vectors (1..NV_MAX). */
static block_fn block_for(int s, int64_t kw, int nv)
{
    static const block_fn fns[5][NV_MAX] = { { block_2_3_1, block_2_3_2, block_2_3_3 },
                                             { block_2_6_1, block_2_6_2, block_2_6_3 },
                                             { block_2_7_1, block_2_7_2, block_2_7_3 },
                                             { block_2_0_1, block_2_0_2, block_2_0_3 },
                                             { block_1_0_1, block_1_0_2, block_1_0_3 } };
    const int r = s != 2 ? 4 : kw == 3 ? 0 : kw == 6 ? 1 : kw == 7 ? 2 : 3;
    return fns[r][nv - 1];
}

/* Stores the first `lanes` lanes of v to d after the epilogue f (NULL: none): + bias b, + the
 * residual res (NULL for none), then min(hi, max(lo, v)), which keeps a NaN v as the scalar form
 * does, then act (NULL: none). A row's last part (squeezenet's 111 columns: 7) by plain stores of
 * 4, 2 and 1 floats, not a masked store, which AMD's Zen cores run as microcode. */
static inline __attribute__((always_inline)) void store8(float *d, int64_t lanes, __m256 v,
                                                         const ki_gemm_fin *f, float b,
                                                         const float *res, const ki_act *act)
{
    if (f) {
        v = _mm256_add_ps(v, _mm256_set1_ps(b));
        if (res) {
            v = _mm256_add_ps(v, lanes == 8 ? _mm256_loadu_ps(res)
                                            : _mm256_maskload_ps(res, ki_lanes_in8(0, lanes)));
        }
        v = _mm256_min_ps(_mm256_set1_ps(f->hi), _mm256_max_ps(_mm256_set1_ps(f->lo), v));
        v = act ? ki_vact_avx2(act, v) : v;
    }
    ki_store_first8(d, v, lanes); /* a plain store for all eight */
}

/* The block's sums acc of channels oc0 .. oc0 + noc - 1 at the nx columns from ox to d, through
 * activation act (NULL: none). */
static inline __attribute__((always_inline)) void
store_block_act(const ki_conv2d_direct_dst *d, __m256 acc[OC_GROUP][NV_MAX], int64_t oc0,
                int64_t noc, int64_t ox, int64_t nx, const ki_act *act)
{
    for (int v = 0; 8 * v < nx; v++) {
        const int64_t lanes = nx - 8 * v < 8 ? nx - 8 * v : 8;
        for (int64_t o = 0; o < noc; o++) {
            const int64_t at = (oc0 + o) * d->cstride + ox + 8 * v;
            const float b = d->fin && d->fin->bias ? d->fin->bias[oc0 + o] : 0.0f;
            store8(d->dst + at, lanes, acc[o][v], d->fin, b, d->res ? d->res + at : NULL, act);
        }
    }
}

/* store_block_act with d's activation, its kind a constant (the formula's switch then folds away:
 * taken per vector, mobilenet_v3_small's stem with its Hardswish was slower in registers than
 * after the store). */
static void store_block(const ki_conv2d_direct_dst *d, __m256 acc[OC_GROUP][NV_MAX], int64_t oc0,
                        int64_t noc, int64_t ox, int64_t nx)
{
    const ki_act_kind k = d->act ? d->act->kind : KI_ACT_NONE;
    if (k == KI_ACT_HARDSWISH) {
        const ki_act a = { KI_ACT_HARDSWISH, 0.0f, 0.0f };
        store_block_act(d, acc, oc0, noc, ox, nx, &a);
    } else if (k == KI_ACT_HARDSIGMOID) {
        const ki_act a = { KI_ACT_HARDSIGMOID, 0.0f, 0.0f };
        store_block_act(d, acc, oc0, noc, ox, nx, &a);
    } else if (k == KI_ACT_LEAKY_RELU) {
        const ki_act a = { KI_ACT_LEAKY_RELU, d->act->a, 0.0f };
        store_block_act(d, acc, oc0, noc, ox, nx, &a);
    } else {
        store_block_act(d, acc, oc0, noc, ox, nx, d->act);
    }
}

/* Stages the input rows the chunk of output columns from ox (n of them) reads into st: the tap
 * rows inside the image, their indices into ti; returns how many. */
static int64_t stage_rows(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t oy,
                          int64_t ox, int64_t n, float (*st)[2 * PAR], int64_t *ti)
{
    const int64_t h = g->in.h, w = g->in.w, s = c->sw, b = ox * s - c->pl;
    /* columns a tap row gives the chunk, per parity at stride 2 */
    /* the blocks' vectors cover n rounded up to 8; tap kx reads from kx (kx / 2 of a parity) */
    const int64_t span = (n + 7) / 8 * 8 + (s == 2 ? (c->kw - 1) / 2 : c->kw - 1);
    int64_t nrows = 0;
    for (int64_t ic = 0; ic < c->in_ch; ic++) {
        for (int64_t ky = 0; ky < c->kh; ky++) {
            const int64_t iy = oy * c->sh - c->pt + ky;
            if (iy >= 0 && iy < h) {
                stage(x + (ic * h + iy) * w, b, w, (int)s, span, st[nrows]);
                ti[nrows++] = ic * c->kh + ky;
            }
        }
    }
    return nrows;
}

void ki_conv2d_direct_row_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                               const float *wp, int64_t oy, const ki_conv2d_direct_dst *d)
{
    const int64_t ow = g->ow, k = c->in_ch * c->kh * c->kw, kw = c->kw;
    const int s = (int)c->sw;
    float st[TAP_ROWS][2 * PAR];
    int64_t ti[TAP_ROWS];
    for (int64_t ox0 = 0; ox0 < ow; ox0 += CHUNK) {
        const int64_t n = ow - ox0 < CHUNK ? ow - ox0 : CHUNK;
        const int64_t nrows = stage_rows(c, g, x, oy, ox0, n, st, ti);
        for (int64_t oc0 = 0; oc0 < c->out_ch; oc0 += OC_GROUP) {
            const int64_t noc = c->out_ch - oc0 < OC_GROUP ? c->out_ch - oc0 : OC_GROUP;
            /* block oc0 / 16 of the packing, its channels from oc0 % 16 */
            const float *wg = wp + oc0 / KI_DIRECT_OC * k * KI_DIRECT_OC + oc0 % KI_DIRECT_OC;
            for (int64_t x0 = 0; x0 < n; x0 += 8 * NV_MAX) {
                const int64_t nx = n - x0 < 8 * NV_MAX ? n - x0 : 8 * NV_MAX;
                const int nv = (int)((nx + 7) / 8);
                /* a whole block without a residual stores itself */
                const bool whole = nx == 8 * NV_MAX && noc == OC_GROUP && !d->res;
                __m256 acc[OC_GROUP][NV_MAX];
                block_for(s, kw, nv)(st, ti, nrows, wg, x0, kw, acc, whole ? d : NULL, oc0,
                                     ox0 + x0);
                if (!whole) {
                    store_block(d, acc, oc0, noc, ox0 + x0, nx);
                }
            }
        }
    }
}
