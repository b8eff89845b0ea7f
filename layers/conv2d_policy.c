/* conv2d_policy.c - every decision about how nn.Conv2d runs, in one place: the kernels of each
 * instruction-set level (one table per level), which forms of its weights a layer prepares at
 * load (Winograd, the small-output path, binary16), whether it runs band by band with the
 * depthwise layer after it, and, per input shape, which path runs (ki_conv2d_pick), with a name
 * for profiles (ki_conv2d_describe). Thresholds that depend on the machine come from the CPU
 * module's cache sizes; the timings behind the others are in docs/performance.md. */
#include <stdio.h>
#include <string.h>

#include "../core/half.h"
#include "conv2d.h"

/* The kernels of each instruction-set level: one table per level, the algorithms shared. A level
 * without its own version of a kernel names the one below it, or NULL where the path needs a
 * vector kernel (depthwise in place, stride-2 im2col). */
typedef struct conv_kernels {
    ki_cv_epilogue_fn epf;
    void (*gather2)(const float *src, float *restrict d, int64_t n);
    void (*dw3_planes)(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t p0,
                       int64_t p1, float *restrict out);
    void (*dw3_band)(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band, int64_t row0,
                     int64_t cstride, int64_t c0, int64_t c1, int64_t y0, int64_t y1,
                     float *restrict out);
    ki_conv2d_direct_row_fn direct_row;
    bool direct_act; /* direct_row applies ki_conv2d_direct_dst's act */
    ki_pool_max_s2_fn direct_pool;
    void (*pack3s2)(const ki_conv2d *c, const ki_conv2d_geom *g, const ki_conv2d_rows *src,
                    int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst);
    ki_wino_in_fn wino_in;
    ki_wino_out_fn wino_out;
    void (*wino_hu)(const uint16_t *g, int64_t kc, float *restrict u, int64_t pstride);
    void (*wino_fu)(const float *g, int64_t kc, float *restrict u, int64_t pstride);
    ki_ov_ukernel ov_uk;
    ki_ov_ukernel_h ov_ukh;
    ki_ov_store_fn ov_st;
    ki_ws2_in_fn ws2_in;
    ki_ws2_out_fn ws2_out;
    void (*dw3_band_eo)(const ki_conv2d *c, const ki_conv2d_geom *g, const float *band,
                        int64_t row0, int64_t cstride, int64_t c0, int64_t c1, int64_t y0,
                        int64_t y1, float *restrict out);
    void (*pack_eo)(const float *x, int64_t ldb, int64_t w, int64_t j0, int64_t nr, int64_t k,
                    float *restrict dst);
    int64_t (*ov_pw)(int64_t n);
    ki_ov_ukernel ov_uk8;
} conv_kernels;

static const conv_kernels kernels_of[KI_ISA_COUNT] = {
    [KI_ISA_GENERIC] = { ki_cv_epilogue_ref, ki_conv2d_gather2_ref, NULL, NULL,
                         ki_conv2d_direct_row_ref, false, ki_pool_max_s2_ref, NULL,
                         ki_wino_input_ref, ki_wino_output_ref, ki_wino_hu_ref, ki_wino_fu_ref,
                         ki_ov_ukernel_ref, ki_ov_ukernel_h_ref, ki_ov_tile_store, ki_ws2_input_ref,
                         ki_ws2_output_ref },
#if KI_HAVE_X86
    [KI_ISA_AVX2] = { ki_cv_epilogue_avx2,
                      ki_conv2d_gather2_avx2,
                      ki_conv2d_dw3_planes_avx2,
                      ki_conv2d_dw3_band_avx2,
                      ki_conv2d_direct_row_avx2,
                      true,
                      ki_pool_max_s2_avx2,
                      ki_conv2d_pack3s2_avx2,
                      ki_wino_input_avx2,
                      ki_wino_output_avx2,
                      ki_wino_hu_ref,
                      ki_wino_fu_avx2,
                      ki_ov_ukernel_avx2,
                      ki_ov_ukernel_h_ref,
                      ki_ov_tile_store_avx2,
                      ki_ws2_input_avx2,
                      ki_ws2_output_avx2,
                      ki_conv2d_dw3_band_eo_avx2,
                      ki_conv2d_pack_eo_avx2,
                      ki_ov_pw_avx2,
                      ki_ov_ukernel8_avx2 },
    /* vcvtph2ps on zmm (the binary16 kernels) is AVX512F itself */
    [KI_ISA_AVX512] = { ki_cv_epilogue_avx512, ki_conv2d_gather2_avx2, ki_conv2d_dw3_planes_avx512,
                        ki_conv2d_dw3_band_avx512, ki_conv2d_direct_row_avx512, true,
                        ki_pool_max_s2_avx512, ki_conv2d_pack3s2_avx512, ki_wino_input_avx512,
                        ki_wino_output_avx512, ki_wino_hu_avx512, ki_wino_fu_avx512,
                        ki_ov_ukernel_avx512, ki_ov_ukernel_h_avx512, ki_ov_tile_store_avx512,
                        ki_ws2_input_avx2, ki_ws2_output_avx2 },
#endif
};

