/* conv2d_wino.c - nn.Conv2d 3x3 stride 1 by Winograd F(4x4, 3x3) (36 multiplies per 4x4 output
 * tile and channel pair instead of 144) or F(2x2, 3x3) (16 instead of 36). The weights are
 * transformed once (ki_conv2d_wino_prepare, at create); each run transforms the input's tiles
 * (wino_xform.h), does the t^2 channel products per panel of KI_GEMM_NR tiles with the SGEMM
 * micro-kernels of gemm.h, and transforms them back into the output with the epilogue. Every tile
 * is computed the same way whatever the thread count, so results do not depend on it. Large
 * F(2x2) layers with small outputs keep their original weights and form U per block of input
 * channels during the products: as binary16 when all of them are such values (wino_h: a fifth
 * of float32 U's bytes to stream), else as float32 (wino_f: 9/16 of them). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../core/team.h"

#define KI_WINO_SUFFIX _ref
#include "wino_xform.h"

/* G of F(2x2, 3x3) and of F(4x4, 3x3): the weight transform U = G g G^T. */
static const double wino_g2[4][3] = {
    { 1.0, 0.0, 0.0 }, { 0.5, 0.5, 0.5 }, { 0.5, -0.5, 0.5 }, { 0.0, 0.0, 1.0 }
};
static const double wino_g4[6][3] = {
    { 1.0 / 4, 0.0, 0.0 },
    { -1.0 / 6, -1.0 / 6, -1.0 / 6 },
    { -1.0 / 6, 1.0 / 6, -1.0 / 6 },
    { 1.0 / 24, 1.0 / 12, 1.0 / 6 },
    { 1.0 / 24, -1.0 / 12, 1.0 / 6 },
    { 0.0, 0.0, 1.0 },
};

bool ki_conv2d_wino_shape_ok(const ki_conv2d *c)
{
    return c->kh == 3 && c->kw == 3 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 &&
           c->groups == 1 && c->pad_mode == KI_CONV_PAD_ZEROS;
}

int64_t ki_conv2d_wino_tiles(int64_t oh, int64_t ow, int m)
{
    return ((oh + m - 1) / m) * ((ow + m - 1) / m);
}

ki_status ki_conv2d_wino_prepare(ki_conv2d *c, int m, bool ov, ki_error *err)
{
    int64_t ic = c->in_ch, oc = c->out_ch, nob = (oc + KI_OV_MV - 1) / KI_OV_MV;
    int64_t rows = ov ? nob * KI_OV_MV : oc;
    const int ts = m + 2;
    const double(*gm)[3] = m == 4 ? wino_g4 : wino_g2;
    size_t bytes;
    float *u;
    if (!c->weight || !ki_conv2d_wino_shape_ok(c) || (m != 2 && m != 4)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a 3x3 stride-1 convolution with weights");
    }
    ki_status st = ki_conv2d_alloc_weights((size_t)rows, (size_t)ic, (size_t)(ts * ts),
                                           "Winograd weights", &u, &bytes, err);
    if (st != KI_OK) {
        return st;
    }
    if (ov) {
        memset(u, 0, bytes); /* the channel rows past oc */
    }
    for (int64_t o = 0; o < oc; o++) {
        for (int64_t i = 0; i < ic; i++) {
            const float *g = c->weight + (o * ic + i) * 9;
            double t[6][3];
            for (int r = 0; r < ts; r++) { /* t = G g */
                for (int k = 0; k < 3; k++) {
                    t[r][k] = gm[r][0] * g[k] + gm[r][1] * g[3 + k] + gm[r][2] * g[6 + k];
                }
            }
            for (int r = 0; r < ts; r++) { /* U = t G^T */
                for (int s = 0; s < ts; s++) {
                    double v = t[r][0] * gm[s][0] + t[r][1] * gm[s][1] + t[r][2] * gm[s][2];
                    int64_t pos = r * ts + s;
                    size_t at = ov ? (size_t)((((pos * nob + o / KI_OV_MV) * ic + i) * KI_OV_MV) +
                                              o % KI_OV_MV)
                                   : (size_t)((pos * oc + o) * ic + i);
                    u[at] = (float)v;
                }
            }
        }
    }
    free(c->wino_u);
    c->wino_u = u;
    c->wino_m = m;
    c->wino_ov = ov;
    return KI_OK;
}

