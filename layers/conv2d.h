/* conv2d.h - nn.Conv2d and nn.ConvTranspose2d: state, geometry and kernels.
 *
 * create() parses the parameters into a ki_conv2d / ki_deconv2d (malloc'd, freed by destroy);
 * the weight pointer refers to the model's attribute data, which outlives the state. For each
 * input shape, *_geom_make() validates and computes sizes, and *_pick() chooses the kernel: the
 * choice lives only there, so the later speed work (Winograd, AVX2) adds paths in one place.
 * Kernels cannot fail: shape() has checked everything. The reference kernels are plain scalar
 * loops kept as the test oracle. State is read-only after create; kernels are thread-safe. */
#ifndef KI_CONV2D_H
#define KI_CONV2D_H

#include "gemm.h"

/* The m x m output tiles (m = 4 or 2) of one Winograd plane, numbered row-major (ntx per row):
 * output oh x ow, input patches of (m+2) x (m+2) start at (m*ty - pt, m*tx - pl). */
typedef struct ki_wino_tiles {
    int64_t ntx, tiles, pt, pl, oh, ow, m;
} ki_wino_tiles;

/* Winograd F(4x4,3x3) / F(2x2,3x3) transforms of one channel plane (wino_xform.h). */
typedef void (*ki_wino_in_fn)(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg,
                              int64_t tb, int64_t te, float *restrict v, int64_t pan,
                              int64_t pstride);
typedef void (*ki_wino_out_fn)(const float *m, int64_t pstride, float *q, const float *res,
                               const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                               float hi);

/* The OV micro-kernel: t[j][r] (+)= sum over k of a[k][r] * b[k][j] for the KI_OV_MV output
 * channels r of one packed weight block a ([k][KI_OV_MV], 64-byte aligned) and the
 * pw <= KI_OV_PW_MAX output pixels j of one column block b (k rows of row stride ldb); acc: add to
 * t instead of overwriting it; then + bias[r] when bias is not NULL, then min(hi, max(lo, v)). t is
 * [pw][KI_OV_MV]. pf: cache lines to ask L2 for while the k loop runs (see ki_ov_pf). */
#define KI_OV_MV     32
#define KI_OV_PW_MAX 12
#define KI_OV_KC     128 /* k block: a weight block (16 KiB) stays in L1 over the pixel blocks */
/* Where channel block ob's weights for the k block from k0 (kc rows) start in the repacked weights
 * of a layer with nob channel blocks (ki_conv2d.ov_a or ov_h, in elements): the k blocks one after
 * another, each [nob][kc][KI_OV_MV]. */
static inline int64_t ki_ov_block_at(int64_t k0, int64_t kc, int64_t nob, int64_t ob)
{
    return (k0 * nob + ob * kc) * KI_OV_MV;
}
/* Input channels from which a 1x1 layer read in place with more pixels than output channels runs
 * split over k (conv2d_ov.c: ov_split_k): two halves of at least 64. */
#define KI_OV_SPLITK_MIN 128
/* n cache lines from p (the next weight block, which comes from memory) that the OV micro-kernel
 * asks L2 for spread over its k loop, about n / k lines a step, so that the requests overlap the
 * products; issued at once before the kernel, they filled the line-fill buffers and stalled the
 * core (mobilenet_v2's 7x7 layers, 2 threads: 0.87-0.91x of the time with them spread;
 * docs/performance.md). n 0: nothing. The kernels without vectors ignore it. */
typedef struct ki_ov_pf {
    const char *p;
    int64_t n;
} ki_ov_pf;
typedef void (*ki_ov_ukernel)(int64_t k, const float *a, const float *b, int pw, int64_t ldb,
                              bool acc, const float *bias, float lo, float hi, float *restrict t,
                              ki_ov_pf pf);
/* The same with the weight block a in IEEE binary16 (each value widened exactly). */
typedef void (*ki_ov_ukernel_h)(int64_t k, const uint16_t *a, const float *b, int pw, int64_t ldb,
                                bool acc, const float *bias, float lo, float hi, float *restrict t,
                                ki_ov_pf pf);
/* Lines of pf per step of a k loop of k steps and how many first steps ask for some (before the
 * loop), then the step q's (the body of a first loop over those steps; a second loop runs the
 * others without this bookkeeping, which in every step took seven instructions beside the twelve
 * FMAs of an AVX2 kernel's step). */
static inline int64_t ki_ov_pf_per(ki_ov_pf pf, int64_t k)
{
    return k > 0 ? (pf.n + k - 1) / k : 0;
}
static inline int64_t ki_ov_pf_steps(ki_ov_pf pf, int64_t per)
{
    return per > 0 ? (pf.n + per - 1) / per : 0;
}
static inline __attribute__((always_inline)) void ki_ov_pf_step(ki_ov_pf pf, int64_t per, int64_t q)
{
    for (int64_t i = q * per; i < (q + 1) * per && i < pf.n; i++) {
        __builtin_prefetch(pf.p + i * 64, 0, 2); /* to L2: L1 holds the block being used */
    }
}
#define KI_OV_NO_PF ((ki_ov_pf){ NULL, 0 })
/* An OV micro-kernel's loop over its k steps q (STEP, a statement that may use q): the steps that
 * ask for pf's lines first, then the others in a loop without that bookkeeping. */
#define KI_OV_K_LOOP(pf, k, STEP)                                                                  \
    do {                                                                                           \
        const int64_t per_ = ki_ov_pf_per(pf, k), steps_ = ki_ov_pf_steps(pf, per_);               \
        int64_t q = 0;                                                                             \
        for (; q < steps_; q++) {                                                                  \
            ki_ov_pf_step(pf, per_, q);                                                            \
            STEP;                                                                                  \
        }                                                                                          \
        for (; q < (k); q++) {                                                                     \
            STEP;                                                                                  \
        }                                                                                          \
    } while (0)
/* KI_OV_K_LOOP over a column block in eight-channel groups (k a multiple of 8): STEP(i) for step
 * i (0..7) of a group, then NEXT once a group. */
#define KI_OV_K_LOOP8(pf, k, STEP, NEXT)                                                           \
    do {                                                                                           \
        const int64_t per_ = ki_ov_pf_per(pf, k), steps_ = ki_ov_pf_steps(pf, per_);               \
        for (int64_t q = 0; q < (k); q += 8) {                                                     \
            if (q < steps_) {                                                                      \
                for (int64_t i_ = 0; i_ < 8; i_++) {                                               \
                    ki_ov_pf_step(pf, per_, q + i_);                                               \
                }                                                                                  \
            }                                                                                      \
            STEP(0);                                                                               \
            STEP(1);                                                                               \
            STEP(2);                                                                               \
            STEP(3);                                                                               \
            STEP(4);                                                                               \
            STEP(5);                                                                               \
            STEP(6);                                                                               \
            STEP(7);                                                                               \
            NEXT;                                                                                  \
        }                                                                                          \
    } while (0)
/* Writes rows 0..rows-1 (output channels) of an OV tile t ([pw][KI_OV_MV]) for pixels 0..nr-1
 * to d (row stride ld): + the residual res (same layout as d) when not NULL, then
 * min(hi, max(lo, v)). */
typedef void (*ki_ov_store_fn)(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                               const float *res, float lo, float hi);

struct ki_conv2d_geom;
struct ki_conv2d;