void ki_conv2d_set_isa(ki_conv2d *c, ki_isa isa)
{
    while (isa > KI_ISA_GENERIC && !ki_gemm_ukernel_for(isa)) {
        isa--; /* a level this CPU (or this build) lacks */
    }
    const conv_kernels *k = &kernels_of[isa];
    c->isa = isa;
    c->uk = ki_gemm_ukernel_for(isa);
    c->epf = k->epf;
    c->dw_avx2 = isa >= KI_ISA_AVX2;
    c->dw3_planes = k->dw3_planes;
    c->dw3_band = k->dw3_band;
    c->dw3_band_eo = k->dw3_band_eo;
    c->pack_eo = k->pack_eo;
    c->direct = isa >= KI_ISA_AVX2;
    c->direct_row = k->direct_row;
    c->direct_act = k->direct_act;
    c->direct_pool = k->direct_pool;
    c->gather2 = k->gather2;
    c->pack3s2 = k->pack3s2 && ki_conv2d_pack3s2_ok(c) ? k->pack3s2 : NULL;
    c->wino_in = k->wino_in;
    c->wino_out = k->wino_out;
    c->wino_hu = k->wino_hu;
    c->wino_fu = k->wino_fu;
    c->ov_uk = k->ov_uk;
    c->ws2_in = k->ws2_in;
    c->ws2_out = k->ws2_out;
    c->ov_ukh = k->ov_ukh;
    c->ov_st = k->ov_st;
    c->ov_pw = k->ov_pw;
    c->ov_uk8 = k->ov_uk8;
}

/* The direct path's row kernels apply Hardswish, Hardsigmoid and LeakyReLU in registers, where the
 * store after the sums leaves them a few operations each; SiLU and Sigmoid (an exp each) stay
 * after the row is stored: in registers yolov5s' 6x6 stem with its SiLU took 1.04x (AVX2) and
 * 1.07x (AVX-512) as long, mobilenet_v3_small's stem with its Hardswish 0.86x and 0.81x
 * (docs/performance.md). */
bool ki_conv2d_direct_act_ok(const ki_conv2d *c)
{
    const ki_act_kind k = c->ep.act.kind;
    return c->direct_act && ki_conv2d_act_in_regs(&c->ep) && k != KI_ACT_SILU &&
           k != KI_ACT_SIGMOID;
}

/* F(4x4) also pays from KI_WINO_MIN_TILES4_SMALL tiles (13 x 13 to 16 x 16 outputs), with 27 %
 * fewer products than F(2x2) on 49 tiles, while its transformed weights (36 floats per input /
 * output channel pair, 2.25x F(2x2)'s) come from the cache: at 16 tiles the products read 0.125
 * bytes of U per FLOP, which the last-level cache delivers to every core but memory may not. So U
 * may take up to half of L3 (KI_WINO_U4_L2S L2 sizes on a CPU without one). Weights stored as
 * binary16, kept small on purpose (KI_OV_HALF_MIN_BYTES), stay within KI_WINO_U4_L2S L2 sizes:
 * resnet18's zoo export would peak at 95 MiB instead of 78 (docs/memory.md). On a Zen 4 VM (L2 1
 * MiB, L3 32 MiB), 2 threads, in the network, per-step minima: resnet18's 256-channel 14 x 14
 * layers (U 9.4 MB) 0.85-0.86 -> 0.62-0.70 ms at avx2, 0.60-0.64 -> 0.52-0.57 at avx512; unet's
 * 16 x 16 layers 0.27-0.59 -> 0.19-0.36 ms; squeezenet's 64 -> 256 at 13 x 13 (U 2.4 MB) alone
 * 0.225 -> 0.178. On a CPU with 2 MiB of L2, resnet18's layers were level in the network
 * (docs/performance.md). */
#define KI_WINO_MIN_TILES4_SMALL 16
#define KI_WINO_U4_L2S           3

/* The bytes that transformed weights of 36 floats per channel pair may take (F(4x4) and the
 * two-phase stride-2 form): half of L3, KI_WINO_U4_L2S L2 sizes without one or for weights
 * stored as binary16 when that is smaller. */
static size_t u4_bound(bool stored)
{
    const ki_cpu_info *cpu = ki_cpu_get();
    const size_t l2s = KI_WINO_U4_L2S * cpu->l2, l3 = cpu->l3 / 2;
    return !cpu->l3 ? l2s : stored && l2s < l3 ? l2s : l3;
}

/* Whether F(4x4)'s transformed weights for c fit that bound (stored: its weights are stored as
 * binary16; the bound is then never above the float32 one, so a layer given F(4x4) at create
 * keeps it at run time, where ki_conv2d_pick asks with the float32 bound). */
static bool u4_small(const ki_conv2d *c, bool stored)
{
    int64_t pairs;
    return ki_ckd_mul_i64(&pairs, c->in_ch / c->groups, c->out_ch) &&
           pairs <= (int64_t)(u4_bound(stored) / (36 * sizeof(float)));
}

/* Whether Winograd pays for layer c at output size oh x ow with m x m tiles (see
 * KI_WINO_MIN_TILES4); ov: its products run on the OV micro-kernel, which fills its lanes from
 * few tiles; stored: its weights are stored as binary16 (u4_small). */
