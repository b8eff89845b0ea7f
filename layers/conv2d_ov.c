/* conv2d_ov.c - the OV path of nn.Conv2d (see conv2d.h): weights repacked once into blocks of
 * KI_OV_MV output channels, column blocks of the pixels packed per run, and a micro-kernel that
 * keeps a KI_OV_MV x pw output tile in registers over one k block. k blocks are outermost: the
 * team's packed columns of one k block stay in cache while each thread streams its share of the
 * weights once, and each thread's partial tiles wait in its own slice of the workspace. Every
 * tile is computed by the same operations whatever the thread count, so results do not depend
 * on it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../core/team.h"
#include "conv2d.h"

bool ki_conv2d_ov_shape_ok(const ki_conv2d *c)
{
    return c->groups == 1;
}

int64_t ki_conv2d_ov_pw_equal(int64_t n)
{
    if (n <= 1) {
        return 1;
    }
    int64_t blocks = (n + KI_OV_PW_MAX - 1) / KI_OV_PW_MAX;
    return (n + blocks - 1) / blocks;
}

int64_t ki_conv2d_ov_pw(const ki_conv2d *c, int64_t n)
{
    return c->ov_pw ? c->ov_pw(n) : ki_conv2d_ov_pw_equal(n);
}

int64_t ki_conv2d_ov_blocks(int64_t n)
{
    return (n + KI_OV_PW_MAX - 1) / KI_OV_PW_MAX; /* ceil(n / pw) of either cut */
}

/* blk[q][r] = weight (o = ob * 32 + r, k0 + q), zero past out_ch, for every k and channel block:
 * the layout of ki_conv2d.ov_a (STORE writes one element). */
