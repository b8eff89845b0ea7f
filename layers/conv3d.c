/* conv3d.c - nn.Conv3d and F.conv3d (weight and bias as inputs): groups, stride, dilation,
 * padding as numbers or same/valid, padding_mode zeros / reflect / replicate / circular, on
 * (N,C,D,H,W) or unbatched (C,D,H,W) inputs.
 *
 * Kernel: per (image, group) the input is unfolded (vol2col) straight into the packed column
 * panels of the SGEMM driver (gemm.h), a chunk of output depth planes at a time, and the tiles
 * of W_g * columns are written into the output volume (row stride: the whole volume) with the
 * bias and a fused activation applied by the driver's epilogue. Packing and tiles share one
 * OpenMP region per chunk; every tile is computed the same way whatever the thread count, so
 * the results do not depend on it. State: parameters only, read-only after create;
 * thread-safe. */
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "vol_common.h"

typedef struct conv3d {
    ki_vol_conv v; /* first (see ki_vol_conv); @weight is (out, in/groups, kd, kh, kw) */
    bool same;     /* padding='same': computed from the kernel */
    ki_conv_pad_mode mode;
    int64_t pad_lo[3], pad_hi[3];
    ki_cv_epilogue_fn epf; /* the epilogue and micro-kernel of the CPU level */
    ki_gemm_ukernel uk;
} conv3d;

typedef struct c3_geom {
    ki_vol x;
    int64_t out_ch, cig, cog, groups;
    int64_t k[3], lo[3], o[3];
    int64_t kk, ohw, odhw, dhw;
    int64_t pz;   /* output depth planes per column chunk */
    int64_t cols; /* floats of the packed panels of one chunk */
} c3_geom;

/* padding: one int, (d,h,w), the strings same/valid, or six ints (w_lo,w_hi,h_lo,h_hi,d_lo,d_hi)
 * as pnnx writes a non-zero padding_mode's padding (PyTorch's reversed padding, repeated). */
static ki_status parse_padding(const ki_op_desc *op, conv3d *c, ki_error *err)
{
    const ki_param *p = ki_op_param(op, "padding");
    int64_t v[6];
    int n;
    if (p && p->kind == KI_PARAM_STRING) {
        return ki_cv_padding_word(p, c->v.s[0] == 1 && c->v.s[1] == 1 && c->v.s[2] == 1, &c->same,
                                  err);
    }
    ki_status st = ki_op_get_int_list(op, "padding", 6, v, &n, err);
    if (st != KI_OK) {
        return st;
    }
    for (int i = 0; i < 3 && (n == 1 || n == 3); i++) {
        c->pad_lo[i] = c->pad_hi[i] = v[n == 1 ? 0 : i];
    }
    for (int i = 0; i < 3 && n == 6; i++) {
        c->pad_lo[i] = v[4 - 2 * i], c->pad_hi[i] = v[5 - 2 * i];
    }
    if (n != -1 && n != 1 && n != 3 && n != 6) {
        return KI_FAIL(err, KI_ERR_FORMAT, "padding=%s needs 1, 3 or 6 entries", p->raw);
    }
    for (int i = 0; i < 3; i++) {
        if (c->pad_lo[i] < 0 || c->pad_lo[i] > KI_CV_MAX_PARAM || c->pad_hi[i] < 0 ||
            c->pad_hi[i] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_FORMAT, "padding=%s is out of range", p->raw);
        }
    }
    return KI_OK;
}

static ki_status parse(const ki_op_desc *op, void *state, ki_error *err)
{
    conv3d *c = state;
    c->epf = ki_cv_epilogue_for(ki_cpu_isa());
    c->uk = ki_gemm_ukernel_for(ki_cpu_isa());
    c->uk = c->uk ? c->uk : ki_gemm_ukernel_ref;
    ki_status st = ki_vol_conv_parse(op, &c->v, err);
    if (st == KI_OK) {
        st = parse_padding(op, c, err);
    }
    return st == KI_OK ? ki_cv_parse_pad_mode(op, &c->mode, err) : st;
}

static ki_status conv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const ki_vol_conv head = { .functional = false };
    return ki_vol_conv_create(op, &head, sizeof(conv3d), parse, state, err);
}

static ki_status f_conv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const ki_vol_conv head = { .functional = true };
    return ki_vol_conv_create(op, &head, sizeof(conv3d), parse, state, err);
}

/* The weight's dims (out, in/groups, kd, kh, kw): the attribute's, or F.conv3d's weight input
 * and its bias input checked against them. */