static bool wino_pays(const ki_conv2d *c, int64_t oh, int64_t ow, int m, bool ov, bool stored)
{
    const int64_t tiles = ki_conv2d_wino_tiles(oh, ow, m);
    if (m == 4) {
        return tiles >= KI_WINO_MIN_TILES4 ||
               (tiles >= KI_WINO_MIN_TILES4_SMALL && u4_small(c, stored));
    }
    return tiles >= (ov ? KI_WINO_MIN_TILES2_OV : KI_WINO_MIN_TILES2);
}

/* The input shape the param file declares, when it gives the height and width; else NULL. */
static const ki_shape *declared_input(const ki_op_desc *op)
{
    const ki_shape *d = op->input_decl && op->n_inputs > 0 ? &op->input_decl[0] : NULL;
    return d && d->ndim >= 3 && d->d[d->ndim - 1] >= 0 && d->d[d->ndim - 2] >= 0 ? d : NULL;
}

/* The geometry of declared input d (an unknown batch read as 1, unknown channels as the
 * layer's); false when it does not fit the layer. */
static bool declared_geom(const ki_conv2d *c, const ki_shape *d, ki_conv2d_geom *g)
{
    ki_shape s = *d;
    for (int i = 0; i < s.ndim - 2; i++) {
        s.d[i] = s.d[i] >= 0 ? s.d[i] : i == s.ndim - 3 ? c->in_ch : 1;
    }
    return ki_conv2d_geom_make(c, &s, g, NULL) == KI_OK;
}

/* Output pixels per image up to which a layer gets the OV path (its declared input size must
 * say so): there the GEMM's 32-pixel panels run partly empty and few panels leave the threads
 * little to split. At 7 x 7 (49 pixels) the OV path is 1.1-1.35x faster on resnet18's and
 * mobilenet_v2's layers; on a CPU with two 512-bit FMA units (its 12-pixel tiles keep 24
 * accumulators, the GEMM's 8 x 32 tile 16) also at 14 x 14 and 20 x 20: resnet18's 3x3
 * stride-2 128->256 0.95 -> 0.69 ms, yolov5s's 256->512 to 20x20 7.0 -> 5.4 ms (2 threads, in
 * the network); at 28 x 28 it is no faster. */
#define KI_OV_MAX_PIXELS 400
/* Output pixels up to which binary16 weights are kept as such (KI_OV_HALF_MIN_BYTES): a 3x3
 * stride-1 layer then runs Winograd F(2x2) forming U from them per block of input channels
 * (ki_conv2d_wino_prepare_h), another one the OV path on them. At 14 x 14 resnet18's
 * 256-channel layers are faster with F(2x2) on float32 U (0.35 against 0.37-0.38 ms with U formed
 * per block, 2 threads, in the network). */
#define KI_OV_HALF_MAX_PIXELS 64

/* Float32 weight bytes from which binary16-exact weights are kept as binary16: below that they
 * stay in L2 / L3 between runs and the widening costs more than it saves (mobilenet_v2's 1x1
 * layers of 0.2-1.6 MB 1.02-1.15x slower as binary16). Larger ones come from memory: resnet18's
 * 7x7 layer4 (9.4 MB per layer) took 1.94 ms per layer with F(2x2) on float32 U (16/9 of the
 * original floats, 3.6x the binary16 bytes, and 50 MB more memory), 1.34 on the OV path with
 * binary16 weights, 1.60 with float32 ones; F(2x2) with U formed from the binary16 weights runs
 * them 0.55-0.60 ms against the OV path's 0.76-0.83 (2 threads, in the network, a later day). */
#define KI_OV_HALF_MIN_BYTES (2 * 1024 * 1024)

/* The layer's weight count. */
static int64_t weight_floats(const ki_conv2d *c)
{
    return c->out_ch * (c->in_ch / c->groups) * c->kh * c->kw;
}

/* Whether F(2x2) forming U from float32 weights (9/16 of U's bytes) pays over float32 U: for
 * weights of at least four L2 sizes (U of seven), whose U comes from memory each run. resnet18's
 * 7x7 layer4 (9.4 MB per layer, U 16.8 MB), 2 threads, in the network: AVX-512 1.27-1.34 ->
 * 1.03-1.04 ms per layer, AVX2 1.61-1.62 -> 1.53-1.55. unet's 256-channel 8x8 layer (2.25 MB, U
 * 4 MB, which the last-level cache keeps between runs): 0.23 -> 0.28 ms (docs/performance.md). */
static bool formed_f32_pays(const ki_conv2d *c)
{
    return weight_floats(c) >= 4 * (int64_t)(ki_cpu_get()->l2 / sizeof(float));
}

/* Whether this layer's weights are all exactly binary16 values (an export that stores f16
 * weights) and large enough to come from memory each run. */
bool ki_conv2d_half_stored(const ki_conv2d *c)
{
    uint16_t h;
    const int64_t n = weight_floats(c);
    if (!c->weight || n < KI_OV_HALF_MIN_BYTES / (int64_t)sizeof(float)) {
        return false;
    }
    for (int64_t i = 0; i < n; i++) {
        if (!ki_half_exact(c->weight[i], &h)) {
            return false;
        }
    }
    return true;
}

/* Whether to keep this layer's weights as binary16 (stored: ki_conv2d_half_stored): only a vector
 * kernel widens them (AVX-512's vcvtph2ps on zmm). */
