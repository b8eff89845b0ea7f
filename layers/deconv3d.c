/* deconv3d.c - nn.ConvTranspose3d and F.conv_transpose3d (weight and bias as inputs): groups,
 * stride, padding, output_padding and dilation on (N,C,D,H,W) or unbatched (C,D,H,W) inputs.
 *
 * Kernel: per (image, group) and chunk of input depth planes, cblas_sgemm forms the column
 * matrix col[cog*kd*kh*kw x planes*h*w] = W_g^T * X_g (outside any parallel region), then
 * col2vol adds each output channel's rows into its volume, one channel per iteration of a
 * parallel loop, so every output value is summed in the same order whatever the thread count.
 * The bias and a fused activation go through the convolution epilogue. State: parameters only,
 * read-only after create; thread-safe. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "vol_common.h"

/* A column chunk holds at most this many floats (8 MiB) unless one input plane needs more. */
#define D3_COL_FLOATS ((int64_t)1 << 21)

typedef struct deconv3d {
    bool functional; /* F.conv_transpose3d: weight (and bias) are inputs w_in (b_in, or -1) */
    int x_in, w_in, b_in;
    int64_t in_ch, cog, groups; /* nn.ConvTranspose3d: from @weight */
    int64_t k[3], s[3], dl[3], pad[3], opad[3];
    const float *weight;
    ki_cv_epilogue ep;
} deconv3d;

typedef struct d3_geom {
    ki_vol x;
    int64_t out_ch, cig, cog, groups;
    int64_t k[3], o[3];
    int64_t m, hw, dhw, ohw, odhw; /* m = cog*kd*kh*kw, the column rows */
    int64_t pz;                    /* input depth planes per column chunk */
} d3_geom;

/* nn.ConvTranspose3d: @weight (in, out/groups, kd, kh, kw) and the optional @bias. */
static ki_status parse_weights(const ki_op_desc *op, deconv3d *c, ki_error *err)
{
    static const int64_t any5[5] = { -1, -1, -1, -1, -1 };
    const ki_attr *w, *b;
    bool has_bias;
    int64_t out_ch, k[3];
    ki_status st = ki_op_require_attr(op, "weight", 5, any5, &w, err);
    if (st != KI_OK) {
        return st;
    }
    if (w->shape.d[0] < 1 || w->shape.d[0] % c->groups != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "groups=%lld does not divide in_channels=%lld",
                       (long long)c->groups, (long long)w->shape.d[0]);
    }
    c->in_ch = w->shape.d[0], c->cog = w->shape.d[1], c->weight = w->data;
    if (c->cog < 1 || !ki_ckd_mul_i64(&out_ch, c->cog, c->groups) || out_ch > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@weight has %lld output channels per group",
                       (long long)c->cog);
    }
    st = ki_vol_triple(op, "kernel_size", &w->shape.d[2], 1, k, err);
    for (int i = 0; st == KI_OK && i < 3; i++) {
        c->k[i] = k[i];
        if (k[i] != w->shape.d[2 + i]) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "kernel_size does not match @weight");
        }
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "in_channels", c->in_ch, err);
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "out_channels", out_ch, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "bias", ki_op_attr(op, "bias") != NULL, &has_bias, err);
    }
    if (st == KI_OK && has_bias) {
        st = ki_op_require_attr(op, "bias", 1, &out_ch, &b, err);
        c->ep.bias = st == KI_OK ? b->data : NULL;
    }
    return st;
}

/* F.conv_transpose3d: input, weight and an optional bias, by `$key` or in that order. */
static ki_status parse_inputs(const ki_op_desc *op, deconv3d *c, ki_error *err)
{
    if ((op->n_inputs != 2 && op->n_inputs != 3) || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs and %d outputs, expected 2 or 3 and 1",
                       op->n_inputs, op->n_outputs);
    }
    int x = ki_op_input_index(op, "input"), w = ki_op_input_index(op, "weight");
    int b = ki_op_input_index(op, "bias");
    c->x_in = x >= 0 ? x : 0;
    c->w_in = w >= 0 ? w : 1;
    c->b_in = b >= 0 ? b : (op->n_inputs == 3 ? 2 : -1);
    if (c->x_in == c->w_in || c->x_in == c->b_in || c->w_in == c->b_in || c->w_in >= op->n_inputs ||
        c->x_in >= op->n_inputs || c->b_in >= op->n_inputs ||
        (op->n_inputs == 3) != (c->b_in >= 0)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "cannot tell the input, weight and bias operands apart");
    }
    return KI_OK;
}

