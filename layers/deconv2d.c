/* deconv2d.c - nn.ConvTranspose2d: parameters, shapes, kernel choice and the scalar reference
 * kernel (a gather over the input, so each output is written by one thread). The GEMM + col2im
 * kernel is in deconv2d_gemm.c. */
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"

static ki_status get_pair(const ki_op_desc *op, const char *key, int64_t def, int64_t lo,
                          int64_t out[2], ki_error *err)
{
    int64_t d[2] = { def, def };
    ki_status st = ki_op_get_ints(op, key, 2, d, out, err);
    for (int i = 0; st == KI_OK && i < 2; i++) {
        if (out[i] < lo || out[i] > KI_CV_MAX_PARAM) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "parameter %s has an out-of-range entry %lld", key,
                         (long long)out[i]);
        }
    }
    return st;
}

/* groups, channels and kernel size from the weight's dims wd (in, out/groups, kh, kw). */
static ki_status parse_dims(const ki_op_desc *op, const int64_t wd[4], ki_deconv2d *c,
                            ki_error *err)
{
    ki_status st = ki_op_get_int(op, "groups", 1, &c->groups, err);
    if (st != KI_OK) {
        return st;
    }
    if (c->groups < 1 || wd[0] % c->groups != 0 || wd[0] == 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "groups=%lld does not divide in_channels=%lld",
                       (long long)c->groups, (long long)wd[0]);
    }
    if (!ki_ckd_mul_i64(&c->out_ch, wd[1], c->groups) || c->out_ch > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@weight has too many output channels");
    }
    c->in_ch = wd[0];
    c->kh = wd[2], c->kw = wd[3];
    int64_t k[2];
    st = ki_op_get_ints(op, "kernel_size", 2, &wd[2], k, err);
    if (st == KI_OK && (k[0] != c->kh || k[1] != c->kw)) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "kernel_size does not match @weight");
    }
    if (st == KI_OK &&
        (c->kh < 1 || c->kw < 1 || c->kh > KI_CV_MAX_PARAM || c->kw > KI_CV_MAX_PARAM)) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "the weight's kernel %lldx%lld is out of range",
                     (long long)c->kh, (long long)c->kw);
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "in_channels", c->in_ch, err);
    }
    return st == KI_OK ? ki_cv_check_count(op, "out_channels", c->out_ch, err) : st;
}

ki_status ki_deconv2d_parse(const ki_op_desc *op, const int64_t wd[4], ki_deconv2d *c,
                            ki_error *err)
{
    int64_t s[2], d[2], p[2], op_[2];
    const char *mode;
    ki_status st = parse_dims(op, wd, c, err);
    if (st == KI_OK) {
        st = get_pair(op, "stride", 1, 1, s, err);
    }
    if (st == KI_OK) {
        st = get_pair(op, "dilation", 1, 1, d, err);
    }
    if (st == KI_OK) {
        st = get_pair(op, "padding", 0, 0, p, err);
    }
    if (st == KI_OK) {
        st = get_pair(op, "output_padding", 0, 0, op_, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_string(op, "padding_mode", "zeros", &mode, err);
    }
    if (st != KI_OK) {
        return st;
    }
    if (strcmp(mode, "zeros") != 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "padding_mode=%s (only zeros)", mode);
    }
    /* PyTorch: output padding must be smaller than either stride or dilation. */
    for (int i = 0; i < 2; i++) {
        if (op_[i] >= s[i] && op_[i] >= d[i]) {
            return KI_FAIL(err, KI_ERR_SHAPE,
                           "output_padding must be smaller than either stride or dilation");
        }
    }
    c->sh = s[0], c->sw = s[1], c->dh = d[0], c->dw = d[1];
    c->ph = p[0], c->pw = p[1], c->oph = op_[0], c->opw = op_[1];
    return KI_OK;
}