bool ki_conv2d_want_half(const ki_conv2d *c, bool stored)
{
    return stored && c->ov_ukh != ki_ov_ukernel_h_ref;
}

/* Which Winograd variant to transform the weights for at create (4, 2, or 0 for none): a 3x3
 * stride-1 kernel with enough channels and, when the param file declares the input's size,
 * enough output tiles (the transformed weights take 4x / 1.8x the memory of the originals, so
 * layers that would not use them do not get them). When the size is known only at run time
 * (dynamic exports), the channel count stands in for it, as CNNs widen where they shrink:
 * F(4x4) up to 128 x 128 channels, F(2x2) up to 256 x 256, none above (resnet18's dynamic
 * export then gets exactly the static export's choices instead of 140 MB of F(4x4) weights for
 * layers whose 7 x 7 and 14 x 14 outputs would not use them). *ov: the products run on the OV
 * micro-kernel (AVX-512): from KI_WINO_OV_MIN_IN input channels, and for the small outputs where
 * only it makes F(2x2) pay. *wh: F(2x2) with U formed per block from the original weights at
 * small outputs (KI_OV_HALF_MAX_PIXELS): kept as binary16 when half (they all are such values
 * and large), else as float32 where formed_f32_pays. */
int ki_conv2d_want_wino(const ki_conv2d *c, const ki_op_desc *op, bool half, bool stored, bool *ov,
                        bool *wh)
{
    *wh = false;
    const bool ov_ok = c->ov_uk != ki_ov_ukernel_ref;
    *ov = ov_ok && c->in_ch >= KI_WINO_OV_MIN_IN;
    if (!c->weight || !ki_conv2d_wino_shape_ok(c) || c->in_ch < 8 || c->out_ch < 8) {
        return 0;
    }
    const ki_shape *d = declared_input(op);
    ki_conv2d_geom g;
    if (!d) {
        int64_t pairs = c->in_ch * c->out_ch;
        return pairs <= 128 * 128 ? 4 : pairs <= 256 * 256 ? 2 : 0;
    }
    if (!declared_geom(c, d, &g)) {
        return 0;
    }
    if (ov_ok && g.oh * g.ow <= KI_OV_HALF_MAX_PIXELS && (half || formed_f32_pays(c))) {
        /* F(2x2) forming U from the weights (binary16 ones kept as such), else the OV path on
         * them (see KI_OV_HALF_MIN_BYTES) */
        *ov = *wh = wino_pays(c, g.oh, g.ow, 2, true, stored);
        return *wh ? 2 : 0;
    }
    if (wino_pays(c, g.oh, g.ow, 4, *ov, stored)) {
        return 4;
    }
    if (wino_pays(c, g.oh, g.ow, 2, *ov, stored)) {
        return 2;
    }
    *ov = ov_ok;
    return ov_ok && wino_pays(c, g.oh, g.ow, 2, true, stored) ? 2 : 0;
}

/* A 1x1 stride-1 unpadded layer's OV path reads the input in place (no packing) and pays to
 * larger outputs when k is long enough: 2 threads, 14 x 14, 384 -> 64 channels 0.050 ms against
 * the GEMM's 0.097; 576 -> 96 0.109 / 0.180; 20 x 20, 1024 -> 512 1.95 / 2.34 ms; 28 x 28,
 * 192 -> 32 0.055 / 0.064. From 56 x 56 its pixel-block loop streams the input once per channel
 * block and loses (64 -> 128: 0.30 / 0.27 ms), as it does for short k (24 -> 144 at 56 x 56). */
#define KI_OV_1X1_MIN_IN     64
#define KI_OV_1X1_MAX_PIXELS 1024

/* Whether the output channels fill the OV path's KI_OV_MV-channel blocks at least 7/8. */
static bool ov_blocks_full(const ki_conv2d *c)
{
    const int64_t lanes = (c->out_ch + KI_OV_MV - 1) / KI_OV_MV * KI_OV_MV;
    return 8 * c->out_ch >= 7 * lanes;
}

/* A 1x1 layer whose pixels fill the GEMM's 32-wide panels at least 7/8 stays on the GEMM when
 * its k is short (one k block, fewer than KI_OV_KC input channels, e.g. mobilenet's expansions:
 * the OV path's transposing store of every output is a large share of so few products per
 * output; mobilenet_v2's 64 -> 384 at 14x14, one thread: a quarter of the layer) or when its
 * output channels fill the OV path's 32-channel blocks less than 7/8 (the GEMM's rows go by 8):
 * mobilenet_v3_small's 144 -> 48 at 14x14 alone, avx2, 0.047 -> 0.041 ms on one thread, 0.028
 * -> 0.025 on two, the network 0.98-0.99x; squeezenet1_1's 384 -> 48 at 13x13 0.121 -> 0.106 ms
 * on one thread. The GEMM writes its rows as they are. 7x7 (49 of 64 lanes) keeps the OV path
 * (docs/performance.md). */
static bool gemm_fills(const ki_conv2d *c, int64_t n)
{
    const int64_t lanes = (n + KI_GEMM_NR - 1) / KI_GEMM_NR * KI_GEMM_NR;
    return ki_conv2d_is_pointwise(c) && (c->in_ch < KI_OV_KC || !ov_blocks_full(c)) &&
           8 * n >= 7 * lanes;
}