ki_status ki_conv2d_wino_prepare_h(ki_conv2d *c, bool half, ki_error *err)
{
    int64_t ic = c->in_ch, oc = c->out_ch, nob = (oc + KI_OV_MV - 1) / KI_OV_MV;
    size_t bytes;
    float *a;
    if (!c->weight || !ki_conv2d_wino_shape_ok(c)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a 3x3 stride-1 convolution with weights");
    }
    /* binary16: half the floats of the same block count (KI_OV_MV is even) */
    ki_status st = ki_conv2d_alloc_weights((size_t)nob, half ? KI_OV_MV / 2 : KI_OV_MV,
                                           (size_t)ic * 9, "Winograd weights", &a, &bytes, err);
    if (st != KI_OK) {
        return st;
    }
    uint16_t *h = (uint16_t *)(void *)a;
    memset(a, 0, bytes); /* the channel rows past oc */
    for (int64_t o = 0; o < oc; o++) {
        for (int64_t i = 0; i < ic * 9; i++) {
            size_t at = (size_t)(((o / KI_OV_MV) * ic * 9 + i) * KI_OV_MV + o % KI_OV_MV);
            if (!half) {
                a[at] = c->weight[o * ic * 9 + i];
            } else if (!ki_half_exact(c->weight[o * ic * 9 + i], &h[at])) {
                free(a);
                return KI_FAIL(err, KI_ERR_INTERNAL, "weights are not binary16 values");
            }
        }
    }
    free(c->wino_u);
    free(c->wino_h);
    free(c->wino_f);
    c->wino_u = NULL;
    c->wino_h = half ? h : NULL;
    c->wino_f = half ? NULL : a;
    c->wino_m = 2;
    c->wino_ov = true;
    return KI_OK;
}

/* U of F(2x2) for input channel q, output channel r of a block from its nine weights w. */
static void wino_u_of(const float w[9], int64_t q, int r, float *restrict u, int64_t pstride)
{
    float t[4][3];
    for (int k = 0; k < 3; k++) { /* t = G g */
        float a = w[k] + w[6 + k];
        t[0][k] = w[k];
        t[1][k] = (a + w[3 + k]) * 0.5f;
        t[2][k] = (a - w[3 + k]) * 0.5f;
        t[3][k] = w[6 + k];
    }
    for (int i = 0; i < 4; i++) { /* U = t G^T */
        float b = t[i][0] + t[i][2];
        float *d = u + i * 4 * pstride + q * KI_OV_MV + r;
        d[0] = t[i][0];
        d[pstride] = (b + t[i][1]) * 0.5f;
        d[2 * pstride] = (b - t[i][1]) * 0.5f;
        d[3 * pstride] = t[i][2];
    }
}

void ki_wino_fu_ref(const float *g, int64_t kc, float *restrict u, int64_t pstride)
{
    for (int64_t q = 0; q < kc; q++) {
        for (int r = 0; r < KI_OV_MV; r++) {
            float w[9];
            for (int k = 0; k < 9; k++) {
                w[k] = g[(q * 9 + k) * KI_OV_MV + r];
            }
            wino_u_of(w, q, r, u, pstride);
        }
    }
}

void ki_wino_hu_ref(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride)
{
    for (int64_t q = 0; q < kc; q++) {
        for (int r = 0; r < KI_OV_MV; r++) {
            float w[9];
            for (int k = 0; k < 9; k++) {
                w[k] = ki_half_to_float(g[(q * 9 + k) * KI_OV_MV + r]);
            }
            wino_u_of(w, q, r, u, pstride);
        }
    }
}

/* Whether the layer forms U per block (wino_h or wino_f) instead of reading wino_u. */
static bool wino_formed(const ki_conv2d *c)
{
    return c->wino_h || c->wino_f;
}

/* Two ways to run a layer. With at least KI_WINO_BLOCKED panels per thread (many tiles) each
 * thread takes a contiguous run of panels (32 tiles) and does everything for one panel at a
 * time in its own slice of the workspace: transformed input V (t^2 x in_ch x 32) and products
 * M (t^2 x out_ch x 32) stay in L2 between the three steps. With fewer panels the team shares
 * whole-image V and M (tiles rounded up to a panel) and splits each step: input channels, then
 * (position, panel group) products, then output channels. Between the two, a layer whose
 * products run on the GEMM, whose tiles give each thread at least one item of KI_WINO_SUB tiles
 * and whose U takes at most KI_WINO_SUB_L2S L2 sizes is blocked too, by those items (up to a
 * panel of them at a time where a thread's items follow each other): each thread then reads the
 * whole of U, but transforms only its own tiles in its own slice, and nothing waits at a barrier
 * or crosses to the other core. Shared, each thread writes half of V and reads the other half
 * from the other core (and takes those lines back the next run), and waits twice: squeezenet's
 * 32 -> 128 layers at 27x27 (49 tiles) are faster blocked. So are the layers of one item a thread
 * (16 tiles on two threads: squeezenet's 48 -> 192 at 13x13, unet's 64 -> 128 at 16x16) in their
 * networks, although their products then run on the 8-column micro-kernel and a layer alone,
 * repeated, runs faster shared (docs/performance.md). Squeezenet's 64 -> 256 layers (U 2.4 MB,
 * with 1 MiB of L2) are shared. The same operations per tile, so the same bits. */