/* nn.ConvTranspose2d: the parameters for @weight, then its data and the optional @bias. */
static ki_status parse(const ki_op_desc *op, ki_deconv2d *c, ki_error *err)
{
    const ki_attr *w;
    ki_status st = ki_cv_weight_attr(op, 4, &w, err);
    st = st == KI_OK ? ki_deconv2d_parse(op, w->shape.d, c, err) : st;
    c->weight = st == KI_OK ? w->data : NULL;
    return st == KI_OK ? ki_cv_parse_bias(op, c->out_ch, &c->ep.bias, err) : st;
}

static ki_status deconv_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ki_deconv2d *c = calloc(1, sizeof *c);
    if (!c) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = parse(op, c, err);
    if (st != KI_OK) {
        free(c);
        return st;
    }
    /* the GEMM's A, once: the weight transposed per group */
    size_t bytes;
    if (!ki_cv_floats3(&bytes, c->in_ch, c->out_ch / c->groups, c->kh * c->kw) ||
        !(c->wt = malloc(bytes ? bytes : 1))) {
        free(c);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for the transposed weight");
    }
    ki_deconv2d_transpose(c, c->wt);
    *state = c;
    return KI_OK;
}

/* (in-1)*s - 2p + d*(k-1) + output_padding + 1, which must be positive. */
static ki_status out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p, int64_t op,
                         int64_t *out, ki_error *err)
{
    int64_t o = (in - 1) * s - 2 * p + d * (k - 1) + op + 1;
    if (in < 1 || o < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input size %lld gives output size %lld", (long long)in,
                       (long long)o);
    }
    *out = o;
    return KI_OK;
}

ki_status ki_deconv2d_geom_make(const ki_deconv2d *c, const ki_shape *in, ki_conv2d_geom *g,
                                ki_error *err)
{
    size_t col;
    ki_status st = ki_cv_nchw_get(in, &g->in, err);
    if (st != KI_OK) {
        return st;
    }
    if (g->in.c != c->in_ch) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has %lld channels, expected %lld",
                       (long long)g->in.c, (long long)c->in_ch);
    }
    st = out_dim(g->in.h, c->kh, c->sh, c->dh, c->ph, c->oph, &g->oh, err);
    if (st == KI_OK) {
        st = out_dim(g->in.w, c->kw, c->sw, c->dw, c->pw, c->opw, &g->ow, err);
    }
    if (st != KI_OK) {
        return st;
    }
    ki_shape o = ki_cv_nchw_shape(g->in.batched, g->in.n, c->out_ch, g->oh, g->ow);
    st = ki_shape_check(&o, err);
    int64_t m = c->out_ch / c->groups * c->kh * c->kw, hw = g->in.h * g->in.w;
    if (st == KI_OK && (!ki_cv_floats3(&col, m, g->in.h, g->in.w) || !ki_cv_blas_ok(m) ||
                        !ki_cv_blas_ok(hw) || col > (size_t)KI_MAX_NUMEL * 4)) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "transposed convolution too large");
    }
    return st;
}

static ki_status deconv_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const ki_deconv2d *c = state;
    ki_conv2d_geom g;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = ki_deconv2d_geom_make(c, &in[0], &g, err);
    if (st == KI_OK) {
        out[0] = ki_cv_nchw_shape(g.in.batched, g.in.n, c->out_ch, g.oh, g.ow);
    }
    return st;
}

/* The one place that chooses a kernel. */
ki_deconv2d_path ki_deconv2d_pick(const ki_deconv2d *c, const ki_conv2d_geom *g)
{
    (void)c, (void)g;
    return KI_DECONV2D_GEMM;
}

/* As for conv2d: the GEMM path's slices and one column matrix spanning the per-thread slices
 * (deconv2d_gemm.c). */
size_t ki_deconv2d_workspace_for(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_deconv2d_path p,
                                 int n_threads)
{
    return p == KI_DECONV2D_GEMM ? ki_deconv2d_gemm_workspace(c, g, n_threads) : 0;
}