/* Whether to repack the weights for the OV path at create: one group, not Winograd, a vector
 * micro-kernel, and a declared input whose output has at most KI_OV_MAX_PIXELS pixels, or a 1x1
 * layer in the bounds above whose channel blocks are at least 7/8 full; not a 1x1 layer that
 * gemm_fills, nor one on a single pixel: its micro-kernel tile of one pixel keeps two
 * accumulator chains waiting on the FMA latency, where the dot products of KI_CONV2D_DOT keep
 * four and read the original weight rows (mobilenet_v3_small's 18 excitation layers, avx2, one
 * thread: 0.15 -> 0.08 ms; docs/performance.md). */
bool ki_conv2d_want_ov(const ki_conv2d *c, const ki_op_desc *op)
{
    const ki_shape *d = declared_input(op);
    ki_conv2d_geom g;
    if (!c->weight || ki_conv2d_has_wino(c) || !ki_conv2d_ov_shape_ok(c) ||
        c->ov_uk == ki_ov_ukernel_ref || !d || !declared_geom(c, d, &g)) {
        return false;
    }
    const int64_t n = g.oh * g.ow;
    if (gemm_fills(c, n) || (ki_conv2d_is_pointwise(c) && n == 1)) {
        return false; /* one pixel: the dot products (KI_CONV2D_DOT) on the original weights */
    }
    return n <= KI_OV_MAX_PIXELS || (ki_conv2d_is_pointwise(c) && c->in_ch >= KI_OV_1X1_MIN_IN &&
                                     n <= KI_OV_1X1_MAX_PIXELS && ov_blocks_full(c));
}

/* Whether a 6x6 stride-2 stem on the direct path runs as space-to-depth and Winograd F(4x4)
 * (conv2d_s2d.c): where the direct path runs (a vector row kernel), from KI_S2D_MIN_OUT output
 * channels. Its Winograd weights take 36 floats per channel pair (YOLOv5's stem: 55 KB), so no
 * declared size is needed. Faster than the direct rows at AVX2 and AVX-512, alone and in the bands
 * with the next layer (docs/performance.md). */
#define KI_S2D_MIN_OUT 8
/* Whether c keeps its weights as the eight-channel blocks' tap vectors (c->dw_w8): a 3x3
 * depthwise layer of at least eight channels with its weights, at a level whose depthwise kernels
 * run those blocks (AVX2 and up). */
bool ki_conv2d_want_dw_w8(const ki_conv2d *c)
{
    return c->dw_avx2 && c->weight && c->groups == c->in_ch && c->groups == c->out_ch &&
           c->kh == 3 && c->kw == 3 && c->out_ch >= 8;
}

bool ki_conv2d_want_s2d(const ki_conv2d *c)
{
    return c->weight && c->direct && ki_conv2d_direct_shape_ok(c) && ki_conv2d_s2d_shape_ok(c) &&
           c->out_ch >= KI_S2D_MIN_OUT;
}

/* Whether a 3x3 stride-2 layer with padding 1 takes the two-phase Winograd (conv2d_ws2.c): 81
 * products per 4x4 output tile and channel pair instead of 144, on a vector GEMM micro-kernel.
 * - From KI_WS2_MIN_TILES tiles: U (4x the weights) comes from memory each run in a network and
 *   is amortized over the tiles, and items of 32 tiles must give every thread a fair share. On a
 *   Zen 4, per-step minima in the network, avx2: yolov5s's 64 -> 128 at 160x160 (400 tiles)
 *   10.75 -> 8.63 ms on one thread, 7.66 -> 5.79 on two; YOLOv8n's 64 -> 128 and 64 -> 64 at
 *   80x80 (100 tiles) 3.16 / 1.67 -> 2.75 / 1.56 ms on one thread but 1.57 / 0.84 -> 1.71 / 1.04
 *   on two; resnet18's 64 -> 128 at 56x56 (49 tiles) 1.27 -> 1.40 ms on one thread, though 1.18
 *   -> 1.09 alone (docs/performance.md).
 * - From KI_WS2_MIN_CH input and output channels: the transforms' share of the work grows as the
 *   channels shrink.
 * - While an item's transformed input (81 x in_ch x KI_WS2_NT floats), which every block of output
 *   channels reads again, stays within 3/4 of L2 (on 1 MiB: up to 74 input channels; yolov5s's
 *   128-channel layers were 0.9-1.0x without that), and U within half of L3 (KI_WINO_U4_L2S L2
 *   sizes without one).
 * Nothing else fused than the activation and a residual. */