static ki_status weight_dims(const conv3d *c, const ki_shape *in, int n_in, c3_geom *g,
                             ki_error *err)
{
    char buf[96];
    const ki_shape *w = NULL;
    if (!c->v.functional) {
        g->out_ch = c->v.d0, g->cig = c->v.d1;
        memcpy(g->k, c->v.k, sizeof g->k);
        return KI_OK;
    }
    ki_status st = ki_vol_conv_weight_in(&c->v, in, n_in, &w, err);
    if (st != KI_OK) {
        return st;
    }
    if (w->kind != KI_KIND_TENSOR || w->ndim != 5) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not a 5-D tensor",
                       ki_shape_str(w, buf, sizeof buf));
    }
    g->out_ch = w->d[0], g->cig = w->d[1];
    st = ki_vol_conv_kernel_in(w, g->k, err);
    if (st == KI_OK && (g->out_ch < 1 || g->cig < 1 || g->out_ch % c->v.groups != 0)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s does not suit groups=%lld",
                       ki_shape_str(w, buf, sizeof buf), (long long)c->v.groups);
    }
    return st == KI_OK ? ki_vol_conv_bias_in(&c->v, in, g->out_ch, err) : st;
}

/* Padding before each spatial dim and the output size, with the padding mode's limits. */
static ki_status out_dims(const conv3d *c, c3_geom *g, ki_error *err)
{
    const int64_t in[3] = { g->x.d, g->x.h, g->x.w };
    for (int i = 0; i < 3; i++) {
        int64_t span = c->v.dl[i] * (g->k[i] - 1), hi;
        g->lo[i] = c->same ? span / 2 : c->pad_lo[i];
        hi = c->same ? span - g->lo[i] : c->pad_hi[i];
        if (c->mode == KI_CONV_PAD_REFLECT && (g->lo[i] >= in[i] || hi >= in[i])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "reflect padding %lld needs an input above %lld",
                           (long long)(g->lo[i] > hi ? g->lo[i] : hi), (long long)in[i]);
        }
        if (c->mode != KI_CONV_PAD_ZEROS && (g->lo[i] > in[i] || hi > in[i] || in[i] == 0)) {
            return KI_FAIL(err, KI_ERR_SHAPE, "padding %lld is larger than the input (%lld)",
                           (long long)(g->lo[i] > hi ? g->lo[i] : hi), (long long)in[i]);
        }
        int64_t num = in[i] + g->lo[i] + hi - span - 1;
        if (num < 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input size %lld is smaller than the kernel (%lld)",
                           (long long)(in[i] + g->lo[i] + hi), (long long)(span + 1));
        }
        g->o[i] = num / c->v.s[i] + 1;
    }
    return KI_OK;
}

static ki_status geom_make(const conv3d *c, const ki_shape *in, int n_in, c3_geom *g, ki_error *err)
{
    ki_status st = ki_vol_get(&in[c->v.x_in], &g->x, err);
    if (st == KI_OK) {
        st = weight_dims(c, in, n_in, g, err);
    }
    if (st != KI_OK) {
        return st;
    }
    g->groups = c->v.groups, g->cog = g->out_ch / c->v.groups;
    st = ki_vol_conv_check_channels(&g->x, g->cig * c->v.groups, err);
    if (st == KI_OK) {
        st = out_dims(c, g, err);
    }
    ki_shape o;
    if (st == KI_OK) {
        st = ki_vol_shape(&g->x, g->out_ch, g->o, &o, err);
    }
    if (st != KI_OK) {
        return st;
    }
    int64_t kk, dhw;
    size_t col;
    if (!ki_ckd_mul_i64(&kk, g->cig, g->k[0]) || !ki_ckd_mul_i64(&kk, kk, g->k[1] * g->k[2]) ||
        !ki_ckd_mul_i64(&dhw, g->x.d, g->x.h) || !ki_ckd_mul_i64(&dhw, dhw, g->x.w) ||
        !ki_cv_floats3(&col, kk, g->o[1], g->o[2]) || col > (size_t)KI_MAX_NUMEL * 4) {
        return KI_FAIL(err, KI_ERR_LIMIT, "convolution too large");
    }
    g->kk = kk, g->dhw = dhw, g->ohw = g->o[1] * g->o[2], g->odhw = g->o[0] * g->ohw;
    g->pz = ki_vol_conv_chunk(kk * g->ohw, g->o[0]);
    if (!ki_gemm_packed_floats(kk, g->pz * g->ohw, &g->cols) ||
        g->cols > (int64_t)(SIZE_MAX / 2 / sizeof(float))) {
        return KI_FAIL(err, KI_ERR_LIMIT, "convolution too large");
    }
    return KI_OK;
}

static ki_status conv3d_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    c3_geom g;
    ki_status st = ki_vol_conv_counts(state, n_in, n_out, err);
    st = st == KI_OK ? geom_make(state, in, n_in, &g, err) : st;
    return st == KI_OK ? ki_vol_shape(&g.x, g.out_ch, g.o, &out[0], err) : st;
}

/* The column chunk is one matrix spanning the per-thread slices. */
static size_t conv3d_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                               int n_out, int n_threads)
{
    c3_geom g;
    (void)out, (void)n_out;
    return geom_make(state, in, n_in, &g, NULL) == KI_OK
               ? ki_vol_conv_ws((size_t)g.cols * sizeof(float), n_threads)
               : 0;
}