#define KI_WINO_BLOCKED   2
#define KI_WINO_SUB       8
#define KI_WINO_SUB_L2S   2
#define KI_WINO_MAX_BYTES ((size_t)256 << 20)

/* The OV kernel's cost follows the valid tiles (the GEMM's is a whole panel's however few are
 * valid), so its runs go in groups of KI_WINO_LANES tiles (the transforms' unit; an output group
 * past a run's end would write tiles another thread computes), a panel being up to two; the GEMM's
 * in whole panels, the last one past the tiles, or in KI_WINO_SUB tiles (wino_unit). The same
 * operations per tile either way, so the same bits however they are grouped. */
static bool wino_by_lanes(const ki_conv2d *c)
{
    return c->wino_ov || wino_formed(c);
}

/* Whether U takes at most KI_WINO_SUB_L2S L2 sizes, so that each thread of a blocked run may
 * read all of it (see KI_WINO_BLOCKED). */
static bool wino_u_small(const ki_conv2d *c)
{
    const size_t ts = (size_t)c->wino_m + 2, l2s = KI_WINO_SUB_L2S * ki_cpu_get()->l2;
    int64_t pairs;
    return ki_ckd_mul_i64(&pairs, c->in_ch, c->out_ch) &&
           (size_t)pairs <= l2s / (ts * ts * sizeof(float));
}

static bool wino_blocked(const ki_conv2d *c, int64_t tiles, int n_threads)
{
    const int64_t nt = n_threads > 0 ? n_threads : 1, np = (tiles + KI_GEMM_NR - 1) / KI_GEMM_NR;
    return np >= KI_WINO_BLOCKED * nt ||
           (nt > 1 && !wino_by_lanes(c) && tiles >= KI_WINO_SUB * nt && wino_u_small(c));
}

/* The tiles of a blocked run's items (see wino_blocked): KI_WINO_SUB for the GEMM's products on
 * more than one thread, also where there are panels enough to block by them. A thread still runs
 * up to a panel of its own items at a time, and the last ones, taken item by item, leave the
 * threads at most KI_WINO_SUB tiles apart instead of a panel: squeezenet's 16 -> 64 at 55x55 (7
 * panels, 4 and 3 a thread) 4-6 % faster on two threads. */
static int64_t wino_unit(const ki_conv2d *c, int n_threads)
{
    return wino_by_lanes(c) ? KI_WINO_LANES : n_threads > 1 ? KI_WINO_SUB : KI_GEMM_NR;
}

/* A batch of at least two images per thread runs image by image instead: each thread takes
 * whole images (the blocked run on one thread, handed out as threads come free) in one parallel
 * region, where the per-image split cost a parallel region and up to five barriers per image
 * (mnist_cnn's 1,000-image batch: 1,000 regions) and a thread that another process kept off its
 * core held up every one of them. The same operations per tile, so the same bits. */
static bool wino_by_image(const ki_conv2d_geom *g, int n_threads)
{
    return n_threads > 1 && g->in.n >= 2 * (int64_t)n_threads;
}

/* Floats added to the stride between positions of V and of M: with a whole number of pages
 * between them, the t*t values of a tile fell in one set of the L1 cache (F(4x4): 36 lines in a
 * 12-way set) and each panel's transforms kept evicting their own lines. 64 bytes keep the
 * panels aligned. */
#define KI_WINO_SKEW 16

/* Floats of V and M for `cols` tile columns. */
static bool wino_floats(const ki_conv2d *c, int64_t cols, size_t *v, size_t *m)
{
    size_t ts = (size_t)c->wino_m + 2, vp, mp;
    return c->wino_m > 0 && ki_ckd_mul(&vp, (size_t)cols, (size_t)c->in_ch) &&
           ki_ckd_add(&vp, vp, KI_WINO_SKEW) && ki_ckd_mul(v, vp, ts * ts) &&
           ki_ckd_mul(&mp, (size_t)cols, (size_t)c->out_ch) && ki_ckd_add(&mp, mp, KI_WINO_SKEW) &&
           ki_ckd_mul(m, mp, ts * ts);
}

/* Forming U per block (wino_h, wino_f), each thread also has U for KI_WINO_H_KC input channels and
 * its OV tiles of one panel at every position, at the end of the workspace (wino_private). */
#define KI_WINO_H_KC      64
#define KI_WINO_H_NPOS    16
#define KI_WINO_H_UFLOATS (KI_WINO_H_NPOS * (KI_WINO_H_KC * KI_OV_MV + KI_WINO_SKEW))

/* Bytes of a thread's U and tiles for npan panels. */
static size_t wino_h_bytes(int64_t npan)
{
    return (size_t)(KI_WINO_H_UFLOATS +
                    KI_WINO_H_NPOS * (npan * KI_GEMM_NR * KI_OV_MV + KI_WINO_SKEW)) *
           4;
}

