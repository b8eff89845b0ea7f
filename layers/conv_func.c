/* conv_func.c - F.conv2d and F.conv_transpose2d: the convolutions whose weight (and optional
 * bias) arrive as inputs ($weight, $bias: model inputs or pnnx.Attribute operands) instead of
 * @attributes. The parameters are those of nn.Conv2d / nn.ConvTranspose2d (ki_conv2d_parse,
 * ki_deconv2d_parse), parsed again for each weight shape; the kernels are theirs, on the weight
 * as it lies in the input. A weight input can change between runs, so nothing is prepared from
 * it at create (no Winograd or OV forms): the paths that read the weight in place run. The 1-D
 * forms go through as2d.c. State: the operator description (the model's, outliving the state),
 * the input slots and the CPU level; immutable, thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"

typedef struct conv_func {
    const ki_op_desc *op;
    int x, w, b; /* input slots of $input, $weight, $bias (b: -1 without a bias) */
    bool transposed;
    ki_isa isa;
} conv_func;

/* A never-read stand-in for the weight while only sizes are computed: the kernel choice asks
 * whether a weight is present. */
static const float no_data;

/* The convolution's state for a weight of dims wd, or an error naming the bad parameter. */
static ki_status bind_conv(const conv_func *f, const int64_t wd[4], const float *w, const float *b,
                           ki_conv2d *c, ki_error *err)
{
    memset(c, 0, sizeof *c);
    ki_status st = ki_conv2d_parse(f->op, wd, c, err);
    if (st == KI_OK) {
        ki_conv2d_set_isa(c, f->isa);
        c->weight = w, c->ep.bias = b;
    }
    return st;
}

static ki_status bind_deconv(const conv_func *f, const int64_t wd[4], const float *w,
                             const float *b, ki_deconv2d *c, ki_error *err)
{
    memset(c, 0, sizeof *c);
    ki_status st = ki_deconv2d_parse(f->op, wd, c, err);
    c->weight = w, c->ep.bias = b;
    return st;
}

static ki_status cf_create(const ki_op_desc *op, void **state, ki_error *err)
{
    conv_func *f = calloc(1, sizeof *f);
    if (!f) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    f->op = op;
    f->transposed = strcmp(op->type, "F.conv_transpose2d") == 0;
    f->isa = ki_cpu_isa();
    f->x = ki_op_input_slot(op, "input", 0), f->w = ki_op_input_slot(op, "weight", 1);
    f->b = ki_op_input_slot(op, "bias", 2);
    ki_status st = KI_OK;
    if (op->n_inputs < 2 || op->n_inputs > 3 || op->n_outputs != 1 || f->x < 0 || f->w < 0 ||
        (op->n_inputs == 3) != (f->b >= 0) || f->x == f->w || f->x == f->b || f->w == f->b) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED,
                     "expects $input, $weight and an optional $bias, and 1 output");
    } else if (ki_op_has(op, "bias") || ki_op_has(op, "weight")) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "a constant weight or bias parameter");
    }
    if (st == KI_OK) { /* the parameters alone, on a stand-in weight that fits any groups */
        int64_t groups = 1, wd[4] = { 1, 1, 1, 1 };
        ki_conv2d c;
        ki_deconv2d d;
        st = ki_op_get_int(op, "groups", 1, &groups, err);
        wd[0] = groups >= 1 && groups <= KI_MAX_DIM ? groups : 1;
        st = st != KI_OK     ? st
             : f->transposed ? bind_deconv(f, wd, NULL, NULL, &d, err)
                             : bind_conv(f, wd, NULL, NULL, &c, err);
    }
    if (st != KI_OK) {
        free(f);
        return st;
    }
    *state = f;
    return KI_OK;
}

/* The weight's dims from its shape: a 4-D tensor. */
static ki_status weight_dims(const ki_shape *w, int64_t wd[4], ki_error *err)
{
    char buf[96];
    if (w->kind != KI_KIND_TENSOR || w->ndim != 4) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not 4-D", ki_shape_str(w, buf, sizeof buf));
    }
    memcpy(wd, w->d, 4 * sizeof *wd);
    return KI_OK;
}