/* Where a row kernel of the direct path writes: output channel oc's row at dst + oc * cstride
 * (its residual row, if any, at res + oc * cstride); fin: the epilogue applied in registers (the
 * bias from channel 0, the residual, the clamp), or NULL to store the plain sums (the caller then
 * applies the epilogue); act: with fin, an activation applied after the clamp (ki_vact_avx2 /
 * ki_vact_avx512, the vector epilogue's formulas), or NULL. Only the vector kernels take an act
 * (c->direct_act). */
typedef struct ki_conv2d_direct_dst {
    float *dst;
    const float *res;
    int64_t cstride;
    const ki_gemm_fin *fin;
    const ki_act *act;
} ki_conv2d_direct_dst;
/* The direct path's micro-kernel (see ki_conv2d_direct_*): output row oy of every output channel
 * from the image x (in_ch planes of g->in.h x g->in.w) and the packed weights wp. */
typedef void (*ki_conv2d_direct_row_fn)(const struct ki_conv2d *c, const struct ki_conv2d_geom *g,
                                        const float *x, const float *wp, int64_t oy,
                                        const ki_conv2d_direct_dst *d);

/* The input rows y0..y1-1 of every channel of one image, the others read as padding: row iy of
 * channel ch at x + ch * cs + (iy - y0) * w (a whole image: cs = h * w, y0 = 0, y1 = h). */
typedef struct ki_conv2d_rows {
    const float *x;
    int64_t cs, y0, y1;
} ki_conv2d_rows;

/* An item of the two-phase stride-2 Winograd (conv2d_ws2.c): tiles [t0, t0 + nt) of an image's
 * grid of 4x4 output tiles, tw to a row (nt <= KI_WS2_NT, a GEMM panel); each tile's 9 x 9 input
 * patch from row y0 and column x0 (odd: the padding row and column before the first). Its
 * transforms (ws2_xform.h): input, V[p][ch][l] (81 positions p, ic channels, KI_WS2_NT lanes;
 * zeros past nt) from the image x; output, the raw sums of channel row ol of the block's products
 * m[p][rows][KI_WS2_NT] into the channel's output plane y. */
#define KI_WS2_NT KI_GEMM_NR
typedef struct ki_ws2_item {
    int64_t t0, nt, tw;
    int64_t y0[KI_WS2_NT], x0[KI_WS2_NT];
} ki_ws2_item;
struct ki_conv2d_geom;
typedef void (*ki_ws2_in_fn)(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *x,
                             int64_t ic, float *restrict v);
typedef void (*ki_ws2_out_fn)(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *m,
                              int64_t rows, int64_t ol, float *restrict y);
void ki_ws2_input_ref(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *x,
                      int64_t ic, float *restrict v);
void ki_ws2_output_ref(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *m,
                       int64_t rows, int64_t ol, float *restrict y);
void ki_ws2_input_avx2(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *x,
                       int64_t ic, float *restrict v);
void ki_ws2_output_avx2(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *m,
                        int64_t rows, int64_t ol, float *restrict y);

typedef struct ki_conv2d {
    int64_t in_ch, out_ch, groups;
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t pt, pb, pl, pr; /* top, bottom, left, right */
    ki_conv_pad_mode pad_mode;
    const float *weight; /* (out_ch, in_ch/groups, kh, kw) */
    ki_cv_epilogue ep;
    bool residual;  /* fuse() absorbed `add(@0,@1)`: a second input of the output's shape */
    bool pool;      /* fuse() absorbed a 3x3 stride-2 max pool (direct path only), padded by */
    int pool_pad;   /* 0 or 1, */
    bool pool_ceil; /* in ceil mode (else floor) */
    /* fuse() absorbed the depthwise layer (ki_conv2d_dw3_ok), or a dense one (dwf_dense), after
     * this 1x1 or direct-path one (and that layer's activation): its state (owned), run band by
     * band with this one (ki_conv2d_forward_pwdw) */
    struct ki_conv2d *dwf;
    bool dwf_dense; /* dwf is a dense layer instead (see ki_conv2d_pwdw_dense_fits) */
    /* dwf is a small 3x3 depthwise layer run channel block by channel block with this 1x1 one on
     * its OV weights instead of in bands (ki_conv2d_ovdw_ok) */
    bool dwf_c8;
    /* The only consumer of the output (after any activation absorbed) is a depthwise layer over
     * its channels that fuse() was offered and did not absorb (see ki_conv2d_gemm_private) */
    bool next_dw;
    /* fuse() absorbed a global average pool (nn.AdaptiveAvgPool2d or F.adaptive_avg_pool2d to
     * 1x1) after a clamp-type activation, on a layer with OV weights: the output is each
     * channel's mean, (n, out_ch, 1, 1) (gap_forward in conv2d.c) */
    bool gap;
    /* Per run, on forward's copy of the state: that input's data (NULL in the model's state) */
    const float *res;
    /* Per run with gap on the OV path: the tiles' per-channel sums, [image][out_ch][pixel block]
     * (the OV path's tiles then are summed, not stored); else NULL */
    float *gap_sum;
    /* Kernels chosen for this CPU at create (tests may force others), of level isa: */
    ki_isa isa;
    ki_gemm_ukernel uk;    /* GEMM micro-kernel */
    ki_cv_epilogue_fn epf; /* epilogue of the GEMM and depthwise paths */
    bool dw_avx2;          /* depthwise planes through the AVX2 kernel */
    /* the 3x3 / 5x5 depthwise kernels of this CPU's level (ki_conv2d_dw3_*; NULL below AVX2): whole
     * planes in place, and a band of rows (the 1x1 + depthwise fusion) */
    void (*dw3_planes)(const struct ki_conv2d *c, const struct ki_conv2d_geom *g, const float *in,
                       int64_t p0, int64_t p1, float *restrict out);
    void (*dw3_band)(const struct ki_conv2d *c, const struct ki_conv2d_geom *g, const float *band,
                     int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0, int64_t y1,
                     float *restrict out);
    /* dw3_band from rows in the even / odd order (ki_conv2d_pwdw_eo), and the 1x1 layer's packing
     * into that order (ki_conv2d_pack_eo_*); NULL where the level has none */
    void (*dw3_band_eo)(const struct ki_conv2d *c, const struct ki_conv2d_geom *g,
                        const float *band, int64_t row0, int64_t cstride, int64_t c0, int64_t c1,
                        int64_t y0, int64_t y1, float *restrict out);
    void (*pack_eo)(const float *x, int64_t ldb, int64_t w, int64_t j0, int64_t nr, int64_t k,
                    float *restrict dst);
    bool direct; /* the direct path pays on this CPU (an AVX2 or AVX-512 row kernel) */
    ki_conv2d_direct_row_fn direct_row; /* its row kernel (the plain C one below AVX2) */
    bool direct_act; /* the row kernel applies a non-clamp activation too (ki_conv2d_direct_dst) */
    ki_pool_max_s2_fn direct_pool; /* the plane kernel of its fused max pool (c->pool) */
    /* d[i] = src[2i] for i < n, reading src[0 .. 2n-1] (im2col of stride-2 convolutions) */
    void (*gather2)(const float *src, float *restrict d, int64_t n);
    /* im2col of 3-wide stride-2 kernels (ki_conv2d_pack3s2_ok), NULL when the layer or the CPU
     * does not take it; as ki_conv2d_pack_cols with use_col, from the input rows src holds */
    void (*pack3s2)(const struct ki_conv2d *c, const struct ki_conv2d_geom *g,
                    const struct ki_conv2d_rows *src, int64_t j0, int64_t nr, int64_t k, int64_t pw,
                    float *restrict dst);
    /* Winograd F(m x m, 3x3), m = wino_m (4 or 2): the transformed weights
     * [(m+2)^2][out_ch][in_ch] (owned; NULL when the layer does not use Winograd, see
     * ki_conv2d_wino_prepare) and the transforms for this CPU */
    int wino_m;
    float *wino_u;
    bool wino_ov; /* wino_u in the OV layout [(m+2)^2][ceil(out_ch/32)][in_ch][32] */
    ki_wino_in_fn wino_in;
    ki_wino_out_fn wino_out;
    /* F(2x2) with U formed per block of input channels during the products
     * (ki_conv2d_wino_prepare_h), for large layers whose U would come from memory each run:
     * instead of wino_u, the original weights [ceil(out_ch/32)][in_ch][9][32] (owned) as
     * binary16 when every one is exactly such a value (wino_h), else as float32 (wino_f), and
     * the steps that form U from each */
    uint16_t *wino_h;
    float *wino_f;
    void (*wino_hu)(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride);
    void (*wino_fu)(const float *g, int64_t kc, float *restrict u, int64_t pstride);
    /* The OV path (ki_conv2d_ov_prepare): the weights repacked into blocks of KI_OV_KC rows of
     * K, each [ceil(out_ch/32)][kc][32] (owned; NULL when the layer does not use it) and its
     * micro-kernel for this CPU. When every weight is exactly a binary16 value (exports that
     * store f16 weights) and they are large (KI_OV_HALF_MIN_BYTES), they are kept as such in ov_h
     * instead (ov_a NULL): half the bytes to stream from memory each run, the same products. */
    float *ov_a;
    uint16_t *ov_h;
    ki_ov_ukernel ov_uk;
    ki_ov_ukernel_h ov_ukh;
    ki_ov_store_fn ov_st;
    int64_t (*ov_pw)(int64_t n); /* ki_conv2d_ov_pw's choice for ov_uk, or NULL: equal blocks */
    /* ov_uk over input in eight-channel groups (ki_ov_ukernel8_avx2; NULL at the levels without
     * one), and whether this run's input is so laid out (set on a run's copy of a projection
     * absorbed by a channel-block step: pjf) */
    ki_ov_ukernel ov_uk8;
    bool in8;
    /* A channel-block step (dwf_c8) run with its projection (pjf): its depthwise output written
     * in eight-channel groups ([channel / 8][pixel][8], set on a run's copy), and that 1x1 layer
     * (owned; NULL when none was absorbed: conv2d_ovpj.c) */
    bool out8;
    struct ki_conv2d *pjf;
    /* A band step (dwf, not dwf_c8) with its projection: where a run's bands write the
     * projection's rows right after their depthwise rows, and its residual (set on a run's copy;
     * pj_y NULL: the projection runs after all the bands) */
    float *pj_y;
    const float *pj_res;
    /* A 6x6 stride-2 stem on the direct path run as space-to-depth and Winograd F(4x4)
     * (conv2d_s2d.c): the 3x3 stride-1 layer over its 4 x in_ch space-to-depth channels, with its
     * Winograd weights (owned; NULL when the layer does not take it, ki_conv2d_want_s2d) */
    struct ki_conv2d *s2d;
    /* A 3x3 stride-2 layer with padding 1 as Winograd over the input's two phases
     * (conv2d_ws2.c): its 36 distinct transformed weights [36][out_ch rounded up to
     * KI_GEMM_MR][in_ch] (owned; NULL when the layer does not take it, ki_conv2d_want_ws2), and
     * its transforms for this CPU */
    float *ws2_u;
    ki_ws2_in_fn ws2_in;
    ki_ws2_out_fn ws2_out;
    /* A 3x3 depthwise layer's weights for the eight-channel blocks (ki_conv2d_dw3_ch8_avx2): tap t
     * of channels 8q .. 8q + 7 as one vector, [out_ch / 8][9][8] (owned; ki_conv2d_want_dw_w8:
     * NULL below AVX2, for fewer than eight channels and for weights given at run time, whose
     * blocks gather them) */
    float *dw_w8;
} ki_conv2d;