#define KI_WS2_MIN_TILES 256
#define KI_WS2_MIN_CH    32
bool ki_conv2d_want_ws2(const ki_conv2d *c, const ki_op_desc *op)
{
    const ki_shape *d = declared_input(op);
    const ki_cpu_info *cpu = ki_cpu_get();
    const size_t v_item = 81 * (size_t)KI_WS2_NT * sizeof(float);
    ki_conv2d_geom g;
    int64_t pairs;
    if (!c->weight || !ki_conv2d_ws2_shape_ok(c) || c->uk == ki_gemm_ukernel_ref ||
        ki_conv2d_has_wino(c) || c->ov_a || c->ov_h || c->in_ch < KI_WS2_MIN_CH ||
        c->out_ch < KI_WS2_MIN_CH || (size_t)c->in_ch > cpu->l2 / 4 * 3 / v_item || !d ||
        !declared_geom(c, d, &g)) {
        return false;
    }
    return ki_conv2d_ws2_tiles(&g) >= KI_WS2_MIN_TILES &&
           ki_ckd_mul_i64(&pairs, c->in_ch, c->out_ch + KI_GEMM_MR) &&
           pairs <= (int64_t)(u4_bound(false) / (36 * sizeof(float)));
}

bool ki_conv2d_path_ok(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p)
{
    switch (p) {
    case KI_CONV2D_REF:
    case KI_CONV2D_GEMM:
        return c->weight != NULL;
    case KI_CONV2D_GEMM1:
        return c->weight && ki_conv2d_is_pointwise(c);
    case KI_CONV2D_DW:
        return c->weight && c->groups == c->in_ch && c->groups == c->out_ch &&
               c->pad_mode == KI_CONV_PAD_ZEROS;
    case KI_CONV2D_OV:
        return (c->ov_a || c->ov_h) && ki_conv2d_ov_shape_ok(c) &&
               ki_conv2d_ov_workspace(c, g, 1) > 0;
    case KI_CONV2D_DOT:
        return c->weight && c->groups == 1 && ki_conv2d_is_pointwise(c) && g->oh == 1 && g->ow == 1;
    case KI_CONV2D_DIRECT:
        return c->weight && c->direct && ki_conv2d_direct_shape_ok(c) &&
               ki_conv2d_direct_workspace(c) > 0;
    case KI_CONV2D_WS2:
        return c->ws2_u && ki_conv2d_ws2_shape_ok(c) && !c->pool && !c->dwf &&
               ki_conv2d_ws2_tiles(g) > 0 && ki_conv2d_ws2_workspace(c, g) > 0;
    case KI_CONV2D_WINO:
        /* the AVX-512 transforms index planes with 32-bit lanes */
        return ki_conv2d_has_wino(c) && ki_conv2d_wino_shape_ok(c) && g->oh > 0 && g->ow > 0 &&
               ki_conv2d_wino_workspace(c, g, 1) > 0 && g->in.h < INT32_MAX / 16 &&
               g->in.w < INT32_MAX / 16 && g->in.h * g->in.w < INT32_MAX / 2 &&
               g->oh * g->ow < INT32_MAX / 2;
    }
    return false;
}

/* The one place that chooses a kernel. */
ki_conv2d_path ki_conv2d_pick(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_OV)) {
        return KI_CONV2D_OV;
    }
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_DOT)) {
        return KI_CONV2D_DOT;
    }
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_DW)) {
        return KI_CONV2D_DW;
    }
    /* without the original weights (released at create) Winograd takes every size */
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_WINO) &&
        (wino_pays(c, g->oh, g->ow, c->wino_m, c->wino_ov, false) || !c->weight)) {
        return KI_CONV2D_WINO;
    }
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_WS2) &&
        (ki_conv2d_ws2_tiles(g) >= KI_WS2_MIN_TILES || !c->weight)) {
        return KI_CONV2D_WS2;
    }
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_GEMM1)) {
        return KI_CONV2D_GEMM1;
    }
    if (ki_conv2d_path_ok(c, g, KI_CONV2D_DIRECT)) {
        return KI_CONV2D_DIRECT;
    }
    return KI_CONV2D_GEMM;
}

/* Whether c may run band by band with next, an nn.Conv2d (ki_conv2d_forward_pwdw): c is a 1x1
 * layer that runs the GEMM on its original weights or a layer on the direct path (a stem), with
 * nothing fused but its activation, the depthwise band kernel runs on this CPU, and the param
 * file declares next's input (c's output) at ki_conv2d_pwdw_min_bytes() or more: smaller ones stay
 * in L2 between the layers anyway. */
bool ki_conv2d_want_pwdw(const ki_conv2d *c, const ki_op_desc *next)
{
    const ki_shape *d = declared_input(next);
    int64_t bytes = sizeof(float);
    const bool pw = ki_conv2d_is_pointwise(c) && !c->ov_a && !c->ov_h;
    const bool direct = c->direct && ki_conv2d_direct_shape_ok(c);
    if (strcmp(next->type, "nn.Conv2d") != 0 || !c->dw3_band || !(pw || direct) || c->groups != 1 ||
        !c->weight || c->residual || ki_conv2d_has_wino(c) || !d) {
        return false;
    }
    for (int i = d->ndim - 3; i < d->ndim; i++) {
        if (!ki_ckd_mul_i64(&bytes, bytes, d->d[i] >= 0 ? d->d[i] : c->out_ch)) {
            return false;
        }
    }
    return bytes >= ki_conv2d_pwdw_min_bytes(c->isa);
}

/* Floats of a thread's slice for ki_conv2d_forward_ovdw_avx2 over the depthwise geometry dg: a
 * pixel's 32 floats, then the block of c's output (its 32 channels for each pixel), a pixel, a
 * row of zeros (32 floats a pixel) and one group's depthwise output (8 a pixel). */
