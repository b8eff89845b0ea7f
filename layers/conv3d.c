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

/* A column chunk holds about this many floats (8 MiB) unless one output plane needs more. */
#define C3_COL_FLOATS ((int64_t)1 << 21)

typedef struct conv3d {
    bool functional; /* F.conv3d: weight (and bias) are inputs w_in (b_in, or -1) */
    int x_in, w_in, b_in;
    bool same; /* padding='same': computed from the kernel */
    ki_conv_pad_mode mode;
    int64_t out_ch, cig, groups; /* nn.Conv3d: from @weight */
    int64_t k[3], s[3], dl[3], pad_lo[3], pad_hi[3];
    const float *weight;
    ki_cv_epilogue ep;
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
        return ki_cv_padding_word(p, c->s[0] == 1 && c->s[1] == 1 && c->s[2] == 1, &c->same, err);
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

/* nn.Conv3d: @weight (out, in/groups, kd, kh, kw) and the optional @bias. */
static ki_status parse_weights(const ki_op_desc *op, conv3d *c, ki_error *err)
{
    static const int64_t any5[5] = { -1, -1, -1, -1, -1 };
    const ki_attr *w, *b;
    bool has_bias;
    ki_status st = ki_op_require_attr(op, "weight", 5, any5, &w, err);
    if (st != KI_OK) {
        return st;
    }
    if (w->shape.d[0] < 1 || w->shape.d[0] % c->groups != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "groups=%lld does not divide out_channels=%lld",
                       (long long)c->groups, (long long)w->shape.d[0]);
    }
    c->out_ch = w->shape.d[0], c->cig = w->shape.d[1], c->weight = w->data;
    int64_t in_ch, k[3];
    if (c->cig < 1 || !ki_ckd_mul_i64(&in_ch, c->cig, c->groups) || in_ch > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@weight has %lld input channels per group",
                       (long long)c->cig);
    }
    st = ki_vol_triple(op, "kernel_size", &w->shape.d[2], 1, k, err);
    for (int i = 0; st == KI_OK && i < 3; i++) {
        c->k[i] = k[i];
        if (k[i] != w->shape.d[2 + i]) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "kernel_size does not match @weight");
        }
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "in_channels", in_ch, err);
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "out_channels", c->out_ch, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "bias", ki_op_attr(op, "bias") != NULL, &has_bias, err);
    }
    if (st == KI_OK && has_bias) {
        st = ki_op_require_attr(op, "bias", 1, &c->out_ch, &b, err);
        c->ep.bias = st == KI_OK ? b->data : NULL;
    }
    return st;
}

/* F.conv3d: input, weight and an optional bias, by `$key` or in that order. */
static ki_status parse_inputs(const ki_op_desc *op, conv3d *c, ki_error *err)
{
    if ((op->n_inputs != 2 && op->n_inputs != 3) || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs and %d outputs, expected 2 or 3 and 1",
                       op->n_inputs, op->n_outputs);
    }
    c->x_in = ki_op_input_index(op, "input");
    c->w_in = ki_op_input_index(op, "weight");
    c->b_in = ki_op_input_index(op, "bias");
    c->x_in = c->x_in >= 0 ? c->x_in : 0;
    c->w_in = c->w_in >= 0 ? c->w_in : 1;
    c->b_in = c->b_in >= 0 ? c->b_in : (op->n_inputs == 3 ? 2 : -1);
    if (c->x_in == c->w_in || c->x_in == c->b_in || c->w_in == c->b_in || c->w_in >= op->n_inputs ||
        c->x_in >= op->n_inputs || c->b_in >= op->n_inputs ||
        (op->n_inputs == 3) != (c->b_in >= 0)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "cannot tell the input, weight and bias operands apart");
    }
    return KI_OK;
}