size_t ki_conv2d_wino_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads)
{
    size_t v, m, n, bytes, nt = n_threads > 0 ? (size_t)n_threads : 1;
    const int64_t tiles = ki_conv2d_wino_tiles(g->oh, g->ow, c->wino_m);
    const int64_t np = (tiles + KI_GEMM_NR - 1) / KI_GEMM_NR;
    bool blocked = wino_blocked(c, tiles, n_threads) || wino_by_image(g, n_threads);
    if (!wino_floats(c, blocked ? KI_GEMM_NR : np * KI_GEMM_NR, &v, &m) || !ki_ckd_add(&n, v, m) ||
        !ki_ckd_mul(&bytes, n, sizeof(float)) || bytes > KI_WINO_MAX_BYTES) {
        return 0;
    }
    return ((blocked ? bytes : (bytes + nt - 1) / nt) + 63) / 64 * 64 +
           (wino_formed(c) ? wino_h_bytes(blocked ? 1 : np) : 0);
}

/* This thread's U and OV tiles when U is formed per block: the end of its own slice when blocked;
 * else the end of the team's workspace, past the shared V and M. */
static float *wino_private(const ki_exec *ex, int64_t np, bool blocked, int tid)
{
    char *w = ex->workspace;
    size_t hb = wino_h_bytes(blocked ? 1 : np), nt = ex->n_threads > 0 ? (size_t)ex->n_threads : 1;
    /* counted from the workspace's end for the team it was sized for (a smaller team's V and M
     * still fill the whole shared part) */
    size_t at = blocked ? ((size_t)tid + 1) * ex->ws_per_thread - hb
                        : nt * ex->ws_per_thread - ((size_t)tid + 1) * hb;
    return (float *)(void *)(w + at);
}

/* What a run needs besides the state: the tiles, the buffers and the finishing step. */
typedef struct wino_run {
    const ki_conv2d *c;
    const ki_conv2d_geom *g;
    ki_wino_tiles tg;
    int64_t npos, np;
    int64_t unit; /* tiles of a blocked item (wino_unit) */
    bool post;    /* the activation is applied on each finished plane (not a clamp) */
    float lo, hi;
    int64_t ys; /* floats between the output planes */
} wino_run;

/* The products of panels p0..p0+cnt-1 at position pos: U[pos] (out x in) times V[pos] (packed
 * panels of in x 32) into M[pos] (out x ldm), the first n columns (the tiles: a last panel of at
 * most 16 runs on the micro-kernel's half-width form). */
static void wino_products(const wino_run *r, int64_t pos, const float *vpos, float *mpos, int64_t n,
                          int64_t ldm, int64_t p0, int64_t cnt, int64_t o0, int64_t o1)
{
    const ki_conv2d *c = r->c;
    ki_gemm_args ga = { .m = o1 - o0,
                        .n = n,
                        .k = c->in_ch,
                        .a = c->wino_u + (pos * c->out_ch + o0) * c->in_ch,
                        .lda = c->in_ch,
                        .bp = vpos,
                        .c = mpos + o0 * ldm,
                        .ldc = ldm,
                        .c_room = ldm,
                        .uk = c->uk };
    ki_gemm_panels(&ga, p0, cnt, vpos + p0 * c->in_ch * KI_GEMM_NR);
}

/* The columns of panel p that hold tiles, of `tiles` from panel 0. */
static int64_t panel_valid(int64_t tiles, int64_t p)
{
    return tiles - p * KI_GEMM_NR < KI_GEMM_NR ? tiles - p * KI_GEMM_NR : KI_GEMM_NR;
}

/* The same with the OV layout of U ([pos][channel block][in][32]) and the OV micro-kernel, for
 * channel blocks [ob0, ob1) and the first `valid` columns of one panel vpanel (in x 32): the
 * columns in blocks of up to KI_OV_PW_MAX, each tile transposed into mcol (row stride ldm). */
static void wino_products_ov(const wino_run *r, int64_t pos, const float *vpanel, float *mcol,
                             int64_t ldm, int64_t valid, int64_t ob0, int64_t ob1)
{
    const ki_conv2d *c = r->c;
    const int64_t ic = c->in_ch, oc = c->out_ch, nob = (oc + KI_OV_MV - 1) / KI_OV_MV;
    const int64_t pw = ki_conv2d_ov_pw(c, valid);
    _Alignas(64) float t[KI_OV_PW_MAX * KI_OV_MV];
    for (int64_t ob = ob0; ob < ob1; ob++) {
        const float *a = c->wino_u + (pos * nob + ob) * ic * KI_OV_MV;
        int64_t rows = oc - ob * KI_OV_MV < KI_OV_MV ? oc - ob * KI_OV_MV : KI_OV_MV;
        for (int64_t j0 = 0; j0 < valid; j0 += pw) {
            int64_t nr = valid - j0 < pw ? valid - j0 : pw;
            c->ov_uk(ic, a, vpanel + j0, (int)nr, KI_GEMM_NR, false, NULL, -INFINITY, INFINITY, t,
                     KI_OV_NO_PF);
            c->ov_st(t, rows, nr, mcol + ob * KI_OV_MV * ldm + j0, ldm, NULL, -INFINITY, INFINITY);
        }
    }
}