/* Sizes for one concrete input. */
typedef struct ki_conv2d_geom {
    ki_cv_nchw in;
    int64_t oh, ow;
} ki_conv2d_geom;

/* What a convolution path's parallel body (run by ki_team_run, core/team.h) reads: each thread of
 * a running team makes its own, the same. */
typedef struct ki_conv2d_job {
    const ki_conv2d *c;
    const ki_conv2d_geom *g;
    const float *in;
    float *out;
    const ki_exec *ex;
    bool use_col; /* the GEMM path: im2col columns (KI_CONV2D_GEMM) or the input planes */
} ki_conv2d_job;

typedef enum ki_conv2d_path {
    KI_CONV2D_REF = 0, /* direct scalar loops */
    KI_CONV2D_GEMM,    /* im2col into packed panels + our SGEMM per (image, group) */
    KI_CONV2D_GEMM1,   /* 1x1, stride 1, no padding: the input already is the column matrix */
    KI_CONV2D_DW,      /* depthwise (groups == in == out), direct, parallel over planes */
    KI_CONV2D_WINO,    /* 3x3 stride 1: Winograd F(4x4,3x3) or F(2x2,3x3), see ki_conv2d_wino_* */
    KI_CONV2D_OV,      /* im2col + a GEMM vectorised over output channels (see ki_conv2d_ov_*) */
    KI_CONV2D_DIRECT,  /* few input channels: direct, AVX2 / AVX-512 (see ki_conv2d_direct_*) */
    KI_CONV2D_DOT,     /* 1x1 on one pixel per image: a dot product per output (forward_dot) */
    KI_CONV2D_WS2      /* 3x3 stride 2: Winograd over the input's two phases (conv2d_ws2.c) */
} ki_conv2d_path;

/* Fewest output tiles per image for which a layer gets Winograd. F(4x4,3x3) (36 products per
 * 16 outputs, weights x4): from 20 tiles, e.g. 20 x 20 outputs (25 tiles, 256 channels: 1.9x
 * faster than im2col + GEMM on one thread). Below that, at 14 x 14, F(4x4) leaves half a GEMM
 * panel empty and would cost resnet18 28 MB of weights: F(2x2,3x3) (16 products per 4 outputs,
 * weights x1.8) from 32 of its tiles instead (14 x 14: 49 tiles), unless F(4x4)'s weights are
 * small (conv2d_policy.c: KI_WINO_MIN_TILES4_SMALL). */
#define KI_WINO_MIN_TILES4 20
#define KI_WINO_MIN_TILES2 32
/* With the OV micro-kernel for the products (AVX-512), which keeps its lanes full from few
 * tiles, F(2x2,3x3) from 9 tiles (6 x 6 outputs): resnet18's 7 x 7 layers (16 tiles) run 1.7x
 * faster than the direct OV path; the original weights are released, so memory grows by 0.8x
 * (or shrinks to half with binary16 weights, ki_conv2d_wino_prepare_h). */
#define KI_WINO_MIN_TILES2_OV 9
/* Below this many input channels the OV products' transposing stores cost more than the GEMM's
 * empty columns save (64ch 56x56 F(4x4): 0.77 ms with the GEMM, 0.93 with OV; 128ch 28x28:
 * 0.98 -> 0.85 ms; 256ch 14x14 F(2x2): 1.29 -> 1.11 ms; 2 threads). */
#define KI_WINO_OV_MIN_IN 128

/* Whether the layer holds Winograd weights in any form (wino_u, or the originals U is formed
 * from: wino_h, wino_f). */