/* Columns [j0, j0 + NR) of the column matrix of the chunk starting at output plane z0 (cols
 * columns in all) into panel b: row r = (ic, kz, ky, kx) holds the input value each output
 * position reads through that tap (0 in zero padding, and past the last column). */
static void pack_panel(const conv3d *c, const c3_geom *g, const float *x, int64_t z0, int64_t j0,
                       int64_t cols, float *restrict b)
{
    int64_t k3 = g->k[0] * g->k[1] * g->k[2], nr = cols - j0 < KI_GEMM_NR ? cols - j0 : KI_GEMM_NR;
    for (int64_t r = 0; r < g->kk; r++, b += KI_GEMM_NR) {
        int64_t t = r % k3, jj = 0;
        int64_t kz = t / (g->k[1] * g->k[2]), ky = t / g->k[2] % g->k[1], kx = t % g->k[2];
        int64_t oz = z0 + j0 / g->ohw, oy = j0 / g->o[2] % g->o[1], ox = j0 % g->o[2];
        const float *src = x + r / k3 * g->dhw;
        for (; jj < nr; jj++) {
            int64_t iz =
                ki_conv_pad_index(oz * c->v.s[0] - g->lo[0] + kz * c->v.dl[0], g->x.d, c->mode);
            int64_t iy =
                ki_conv_pad_index(oy * c->v.s[1] - g->lo[1] + ky * c->v.dl[1], g->x.h, c->mode);
            int64_t ix =
                ki_conv_pad_index(ox * c->v.s[2] - g->lo[2] + kx * c->v.dl[2], g->x.w, c->mode);
            b[jj] = iz >= 0 && iy >= 0 && ix >= 0 ? src[(iz * g->x.h + iy) * g->x.w + ix] : 0.0f;
            if (++ox == g->o[2]) { /* the next output row, and plane */
                ox = 0;
                if (++oy == g->o[1]) {
                    oy = 0, oz++;
                }
            }
        }
        for (; jj < KI_GEMM_NR; jj++) {
            b[jj] = 0.0f;
        }
    }
}

/* One (image, group): the cog output volumes at y = W_g (cog x kk) * columns, channel ch0 on. */
static void conv_group(const conv3d *c, const c3_geom *g, const ki_cv_epilogue *ep, int64_t ch0,
                       const float *w, const float *x, float *y, float *col, int nt)
{
    for (int64_t z0 = 0; z0 < g->o[0]; z0 += g->pz) {
        int64_t nz = g->o[0] - z0 < g->pz ? g->o[0] - z0 : g->pz, cols = nz * g->ohw;
        int64_t np = (cols + KI_GEMM_NR - 1) / KI_GEMM_NR;
        ki_gemm_args ga = { .m = g->cog,
                            .n = cols,
                            .k = g->kk,
                            .a = w,
                            .lda = g->kk,
                            .bp = col,
                            .c = y + z0 * g->ohw,
                            .ldc = g->odhw,
                            .ep = ep,
                            .epf = c->epf,
                            .ch0 = ch0,
                            .uk = c->uk };
#pragma omp parallel num_threads(nt)
        {
#pragma omp for schedule(static)
            for (int64_t p = 0; p < np; p++) {
                pack_panel(c, g, x, z0, p * KI_GEMM_NR, cols, col + p * KI_GEMM_NR * g->kk);
            }
            ki_gemm_compute(&ga, omp_get_thread_num(), omp_get_num_threads());
        }
    }
}

static ki_status conv3d_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const conv3d *c = state;
    c3_geom g;
    ki_shape sh[3];
    ki_cv_epilogue ep;
    (void)n_out;
    if (!ki_vol_conv_shapes(in, n_in, sh) || geom_make(c, sh, n_in, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    if (!ki_vol_conv_ws_fits((size_t)g.cols * sizeof(float), ex)) {
        return KI_ERR_INTERNAL;
    }
    const float *weight = ki_vol_conv_operands(&c->v, in, &ep);
    const float *x = in[c->v.x_in].data;
    float *y = out[0].data;
    for (int64_t n = 0; n < g.x.n; n++) {
        for (int64_t gi = 0; gi < g.groups; gi++) {
            conv_group(c, &g, &ep, gi * g.cog, weight + gi * g.cog * g.kk,
                       x + (n * g.x.c + gi * g.cig) * g.dhw,
                       y + (n * g.out_ch + gi * g.cog) * g.odhw, ex->workspace, ex->n_threads);
        }
    }
    return KI_OK;
}

KI_VOL_CONV_OPS(ki_layer_conv3d, "nn.Conv3d", conv3d_create, conv3d);
KI_VOL_CONV_OPS(ki_layer_f_conv3d, "F.conv3d", f_conv3d_create, conv3d);