static ki_status parse(const ki_op_desc *op, conv3d *c, ki_error *err)
{
    static const int64_t one[3] = { 1, 1, 1 };
    ki_status st = ki_op_get_int(op, "groups", 1, &c->groups, err);
    if (st == KI_OK && (c->groups < 1 || c->groups > KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "groups=%lld is out of range", (long long)c->groups);
    }
    if (st == KI_OK) {
        st = c->functional ? parse_inputs(op, c, err) : ki_cv_check_io(op, 1, 1, err);
    }
    if (st == KI_OK && !c->functional) {
        st = parse_weights(op, c, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "stride", one, 1, c->s, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "dilation", one, 1, c->dl, err);
    }
    if (st == KI_OK) {
        st = parse_padding(op, c, err);
    }
    return st == KI_OK ? ki_cv_parse_pad_mode(op, &c->mode, err) : st;
}

static ki_status create(const ki_op_desc *op, bool functional, void **state, ki_error *err)
{
    conv3d *c = calloc(1, sizeof *c);
    if (!c) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    c->functional = functional;
    c->b_in = -1;
    c->epf = ki_cv_epilogue_for(ki_cpu_isa());
    c->uk = ki_gemm_ukernel_for(ki_cpu_isa());
    c->uk = c->uk ? c->uk : ki_gemm_ukernel_ref;
    ki_status st = parse(op, c, err);
    if (st != KI_OK) {
        free(c);
        return st;
    }
    *state = c;
    return KI_OK;
}

static ki_status conv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, false, state, err);
}

static ki_status f_conv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, true, state, err);
}

/* The weight's dims (out, in/groups, kd, kh, kw): the attribute's, or F.conv3d's weight input
 * and its bias input checked against them. */
static ki_status weight_dims(const conv3d *c, const ki_shape *in, int n_in, c3_geom *g,
                             ki_error *err)
{
    char buf[96];
    if (!c->functional) {
        g->out_ch = c->out_ch, g->cig = c->cig;
        memcpy(g->k, c->k, sizeof g->k);
        return KI_OK;
    }
    if (c->w_in >= n_in || (c->b_in >= 0 && c->b_in >= n_in)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input count");
    }
    const ki_shape *w = &in[c->w_in];
    if (w->kind != KI_KIND_TENSOR || w->ndim != 5) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not a 5-D tensor",
                       ki_shape_str(w, buf, sizeof buf));
    }
    g->out_ch = w->d[0], g->cig = w->d[1];
    for (int i = 0; i < 3; i++) {
        g->k[i] = w->d[2 + i];
        if (g->k[i] < 1 || g->k[i] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_SHAPE, "weight %s has an empty or huge kernel",
                           ki_shape_str(w, buf, sizeof buf));
        }
    }
    if (g->out_ch < 1 || g->cig < 1 || g->out_ch % c->groups != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s does not suit groups=%lld",
                       ki_shape_str(w, buf, sizeof buf), (long long)c->groups);
    }
    if (c->b_in >= 0 && (in[c->b_in].kind != KI_KIND_TENSOR || in[c->b_in].ndim != 1 ||
                         in[c->b_in].d[0] != g->out_ch)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "bias %s does not hold %lld values",
                       ki_shape_str(&in[c->b_in], buf, sizeof buf), (long long)g->out_ch);
    }
    return KI_OK;
}

/* Padding before each spatial dim and the output size, with the padding mode's limits. */
static ki_status out_dims(const conv3d *c, c3_geom *g, ki_error *err)
{
    const int64_t in[3] = { g->x.d, g->x.h, g->x.w };
    for (int i = 0; i < 3; i++) {
        int64_t span = c->dl[i] * (g->k[i] - 1), hi;
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
        g->o[i] = num / c->s[i] + 1;
    }
    return KI_OK;
}