#define OV_REPACK(STORE)                                                                           \
    for (int64_t k0 = 0; k0 < k; k0 += KI_OV_KC) {                                                 \
        int64_t kc = k - k0 < KI_OV_KC ? k - k0 : KI_OV_KC;                                        \
        for (int64_t ob = 0; ob < nob; ob++) {                                                     \
            int64_t at = ki_ov_block_at(k0, kc, nob, ob);                                          \
            for (int64_t r = 0; r < KI_OV_MV; r++) {                                               \
                int64_t o = ob * KI_OV_MV + r;                                                     \
                for (int64_t q = 0; q < kc; q++) {                                                 \
                    float v = o < oc ? c->weight[o * k + k0 + q] : 0.0f;                           \
                    STORE(at + q * KI_OV_MV + r, v);                                               \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

ki_status ki_conv2d_ov_prepare(ki_conv2d *c, bool half, ki_error *err)
{
    int64_t k = c->in_ch * c->kh * c->kw, oc = c->out_ch, nob = (oc + KI_OV_MV - 1) / KI_OV_MV;
    size_t bytes, nw;
    float *a;
    uint16_t h;
    if (!c->weight || !ki_conv2d_ov_shape_ok(c) || !ki_ckd_mul(&nw, (size_t)oc, (size_t)k)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a one-group convolution with weights");
    }
    for (size_t i = 0; i < nw && half; i++) {
        half = ki_half_exact(c->weight[i], &h);
    }
    /* binary16: half the floats of the same block count (KI_OV_MV is even) */
    ki_status st = ki_conv2d_alloc_weights((size_t)nob, half ? KI_OV_MV / 2 : KI_OV_MV, (size_t)k,
                                           "repacked weights", &a, &bytes, err);
    if (st != KI_OK) {
        return st;
    }
    free(c->ov_a);
    free(c->ov_h);
    c->ov_a = NULL, c->ov_h = NULL;
    if (half) {
        uint16_t *ah = (uint16_t *)(void *)a;
#define STORE_H(i, v) ki_half_exact(v, &ah[i])
        OV_REPACK(STORE_H)
#undef STORE_H
        c->ov_h = ah;
    } else {
#define STORE_F(i, v) a[i] = (v)
        OV_REPACK(STORE_F)
#undef STORE_F
        c->ov_a = a;
    }
    return KI_OK;
}

/* Whether the column blocks are packed: a 1x1 stride-1 unpadded layer reads them in place (the
 * input's planes are the rows of its column matrix). */
static bool ov_packs(const ki_conv2d *c)
{
    return !ki_conv2d_is_pointwise(c);
}

/* How the tiles (channel block ob x pixel block pb) are shared by nt threads. Each thread takes
 * one part: by channels, a contiguous run of tiles in (ob, pb) order (the thread streams its share
 * of the weights once), or, when the column matrix is the larger operand (more pixels than output
 * channels), by pixels: a run of pixel blocks for every channel block, so a thread reads only its
 * own pixels, which the layer before it mostly wrote from the same core, and packs them itself.
 * By pixels the blocks are narrowed so that their count divides evenly between the threads (so
 * never with a fused global mean). */
typedef struct ov_layout {
    int64_t pw, nb, nob;
    bool by_pixels;
} ov_layout;

static ov_layout ov_layout_of(const ki_conv2d *c, const ki_conv2d_geom *g, int nt)
{
    int64_t n = g->oh * g->ow;
    ov_layout l = { ki_conv2d_ov_pw(c, n), ki_conv2d_ov_blocks(n),
                    (c->out_ch + KI_OV_MV - 1) / KI_OV_MV, false };
    /* not with a fused global mean, whose sums per pixel block then would depend on nt */
    if (nt > 1 && n > c->out_ch && l.nb >= nt && !c->gap) {
        int64_t want = (l.nb + nt - 1) / nt * nt, pw = (n + want - 1) / want;
        if (pw >= KI_OV_PW_MAX / 2 && (n + pw - 1) / pw == want) {
            l.pw = pw;
            l.nb = want;
        }
        l.by_pixels = true;
    }
    return l;
}

/* Part p of nt: tiles [*i0, *i1) by channels, pixel blocks [*q0, *q1) of every channel block by
 * pixels; returns the part's tile count. */
static int64_t ov_part(const ov_layout *l, int64_t p, int64_t nt, int64_t *i0, int64_t *q0,
                       int64_t *q1)
{
    if (l->by_pixels) {
        *q0 = l->nb * p / nt;
        *q1 = l->nb * (p + 1) / nt;
        *i0 = 0;
        return l->nob * (*q1 - *q0);
    }
    int64_t tiles = l->nob * l->nb;
    *i0 = tiles * p / nt;
    *q0 = *q1 = 0;
    return tiles * (p + 1) / nt - *i0;
}

/* Whether a layer split by channels runs channel block by channel block (ov_blocks_run): when its
 * column matrix (k x the pixels, packed or in place) takes at most half of L2, so that every
 * channel block can read all of it from there. Each thread then takes items (whole channel
 * blocks, or segments of them: ov_segments) as they come free (ki_share) and runs each over all
 * its k blocks with the item's partial tiles (a pixel block each) in L1, instead of a fixed half
 * of the (channel block, pixel block) tiles, k block by k block, with the partial tiles of all of
 * them (squeezenet's classifier: 368 KB a thread) in L2. A thread that another process slows
 * leaves its last items to the other. The same micro-kernel calls for every tile in the same k
 * order, so the same bits. Otherwise (yolov5s's 20x20 layers: columns of 1.6 to 3.7 MB) the k
 * blocks stay outermost: a k block of the columns then serves every channel block from L2. */
static bool ov_by_blocks(const ki_conv2d *c, const ov_layout *l, int64_t n)
{
    int64_t cols; /* the tiles read n columns (a short last block none past its pixels) */
    return !l->by_pixels && ki_ckd_mul_i64(&cols, c->in_ch * c->kh * c->kw, n) &&
           cols <= (int64_t)(ki_cpu_get()->l2 / 2 / sizeof(float));
}

/* Bytes of the packed column blocks of one image (shared by the team; 0 when not packed) and of
 * one part's partial tiles (the largest); false on overflow. With one k block a tile is stored
 * as soon as it is computed, so the part needs one slot, which stays in L1 (a slot per tile
 * spread the stores over up to 160 KB, partly lines the layer before had written on the other
 * core: mobilenet_v2's 64 -> 384 at 14x14, 2 threads, 68 -> 60 us; docs/performance.md). */
static bool ov_sizes(const ki_conv2d *c, const ki_conv2d_geom *g, int nt, size_t *cols,
                     size_t *part)
{
    int64_t k = c->in_ch * c->kh * c->kw;
    ov_layout l = ov_layout_of(c, g, nt);
    int64_t i0, q0, q1, mine = 0;
    for (int p = 0; p < nt; p++) {
        int64_t m = ov_part(&l, p, nt, &i0, &q0, &q1);
        mine = m > mine ? m : mine;
    }
    if (ov_by_blocks(c, &l, g->oh * g->ow)) { /* a channel block's tiles */
        mine = l.nb;
    }
    return ki_ckd_mul(cols, ov_packs(c) ? (size_t)l.nb : 0, (size_t)l.pw) &&
           ki_ckd_mul(cols, *cols, (size_t)k) && ki_ckd_mul(cols, *cols, sizeof(float)) &&
           *cols < SIZE_MAX / 2 &&
           ki_ckd_mul(part, k > KI_OV_KC ? (size_t)mine : 1,
                      (size_t)l.pw * KI_OV_MV * sizeof(float)) &&
           *part < SIZE_MAX / 2 / (size_t)nt;
}

/* Whether a layer runs split over k: a 1x1 layer read in place (the planes are the column
 * matrix's rows) whose input channels come in two halves.
 * Split by pixels, each thread read every input channel at its pixels, half of them written on
 * the other core by the layer before (a depthwise layer or an expansion splits by channels), and
 * a two-thread run of such a layer in the network took as long as one thread (384 -> 64 at
 * 14x14: 58 us either way; 34 us when its input was not freshly written; docs/performance.md).
 * Split over k, half h of the input channels gives partial tiles P_h for every output, which
 * the thread that wrote those channels computes; then P_0 + P_1 per value, the bias, the clamp
 * and the store. Every value is that same sum whatever the thread count (one thread computes
 * both halves), so results still do not depend on it. Chosen from the shape alone, and only
 * where the two halves' partial sums (2 x out_ch x n floats) are at most half the input
 * (k x n): mobilenet's projections (k / out_ch of 4.5-6) gain, YOLOv8's 1x1 layers at 20x20
 * (k / out_ch 1-2, 0.8 MB of partials) lost 6-19 % (docs/performance.md). Also only with more
 * pixels than output channels: fewer (7x7 projections) go by channel blocks, each thread reading
 * every input channel, which in the network, compared on one session, is faster than split over k
 * (2 threads, medians: mobilenet_v2's 960 -> 160 0.18-0.22 -> 0.13-0.17 ms at avx2, 0.137 ->
 * 0.112 at avx512; mobilenet_v3_small's 576 -> 96 0.082 -> 0.070 at avx2, 0.051 -> 0.038 at
 * avx512); the tenth session had found the opposite on another CPU. */
static bool ov_split_k(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    return ki_conv2d_is_pointwise(c) && c->in_ch >= KI_OV_SPLITK_MIN && 4 * c->out_ch <= c->in_ch &&
           g->oh * g->ow > c->out_ch;
}

/* The split-k layout: pixel blocks of pw (nb of them), nob channel blocks, and the floats of one
 * half's partial tiles (nob * nb tiles of pw x KI_OV_MV); false on overflow. */
static bool splitk_sizes(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t *pw, int64_t *nb,
                         int64_t *nob, size_t *half)
{
    const int64_t n = g->oh * g->ow;
    *pw = ki_conv2d_ov_pw(c, n);
    *nb = ki_conv2d_ov_blocks(n);
    *nob = (c->out_ch + KI_OV_MV - 1) / KI_OV_MV;
    return ki_ckd_mul(half, (size_t)*nob * (size_t)*nb, (size_t)*pw * KI_OV_MV) &&
           *half < SIZE_MAX / 16;
}

/* Per part (one per thread): its share of the packed columns (which span the slices one after
 * another) and its partial tiles; split over k, a share of the two halves' partial tiles. */
size_t ki_conv2d_ov_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads)
{
    int nt = n_threads > 0 ? n_threads : 1;
    size_t cols, part;
    if (ov_split_k(c, g)) { /* the two halves' partial tiles, shared by the team */
        int64_t pw, nb, nob;
        size_t half;
        if (!splitk_sizes(c, g, &pw, &nb, &nob, &half)) {
            return 0;
        }
        return (2 * half * sizeof(float) + (size_t)nt - 1) / (size_t)nt / 64 * 64 + 128;
    }
    if (!ov_sizes(c, g, nt, &cols, &part)) {
        return 0;
    }
    return ((cols + (size_t)nt - 1) / (size_t)nt + 63) / 64 * 64 + (part + 63) / 64 * 64;
}

/* The plain micro-kernel on b's element (q, j) at b[q / g * ldb + j * g + q % g]: g 1, planes
 * (rows ldb apart); g 8, eight-channel groups (ki_ov_ukernel8_ref). */
static void ov_ref(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                   const float *bias, float lo, float hi, float *restrict t, int64_t g)
{
    if (!acc) {
        memset(t, 0, (size_t)pw * KI_OV_MV * sizeof *t);
    }
    for (int64_t q = 0; q < k; q++) {
        for (int j = 0; j < pw; j++) {
            float bv = b[q / g * ldb + j * g + q % g];
            for (int r = 0; r < KI_OV_MV; r++) {
                t[j * KI_OV_MV + r] += a[q * KI_OV_MV + r] * bv;
            }
        }
    }
    for (int i = 0; i < pw * KI_OV_MV; i++) {
        float v = bias ? t[i] + bias[i % KI_OV_MV] : t[i];
        v = lo > v ? lo : v; /* NaN kept, as the vector max/min keep it */
        t[i] = hi < v ? hi : v;
    }
}

void ki_ov_ukernel_ref(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                       const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf)
{
    (void)pf;
    ov_ref(k, a, b, pw, ldb, acc, bias, lo, hi, t, 1);
}

void ki_ov_ukernel8_ref(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                        const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf)
{
    (void)pf;
    ov_ref(k, a, b, pw, ldb, acc, bias, lo, hi, t, 8);
}

/* ki_ov_ukernel_ref on binary16 weights: each k block widened, then the float kernel (the bias
 * and clamp only after the last). */
void ki_ov_ukernel_h_ref(int64_t k, const uint16_t *a, const float *b, int pw, int64_t ldb,
                         bool acc, const float *bias, float lo, float hi, float *restrict t,
                         ki_ov_pf pf)
{
    (void)pf;
    float af[KI_OV_KC * KI_OV_MV];
    for (int64_t q0 = 0; q0 < k; q0 += KI_OV_KC) { /* the float kernel on widened pieces */
        int64_t kc = k - q0 < KI_OV_KC ? k - q0 : KI_OV_KC;
        for (int64_t i = 0; i < kc * KI_OV_MV; i++) {
            af[i] = ki_half_to_float(a[q0 * KI_OV_MV + i]);
        }
        bool end = q0 + kc >= k;
        ki_ov_ukernel_ref(kc, af, b + q0 * ldb, pw, ldb, acc || q0 > 0, end ? bias : NULL,
                          end ? lo : -INFINITY, end ? hi : INFINITY, t, KI_OV_NO_PF);
    }
}

/* How a tile is finished: clamp-type activations (none, ReLU, ReLU6, Hardtanh) take the bias
 * and, without a residual, the clamp in the micro-kernel; the residual and its clamp are added
 * at the transposing store. Other activations: raw sums stored, then the row epilogue. */
typedef struct ov_fin {
    bool clamp;
    float lo, hi;
} ov_fin;

void ki_ov_tile_store(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                      const float *res, float lo, float hi)
{
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < nr; j++) {
            float v = res ? t[j * KI_OV_MV + r] + res[r * ld + j] : t[j * KI_OV_MV + r];
            v = lo > v ? lo : v; /* NaN kept, as the vector max/min keep it */
            d[r * ld + j] = hi < v ? hi : v;
        }
    }
}

/* With a fused global mean (c->gap_sum): tile t's sums per channel over its nr pixels, in pixel
 * order (the same tiles, so the same sums, whatever the thread count), to gs[r * nb] for its rows
 * (gs: the image's sums at the tile's channel block and pixel block). */
static void ov_gap_sums(const float *t, int64_t rows, int64_t nr, float *gs, int64_t nb)
{
    float acc[KI_OV_MV] = { 0 };
    for (int64_t j = 0; j < nr; j++) {
#pragma GCC ivdep
        for (int r = 0; r < KI_OV_MV; r++) {
            acc[r] += t[j * KI_OV_MV + r];
        }
    }
    for (int64_t r = 0; r < rows; r++) {
        gs[r * nb] = acc[r];
    }
}

/* Writes tile t ([pw][MV], rows oc0..oc0+rows-1 of the output, pixels j0..j0+nr-1) into y
 * (row stride n) with the rest of the epilogue; with a fused global mean its sums into gs (the
 * image's, [out_ch][nb]; pixel block j0 / pw) instead. */
static void ov_store(const ki_conv2d *c, const ov_fin *f, const float *t, int64_t oc0, int64_t rows,
                     int64_t j0, int64_t nr, int64_t n, float *y, const float *res, float *gs,
                     int64_t pw, int64_t nb)
{
    if (gs) { /* the bias and the clamp are in t (ki_conv2d_gap_ok: no residual) */
        ov_gap_sums(t, rows, nr, gs + oc0 * nb + j0 / pw, nb);
        return;
    }
    float *d = y + oc0 * n + j0;
    const float *rr = res ? res + oc0 * n + j0 : NULL;
    if (f->clamp) { /* the bias is in t; the clamp too unless there is a residual */
        c->ov_st(t, rows, nr, d, n, rr, rr ? f->lo : -INFINITY, rr ? f->hi : INFINITY);
        return;
    }
    c->ov_st(t, rows, nr, d, n, NULL, -INFINITY, INFINITY); /* the rest: ov_epilogue */
}

/* The epilogue of the other activations over pixel blocks [p0, p1) of channel block ob of image y,
 * once they are stored: per channel one call over the blocks' pixel span. */
static void ov_epilogue(const ki_conv2d *c, int64_t ob, int64_t p0, int64_t p1, int64_t pw,
                        int64_t n, float *y, const float *res)
{
    int64_t j0 = p0 * pw, j1 = p1 * pw < n ? p1 * pw : n;
    for (int64_t oc = ob * KI_OV_MV; oc < (ob + 1) * KI_OV_MV && oc < c->out_ch && j1 > j0; oc++) {
        c->epf(&c->ep, res ? res + oc * n + j0 : NULL, oc, y + oc * n + j0, (size_t)(j1 - j0));
    }
}

/* Most offsets of one pixel block's taps a table holds (kh * kw * pw). */
#define OV_PACK_TAPS 1024

/* Columns j0..j0+nr of the column matrix (zero padding) into dst (row stride pw): the offset of
 * every (tap, pixel) in the input plane (-1 in the padding) computed once per block, then each
 * channel's rows gathered through it. At 7 x 7 a row of a block spans two output rows, so the
 * run-wise ki_conv2d_pack_cols made two library calls per ten floats. False (nothing written)
 * when the table would not fit. */
static bool ov_pack_small(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t j0,
                          int64_t nr, int64_t k, int64_t pw, float *restrict dst)
{
    const int64_t khw = c->kh * c->kw, hw = g->in.h * g->in.w, ow = g->ow;
    int32_t off[OV_PACK_TAPS];
    if (c->pad_mode != KI_CONV_PAD_ZEROS || khw * pw > OV_PACK_TAPS || hw > INT32_MAX) {
        return false;
    }
    for (int64_t t = 0; t < khw; t++) {
        const int64_t ky = t / c->kw, kx = t % c->kw;
        for (int64_t j = 0; j < pw; j++) {
            const int64_t oy = (j0 + j) / ow, ox = (j0 + j) % ow;
            const int64_t iy = oy * c->sh - c->pt + ky * c->dh,
                          ix = ox * c->sw - c->pl + kx * c->dw;
            const bool in = j < nr && iy >= 0 && iy < g->in.h && ix >= 0 && ix < g->in.w;
            off[t * pw + j] = in ? (int32_t)(iy * g->in.w + ix) : -1;
        }
    }
    for (int64_t r0 = 0; r0 < k; r0 += khw) {
        const float *plane = x + r0 / khw * hw;
        float *d = dst + r0 * pw;
        for (int64_t i = 0; i < khw * pw; i++) {
            d[i] = off[i] >= 0 ? plane[off[i]] : 0.0f;
        }
    }
    return true;
}

static void ov_pack(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t j0,
                    int64_t nr, int64_t k, int64_t pw, float *restrict dst)
{
    if (!ov_pack_small(c, g, x, j0, nr, k, pw, dst)) {
        ki_conv2d_pack_cols(c, g, true, x, j0, nr, k, pw, dst);
    }
}

/* Floats of a part's pixels (over all input channels) prefetched at once: half of one core's L2
 * (128 Ki floats on the 1 MiB L2 where it was timed). */
#define KI_OV_PREFETCH_ALL ((int64_t)(ki_cpu_get()->l2 / 2 / sizeof(float)))

/* Where the micro-kernel reads image x's column block from input channel k0 (in place) and pixel
 * j0, and the stride *ldb it takes: the planes (rows hw apart), or with c->in8 eight-channel
 * groups (ki_ov_ukernel8: 8 hw apart, a pixel's eight channels together; k0 a multiple of 8). */
static const float *ov_cols(const ki_conv2d *c, const float *x, int64_t hw, int64_t k0, int64_t j0,
                            int64_t *ldb)
{
    *ldb = c->in8 ? 8 * hw : hw;
    return x + k0 * hw + (c->in8 ? j0 * 8 : j0);
}

static ki_ov_ukernel ov_kernel(const ki_conv2d *c)
{
    return c->in8 ? c->ov_uk8 : c->ov_uk;
}

/* Rows q0..q1-1 (stride ld) of cols floats at x into L2. */
static void prefetch_rows(const float *x, int64_t ld, int64_t q0, int64_t q1, int64_t cols)
{
    for (int64_t q = q0; q < q1; q++) {
        const char *r = (const char *)(x + q * ld);
        for (int64_t b = 0; b < cols * (int64_t)sizeof(float) + 63; b += 64) {
            __builtin_prefetch(r + b, 0, 2);
        }
    }
}

/* Input channels q0..q1-1 of pixels [j0, j1) of image x (in place) into L2, as ov_cols lays
 * them out. */
static void prefetch_cols(const ki_conv2d *c, const float *x, int64_t hw, int64_t q0, int64_t q1,
                          int64_t j0, int64_t j1)
{
    if (c->in8) {
        prefetch_rows(x + j0 * 8, 8 * hw, q0 / 8, (q1 + 7) / 8, (j1 - j0) * 8);
    } else {
        prefetch_rows(x + j0, hw, q0, q1, j1 - j0);
    }
}

/* The split-k run of image x into y (see ov_split_k): items (half, channel block, pixel block)
 * in that order, a contiguous share per thread (with two threads, each thread one half: the
 * input channels the layer before wrote on its core); then, after a barrier, each thread its
 * share of the pixel blocks: P_0 + P_1, the bias and clamp, the store, the other activations. */
static void ov_forward_split_k(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                               float *y, const float *res, float *gs, const ki_exec *ex,
                               const ki_part *me)
{
    const int64_t k = c->in_ch, hw = g->in.h * g->in.w, n = g->oh * g->ow, kh = k / 2;
    int64_t pw, nb, nob;
    size_t half;
    if (!splitk_sizes(c, g, &pw, &nb, &nob, &half)) {
        return;
    }
    float *const part =
        (float *)((char *)ex->workspace + (64 - (uintptr_t)ex->workspace % 64) % 64);
    ki_gemm_fin gf;
    const ov_fin f = { ki_gemm_fin_of(&c->ep, 0, NULL, &gf), gf.lo, gf.hi };
    const int64_t items = 2 * nob * nb;
    const int64_t tid = me->tid, nt = me->nt;
    const int64_t i0 = items * tid / nt, i1 = items * (tid + 1) / nt;
    /* k blocks outermost within a half (the weights' blocks of KI_OV_KC rows, cut at the
     * half), so a weight block serves the thread's pixel blocks from L1 */
    for (int h = 0; h < 2; h++) {
        const int64_t lo = h * nob * nb > i0 ? h * nob * nb : i0;
        const int64_t hi = (h + 1) * nob * nb < i1 ? (h + 1) * nob * nb : i1;
        const int64_t q0 = h ? kh : 0, q1 = h ? k : kh;
        for (int64_t kb = q0 / KI_OV_KC * KI_OV_KC; kb < q1 && lo < hi; kb += KI_OV_KC) {
            const int64_t kcb = k - kb < KI_OV_KC ? k - kb : KI_OV_KC; /* the block's rows */
            const int64_t s0 = kb > q0 ? kb : q0, s1 = kb + kcb < q1 ? kb + kcb : q1;
            for (int64_t it = lo; it < hi; it++) {
                const int64_t ob = it % (nob * nb) / nb, pb = it % nb;
                const int64_t j0 = pb * pw, nr = n - j0 < pw ? n - j0 : pw;
                const int64_t at = ki_ov_block_at(kb, kcb, nob, ob) + (s0 - kb) * KI_OV_MV;
                float *t = part + (size_t)h * half + (size_t)(ob * nb + pb) * (size_t)pw * KI_OV_MV;
                int64_t ldb;
                const float *b = ov_cols(c, x, hw, s0, j0, &ldb);
                if (c->ov_h) {
                    c->ov_ukh(s1 - s0, c->ov_h + at, b, (int)nr, ldb, s0 > q0, NULL, -INFINITY,
                              INFINITY, t, KI_OV_NO_PF);
                } else {
                    ov_kernel(c)(s1 - s0, c->ov_a + at, b, (int)nr, ldb, s0 > q0, NULL, -INFINITY,
                                 INFINITY, t, KI_OV_NO_PF);
                }
            }
        }
    }
    ki_part_sync(me);
    const int64_t p0 = nb * tid / nt, p1 = nb * (tid + 1) / nt;
    const bool kclamp = f.clamp && !res;
    /* without the clamp, max(-inf, v) and min(inf, v) give v itself (-0 and NaN too) */
    const float lo = kclamp ? f.lo : -INFINITY, hi = kclamp ? f.hi : INFINITY;
    for (int64_t ob = 0; ob < nob; ob++) {
        const int64_t oc0 = ob * KI_OV_MV;
        const int64_t rows = c->out_ch - oc0 < KI_OV_MV ? c->out_ch - oc0 : KI_OV_MV;
        const float *bias = f.clamp && c->ep.bias ? c->ep.bias + oc0 : NULL;
        float bv[KI_OV_MV]; /* the block's bias, zero past out_ch (lanes never stored) */
        for (int r = 0; r < KI_OV_MV; r++) {
            bv[r] = bias && r < rows ? bias[r] : 0.0f;
        }
        for (int64_t pb = p0; pb < p1; pb++) {
            const int64_t j0 = pb * pw, nr = n - j0 < pw ? n - j0 : pw;
            const size_t off = (size_t)(ob * nb + pb) * (size_t)pw * KI_OV_MV;
            float *t = part + off;
            const float *u = part + half + off;
            /* as the micro-kernel finishes a tile: the sum, + bias, max(lo, .), min(hi, .);
             * a pixel's 32 channels a loop the compiler vectorises (a scalar loop over the
             * tile took 15-23 us of a 55 us 384 -> 64 layer at 14x14) */
            for (int64_t j = 0; j < nr; j++) {
                float *tj = t + j * KI_OV_MV;
                const float *uj = u + j * KI_OV_MV;
                if (bias) {
#pragma GCC ivdep
                    for (int r = 0; r < KI_OV_MV; r++) {
                        const float v = tj[r] + uj[r] + bv[r], w = lo > v ? lo : v;
                        tj[r] = hi < w ? hi : w;
                    }
                } else {
#pragma GCC ivdep
                    for (int r = 0; r < KI_OV_MV; r++) {
                        const float v = tj[r] + uj[r], w = lo > v ? lo : v;
                        tj[r] = hi < w ? hi : w;
                    }
                }
            }
            ov_store(c, &f, t, oc0, rows, j0, nr, n, y, res, gs, pw, nb);
        }
        if (!f.clamp && p1 > p0) {
            ov_epilogue(c, ob, p0, p1, pw, n, y, res);
        }
    }
}

/* Items a layer run by channel blocks is shared in: each channel block whole, or cut into
 * KI_OV_ITEMS_PER_THREAD * nt items by its pixel blocks when there are fewer blocks than that
 * (mobilenet_v2's 960 -> 160 at 7x7: 5 blocks would go 3 and 2 to two threads). */
#define KI_OV_ITEMS_PER_THREAD 4
static int64_t ov_segments(const ov_layout *l, int nt)
{
    const int64_t want = KI_OV_ITEMS_PER_THREAD * (int64_t)nt, s = (want + l->nob - 1) / l->nob;
    return s < 1 ? 1 : s > l->nb ? l->nb : s;
}

/* One image of a run: the layer, how its tiles finish, the k rows of its column matrix (packed
 * in bp, pw a block, or read in place from x, hw a row), its n output pixels into y (residual
 * res). */
typedef struct ov_image {
    const ki_conv2d *c;
    const ov_fin *f;
    int64_t k, n, hw, pw;
    const float *x, *bp;
    bool packs;
    float *y;
    const float *res;
    float *gs; /* the image's sums of a fused global mean ([out_ch][nb]), or NULL */
    int64_t nb;
} ov_image;

/* The bias of channel block oc0 (rows channels) into buf, zero past them, where the micro-kernel
 * adds it (clamp-type finishes); else NULL. */
const float *ki_conv2d_ov_bias(const ki_conv2d *c, int64_t oc0, int64_t rows, float buf[KI_OV_MV])
{
    if (!c->ep.bias) {
        return NULL;
    }
    for (int64_t r = 0; r < KI_OV_MV; r++) {
        buf[r] = r < rows ? c->ep.bias[oc0 + r] : 0.0f;
    }
    return buf;
}

static const float *ov_block_bias(const ov_image *im, int64_t oc0, int64_t rows,
                                  float buf[KI_OV_MV])
{
    return im->f->clamp ? ki_conv2d_ov_bias(im->c, oc0, rows, buf) : NULL;
}

/* Tile (channel block oc0 of rows channels, pixel block pb): its k block of kc rows from k0 (the
 * weights at a) into t, with the bias and clamp after the last one, when it is also stored with
 * the rest of the epilogue; pf: lines to ask for meanwhile. */
static void ov_tile(const ov_image *im, const char *a, int64_t k0, int64_t kc, int64_t oc0,
                    int64_t rows, int64_t pb, const float *bias, float *t, ki_ov_pf pf)
{
    const ki_conv2d *c = im->c;
    const bool last = k0 + kc >= im->k, kclamp = last && im->f->clamp && !im->res;
    const float lo = kclamp ? im->f->lo : -INFINITY, hi = kclamp ? im->f->hi : INFINITY;
    const float *bv = last ? bias : NULL;
    /* the last block multiplies only its own pixels: in place there is nothing past them to read,
     * and packed, a block of one pixel after blocks of twelve (ki_conv2d_ov_pw) would cost a
     * whole tile of its zero padding */
    const int64_t j0 = pb * im->pw, nr = im->n - j0 < im->pw ? im->n - j0 : im->pw;
    int64_t ldb = im->pw;
    const float *b =
        im->packs ? im->bp + (pb * im->k + k0) * im->pw : ov_cols(c, im->x, im->hw, k0, j0, &ldb);
    if (c->ov_h) {
        c->ov_ukh(kc, (const uint16_t *)(const void *)a, b, (int)nr, ldb, k0 > 0, bv, lo, hi, t,
                  pf);
    } else {
        ov_kernel(c)(kc, (const float *)(const void *)a, b, (int)nr, ldb, k0 > 0, bv, lo, hi, t,
                     pf);
    }
    if (last) {
        ov_store(c, im->f, t, oc0, rows, j0, nr, im->n, im->y, im->res, im->gs, im->pw, im->nb);
    }
}

/* One image by channel blocks (ov_by_blocks): each thread takes items (a channel block, or a
 * segment of its pixel blocks: ov_segments) as they come free, and runs an item's k blocks in
 * order over its pixel blocks, their partial tiles in tp (a slot per pixel block); the next k
 * block's weights (the same channel block's; after the last, those of the next item) are asked
 * for a share per tile meanwhile. */
static void ov_blocks_run(const ov_image *im, const ov_layout *l, float *tp, const ki_part *me)
{
    const ki_conv2d *c = im->c;
    const int64_t k = im->k, nb = l->nb, nob = l->nob, segs = ov_segments(l, me->nt);
    const size_t esz = c->ov_h ? 2 : 4;
    const char *wa = c->ov_h ? (const char *)c->ov_h : (const char *)c->ov_a;
    ki_share_begin(me, nob * segs);
    for (int64_t it = ki_share_take(me->share, me->tid); it >= 0;
         it = ki_share_take(me->share, me->tid)) {
        const int64_t ob = it / segs, p0 = nb * (it % segs) / segs,
                      p1 = nb * (it % segs + 1) / segs;
        const int64_t oc0 = ob * KI_OV_MV;
        const int64_t rows = c->out_ch - oc0 < KI_OV_MV ? c->out_ch - oc0 : KI_OV_MV;
        float buf[KI_OV_MV];
        const float *bias = ov_block_bias(im, oc0, rows, buf);
        for (int64_t k0 = 0; k0 < k; k0 += KI_OV_KC) {
            const int64_t kc = k - k0 < KI_OV_KC ? k - k0 : KI_OV_KC;
            const bool last = k0 + kc >= k;
            const char *a = wa + (size_t)ki_ov_block_at(k0, kc, nob, ob) * esz;
            /* the weights of the next k block, or of the next item's first */
            const int64_t k1 = last ? 0 : k0 + kc, kc1 = k - k1 < KI_OV_KC ? k - k1 : KI_OV_KC;
            const int64_t ob1 = last ? (it + 1) / segs : ob;
            const char *nx = ob1 < nob ? wa + (size_t)ki_ov_block_at(k1, kc1, nob, ob1) * esz : a;
            const int64_t lines = ob1 < nob ? kc1 * KI_OV_MV * (int64_t)esz / 64 : 0;
            for (int64_t pb = p0; pb < p1; pb++) {
                const int64_t q0l = (pb - p0) * lines / (p1 - p0);
                const ki_ov_pf pf = { nx + q0l * 64, (pb - p0 + 1) * lines / (p1 - p0) - q0l };
                float *t = tp + (k > KI_OV_KC ? (pb - p0) * l->pw * KI_OV_MV : 0);
                ov_tile(im, a, k0, kc, oc0, rows, pb, bias, t, pf);
            }
        }
        if (!im->f->clamp) {
            ov_epilogue(c, ob, p0, p1, l->pw, im->n, im->y, im->res);
        }
    }
}

/* Image img's sums of a fused global mean (c->gap_sum: [image][out_ch][pixel block] for n
 * pixels an image), or NULL. */
static float *ov_gap_of(const ki_conv2d *c, int64_t img, int64_t n)
{
    return c->gap_sum ? c->gap_sum + img * c->out_ch * ki_conv2d_ov_blocks(n) : NULL;
}

/* Each image in turn, the team on it. */
static void ov_body(void *arg, const ki_part *me)
{
    const ki_conv2d_job *job = arg;
    const ki_conv2d *c = job->c;
    const ki_conv2d_geom *g = job->g;
    const float *in = job->in;
    float *out = job->out;
    const ki_exec *ex = job->ex;
    if (ov_split_k(c, g)) {
        const int64_t hw = g->in.h * g->in.w, n = g->oh * g->ow;
        for (int64_t img = 0; img < g->in.n; img++) {
            if (img > 0) {
                ki_part_sync(me); /* the image before is done with the partial sums */
            }
            ov_forward_split_k(
                c, g, in + img * c->in_ch * hw, c->gap_sum ? NULL : out + img * c->out_ch * n,
                c->res ? c->res + img * c->out_ch * n : NULL, ov_gap_of(c, img, n), ex, me);
        }
        return;
    }
    int64_t k = c->in_ch * c->kh * c->kw, hw = g->in.h * g->in.w, n = g->oh * g->ow;
    const ov_layout l = ov_layout_of(c, g, ex->n_threads);
    const int64_t pw = l.pw, nb = l.nb, nob = l.nob, parts_n = ex->n_threads;
    bool packs = ov_packs(c);
    ki_gemm_fin gf;
    ov_fin f = { ki_gemm_fin_of(&c->ep, 0, NULL, &gf), gf.lo, gf.hi };
    size_t cols, part;
    if (n == 0 || c->out_ch == 0 || !ov_sizes(c, g, ex->n_threads, &cols, &part)) {
        return;
    }
    float *bp = ex->workspace;
    /* the partial tiles after the columns: each part's slice holds (cols / nt) + part */
    char *parts = (char *)ex->workspace + (cols + 63) / 64 * 64;
    size_t part_stride = (part + 63) / 64 * 64;
    for (int64_t img = 0; img < g->in.n; img++) {
        const float *x = in + img * c->in_ch * hw;
        float *y = c->gap_sum ? NULL : out + img * c->out_ch * n;
        const float *res = c->res ? c->res + img * c->out_ch * n : NULL;
        if (img > 0) {
            ki_part_sync(me); /* the image before is done with the packed columns */
        }
        if (packs && !l.by_pixels) {
            int64_t pb0, pb1;
            ki_part_range(nb, me, &pb0, &pb1);
            for (int64_t pb = pb0; pb < pb1; pb++) {
                int64_t j0 = pb * pw, nr = n - j0 < pw ? n - j0 : pw;
                ov_pack(c, g, x, j0, nr, k, pw, bp + pb * k * pw);
            }
            ki_part_sync(me);
        }
        const ov_image im = { c, &f, k, n, hw, pw, x, bp, packs, y, res, ov_gap_of(c, img, n), nb };
        if (ov_by_blocks(c, &l, n)) {
            ov_blocks_run(&im, &l, (float *)(parts + (size_t)me->tid * part_stride), me);
            continue;
        }
        /* a thread per part (parts_n parts however many threads the team has) */
        for (int64_t pt = me->tid; pt < parts_n; pt += me->nt) {
            int64_t i0, q0, q1, cnt = ov_part(&l, pt, parts_n, &i0, &q0, &q1);
            float *tp = (float *)(parts + (size_t)pt * part_stride);
            float buf[KI_OV_MV];
            for (int64_t pb = q0; pb < q1 && packs; pb++) { /* by pixels: its own blocks */
                int64_t j0 = pb * pw, nr = n - j0 < pw ? n - j0 : pw;
                ov_pack(c, g, x, j0, nr, k, pw, bp + pb * k * pw);
            }
            /* by pixels, in place: the part's pixels of the next k block's rows, requested
             * a block ahead (the first at once); the layer before wrote half of them on the
             * other core, and the kernel's strided reads would fetch them a line at a time */
            const int64_t pj0 = q0 * pw, pj1 = q1 * pw < n ? q1 * pw : n;
            bool ahead = !packs && l.by_pixels && q1 > q0;
            if (ahead && k * (pj1 - pj0) <= KI_OV_PREFETCH_ALL) { /* all of it at once */
                prefetch_cols(c, x, hw, 0, k, pj0, pj1);
                ahead = false;
            } else if (ahead) {
                prefetch_cols(c, x, hw, 0, k < KI_OV_KC ? k : KI_OV_KC, pj0, pj1);
            }
            for (int64_t k0 = 0; k0 < k; k0 += KI_OV_KC) {
                int64_t kc = k - k0 < KI_OV_KC ? k - k0 : KI_OV_KC;
                const bool last = k0 + kc >= k;
                if (ahead && !last) {
                    prefetch_cols(c, x, hw, k0 + kc,
                                  k - k0 - kc < KI_OV_KC ? k : k0 + kc + KI_OV_KC, pj0, pj1);
                }
                for (int64_t u = 0; u < cnt; u++) {
                    int64_t ob, pb, span, at;
                    if (l.by_pixels) {
                        ob = u / (q1 - q0), pb = q0 + u % (q1 - q0);
                        span = q1 - q0, at = pb - q0;
                    } else {
                        ob = (i0 + u) / nb, pb = (i0 + u) % nb, span = nb, at = pb;
                    }
                    int64_t oc0 = ob * KI_OV_MV;
                    int64_t rows = c->out_ch - oc0 < KI_OV_MV ? c->out_ch - oc0 : KI_OV_MV;
                    float *t = tp + (k > KI_OV_KC ? u * pw * KI_OV_MV : 0);
                    const int64_t at_a = ki_ov_block_at(k0, kc, nob, ob);
                    const char *a =
                        c->ov_h ? (const char *)(c->ov_h + at_a) : (const char *)(c->ov_a + at_a);
                    /* the weights come from memory once per run, in blocks the hardware
                     * prefetchers do not follow: while this block serves the part's pixel
                     * blocks, fetch the next one (the next channel block's), a share per
                     * tile, spread over the tile's k loop (ki_ov_pf) */
                    const int64_t lines = kc * KI_OV_MV * (c->ov_h ? 2 : 4) / 64;
                    const int64_t q0l = at * lines / span;
                    const ki_ov_pf pf = { a + (lines + q0l) * 64, (at + 1) * lines / span - q0l };
                    ov_tile(&im, a, k0, kc, oc0, rows, pb,
                            last ? ov_block_bias(&im, oc0, rows, buf) : NULL, t, pf);
                }
            }
            if (!f.clamp && cnt > 0) {
                int64_t ob0 = l.by_pixels ? 0 : i0 / nb;
                int64_t ob1 = l.by_pixels ? nob : (i0 + cnt + nb - 1) / nb;
                for (int64_t ob = ob0; ob < ob1; ob++) {
                    int64_t p0 = q0, p1 = q1;
                    if (!l.by_pixels) {
                        ki_row_span(i0, i0 + cnt, ob, nb, &p0, &p1);
                    }
                    ov_epilogue(c, ob, p0, p1, pw, n, y, res);
                }
            }
        }
    }
}

void ki_conv2d_forward_ov(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex)
{
    ki_conv2d_job job = { c, g, in, out, ex, false };
    ki_team_run(ex, ov_body, &job);
}