static ki_status parse(const ki_op_desc *op, deconv3d *c, ki_error *err)
{
    static const int64_t one[3] = { 1, 1, 1 }, zero[3] = { 0, 0, 0 };
    const char *mode;
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
        st = ki_vol_triple(op, "padding", zero, 0, c->pad, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "output_padding", zero, 0, c->opad, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_string(op, "padding_mode", "zeros", &mode, err);
    }
    if (st == KI_OK && strcmp(mode, "zeros") != 0) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "padding_mode=%s (only zeros)", mode);
    }
    /* PyTorch: output padding must be smaller than either stride or dilation. */
    for (int i = 0; st == KI_OK && i < 3; i++) {
        if (c->opad[i] >= c->s[i] && c->opad[i] >= c->dl[i]) {
            st = KI_FAIL(err, KI_ERR_SHAPE,
                         "output_padding must be smaller than either stride or dilation");
        }
    }
    return st;
}

static ki_status create(const ki_op_desc *op, bool functional, void **state, ki_error *err)
{
    deconv3d *c = calloc(1, sizeof *c);
    if (!c) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    c->functional = functional;
    c->b_in = -1;
    ki_status st = parse(op, c, err);
    if (st != KI_OK) {
        free(c);
        return st;
    }
    *state = c;
    return KI_OK;
}

static ki_status deconv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, false, state, err);
}

static ki_status f_deconv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, true, state, err);
}

/* The weight's dims (in, out/groups, kd, kh, kw): the attribute's, or the weight input's (and
 * the bias input checked against them). */
static ki_status weight_dims(const deconv3d *c, const ki_shape *in, int n_in, d3_geom *g,
                             ki_error *err)
{
    char buf[96];
    int64_t in_ch;
    if (!c->functional) {
        in_ch = c->in_ch, g->cog = c->cog;
        memcpy(g->k, c->k, sizeof g->k);
    } else {
        if (c->w_in >= n_in || c->b_in >= n_in) {
            return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input count");
        }
        const ki_shape *w = &in[c->w_in];
        if (w->kind != KI_KIND_TENSOR || w->ndim != 5 || w->d[0] < 1 || w->d[1] < 1 ||
            w->d[0] % c->groups != 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not a 5-D tensor for groups=%lld",
                           ki_shape_str(w, buf, sizeof buf), (long long)c->groups);
        }
        in_ch = w->d[0], g->cog = w->d[1];
        for (int i = 0; i < 3; i++) {
            g->k[i] = w->d[2 + i];
            if (g->k[i] < 1 || g->k[i] > KI_CV_MAX_PARAM) {
                return KI_FAIL(err, KI_ERR_SHAPE, "weight %s has an empty or huge kernel",
                               ki_shape_str(w, buf, sizeof buf));
            }
        }
    }
    g->groups = c->groups, g->cig = in_ch / c->groups;
    if (!ki_ckd_mul_i64(&g->out_ch, g->cog, c->groups) || g->out_ch > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "too many output channels");
    }
    if (c->functional && c->b_in >= 0 &&
        (in[c->b_in].kind != KI_KIND_TENSOR || in[c->b_in].ndim != 1 ||
         in[c->b_in].d[0] != g->out_ch)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "bias %s does not hold %lld values",
                       ki_shape_str(&in[c->b_in], buf, sizeof buf), (long long)g->out_ch);
    }
    return KI_OK;
}

/* (in-1)*s - 2p + d*(k-1) + output_padding + 1 per spatial dim, which must be positive. */
static ki_status out_dims(const deconv3d *c, d3_geom *g, ki_error *err)
{
    const int64_t in[3] = { g->x.d, g->x.h, g->x.w };
    for (int i = 0; i < 3; i++) {
        g->o[i] = (in[i] - 1) * c->s[i] - 2 * c->pad[i] + c->dl[i] * (g->k[i] - 1) + c->opad[i] + 1;
        if (in[i] < 1 || g->o[i] < 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input size %lld gives output size %lld",
                           (long long)in[i], (long long)g->o[i]);
        }
    }
    return KI_OK;
}