/* One output value: every (input pixel, tap) with iy*s - p + ky*d == oy lands here. */
static float deconv_point(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *x,
                          const float *w, int64_t oy, int64_t ox)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups;
    int64_t hw = g->in.h * g->in.w, khw = c->kh * c->kw;
    float acc = 0.0f;
    for (int64_t ic = 0; ic < cig; ic++) {
        for (int64_t ky = 0; ky < c->kh; ky++) {
            int64_t ty = oy + c->ph - ky * c->dh, iy = ty / c->sh;
            bool row_ok = ty >= 0 && ty % c->sh == 0 && iy < g->in.h;
            for (int64_t kx = 0; kx < c->kw && row_ok; kx++) {
                int64_t tx = ox + c->pw - kx * c->dw, ix = tx / c->sw;
                if (tx >= 0 && tx % c->sw == 0 && ix < g->in.w) {
                    acc += x[ic * hw + iy * g->in.w + ix] * w[ic * cog * khw + ky * c->kw + kx];
                }
            }
        }
    }
    return acc;
}

static void deconv_forward_ref(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *in,
                               float *restrict out)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups;
    int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow, khw = c->kh * c->kw;
    for (int64_t n = 0; n < g->in.n; n++) {
        for (int64_t oc = 0; oc < c->out_ch; oc++) {
            int64_t gi = oc / cog;
            const float *x = in + (n * c->in_ch + gi * cig) * hw;
            const float *w = c->weight + (gi * cig * cog + oc % cog) * khw;
            float *o = out + (n * c->out_ch + oc) * ohw;
            for (int64_t i = 0; i < ohw; i++) {
                o[i] = deconv_point(c, g, x, w, i / g->ow, i % g->ow);
            }
            ki_cv_epilogue_plane(&c->ep, oc, o, (size_t)ohw);
        }
    }
}

void ki_deconv2d_run(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_deconv2d_path p,
                     const float *in, float *out, const ki_exec *ex)
{
    switch (p) {
    case KI_DECONV2D_REF:
        deconv_forward_ref(c, g, in, out);
        break;
    case KI_DECONV2D_GEMM:
        ki_deconv2d_forward_gemm(c, g, in, out, ex);
        break;
    }
}

static size_t deconv_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                               int n_out, int n_threads)
{
    const ki_deconv2d *c = state;
    ki_conv2d_geom g;
    (void)n_in, (void)out, (void)n_out;
    if (ki_deconv2d_geom_make(c, &in[0], &g, NULL) != KI_OK) {
        return 0;
    }
    return ki_deconv2d_workspace_for(c, &g, ki_deconv2d_pick(c, &g), n_threads);
}

static ki_status deconv_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const ki_deconv2d *c = state;
    ki_conv2d_geom g;
    (void)n_in, (void)n_out;
    if (ki_deconv2d_geom_make(c, &in[0].shape, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    ki_deconv2d_path p = ki_deconv2d_pick(c, &g);
    if (ki_deconv2d_workspace_for(c, &g, p, ex->n_threads) > ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    ki_deconv2d_run(c, &g, p, in[0].data, out[0].data, ex);
    return KI_OK;
}

static void deconv_destroy(void *state)
{
    ki_deconv2d *c = state;
    if (c) {
        free(c->wt);
    }
    free(c);
}

/* Absorbs a following activation into the output epilogue (see ki_cv_fuse_act). */
static bool deconv_fuse(void *state, const ki_op_desc *next, int slot)
{
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    ki_deconv2d *c = state;
    return ki_cv_fuse_act(&c->ep, next);
}

const ki_layer_ops ki_layer_conv_transpose2d = {
    .type = "nn.ConvTranspose2d",
    .create = deconv_create,
    .shape = deconv_shape,
    .workspace = deconv_workspace,
    .forward = deconv_forward,
    .destroy = deconv_destroy,
    .fuse = deconv_fuse,
};