static inline bool ki_conv2d_has_wino(const ki_conv2d *c)
{
    return c->wino_u || c->wino_h || c->wino_f;
}

/* 1x1, stride 1, no padding: the input's planes are the rows of the column matrix. */
static inline bool ki_conv2d_is_pointwise(const ki_conv2d *c)
{
    return c->kh == 1 && c->kw == 1 && c->sh == 1 && c->sw == 1 && c->pt == 0 && c->pb == 0 &&
           c->pl == 0 && c->pr == 0;
}

ki_status ki_conv2d_geom_make(const ki_conv2d *c, const ki_shape *in, ki_conv2d_geom *g,
                              ki_error *err);
ki_conv2d_path ki_conv2d_pick(const ki_conv2d *c, const ki_conv2d_geom *g);
/* Whether a path can run this geometry (tests force each path through ki_conv2d_run). */
bool ki_conv2d_path_ok(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p);
/* Scratch bytes per thread for path p with n_threads threads. */
size_t ki_conv2d_workspace_for(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p,
                               int n_threads);
void ki_conv2d_run(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p, const float *in,
                   float *out, const ki_exec *ex);

/* Kernels (conv2d.c: ref; conv2d_gemm.c: gemm, gemm1, dw). */
void ki_conv2d_forward_ref(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out);
void ki_conv2d_forward_gemm(const ki_conv2d *c, const ki_conv2d_geom *g, bool im2col,
                            const float *in, float *restrict out, const ki_exec *ex);
void ki_conv2d_forward_dw(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex);
/* A 1x1 layer (one group) on one pixel per image, as a squeeze-and-excitation block's
 * excitations or a classifier written as a convolution: each output the level's dot product of
 * its weight row and the image's channels (ki_dot_for, as nn.Linear's one row), then the
 * epilogue. */
void ki_conv2d_forward_dot(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out, const ki_exec *ex);
/* conv2d_avx2.c: one depthwise plane, zero padding, columns within int32. */
void ki_conv2d_dw_plane_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                             const float *w, float *restrict o);
/* Whether the GEMM paths give each thread whole panels (packed privately, one at a time) rather
 * than sharing one packed B (every panel packed by the team, then the tiles split over the
 * output channels as well: ki_gemm_compute): when there are enough panels to balance the
 * threads; with a panel or more per thread, also when no depthwise layer follows. Shared, each
 * thread reads the panels the other packed, from the other core; a depthwise layer after it
 * (split by channels) then finds its channels' rows where they were computed, which private
 * panels (all channels of some pixels) would scatter. mobilenet_v3_small's 96 -> 40 and
 * 120 -> 48 projections at 14x14 (7 panels), 2 threads, in the network: 0.027 -> 0.018 and
 * 0.034 -> 0.025 ms; its expansions before depthwise layers were slower private, and the
 * depthwise layers after them (docs/performance.md). */
static inline bool ki_conv2d_gemm_private(const struct ki_conv2d *c, int64_t n_panels,
                                          int n_threads)
{
    return n_panels >= 4 * (int64_t)n_threads ||
           (n_threads > 1 && n_panels >= n_threads && !c->next_dw);
}

/* A batch or a grouped layer with at least two (image, group) items per thread runs item by
 * item: each thread takes whole items in one parallel region (as they come free), packing up
 * to KI_CONV2D_ITEM_GROUP panels at a time into its own slice. Per item the team would cost a
 * parallel region and its barriers (mnist_cnn's 1,000-image batch: 2,000), and a thread that
 * another process kept off its core held up every one. The same operations per tile. */
#define KI_CONV2D_ITEM_GROUP 4
static inline bool ki_conv2d_gemm_by_item(const ki_conv2d *c, const ki_conv2d_geom *g,
                                          int n_threads)
{
    return n_threads > 1 && g->in.n * c->groups >= 2 * (int64_t)n_threads;
}

/* Panels a thread packs and multiplies together on the private path: up to 4, fewer when that
 * would leave fewer than two groups per thread. */
static inline int64_t ki_conv2d_gemm_group(int64_t n_panels, int n_threads)
{
    int64_t g = n_panels / (2 * (int64_t)n_threads);
    return g < 1 ? 1 : (g > 4 ? 4 : g);
}

/* Whether the depthwise path runs the AVX2 kernel on a zero-padded copy of each plane (a slice
 * of the workspace), which leaves it no borders to mask; *floats gets that copy's size: the
 * padded plane plus slack for the last vector of a row reading past its end. */
static inline bool ki_conv2d_dw_padded(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t *floats)
{
    int64_t hp = g->in.h + c->pt + c->pb, wp = g->in.w + c->pl + c->pr;
    return c->dw_avx2 && c->sw <= 2 && ki_ckd_mul_i64(floats, hp, wp) &&
           ki_ckd_add_i64(floats, *floats, 8 * c->sw + 16) && wp < INT32_MAX / 4;
}

/* Lanes i of a 16-lane load at column b of a row of w values with 0 <= b + i < w, as a bit mask
 * (the masked loads of the AVX-512 kernels, which never touch the lanes masked off). */
static inline uint32_t ki_lane_mask16(int64_t b, int64_t w)
{
    int64_t lo = b < 0 ? -b : 0, hi = w - b < 16 ? w - b : 16;
    if (hi <= lo) {
        return 0;
    }
    return (hi >= 16 ? 0xFFFFu : (1u << hi) - 1u) & ~((1u << lo) - 1u);
}

/* conv2d_direct.c: the direct path for layers with at most KI_DIRECT_MAX_IN input channels
 * (one group, kernels up to KI_DIRECT_MAX_K, stride 1 or 2 in both directions, dilation 1, zero
 * padding): whether the shape qualifies, workspace bytes (the weights repacked as
 * [ceil(out_ch / KI_DIRECT_OC)][in_ch * kh * kw][KI_DIRECT_OC], in the first thread's slice), the
 * kernel. The loops over rows and bands are shared; each output row goes through c->direct_row,
 * the micro-kernel of the CPU's level (conv2d_direct_avx2.c, conv2d_direct_avx512.c, or _ref). A
 * stem (3 channels, 224x224 or 640x640) spends more on im2col's gather than on the products:
 * mobilenet_v2's 3x3 stem 0.37 -> 0.12 ms. */
#define KI_DIRECT_MAX_IN 4
#define KI_DIRECT_MAX_K  8
#define KI_DIRECT_OC     16 /* output channels a block of the packed weights */
bool ki_conv2d_direct_shape_ok(const ki_conv2d *c);
size_t ki_conv2d_direct_workspace(const ki_conv2d *c);
void ki_conv2d_forward_direct(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex);
/* The direct path's weights packed into wp (ki_conv2d_direct_workspace bytes); then output rows
 * [r0, r1) of image n, every channel, into dst (row r at dst + (r - r0) * ow, channels cstride
 * apart), with the epilogue but no residual (ki_conv2d_forward_pwdw). */
void ki_conv2d_direct_pack(const ki_conv2d *c, float *restrict wp);
void ki_conv2d_direct_rows(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           const float *wp, int64_t n, int64_t r0, int64_t r1, float *restrict dst,
                           int64_t cstride);