/* The columns of panel p that hold tiles (of `tiles` from panel 0) and their OV block width. */
static int64_t panel_cols(const ki_conv2d *c, int64_t tiles, int64_t p, int64_t *pw)
{
    int64_t valid = panel_valid(tiles, p);
    *pw = ki_conv2d_ov_pw(c, valid);
    return valid;
}

/* The products with U formed per block (wino_h, wino_f) for panels 0..npan-1 from vpanel (vpp
 * floats apart, vps per position, in x 32 each; `tiles` valid columns from the first) for channel
 * blocks [ob0, ob1) into mcol (KI_GEMM_NR columns per panel, mps per position, row stride ldm). Per
 * block of KI_WINO_H_KC input channels U is formed for all 16 positions in u, and the OV tiles of
 * every position and panel, kept in t (see wino_h_bytes), take that block's sums. */
static void wino_products_h(const wino_run *r, const float *vpanel, int64_t vps, int64_t vpp,
                            float *mcol, int64_t mps, int64_t ldm, int64_t tiles, int64_t npan,
                            int64_t ob0, int64_t ob1, float *u, float *t)
{
    const ki_conv2d *c = r->c;
    const int64_t ic = c->in_ch, oc = c->out_ch;
    const int64_t ups = KI_WINO_H_KC * KI_OV_MV + KI_WINO_SKEW;
    const int64_t tps = npan * KI_GEMM_NR * KI_OV_MV + KI_WINO_SKEW;
    /* the weights as bytes, esz a weight */
    const int64_t esz = c->wino_h ? 2 : 4;
    const char *gw = c->wino_h ? (const char *)c->wino_h : (const char *)c->wino_f;
    for (int64_t ob = ob0; ob < ob1; ob++) {
        const char *g = gw + ob * ic * 9 * KI_OV_MV * esz;
        for (int64_t i0 = 0; i0 < ic; i0 += KI_WINO_H_KC) {
            int64_t kc = ic - i0 < KI_WINO_H_KC ? ic - i0 : KI_WINO_H_KC;
            const void *blk = g + i0 * 9 * KI_OV_MV * esz;
            if (c->wino_h) {
                c->wino_hu(blk, kc, u, ups);
            } else {
                c->wino_fu(blk, kc, u, ups);
            }
            /* the next block's weights come from memory while this one's products run */
            const char *nx = g + (i0 + kc) * 9 * KI_OV_MV * esz;
            int64_t left = i0 + kc < ic ? ic - i0 - kc : ob + 1 < ob1 ? ic : 0;
            int64_t nbytes = (left < KI_WINO_H_KC ? left : KI_WINO_H_KC) * 9 * KI_OV_MV * esz;
            for (int64_t pos = 0; pos < KI_WINO_H_NPOS; pos++) {
                /* a sixteenth of the next block's lines, asked for during the position's first
                 * products (ki_ov_pf) */
                const int64_t l0 = nbytes * pos / KI_WINO_H_NPOS / 64;
                ki_ov_pf pf = { nx + l0 * 64,
                                (nbytes * (pos + 1) / KI_WINO_H_NPOS + 63) / 64 - l0 };
                for (int64_t p = 0; p < npan; p++) {
                    int64_t pw, valid = panel_cols(c, tiles, p, &pw);
                    for (int64_t j0 = 0; j0 < valid; j0 += pw) {
                        int64_t nr = valid - j0 < pw ? valid - j0 : pw;
                        c->ov_uk(kc, u + pos * ups,
                                 vpanel + pos * vps + p * vpp + i0 * KI_GEMM_NR + j0, (int)nr,
                                 KI_GEMM_NR, i0 > 0, NULL, -INFINITY, INFINITY,
                                 t + pos * tps + (p * KI_GEMM_NR + j0) * KI_OV_MV, pf);
                        pf = KI_OV_NO_PF;
                    }
                }
            }
        }
        int64_t rows = oc - ob * KI_OV_MV < KI_OV_MV ? oc - ob * KI_OV_MV : KI_OV_MV;
        for (int64_t pos = 0; pos < KI_WINO_H_NPOS; pos++) {
            for (int64_t p = 0; p < npan; p++) {
                int64_t pw, valid = panel_cols(c, tiles, p, &pw);
                for (int64_t j0 = 0; j0 < valid; j0 += pw) {
                    int64_t nr = valid - j0 < pw ? valid - j0 : pw;
                    c->ov_st(t + pos * tps + (p * KI_GEMM_NR + j0) * KI_OV_MV, rows, nr,
                             mcol + pos * mps + p * KI_GEMM_NR + ob * KI_OV_MV * ldm + j0, ldm,
                             NULL, -INFINITY, INFINITY);
                }
            }
        }
    }
}