static ki_status cf_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const conv_func *f = state;
    int64_t wd[4], oc = 0;
    ki_conv2d_geom g;
    char buf[96];
    if (n_in != f->op->n_inputs || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = weight_dims(&in[f->w], wd, err);
    if (st == KI_OK && f->transposed) {
        ki_deconv2d d;
        st = bind_deconv(f, wd, &no_data, NULL, &d, err);
        st = st != KI_OK ? st : ki_deconv2d_geom_make(&d, &in[f->x], &g, err);
        oc = d.out_ch;
    } else if (st == KI_OK) {
        ki_conv2d c;
        st = bind_conv(f, wd, &no_data, NULL, &c, err);
        st = st != KI_OK ? st : ki_conv2d_geom_make(&c, &in[f->x], &g, err);
        oc = c.out_ch;
    }
    if (st == KI_OK && f->b >= 0 &&
        (in[f->b].kind != KI_KIND_TENSOR || in[f->b].ndim != 1 || in[f->b].d[0] != oc)) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "bias %s is not (%lld)",
                     ki_shape_str(&in[f->b], buf, sizeof buf), (long long)oc);
    }
    if (st == KI_OK) {
        out[0] = ki_cv_nchw_shape(g.in.batched, g.in.n, oc, g.oh, g.ow);
    }
    return st;
}

static size_t cf_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                           int n_out, int n_threads)
{
    const conv_func *f = state;
    int64_t wd[4];
    ki_conv2d_geom g;
    (void)n_in, (void)out, (void)n_out;
    if (weight_dims(&in[f->w], wd, NULL) != KI_OK) {
        return 0;
    }
    if (f->transposed) {
        ki_deconv2d d;
        if (bind_deconv(f, wd, &no_data, NULL, &d, NULL) != KI_OK ||
            ki_deconv2d_geom_make(&d, &in[f->x], &g, NULL) != KI_OK) {
            return 0;
        }
        return ki_deconv2d_workspace_for(&d, &g, ki_deconv2d_pick(&d, &g), n_threads);
    }
    ki_conv2d c;
    if (bind_conv(f, wd, &no_data, NULL, &c, NULL) != KI_OK ||
        ki_conv2d_geom_make(&c, &in[f->x], &g, NULL) != KI_OK) {
        return 0;
    }
    return ki_conv2d_workspace_for(&c, &g, ki_conv2d_pick(&c, &g), n_threads);
}

static ki_status cf_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const conv_func *f = state;
    const float *b = f->b >= 0 ? in[f->b].data : NULL;
    int64_t wd[4];
    ki_conv2d_geom g;
    (void)n_in, (void)n_out;
    if (weight_dims(&in[f->w].shape, wd, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    if (f->transposed) {
        ki_deconv2d d;
        if (bind_deconv(f, wd, in[f->w].data, b, &d, NULL) != KI_OK ||
            ki_deconv2d_geom_make(&d, &in[f->x].shape, &g, NULL) != KI_OK) {
            return KI_ERR_SHAPE;
        }
        ki_deconv2d_path p = ki_deconv2d_pick(&d, &g);
        if (ki_deconv2d_workspace_for(&d, &g, p, ex->n_threads) > ex->ws_per_thread) {
            return KI_ERR_INTERNAL;
        }
        ki_deconv2d_run(&d, &g, p, in[f->x].data, out[0].data, ex);
        return KI_OK;
    }
    ki_conv2d c;
    if (bind_conv(f, wd, in[f->w].data, b, &c, NULL) != KI_OK ||
        ki_conv2d_geom_make(&c, &in[f->x].shape, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    ki_conv2d_path p = ki_conv2d_pick(&c, &g);
    if (!ki_conv2d_path_ok(&c, &g, p) ||
        ki_conv2d_workspace_for(&c, &g, p, ex->n_threads) > ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    ki_conv2d_run(&c, &g, p, in[f->x].data, out[0].data, ex);
    return KI_OK;
}

const ki_layer_ops ki_layer_f_conv2d = {
    .type = "F.conv2d",
    .create = cf_create,
    .shape = cf_shape,
    .workspace = cf_workspace,
    .forward = cf_forward,
    .destroy = free,
};

const ki_layer_ops ki_layer_f_conv_transpose2d = {
    .type = "F.conv_transpose2d",
    .create = cf_create,
    .shape = cf_shape,
    .workspace = cf_workspace,
    .forward = cf_forward,
    .destroy = free,
};