/* conv2d_s2d.c: a 6x6 stride-2 layer with padding 2 (YOLOv5's stem) as the 3x3 stride-1 layer
 * with padding 1 over its space-to-depth input z[(ic, py, px)][Y][X] = x[ic][2Y + py][2X + px],
 * whose weights are w[o][ic][2ty + py][2tx + px] at tap (ty, tx), on Winograd F(4x4): 36
 * products per 16 outputs and input channel where the direct path takes 144. Whether the shape
 * qualifies; the hidden layer (c->s2d) built at create from c's weights; whether a run of outputs
 * ow wide takes it (not with a fused residual or pool, which stay on the direct rows, nor rows
 * too wide for the transforms' 32-bit offsets); the scratch bytes of a
 * thread for outputs ow wide; output rows [r0, r1) of image n, every channel, into dst (row r
 * at dst + (r - r0) * ow, channels cstride apart) with the epilogue, through the scratch. The
 * rows are computed in runs of KI_S2D_RUN whose tiles start at a multiple of it, so an output
 * has the same bits however the rows are split (alone, by ki_conv2d_forward_direct, or band by
 * band with the next layer, ki_conv2d_forward_pwdw); a run only partly inside [r0, r1) goes
 * through the scratch. */
/* Output rows a run: two rows of F(4x4) tiles. A run copies the z rows of its own rows and two
 * more, so one row of tiles copied 6 z rows per 4 output rows where this copies 10 per 8, and the
 * band it fills holds 8 new rows (docs/performance.md). */
#define KI_S2D_RUN 8
bool ki_conv2d_s2d_shape_ok(const ki_conv2d *c);
ki_status ki_conv2d_s2d_prepare(ki_conv2d *c, ki_error *err);
bool ki_conv2d_s2d_on(const ki_conv2d *c, int64_t ow);
size_t ki_conv2d_s2d_scratch(const ki_conv2d *c, int64_t ow);
void ki_conv2d_s2d_rows(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t n,
                        int64_t r0, int64_t r1, float *restrict dst, int64_t cstride,
                        float *scratch);
/* The layer alone (ki_conv2d_forward_direct when ki_conv2d_s2d_on): the team's runs of rows, each
 * thread through ki_conv2d_s2d_scratch bytes of its slice. */
void ki_conv2d_forward_s2d(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out, const ki_exec *ex);
/* conv2d_ws2.c: 3x3 stride-2 layers with padding 1 as Winograd over the input's two phases (81
 * products per 4x4 output tile and channel pair instead of 144). prepare: U into c->ws2_u; tiles:
 * the 4x4 output tiles of one image; workspace: bytes per thread (0 when too large); forward: the
 * team over items of KI_GEMM_NR tiles. */
bool ki_conv2d_ws2_shape_ok(const ki_conv2d *c);
ki_status ki_conv2d_ws2_prepare(ki_conv2d *c, ki_error *err);
int64_t ki_conv2d_ws2_tiles(const ki_conv2d_geom *g);
size_t ki_conv2d_ws2_workspace(const ki_conv2d *c, const ki_conv2d_geom *g);
void ki_conv2d_forward_ws2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out, const ki_exec *ex);
/* The direct path with the max pool of c->pool after it (resnet's stem): each thread computes a
 * band of the convolution's rows for every channel into its slice of the workspace (the bytes
 * of ki_conv2d_direct_pool_workspace per thread) and pools it from L2 into out, of the pool's
 * output shape (ki_conv2d_pool_dim), so the convolution's output never goes to memory. */
/* The fused pool's output size along a side of n: PyTorch's for its 3-wide window at stride 2,
 * c->pool_pad and c->pool_ceil (a ceil-mode window must start inside the input or the left
 * padding); 0 when no window fits. */
int64_t ki_conv2d_pool_dim(const ki_conv2d *c, int64_t n);
size_t ki_conv2d_direct_pool_workspace(const ki_conv2d *c, const ki_conv2d_geom *g);
void ki_conv2d_forward_direct_pool(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                   float *restrict out, const ki_exec *ex);
/* The row kernels (ki_conv2d_direct_row_fn): plain C (the test oracle of the others, the same
 * taps in the same order, not fused), AVX2+FMA (four channels by 24 columns a block, from rows
 * staged on the stack) and AVX-512 (sixteen by sixteen, from the input in place). */
void ki_conv2d_direct_row_ref(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                              const float *wp, int64_t oy, const ki_conv2d_direct_dst *d);
void ki_conv2d_direct_row_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                               const float *wp, int64_t oy, const ki_conv2d_direct_dst *d);
void ki_conv2d_direct_row_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                                 const float *wp, int64_t oy, const ki_conv2d_direct_dst *d);

/* conv2d_pwdw.c: a 1x1 layer (one group, its original weights) or a layer on the direct path (a
 * stem), and the 3x3 depthwise layer c->dwf after it, a band of the depthwise layer's output rows
 * at a time: each thread computes the first layer's rows the band reads into its slice of the
 * workspace, in L2, and the depthwise band kernel (c->dwf->dw3_band) reads them there, so the
 * first layer's output is never written to memory. Bytes of in-between data that make it pay
 * (declared, at load): more than stay in one core's L2 between the two layers anyway (at AVX2 on a
 * 2 MiB L2: 4.8 MB faster fused, 1.6 and 1.8 MB even or slower), or with AVX-512, whose layers
 * take half the time for the same bytes, more than half of it (mobilenet_v2's 1.6 and 1.8 MB at
 * 56x56 and 112x112 faster fused on the 2 MiB L2; docs/performance.md). */
static inline int64_t ki_conv2d_pwdw_min_bytes(ki_isa isa)
{
    const int64_t l2 = (int64_t)ki_cpu_get()->l2; /* one core's L2 */
    return isa >= KI_ISA_AVX512 ? l2 / 2 : l2;
}
/* A dense second layer (c->dwf_dense: conv_fuse takes one when its own path would be the im2col of
 * 3-wide stride-2 kernels and the GEMM, as yolov5s's 32 -> 64 3x3 stride-2 layer after its stem)
 * runs its GEMM on each band's rows instead of the depthwise band kernel. Whether such a layer's
 * weights and packed panels take at most half of L2, so that they stay there beside a band's rows
 * (3/8 of it) from band to band. yolov5s's 32 -> 64 layer after its stem (74 + 147 KB) ran 4-13 %
 * faster with the stem than after it; its 64 -> 128 one after a 1x1 layer (295 + 295 KB, with 1 MiB
 * of L2) 2-7 % slower (docs/performance.md). */
bool ki_conv2d_pwdw_dense_fits(const ki_conv2d *d);
/* The depthwise layer's geometry for the first layer's geometry g; workspace bytes per thread (0
 * when too large); the kernel (out: the depthwise layer's output). */
ki_status ki_conv2d_pwdw_geom(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_geom *dg,
                              ki_error *err);
size_t ki_conv2d_pwdw_workspace(const ki_conv2d *c, const ki_conv2d_geom *g);
/* The even / odd order of a band's rows (ki_conv2d_pwdw_eo): each row of w (even) columns held as
 * its even columns, then its odd ones, so that a 3x3 stride-2 depthwise layer's taps are plain
 * loads (kx = 1 the even half at the output column, kx = 2 the odd half there, kx = 0 the odd
 * half one column before) where rows in order need two loads and a deinterleave per tap pair.
 * The 1x1 layer writes its rows that way by taking its input's columns in that order when it
 * packs its panels. ki_conv2d_eo_src: the column in rows of w, row by row, of flat position n
 * of the even / odd order. The packing (ki_conv2d_pack_cols for a 1x1 layer, its columns in that
 * order): columns j0 .. j0 + nr - 1 (nr <= KI_PACK_EO_PANELS * KI_GEMM_NR, the last panel's rest
 * zeros) of k planes at x (plane stride ldb, rows of w) into dst as panels of k rows of
 * KI_GEMM_NR, one after another. _ref is plain C, the oracle of the AVX2 one. */