/* Output channel ch of tiles [tb, te) from m (pstride floats per position). */
static void wino_finish(const wino_run *r, const float *m, int64_t pstride, float *y,
                        const float *res, int64_t ch, int64_t tb, int64_t te)
{
    const ki_conv2d *c = r->c;
    const int64_t ys = r->ys;
    c->wino_out(m, pstride, y + ch * ys, res ? res + ch * ys : NULL, &r->tg, tb, te,
                c->ep.bias ? c->ep.bias[ch] : 0.0f, r->lo, r->hi);
}

/* Tiles [tb, te) of image x through the three steps in this thread's slice (v, then the products
 * m after it): a panel of up to KI_GEMM_NR tiles. */
static void wino_panel(const wino_run *r, const float *x, float *y, const float *res, float *v,
                       float *priv, int64_t tb, int64_t te)
{
    const ki_conv2d *c = r->c;
    const int64_t ic = c->in_ch, oc = c->out_ch, hw = r->g->in.h * r->g->in.w;
    const int64_t vps = ic * KI_GEMM_NR + KI_WINO_SKEW, mps = oc * KI_GEMM_NR + KI_WINO_SKEW;
    float *m = v + r->npos * vps;
    for (int64_t ch = 0; ch < ic; ch++) {
        c->wino_in(x + ch * hw, r->g->in.h, r->g->in.w, &r->tg, tb, te, v + ch * KI_GEMM_NR, 0,
                   vps);
    }
    const int64_t valid = (te < r->tg.tiles ? te : r->tg.tiles) - tb;
    if (wino_formed(c)) {
        wino_products_h(r, v, vps, 0, m, mps, KI_GEMM_NR, valid, 1, 0,
                        (oc + KI_OV_MV - 1) / KI_OV_MV, priv, priv + KI_WINO_H_UFLOATS);
    }
    for (int64_t pos = 0; pos < r->npos && !wino_formed(c); pos++) {
        if (c->wino_ov) {
            wino_products_ov(r, pos, v + pos * vps, m + pos * mps, KI_GEMM_NR, valid, 0,
                             (oc + KI_OV_MV - 1) / KI_OV_MV);
        } else {
            wino_products(r, pos, v + pos * vps, m + pos * mps, valid, KI_GEMM_NR, 0, 1, 0,
                          r->c->out_ch);
        }
    }
    for (int64_t ch = 0; ch < oc; ch++) {
        wino_finish(r, m + ch * KI_GEMM_NR, mps, y, res, ch, tb, te);
    }
}

/* The whole image x on this thread alone, panel by panel. */
static void wino_image_alone(const wino_run *r, const float *x, float *y, const float *res,
                             float *v, float *priv)
{
    const int64_t tiles = r->tg.tiles, end = wino_by_lanes(r->c) ? tiles : r->np * KI_GEMM_NR;
    for (int64_t tb = 0; tb < end; tb += KI_GEMM_NR) {
        wino_panel(r, x, y, res, v, priv, tb, tb + KI_GEMM_NR < end ? tb + KI_GEMM_NR : end);
    }
}

size_t ki_conv2d_wino_alone_floats(const ki_conv2d *c)
{
    size_t v, m;
    return wino_floats(c, KI_GEMM_NR, &v, &m) && ki_ckd_add(&v, v, m) ? v : 0;
}

/* The run of layer c on geometry g: its tiles, items of `unit` tiles, the finishing step (post:
 * the activation on the finished planes; lo, hi: the clamp in the output transform) and the
 * output planes ys floats apart. */
static wino_run wino_run_of(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t unit, bool post,
                            float lo, float hi, int64_t ys)
{
    const int64_t wm = c->wino_m, tiles = ki_conv2d_wino_tiles(g->oh, g->ow, (int)wm);
    return (wino_run){ c,
                       g,
                       { (g->ow + wm - 1) / wm, tiles, c->pt, c->pl, g->oh, g->ow, wm },
                       (wm + 2) * (wm + 2),
                       (tiles + KI_GEMM_NR - 1) / KI_GEMM_NR,
                       unit,
                       post,
                       lo,
                       hi,
                       ys };
}

void ki_conv2d_wino_alone(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, float *y,
                          int64_t ys, float *v)
{
    const wino_run r = wino_run_of(c, g, KI_GEMM_NR, false, -INFINITY, INFINITY, ys);
    if (r.tg.tiles > 0 && c->out_ch > 0) {
        wino_image_alone(&r, x, y, NULL, v, NULL);
    }
}

/* Blocked: the team's items of image x (wino_unit tiles each), each thread its own slice (see
 * KI_WINO_BLOCKED). Each thread takes its share of the items from the front, up to a panel of
 * them at a time where they follow each other, then what is left of the others' from their back
 * (ki_share): a thread that runs slower (another process on its core) leaves its last items to
 * the others. yolov5s's 128-channel 40x40 layers at --isa avx2 took 1.5x their one-thread time
 * on two threads when the shares were whole panels (64 and 36 of 100 tiles). */