static ki_status geom_make(const deconv3d *c, const ki_shape *in, int n_in, d3_geom *g,
                           ki_error *err)
{
    ki_shape o;
    ki_status st = ki_vol_get(&in[c->x_in], &g->x, err);
    if (st == KI_OK) {
        st = weight_dims(c, in, n_in, g, err);
    }
    if (st == KI_OK && g->x.c != g->cig * c->groups) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "input has %lld channels, expected %lld", (long long)g->x.c,
                     (long long)(g->cig * c->groups));
    }
    if (st == KI_OK) {
        st = out_dims(c, g, err);
    }
    if (st == KI_OK) {
        st = ki_vol_shape(&g->x, g->out_ch, g->o, &o, err);
    }
    if (st != KI_OK) {
        return st;
    }
    size_t col;
    if (!ki_ckd_mul_i64(&g->m, g->cog, g->k[0]) ||
        !ki_ckd_mul_i64(&g->m, g->m, g->k[1] * g->k[2]) ||
        !ki_cv_floats3(&col, g->m, g->x.h, g->x.w) || col > (size_t)KI_MAX_NUMEL * 4) {
        return KI_FAIL(err, KI_ERR_LIMIT, "transposed convolution too large");
    }
    g->hw = g->x.h * g->x.w, g->dhw = g->x.d * g->hw;
    g->ohw = g->o[1] * g->o[2], g->odhw = g->o[0] * g->ohw;
    int64_t per = g->m * g->hw;
    g->pz = per > 0 && per < D3_COL_FLOATS ? D3_COL_FLOATS / per : 1;
    g->pz = g->pz < g->x.d ? g->pz : g->x.d;
    if (!ki_cv_blas_ok(g->m) || !ki_cv_blas_ok(g->pz * g->hw) || !ki_cv_blas_ok(g->dhw) ||
        !ki_cv_blas_ok(g->cig)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "transposed convolution too large for the SGEMM");
    }
    return KI_OK;
}

static ki_status deconv3d_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                                int n_out, ki_error *err)
{
    const deconv3d *c = state;
    d3_geom g;
    if (n_out != 1 || n_in < 1 || c->x_in >= n_in) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = geom_make(c, in, n_in, &g, err);
    return st == KI_OK ? ki_vol_shape(&g.x, g.out_ch, g.o, &out[0], err) : st;
}

/* The column chunk is one matrix spanning the per-thread slices (they are contiguous). */
static size_t deconv3d_workspace(const void *state, const ki_shape *in, int n_in,
                                 const ki_shape *out, int n_out, int n_threads)
{
    const deconv3d *c = state;
    d3_geom g;
    (void)out, (void)n_out;
    if (geom_make(c, in, n_in, &g, NULL) != KI_OK) {
        return 0;
    }
    size_t nt = n_threads > 0 ? (size_t)n_threads : 1;
    size_t col = (size_t)(g.m * g.pz * g.hw) * sizeof(float);
    return ((col + nt - 1) / nt + 63) / 64 * 64;
}

/* Input indices i in [*lo, *hi) whose output i*s + off lands inside [0, n_out). */
static void hit_range(int64_t off, int64_t s, int64_t n_out, int64_t n_in, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n_out - 1 - off < 0 ? 0 : (n_out - 1 - off) / s + 1;
    *lo = a < n_in ? a : n_in;
    *hi = b < n_in ? b : n_in;
    *hi = *hi < *lo ? *lo : *hi;
}

/* Adds the kd*kh*kw column rows of one output channel (input planes [z0, z0 + nz)) into its
 * volume o. */