#define KI_PACK_EO_PANELS 4
static inline int64_t ki_conv2d_eo_src(int64_t n, int64_t w)
{
    const int64_t q = n % w, half = w / 2;
    return n - q + (q < half ? 2 * q : 2 * (q - half) + 1);
}
void ki_conv2d_pack_eo_ref(const float *x, int64_t ldb, int64_t w, int64_t j0, int64_t nr,
                           int64_t k, float *restrict dst);
void ki_conv2d_pack_eo_avx2(const float *x, int64_t ldb, int64_t w, int64_t j0, int64_t nr,
                            int64_t k, float *restrict dst);
/* Whether c (its depthwise layer c->dwf over geometry dg) runs its bands in the even / odd order:
 * a 1x1 first layer, a 3x3 stride-2 depthwise layer padded by one whose rows the level's even /
 * odd band kernel takes (c->dwf->dw3_band_eo: an even width, output rows of at least eight
 * columns, a clamp-type activation, no residual). Decided in conv2d_policy.c. */
bool ki_conv2d_pwdw_eo(const ki_conv2d *c, const ki_conv2d_geom *dg);
void ki_conv2d_forward_pwdw(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                            float *restrict out, const ki_exec *ex);

/* Whether c's kernel is 3 wide with stride 2 across, no dilation across
 * and zero padding; the packing of ki_conv2d_pack_cols (use_col) for such layers. */
static inline bool ki_conv2d_pack3s2_ok(const ki_conv2d *c)
{
    return c->kw == 3 && c->sw == 2 && c->dw == 1 && c->pad_mode == KI_CONV_PAD_ZEROS;
}
void ki_conv2d_pack3s2_avx512(const ki_conv2d *c, const ki_conv2d_geom *g,
                              const ki_conv2d_rows *src, int64_t j0, int64_t nr, int64_t k,
                              int64_t pw, float *restrict dst);
void ki_conv2d_pack3s2_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const ki_conv2d_rows *src,
                            int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst);

/* The 3x3 and 5x5 depthwise kernels, straight from the unpadded planes. ki_conv2d_dw3_ok
 * (conv2d_pwdw.c): whether c is a depthwise shape they take (3x3 or 5x5, stride 1 or 2, dilation
 * 1, zero padding, an activation they apply at the store: none, ReLU, ReLU6, Hardtanh, or with the
 * residual before it LeakyReLU, Hardswish, Hardsigmoid, SiLU, Sigmoid). _planes: the planes
 * p0 <= p < p1 (batch-major: channel p % in_ch) read from the unpadded input in, the epilogue
 * (bias, the residual c->res when set, the activation) applied at the store to out. _band: output
 * rows [y0, y1) of channels [c0, c1) of one image (out: its output, channel stride oh * ow) from a
 * band of its input: channel ch's rows row0, row0 + 1, ... at band + ch * cstride (row stride
 * g->in.w), which must hold every row inside the plane that those output rows read
 * (ki_conv2d_forward_pwdw). Fewer than four rows go a row at a time. Bias and the activation are
 * applied at the store; no residual. One algorithm (conv2d_dw3_loops.h) with the vector pieces per
 * level: conv2d_dw_avx512.c (16 lanes), conv2d_dw_avx2.c (8 lanes); c->dw3_planes and c->dw3_band
 * hold the CPU's. */
bool ki_conv2d_dw3_ok(const ki_conv2d *c);
/* Whether the vector kernels apply epilogue ep at the store: a clamp (ki_gemm_fin_of), or one of
 * the activations of their vector epilogue (ki_vact_avx2 / ki_vact_avx512) after bias +
 * residual. */
bool ki_conv2d_act_in_regs(const ki_cv_epilogue *ep);
/* Whether c's row kernel of the direct path applies its non-clamp activation in registers
 * (conv2d_policy.c). */
bool ki_conv2d_direct_act_ok(const ki_conv2d *c);
void ki_conv2d_dw3_planes_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 int64_t p0, int64_t p1, float *restrict out);
void ki_conv2d_dw3_band_avx512(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                               int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                               int64_t y1, float *restrict out);
void ki_conv2d_dw3_planes_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                               int64_t p0, int64_t p1, float *restrict out);
/* Planes the in-place depthwise path hands its kernel in whole groups of (the team's runs start at
 * multiples of it): 8 where the AVX2 kernel takes c's planes eight channels at a time, else 1
 * (conv2d_policy.c). */
int64_t ki_conv2d_dw_granule(const ki_conv2d *c, const ki_conv2d_geom *g);
/* Whether c's planes go through the AVX2 kernel's eight-channel blocks (ki_conv2d_dw3_ch8_avx2),
 * from the AVX2 or the AVX-512 kernel (conv2d_policy.c). */
bool ki_conv2d_dw3_ch8_on(const ki_conv2d *c, const ki_conv2d_geom *g);
/* Whether the AVX2 kernel takes c's planes eight channels at a time (small 3x3 planes, a clamp, no
 * residual: conv2d_dw_avx2.c's ch8 blocks; a run's planes past its last group of eight of an
 * image go through the other blocks). */
bool ki_conv2d_dw3_ch8_avx2(const ki_conv2d *c, const ki_conv2d_geom *g);
/* The kind of layer those blocks take, at any size. */
bool ki_conv2d_dw3_ch8_shape_avx2(const ki_conv2d *c, const ki_conv2d_geom *g);
/* A 1x1 layer c and the small 3x3 depthwise layer d after it (c->dwf_c8), at AVX2 or AVX-512
 * (conv2d_dw_avx2.c: the level's OV kernel, then the AVX2 eight-channel depthwise blocks at
 * either level; at AVX-512 mobilenet_v2's 14x14 and 7x7 blocks ran 5-19 % faster so than as two
 * layers, docs/performance.md, fortieth session): each thread takes 32-channel blocks of c's
 * output (ki_share); a block's OV tiles (c->ov_a, c's bias and clamp in the kernel, the same sums
 * as its GEMM) are stored straight into the block's buffer, each pixel's 32 channels together
 * (in L1 for 14x14 and 7x7 planes), where the eight-channel depthwise blocks (the same sums
 * as on their own, the taps outside the planes zero products) read each 8-channel group, while the
 * next block's weights are asked for. c's output is never
 * written and has no 8x8 transposes on either side: the OV tile is already pixel-major.
 * ki_conv2d_ovdw_ok: c is 1x1 (one group, OV weights that are float32 or can be made so, a
 * clamp-type activation), its channels a multiple of 8, d the ch8 blocks' kind of layer
 * (ki_conv2d_dw3_ch8_shape_avx2) over geometry dg, and a thread's block and one group's output
 * within a quarter of L2 (mobilenet_v2's 28x28 planes, 129 KB, and smaller; its
 * 56x56 ones run in bands), at AVX-512 planes of at most 16 columns (its 28x28 ones run in bands
 * there, ki_conv2d_pwdw_min_bytes). */
bool ki_conv2d_ovdw_ok(const ki_conv2d *c, const ki_conv2d *d, const ki_conv2d_geom *dg);
bool ki_conv2d_want_ovdw(const ki_conv2d *c, const ki_conv2d *d, const ki_op_desc *next);
/* conv2d_policy.c: whether the channel-block or band step c keeps pj, the 1x1 layer after it (as
 * created: c->pjf, conv2d_ovpj.c), and whether a channel-block step's run at depthwise geometry dg
 * hands its projection (on path p) the depthwise output in eight-channel groups (c->out8,
 * pj->in8). */