static int64_t ovdw_fast_floats(const ki_conv2d_geom *dg)
{
    return (dg->in.h * dg->in.w + dg->in.w + 2) * KI_OV_MV + dg->oh * dg->ow * 8;
}

bool ki_conv2d_ovdw_ok(const ki_conv2d *c, const ki_conv2d *d, const ki_conv2d_geom *dg)
{
#if KI_HAVE_X86
    ki_gemm_fin f;
    /* floats within a quarter of L2; each side below that bound first, so the sizes cannot
     * overflow (and the pixels' places fit int32). At AVX-512 only planes of at most 16 columns,
     * one vector of its own depthwise kernel: on wider ones (mobilenet_v3_small's 28x28) the
     * eight-channel blocks made the pair 10 % slower on one thread (fortieth session). */
    const int64_t cap = (int64_t)(ki_cpu_get()->l2 / 4 / sizeof(float));
    return dg->in.h < cap && dg->in.w < cap && ovdw_fast_floats(dg) <= cap &&
           (c->ov_uk == ki_ov_ukernel_avx2 ||
            (c->ov_uk == ki_ov_ukernel_avx512 && dg->in.w <= 16)) &&
           (d->dw3_planes == ki_conv2d_dw3_planes_avx2 ||
            d->dw3_planes == ki_conv2d_dw3_planes_avx512) &&
           ki_conv2d_is_pointwise(c) && c->groups == 1 && !c->residual && !c->res && !c->ov_h &&
           (c->ov_a || c->weight) && ki_gemm_fin_of(&c->ep, 0, NULL, &f) && c->out_ch % 8 == 0 &&
           d->groups == c->out_ch && d->in_ch == c->out_ch && d->out_ch == c->out_ch &&
           !d->residual && ki_conv2d_dw3_ch8_shape_avx2(d, dg);
#else
    (void)c, (void)d, (void)dg;
    return false;
#endif
}

/* Whether c takes d (created from op next) as its dwf_c8 layer: ki_conv2d_ovdw_ok at the
 * declared geometry, which a run at another size keeps (ki_conv2d_forward_ovdw_avx2 then stores
 * the OV tiles as planes and hands them to the depthwise kernel). */
bool ki_conv2d_want_ovdw(const ki_conv2d *c, const ki_conv2d *d, const ki_op_desc *next)
{
    const ki_shape *decl = declared_input(next);
    ki_conv2d_geom dg;
    return decl && declared_geom(d, decl, &dg) && ki_conv2d_ovdw_ok(c, d, &dg);
}

/* The projection after a channel-block step or a band step: a 1x1 layer of one group over the
 * depthwise output. After a channel-block step, at a level with a micro-kernel for eight-channel
 * groups, on float32 OV weights (which its create made for the declared planes, so on its own it
 * would run them too), and input channels in halves of whole groups (a split over k cuts them at
 * the half). After bands, a layer on the GEMM (its original weights kept: no OV or Winograd
 * form), whose rows each band then computes while its depthwise rows are in L2. */
bool ki_conv2d_want_pjf(const ki_conv2d *c, const ki_conv2d *pj)
{
    if (!c->dwf || c->dwf_dense || pj->residual || pj->groups != 1 || !ki_conv2d_is_pointwise(pj) ||
        pj->in_ch != c->dwf->out_ch) {
        return false;
    }
    if (c->dwf_c8) {
        return pj->ov_uk8 && pj->ov_a && !pj->ov_h && pj->in_ch % 16 == 0;
    }
    return pj->weight && !pj->ov_a && !pj->ov_h && !ki_conv2d_has_wino(pj);
}

/* What ki_conv2d_want_pjf took the projection for (its kernels and weights) holds for its life;
 * a run decides only what depends on its sizes. After bands: the projection on the GEMM. */
bool ki_conv2d_pj_bands(ki_conv2d_path p)
{
    return p == KI_CONV2D_GEMM1;
}

/* After a channel-block step: the groups go to the projection as they are when it runs on the OV
 * path (read in place) and the depthwise blocks run on the OV tiles (ki_conv2d_ovdw_ok at this
 * run's geometry). */
bool ki_conv2d_pj_in8(const ki_conv2d *c, const ki_conv2d_geom *dg, ki_conv2d_path p)
{
    return p == KI_CONV2D_OV && ki_conv2d_ovdw_ok(c, c->dwf, dg);
}

size_t ki_conv2d_ovdw_workspace(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    ki_conv2d_geom dg;
    int64_t floats;
    if (!c->dwf || ki_conv2d_pwdw_geom(c, g, &dg, NULL) != KI_OK) {
        return 0;
    }
    if (ki_conv2d_ovdw_ok(c, c->dwf, &dg)) {
        floats = ovdw_fast_floats(&dg);
    } else if (!ki_ckd_mul_i64(&floats, KI_OV_MV, g->in.h * g->in.w) ||
               !ki_ckd_add_i64(&floats, floats, KI_OV_PW_MAX * KI_OV_MV + 16)) {
        return 0; /* the block's planes and an OV tile */
    }
    return floats < INT64_MAX / 8 ? ((size_t)floats * sizeof(float) + 127) / 64 * 64 : 0;
}