static void col2vol(const deconv3d *c, const d3_geom *g, const float *col, int64_t z0, int64_t nz,
                    float *restrict o)
{
    int64_t k3 = g->k[0] * g->k[1] * g->k[2], cols = nz * g->hw, r[3][2];
    for (int64_t t = 0; t < k3; t++) {
        const int64_t tap[3] = { t / (g->k[1] * g->k[2]), t / g->k[2] % g->k[1], t % g->k[2] };
        const int64_t n_in[3] = { z0 + nz, g->x.h, g->x.w };
        int64_t off[3];
        for (int i = 0; i < 3; i++) {
            off[i] = tap[i] * c->dl[i] - c->pad[i];
            hit_range(off[i], c->s[i], g->o[i], n_in[i], &r[i][0], &r[i][1]);
        }
        r[0][0] = r[0][0] > z0 ? r[0][0] : z0;
        const float *row = col + t * cols;
        for (int64_t iz = r[0][0]; iz < r[0][1]; iz++) {
            for (int64_t iy = r[1][0]; iy < r[1][1]; iy++) {
                float *d =
                    o + ((iz * c->s[0] + off[0]) * g->o[1] + iy * c->s[1] + off[1]) * g->o[2];
                const float *src = row + (iz - z0) * g->hw + iy * g->x.w;
                for (int64_t ix = r[2][0]; ix < r[2][1]; ix++) {
                    d[ix * c->s[2] + off[2]] += src[ix];
                }
            }
        }
    }
}

/* One (image, group): y (cog output volumes) from x (cig input volumes). */
static void deconv_group(const deconv3d *c, const d3_geom *g, const float *w, const float *x,
                         float *y, float *col, int nt)
{
    memset(y, 0, (size_t)(g->cog * g->odhw) * sizeof *y);
    for (int64_t z0 = 0; z0 < g->x.d; z0 += g->pz) {
        int64_t nz = g->x.d - z0 < g->pz ? g->x.d - z0 : g->pz, cols = nz * g->hw;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)g->m, (int)cols, (int)g->cig,
                    1.0f, w, (int)g->m, x + z0 * g->hw, (int)g->dhw, 0.0f, col, (int)cols);
        int64_t per = g->m / g->cog * cols;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t oc = 0; oc < g->cog; oc++) {
            col2vol(c, g, col + oc * per, z0, nz, y + oc * g->odhw);
        }
    }
}

static ki_status deconv3d_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                  int n_out, const ki_exec *ex)
{
    const deconv3d *c = state;
    d3_geom g;
    ki_shape sh[3];
    (void)n_out;
    for (int i = 0; i < n_in && i < 3; i++) {
        sh[i] = in[i].shape;
    }
    if (n_in > 3 || geom_make(c, sh, n_in, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    size_t nt = ex->n_threads > 0 ? (size_t)ex->n_threads : 1;
    if ((size_t)(g.m * g.pz * g.hw) * sizeof(float) > nt * ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    ki_cv_epilogue ep = c->ep;
    const float *weight = c->functional ? in[c->w_in].data : c->weight;
    ep.bias = c->functional ? (c->b_in >= 0 ? in[c->b_in].data : NULL) : c->ep.bias;
    const float *x = in[c->x_in].data;
    float *y = out[0].data;
    for (int64_t n = 0; n < g.x.n; n++) {
        for (int64_t gi = 0; gi < g.groups; gi++) {
            deconv_group(c, &g, weight + gi * g.cig * g.m, x + (n * g.x.c + gi * g.cig) * g.dhw,
                         y + (n * g.out_ch + gi * g.cog) * g.odhw, ex->workspace, ex->n_threads);
        }
        float *yn = y + n * g.out_ch * g.odhw;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
        for (int64_t oc = 0; oc < g.out_ch; oc++) {
            ki_cv_epilogue_plane(&ep, oc, yn + oc * g.odhw, (size_t)g.odhw);
        }
    }
    return KI_OK;
}

static void deconv3d_destroy(void *state)
{
    free(state);
}

/* Absorbs a following activation into the output epilogue (see ki_cv_fuse_act). */
static bool deconv3d_fuse(void *state, const ki_op_desc *next, int slot)
{
    deconv3d *c = state;
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    return ki_cv_fuse_act(&c->ep, next);
}

const ki_layer_ops ki_layer_conv_transpose3d = {
    .type = "nn.ConvTranspose3d",
    .create = deconv3d_create,
    .shape = deconv3d_shape,
    .workspace = deconv3d_workspace,
    .forward = deconv3d_forward,
    .destroy = deconv3d_destroy,
    .fuse = deconv3d_fuse,
};

const ki_layer_ops ki_layer_f_conv_transpose3d = {
    .type = "F.conv_transpose3d",
    .create = f_deconv3d_create,
    .shape = deconv3d_shape,
    .workspace = deconv3d_workspace,
    .forward = deconv3d_forward,
    .destroy = deconv3d_destroy,
    .fuse = deconv3d_fuse,
};