bool ki_conv2d_want_pjf(const ki_conv2d *c, const ki_conv2d *pj);
bool ki_conv2d_pj_in8(const ki_conv2d *c, const ki_conv2d_geom *dg, ki_conv2d_path p);
/* conv2d_policy.c: whether a band step's projection (path p) runs band by band (c->pj_y). */
bool ki_conv2d_pj_bands(ki_conv2d_path p);
/* conv2d_ovpj.c: such a step with its projection: the output shape, the workspace per thread
 * (0: too large) and the run (res: the projection's fused residual, or NULL). */
ki_status ki_conv2d_ovpj_shape(const ki_conv2d *c, const ki_conv2d_geom *g, ki_shape *out,
                               ki_error *err);
size_t ki_conv2d_ovpj_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads);
ki_status ki_conv2d_forward_ovpj(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 const float *res, float *restrict out, const ki_exec *ex);
size_t ki_conv2d_ovdw_workspace(const ki_conv2d *c, const ki_conv2d_geom *g);
void ki_conv2d_forward_ovdw_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 float *restrict out, const ki_exec *ex);
/* The AVX2 kernel's planes of 4 to 8 output columns (p0 <= p < p1) when c's planes are such, else
 * false and nothing done: the AVX-512 kernel's 3x3 stride-1 planes of that width go there. */
bool ki_conv2d_dw3_narrow_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                               int64_t p0, int64_t p1, float *restrict out);
void ki_conv2d_dw3_band_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                             int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                             int64_t y1, float *restrict out);
/* ki_conv2d_dw3_band_avx2 for a 3x3 stride-2 layer padded by one from rows in the even / odd
 * order (ki_conv2d_pwdw_eo), the same sums in the same order as from rows in order. */
void ki_conv2d_dw3_band_eo_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                                int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                                int64_t y1, float *restrict out);
/* Whether the depthwise path runs that kernel on the planes in place (no workspace). */
static inline bool ki_conv2d_dw_in_place(const ki_conv2d *c)
{
    return c->dw3_planes && ki_conv2d_dw3_ok(c);
}

/* conv2d_avx2.c: depthwise plane of channel ch from its padded copy xp (row stride wp, see
 * above). When the activation is one the vector epilogue handles (true returned), the epilogue
 * (bias, the residual plane res or NULL, the activation) is applied at the store; otherwise the
 * caller applies it after. */
bool ki_conv2d_dw_plane_padded_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *xp,
                                    int64_t ch, const float *res, float *restrict o);

/* conv2d_wino.c. Whether the kernel shape allows Winograd (3x3, stride 1, dilation 1, one group,
 * zero padding); m x m output tiles of an oh x ow plane; transforms the weights for F(m x m,
 * 3x3) into c->wino_u and sets c->wino_m (ki_conv2d_path_ok(WINO) then holds); workspace bytes
 * per thread (0 when too large); the kernel. */
bool ki_conv2d_wino_shape_ok(const ki_conv2d *c);
int64_t ki_conv2d_wino_tiles(int64_t oh, int64_t ow, int m);
ki_status ki_conv2d_wino_prepare(ki_conv2d *c, int m, bool ov, ki_error *err);
/* conv2d.c: a huge-page buffer of a * b * c floats (*bytes its size) for a layer's own form of
 * its weights (Winograd, OV), `what` naming that form in the errors. */
ki_status ki_conv2d_alloc_weights(size_t a, size_t b, size_t c, const char *what, float **out,
                                  size_t *bytes, ki_error *err);
/* F(2x2) on the OV micro-kernel with the original weights kept, as binary16 when half (all
 * must be exact such values: wino_h) or as float32 (wino_f): U is formed from them per block of
 * input channels while the products run. */
ki_status ki_conv2d_wino_prepare_h(ki_conv2d *c, bool half, ki_error *err);
/* U = G g G^T of F(2x2) for kc input channels of one 32-channel block of wino_h or wino_f (g:
 * [kc][9][32]) into u[pos * pstride + q * 32 + r], pos < 16. Every version does the same float
 * operations. */
void ki_wino_hu_ref(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride);
void ki_wino_hu_avx512(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride);
void ki_wino_fu_ref(const float *g, int64_t kc, float *restrict u, int64_t pstride);
void ki_wino_fu_avx2(const float *g, int64_t kc, float *restrict u, int64_t pstride);
void ki_wino_fu_avx512(const float *g, int64_t kc, float *restrict u, int64_t pstride);
size_t ki_conv2d_wino_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads);
/* Image x of geometry g on this thread alone, a panel of tiles at a time through v (the floats
 * of ki_conv2d_wino_alone_floats: one panel's V and M), its output planes ys floats apart from
 * y; the bias in the output transform, no activation (conv2d_s2d.c). */
size_t ki_conv2d_wino_alone_floats(const ki_conv2d *c);
void ki_conv2d_wino_alone(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, float *y,
                          int64_t ys, float *v);
void ki_conv2d_forward_wino(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                            float *restrict out, const ki_exec *ex);
/* The transforms (wino_xform.h) take tiles in groups of KI_WINO_LANES: a range [tb, te) starts at
 * a multiple of it and ends at one or at the last tile (an output group is written whole, up to
 * the last tile). */
#define KI_WINO_LANES 16
void ki_wino_input_ref(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                       int64_t te, float *restrict v, int64_t pan, int64_t pstride);
void ki_wino_input_avx512(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                          int64_t te, float *restrict v, int64_t pan, int64_t pstride);
void ki_wino_input_avx2(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                        int64_t te, float *restrict v, int64_t pan, int64_t pstride);
void ki_wino_output_avx2(const float *m, int64_t pstride, float *q, const float *res,
                         const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                         float hi);
void ki_wino_output_ref(const float *m, int64_t pstride, float *q, const float *res,
                        const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                        float hi);
void ki_wino_output_avx512(const float *m, int64_t pstride, float *q, const float *res,
                           const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                           float hi);

/* conv2d_ov.c. For small outputs (few pixels per image, e.g. 7 x 7 = 49) the GEMM's 32-pixel
 * panels run partly empty; the OV path turns the product around: 32 output channels fill two
 * 16-lane vectors (four 8-lane ones with AVX2) and the pixels, in blocks of up to KI_OV_PW_MAX
 * (ki_conv2d_ov_pw), are broadcast: no lane is idle, where 49 pixels fill 77 % of two panels.
 * Weights are repacked at create (groups == 1); the pixels' column blocks are packed per run
 * (ki_conv2d_pack_cols). */
bool ki_conv2d_ov_shape_ok(const ki_conv2d *c);
/* Pixels per column block for n output pixels (1..KI_OV_PW_MAX) in the fewest blocks: equal ones
 * (ki_conv2d_ov_pw_equal), or where c's micro-kernel runs those slower (c->ov_pw: AVX2's
 * ki_ov_pw_avx2), blocks of KI_OV_PW_MAX and the rest. */
int64_t ki_conv2d_ov_pw(const ki_conv2d *c, int64_t n);
/* The bias of c's output channels oc0 .. oc0 + rows - 1 (rows <= KI_OV_MV) into buf, zero past
 * them, for the OV kernel to add; NULL when c has no bias. */