/* The even / odd order moves the deinterleaving from the depthwise layer's out_ch planes to the 1x1
 * layer's packing of its k input rows, so it is taken for expansions only (k < out_ch); measured on
 * mobilenet_v2's two (16 -> 96 and 24 -> 144: docs/performance.md, thirty-sixth session). */
bool ki_conv2d_pwdw_eo(const ki_conv2d *c, const ki_conv2d_geom *dg)
{
    const ki_conv2d *d = c->dwf;
    ki_gemm_fin f;
    return d && !c->dwf_dense && d->dw3_band_eo && c->pack_eo && ki_conv2d_is_pointwise(c) &&
           c->in_ch < c->out_ch && ki_conv2d_dw3_ok(d) && d->kh == 3 && d->sw == 2 && d->pt == 1 &&
           d->pl == 1 && !d->residual && !d->res && ki_gemm_fin_of(&d->ep, 0, NULL, &f) &&
           dg->in.w % 2 == 0 && dg->ow == dg->in.w / 2 && dg->ow >= 8;
}

/* The AVX2 kernel's eight-channel blocks at either vector level; at AVX-512 only for output rows
 * of at most eight columns, half a 16-lane vector: mobilenet_v2's 7x7 outputs (at stride 1 and 2)
 * ran 18-26 % faster there, its 14x14 ones 24-44 % slower (docs/performance.md, fortieth
 * session). */
bool ki_conv2d_dw3_ch8_on(const ki_conv2d *c, const ki_conv2d_geom *g)
{
#if KI_HAVE_X86
    return (c->dw3_planes == ki_conv2d_dw3_planes_avx2 ||
            (c->dw3_planes == ki_conv2d_dw3_planes_avx512 && g->ow <= 8)) &&
           ki_conv2d_dw3_ch8_avx2(c, g);
#else
    (void)c, (void)g;
    return false;
#endif
}

int64_t ki_conv2d_dw_granule(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    return ki_conv2d_dw3_ch8_on(c, g) ? 8 : 1;
}

bool ki_conv2d_gap_ok(const ki_conv2d *c)
{
    ki_gemm_fin f;
    return !c->residual && !c->pool && !c->dwf && c->groups == 1 && (c->ov_a || c->ov_h) &&
           ki_gemm_fin_of(&c->ep, 0, NULL, &f);
}

void ki_conv2d_describe(const ki_conv2d *c, const ki_shape *in, char *buf, size_t n)
{
    static const char *const names[] = {
        [KI_CONV2D_REF] = "reference",        [KI_CONV2D_GEMM] = "im2col+gemm",
        [KI_CONV2D_GEMM1] = "1x1 gemm",       [KI_CONV2D_DW] = "depthwise",
        [KI_CONV2D_WINO] = "winograd",        [KI_CONV2D_OV] = "small-output",
        [KI_CONV2D_DIRECT] = "direct",        [KI_CONV2D_DOT] = "1x1 dot",
        [KI_CONV2D_WS2] = "stride-2 winograd"
    };
    ki_conv2d_geom g;
    if (ki_conv2d_geom_make(c, in, &g, NULL) != KI_OK) {
        snprintf(buf, n, "?");
        return;
    }
    const char *isa = ki_isa_name(c->isa);
    if (c->pool) {
        snprintf(buf, n, "direct+maxpool %s", isa);
    } else if (c->dwf && c->dwf_c8) {
        snprintf(buf, n, "small-output+depthwise by channel blocks%s %s", c->pjf ? "+1x1" : "",
                 isa);
    } else if (c->dwf) {
        ki_conv2d_geom dg;
        const bool eo = ki_conv2d_pwdw_geom(c, &g, &dg, NULL) == KI_OK && ki_conv2d_pwdw_eo(c, &dg);
        snprintf(buf, n, "%s+%s bands%s%s %s",
                 c->weight && ki_conv2d_is_pointwise(c) ? "1x1"
                 : ki_conv2d_s2d_on(c, g.ow)            ? "space-to-depth winograd"
                                                        : "direct",
                 c->dwf_dense ? "conv" : "depthwise", eo ? " even/odd" : "",
                 c->pjf ? ", then 1x1" : "", isa);
    } else {
        ki_conv2d_path p = ki_conv2d_pick(c, &g);
        if (p == KI_CONV2D_WINO) {
            snprintf(buf, n, "winograd F(%dx%d)%s%s %s", c->wino_m, c->wino_m,
                     c->wino_ov ? " small-output" : " gemm",
                     c->wino_h   ? " U from binary16"
                     : c->wino_f ? " U per block"
                                 : "",
                     isa);
        } else if (p == KI_CONV2D_DIRECT && ki_conv2d_s2d_on(c, g.ow)) {
            snprintf(buf, n, "space-to-depth winograd F(4x4) %s", isa);
        } else if (p == KI_CONV2D_DW) {
            snprintf(buf, n, "depthwise%s %s", ki_conv2d_dw_in_place(c) ? " in place" : "", isa);
        } else {
            snprintf(buf, n, "%s%s %s", names[p], p == KI_CONV2D_OV && c->ov_h ? " binary16" : "",
                     isa);
        }
    }
    const size_t len = strlen(buf);
    if (c->gap && len < n) {
        snprintf(buf + len, n - len, " + mean");
    }
}