static void wino_blocked_team(const wino_run *r, const float *x, float *y, const float *res,
                              float *v, float *priv, const ki_part *pt)
{
    const bool lanes = wino_by_lanes(r->c);
    const int64_t tiles = r->tg.tiles, unit = r->unit, most = KI_GEMM_NR / unit;
    ki_share_begin(pt, (tiles + unit - 1) / unit);
    for (int64_t q = ki_share_take(pt->share, pt->tid), pending = -1; q >= 0;) {
        int64_t n = 1;
        while (n < most && ki_share_peek(pt->share, pt->tid) == q + n) {
            const int64_t q2 = ki_share_take(pt->share, pt->tid);
            if (q2 != q + n) { /* taken by a thief meanwhile: q2 is another item */
                pending = q2;
                break;
            }
            n++;
        }
        /* the GEMM's runs end at a whole item past the tiles (zeros in V, see wino_by_lanes) */
        const int64_t tb = q * unit, te = lanes && tb + n * unit > tiles ? tiles : tb + n * unit;
        wino_panel(r, x, y, res, v, priv, tb, te);
        q = pending >= 0 ? pending : ki_share_take(pt->share, pt->tid);
        pending = -1;
    }
}

/* The products of position pos for every output channel and panel, into M (shared run): on the
 * GEMM (whole row tiles) or, with the OV layout of U, by channel blocks. */
static void wino_products_at(const wino_run *r, int64_t pos, const float *vbuf, int64_t vps,
                             float *mbuf, int64_t mps)
{
    const ki_conv2d *c = r->c;
    const int64_t np = r->np, tp = np * KI_GEMM_NR, grp = np < 4 ? np : 4, oc = c->out_ch;
    if (c->wino_ov) {
        for (int64_t p = 0; p < np; p++) {
            wino_products_ov(r, pos, vbuf + pos * vps + p * KI_GEMM_NR * c->in_ch,
                             mbuf + pos * mps + p * KI_GEMM_NR, tp, panel_valid(r->tg.tiles, p), 0,
                             (oc + KI_OV_MV - 1) / KI_OV_MV);
        }
        return;
    }
    for (int64_t p0 = 0; p0 < np; p0 += grp) {
        wino_products(r, pos, vbuf + pos * vps, mbuf + pos * mps, r->tg.tiles, tp, p0,
                      np - p0 < grp ? np - p0 : grp, 0, oc);
    }
}

/* Shared: the team splits each step over the whole image (see KI_WINO_BLOCKED): the input
 * transform by input channels, then the products by position and, after a barrier, the output
 * transform by output channel, at whole GEMM row tiles or OV channel blocks, so every product is
 * the same tile's: the same bits. U formed per block (wino_formed) goes by channel block instead,
 * products and transform, with no barrier between. So did layers of fewer input than output
 * channels from the twenty-first session, whose output transform then read only products its own
 * core wrote; in the network, compared on one session, squeezenet's 64 -> 256 at 13x13 are faster
 * by position (docs/performance.md). Call from every thread of the team. */
static void wino_shared_run(const wino_run *r, const float *x, float *y, const float *res,
                            float *vbuf, float *priv, const ki_part *pt)
{
    const ki_conv2d *c = r->c;
    const int64_t ic = c->in_ch, oc = c->out_ch, hw = r->g->in.h * r->g->in.w;
    const int64_t np = r->np, tp = np * KI_GEMM_NR;
    const int64_t vps = ic * tp + KI_WINO_SKEW, mps = oc * tp + KI_WINO_SKEW;
    float *mbuf = vbuf + r->npos * vps;
    int64_t i0, i1;
    ki_part_range(ic, pt, &i0, &i1);
    for (int64_t ch = i0; ch < i1; ch++) {
        c->wino_in(x + ch * hw, r->g->in.h, r->g->in.w, &r->tg, 0, tp, vbuf + ch * KI_GEMM_NR,
                   ic * KI_GEMM_NR, vps);
    }
    ki_part_sync(pt);
    int64_t o0, o1;
    if (wino_formed(c)) { /* by output channel blocks: U formed per block */
        ki_part_range((oc + KI_OV_MV - 1) / KI_OV_MV, pt, &i0, &i1);
        o0 = i0 * KI_OV_MV < oc ? i0 * KI_OV_MV : oc, o1 = i1 * KI_OV_MV < oc ? i1 * KI_OV_MV : oc;
        for (int64_t ob = i0; ob < i1; ob++) {
            wino_products_h(r, vbuf, vps, KI_GEMM_NR * ic, mbuf, mps, tp, r->tg.tiles, np, ob,
                            ob + 1, priv, priv + KI_WINO_H_UFLOATS);
        }
    } else { /* by position */
        ki_part_range(r->npos, pt, &i0, &i1);
        for (int64_t pos = i0; pos < i1; pos++) {
            wino_products_at(r, pos, vbuf, vps, mbuf, mps);
        }
        ki_part_sync(pt);
        ki_part_range(oc, pt, &o0, &o1);
    }
    for (int64_t ch = o0; ch < o1; ch++) {
        wino_finish(r, mbuf + ch * tp, mps, y, res, ch, 0, tp);
    }
}