const float *ki_conv2d_ov_bias(const ki_conv2d *c, int64_t oc0, int64_t rows, float buf[KI_OV_MV]);
int64_t ki_conv2d_ov_pw_equal(int64_t n);
int64_t ki_ov_pw_avx2(int64_t n);
/* Column blocks for n output pixels, ceil(n / KI_OV_PW_MAX): the same for either cut. */
int64_t ki_conv2d_ov_blocks(int64_t n);
/* Whether fuse() may give layer c a global mean (c->gap): a layer with OV weights, one group, no
 * residual, max pool or band fusion, and a clamp-type activation (in the tiles' epilogue). */
bool ki_conv2d_gap_ok(const ki_conv2d *c);
/* half: keep the weights as binary16 (c->ov_h) if every one is exactly such a value (conv_create
 * asks for it from KI_OV_HALF_MIN_BYTES of them); else float32 (c->ov_a). */
ki_status ki_conv2d_ov_prepare(ki_conv2d *c, bool half, ki_error *err);
size_t ki_conv2d_ov_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads);
void ki_conv2d_forward_ov(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex);
/* Rows 0..rows-1 (output channels) and columns 0..nr-1 (pixels) of an OV tile t ([pw][KI_OV_MV])
 * into d, row stride ld: the transposing store. */
void ki_ov_tile_store(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                      const float *res, float lo, float hi);
void ki_ov_tile_store_avx512(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                             const float *res, float lo, float hi);
/* conv2d_ov_avx2.c: the tile store and the float32 micro-kernel with AVX2+FMA. */
void ki_ov_tile_store_avx2(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                           const float *res, float lo, float hi);
void ki_ov_ukernel_avx2(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                        const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf);
void ki_ov_ukernel_ref(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                       const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf);
/* The OV micro-kernel over a column block in eight-channel groups: b[k][j] at
 * b[(k / 8) * ldb + j * 8 + k % 8] (a pixel's eight channels together, the groups ldb apart),
 * k a multiple of 8; the same products in the same order as ki_ov_ukernel_*, so the same bits. */
void ki_ov_ukernel8_ref(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                        const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf);
void ki_ov_ukernel8_avx2(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                         const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf);
void ki_ov_ukernel_avx512(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                          const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf);
void ki_ov_ukernel_h_ref(int64_t k, const uint16_t *a, const float *b, int pw, int64_t ldb,
                         bool acc, const float *bias, float lo, float hi, float *restrict t,
                         ki_ov_pf pf);
void ki_ov_ukernel_h_avx512(int64_t k, const uint16_t *a, const float *b, int pw, int64_t ldb,
                            bool acc, const float *bias, float lo, float hi, float *restrict t,
                            ki_ov_pf pf);
/* conv2d_gemm.c: d[ox] = src[ox * c->sw + off] for ox < len, zero where that column lies outside
 * the input row src of w columns (the zero padding), stride 1 or 2 (c->gather2); one tap's row of
 * an im2col, and the space-to-depth rows of conv2d_s2d.c. */
void ki_conv2d_tap_row(const ki_conv2d *c, const float *src, int64_t w, int64_t off, int64_t len,
                       float *restrict d);
/* conv2d_gemm.c: columns j0..j0+nr of the column matrix B (k rows: im2col when use_col, else the
 * input planes of a 1x1 convolution) into dst with row stride pw >= nr, zero-filled past nr. */
void ki_conv2d_pack_cols(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col, const float *x,
                         int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst);

void ki_conv2d_gather2_ref(const float *src, float *restrict d, int64_t n);
void ki_conv2d_gather2_avx2(const float *src, float *restrict d, int64_t n);

/* The parameters of op (nn.Conv2d or F.conv2d) for a weight of dims wd (out, in/groups, kh, kw):
 * every geometry field of c, but not the weight and bias data. F.conv2d, whose weight is an
 * input, calls it for each weight shape. */
ki_status ki_conv2d_parse(const ki_op_desc *op, const int64_t wd[4], ki_conv2d *c, ki_error *err);

/* conv2d_policy.c: every choice of how a layer runs. Sets the kernels to those of level isa (or
 * the highest below it this CPU runs). */
void ki_conv2d_set_isa(ki_conv2d *c, ki_isa isa);
/* At create: whether the weights are stored as binary16 (stored), whether to keep them so;
 * which Winograd variant to prepare (4, 2 or 0; *ov: its products on the OV kernel, *wh: F(2x2)
 * on binary16 weights); whether to repack the weights for the OV path; whether a 6x6 stride-2
 * stem runs as space-to-depth and Winograd; whether a 3x3 stride-2 layer takes the two-phase
 * Winograd (conv2d_ws2.c); whether to run band by band with next (a depthwise
 * nn.Conv2d). */
bool ki_conv2d_half_stored(const ki_conv2d *c);
bool ki_conv2d_want_half(const ki_conv2d *c, bool stored);
int ki_conv2d_want_wino(const ki_conv2d *c, const ki_op_desc *op, bool half, bool stored, bool *ov,
                        bool *wh);
bool ki_conv2d_want_ov(const ki_conv2d *c, const ki_op_desc *op);
bool ki_conv2d_want_s2d(const ki_conv2d *c);
bool ki_conv2d_want_dw_w8(const ki_conv2d *c);
bool ki_conv2d_want_ws2(const ki_conv2d *c, const ki_op_desc *op);
bool ki_conv2d_want_pwdw(const ki_conv2d *c, const ki_op_desc *next);
/* The path and kernels this layer runs for input shape in, e.g. "winograd F(4x4) avx2", into buf.
 */
void ki_conv2d_describe(const ki_conv2d *c, const ki_shape *in, char *buf, size_t n);

/* ---- nn.ConvTranspose2d ---- */
typedef struct ki_deconv2d {
    int64_t in_ch, out_ch, groups;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, oph, opw;
    const float *weight; /* (in_ch, out_ch/groups, kh, kw) */
    /* per group the weight transposed, (out_ch/groups * kh * kw) x (in_ch/groups), the GEMM's A
     * (owned; made at create for nn.ConvTranspose2d, NULL for F.conv_transpose2d, whose
     * weight comes with each run: then it is transposed into the workspace) */
    float *wt;
    ki_cv_epilogue ep;
} ki_deconv2d;

typedef enum ki_deconv2d_path {
    KI_DECONV2D_REF = 0, /* gather over the input, scalar */
    KI_DECONV2D_GEMM     /* kinfer's GEMM into columns (a 1x1 convolution), then col2im */
} ki_deconv2d_path;

/* As ki_conv2d_parse for nn.ConvTranspose2d / F.conv_transpose2d, weight dims wd
 * (in, out/groups, kh, kw). */
ki_status ki_deconv2d_parse(const ki_op_desc *op, const int64_t wd[4], ki_deconv2d *c,
                            ki_error *err);
ki_status ki_deconv2d_geom_make(const ki_deconv2d *c, const ki_shape *in, ki_conv2d_geom *g,
                                ki_error *err);
ki_deconv2d_path ki_deconv2d_pick(const ki_deconv2d *c, const ki_conv2d_geom *g);
size_t ki_deconv2d_workspace_for(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_deconv2d_path p,
                                 int n_threads);
void ki_deconv2d_forward_gemm(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex);
/* The transposed weight of every group (c->wt's layout) into wt. */
void ki_deconv2d_transpose(const ki_deconv2d *c, float *restrict wt);
/* The GEMM path's workspace per thread (0 on overflow). */
size_t ki_deconv2d_gemm_workspace(const ki_deconv2d *c, const ki_conv2d_geom *g, int n_threads);
void ki_deconv2d_run(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_deconv2d_path p,
                     const float *in, float *out, const ki_exec *ex);

#endif