static ki_status geom_make(const conv3d *c, const ki_shape *in, int n_in, c3_geom *g, ki_error *err)
{
    ki_status st = ki_vol_get(&in[c->x_in], &g->x, err);
    if (st == KI_OK) {
        st = weight_dims(c, in, n_in, g, err);
    }
    if (st != KI_OK) {
        return st;
    }
    g->groups = c->groups, g->cog = g->out_ch / c->groups;
    if (g->x.c != g->cig * c->groups) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has %lld channels, expected %lld",
                       (long long)g->x.c, (long long)(g->cig * c->groups));
    }
    st = out_dims(c, g, err);
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
    int64_t per = kk * g->ohw;
    g->pz = per > 0 && per < C3_COL_FLOATS ? C3_COL_FLOATS / per : 1;
    g->pz = g->pz < g->o[0] ? g->pz : g->o[0];
    g->pz = g->pz > 0 ? g->pz : 1;
    if (!ki_gemm_packed_floats(kk, g->pz * g->ohw, &g->cols) ||
        g->cols > (int64_t)(SIZE_MAX / 2 / sizeof(float))) {
        return KI_FAIL(err, KI_ERR_LIMIT, "convolution too large");
    }
    return KI_OK;
}

static ki_status conv3d_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const conv3d *c = state;
    c3_geom g;
    if (n_out != 1 || n_in < 1 || c->x_in >= n_in) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = geom_make(c, in, n_in, &g, err);
    return st == KI_OK ? ki_vol_shape(&g.x, g.out_ch, g.o, &out[0], err) : st;
}

/* The column chunk is one matrix spanning the per-thread slices (they are contiguous). */
static size_t conv3d_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                               int n_out, int n_threads)
{
    const conv3d *c = state;
    c3_geom g;
    (void)out, (void)n_out;
    if (geom_make(c, in, n_in, &g, NULL) != KI_OK) {
        return 0;
    }
    size_t nt = n_threads > 0 ? (size_t)n_threads : 1;
    size_t col = (size_t)g.cols * sizeof(float);
    return ((col + nt - 1) / nt + 63) / 64 * 64;
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
                ki_conv_pad_index(oz * c->s[0] - g->lo[0] + kz * c->dl[0], g->x.d, c->mode);
            int64_t iy =
                ki_conv_pad_index(oy * c->s[1] - g->lo[1] + ky * c->dl[1], g->x.h, c->mode);
            int64_t ix =
                ki_conv_pad_index(ox * c->s[2] - g->lo[2] + kx * c->dl[2], g->x.w, c->mode);
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
    const ki_shape sh[3] = { in[0].shape, n_in > 1 ? in[1].shape : in[0].shape,
                             n_in > 2 ? in[2].shape : in[0].shape };
    (void)n_out;
    if (n_in > 3 || geom_make(c, sh, n_in, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    size_t nt = ex->n_threads > 0 ? (size_t)ex->n_threads : 1;
    if ((size_t)g.cols * sizeof(float) > nt * ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    ki_cv_epilogue ep = c->ep;
    const float *weight = c->functional ? in[c->w_in].data : c->weight;
    ep.bias = c->functional ? (c->b_in >= 0 ? in[c->b_in].data : NULL) : c->ep.bias;
    const float *x = in[c->x_in].data;
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

static void conv3d_destroy(void *state)
{
    free(state);
}

/* Absorbs a following activation into the output epilogue (see ki_cv_fuse_act). */
static bool conv3d_fuse(void *state, const ki_op_desc *next, int slot)
{
    conv3d *c = state;
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    return ki_cv_fuse_act(&c->ep, next);
}

const ki_layer_ops ki_layer_conv3d = {
    .type = "nn.Conv3d",
    .create = conv3d_create,
    .shape = conv3d_shape,
    .workspace = conv3d_workspace,
    .forward = conv3d_forward,
    .destroy = conv3d_destroy,
    .fuse = conv3d_fuse,
};

const ki_layer_ops ki_layer_f_conv3d = {
    .type = "F.conv3d",
    .create = f_conv3d_create,
    .shape = conv3d_shape,
    .workspace = conv3d_workspace,
    .forward = conv3d_forward,
    .destroy = conv3d_destroy,
    .fuse = conv3d_fuse,
};