typedef struct wino_job {
    const wino_run *r;
    const float *in;
    float *out;
    const ki_exec *ex;
} wino_job;

/* Whole images per thread (wino_by_image), handed out as threads come free (ki_share): image
 * n's blocked run on the thread alone, then its activation when it is not a clamp. */
static void wino_images(void *arg, const ki_part *pt)
{
    const wino_job *j = arg;
    const wino_run *r = j->r;
    const ki_conv2d *c = r->c;
    const int64_t ic = c->in_ch, oc = c->out_ch, hw = r->g->in.h * r->g->in.w;
    const int64_t ohw = r->g->oh * r->g->ow;
    const ki_cv_epilogue act_only = { NULL, c->ep.act, c->ep.res_after };
    float *v = ki_exec_slice(j->ex, pt->tid);
    float *priv = wino_formed(c) ? wino_private(j->ex, r->np, true, pt->tid) : NULL;
    ki_share_begin(pt, r->g->in.n);
    for (int64_t n = ki_share_take(pt->share, pt->tid); n >= 0;
         n = ki_share_take(pt->share, pt->tid)) {
        float *y = j->out + n * oc * ohw;
        const float *res = c->res ? c->res + n * oc * ohw : NULL;
        wino_image_alone(r, j->in + n * ic * hw, y, c->ep.res_after ? NULL : res, v, priv);
        for (int64_t ch = 0; r->post && ch < oc; ch++) {
            c->epf(&act_only, c->ep.res_after && res ? res + ch * ohw : NULL, ch, y + ch * ohw,
                   (size_t)ohw);
        }
    }
}

/* Each image in turn, the team on it: blocked (each thread its own tiles) or shared. */
static void wino_each_image(void *arg, const ki_part *pt)
{
    const wino_job *j = arg;
    const wino_run *r = j->r;
    const ki_conv2d *c = r->c;
    const ki_exec *ex = j->ex;
    const int64_t ic = c->in_ch, oc = c->out_ch, hw = r->g->in.h * r->g->in.w;
    const int64_t ohw = r->g->oh * r->g->ow;
    /* a residual after the activation is added there too (the output transform leaves it) */
    const ki_cv_epilogue act_only = { NULL, c->ep.act, c->ep.res_after };
    const bool blocked = wino_blocked(c, r->tg.tiles, ex->n_threads);
    float *priv = wino_formed(c) ? wino_private(ex, r->np, blocked, pt->tid) : NULL;
    for (int64_t n = 0; n < r->g->in.n; n++) {
        const float *x = j->in + n * ic * hw;
        float *y = j->out + n * oc * ohw;
        const float *res = c->res ? c->res + n * oc * ohw : NULL;
        const float *res_tr = c->ep.res_after ? NULL : res;   /* the output transform's */
        const float *res_post = c->ep.res_after ? res : NULL; /* after the activation */
        if (n > 0) {
            ki_part_sync(pt); /* the image before is done with the shared buffers */
        }
        if (blocked) {
            float *v = ki_exec_slice(ex, pt->tid);
            wino_blocked_team(r, x, y, res_tr, v, priv, pt);
        } else {
            wino_shared_run(r, x, y, res_tr, ex->workspace, priv, pt);
        }
        if (r->post) {
            int64_t c0, c1;
            ki_part_sync(pt);
            ki_part_range(oc, pt, &c0, &c1);
            for (int64_t ch = c0; ch < c1; ch++) {
                c->epf(&act_only, res_post ? res_post + ch * ohw : NULL, ch, y + ch * ohw,
                       (size_t)ohw);
            }
        }
    }
}

void ki_conv2d_forward_wino(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                            float *restrict out, const ki_exec *ex)
{
    ki_gemm_fin gf;
    /* clamp-type activations finish in the output transform, the others on the plane after it */
    const bool post = !ki_gemm_fin_of(&c->ep, 0, NULL, &gf);
    const wino_run r =
        wino_run_of(c, g, wino_unit(c, ex->n_threads), post, post ? -INFINITY : gf.lo,
                    post ? INFINITY : gf.hi, g->oh * g->ow);
    if (r.tg.tiles == 0 || c->out_ch == 0) {
        return;
    }
    wino_job j = { &r, in, out, ex };
    ki_team_run(ex, wino_by_image(g, ex->n_threads) ? wino_images : wino_each_image, &j);
}
