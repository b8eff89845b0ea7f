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
        if (st == KI_OK && (groups < 1 || groups > KI_MAX_DIM)) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "groups=%lld is out of range", (long long)groups);
        }
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

/* One run's layer: the convolution (or transposed one) for these shapes and data, its geometry. */
typedef struct bound {
    ki_conv2d c;
    ki_deconv2d d;
    ki_conv2d_geom g;
    int64_t out_ch;
} bound;

/* Binds the weight of shape ws (4-D) and data w, bias b, for input shape xs. */
static ki_status bind(const conv_func *f, const ki_shape *xs, const ki_shape *ws, const float *w,
                      const float *b, bound *u, ki_error *err)
{
    char buf[96];
    if (ws->kind != KI_KIND_TENSOR || ws->ndim != 4) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not 4-D",
                       ki_shape_str(ws, buf, sizeof buf));
    }
    ki_status st;
    if (f->transposed) {
        st = bind_deconv(f, ws->d, w, b, &u->d, err);
        st = st != KI_OK ? st : ki_deconv2d_geom_make(&u->d, xs, &u->g, err);
        u->out_ch = u->d.out_ch;
    } else {
        st = bind_conv(f, ws->d, w, b, &u->c, err);
        st = st != KI_OK ? st : ki_conv2d_geom_make(&u->c, xs, &u->g, err);
        u->out_ch = u->c.out_ch;
    }
    return st;
}

/* Workspace bytes per thread of the path the bound layer runs. */
static size_t bound_workspace(const conv_func *f, const bound *u, int n_threads)
{
    if (f->transposed) {
        return ki_deconv2d_workspace_for(&u->d, &u->g, ki_deconv2d_pick(&u->d, &u->g), n_threads);
    }
    return ki_conv2d_workspace_for(&u->c, &u->g, ki_conv2d_pick(&u->c, &u->g), n_threads);
}

static ki_status cf_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const conv_func *f = state;
    bound u;
    char buf[96];
    if (n_in != f->op->n_inputs || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = bind(f, &in[f->x], &in[f->w], &no_data, NULL, &u, err);
    if (st == KI_OK && f->b >= 0 &&
        (in[f->b].kind != KI_KIND_TENSOR || in[f->b].ndim != 1 || in[f->b].d[0] != u.out_ch)) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "bias %s is not (%lld)",
                     ki_shape_str(&in[f->b], buf, sizeof buf), (long long)u.out_ch);
    }
    if (st == KI_OK) {
        out[0] = ki_cv_nchw_shape(u.g.in.batched, u.g.in.n, u.out_ch, u.g.oh, u.g.ow);
    }
    return st;
}

static size_t cf_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                           int n_out, int n_threads)
{
    const conv_func *f = state;
    bound u;
    (void)n_in, (void)out, (void)n_out;
    if (bind(f, &in[f->x], &in[f->w], &no_data, NULL, &u, NULL) != KI_OK) {
        return 0;
    }
    return bound_workspace(f, &u, n_threads);
}

static ki_status cf_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const conv_func *f = state;
    const float *b = f->b >= 0 ? in[f->b].data : NULL;
    bound u;
    (void)n_in, (void)n_out;
    if (bind(f, &in[f->x].shape, &in[f->w].shape, in[f->w].data, b, &u, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    if (bound_workspace(f, &u, ex->n_threads) > ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    if (f->transposed) {
        ki_deconv2d_run(&u.d, &u.g, ki_deconv2d_pick(&u.d, &u.g), in[f->x].data, out[0].data, ex);
        return KI_OK;
    }
    ki_conv2d_path p = ki_conv2d_pick(&u.c, &u.g);
    if (!ki_conv2d_path_ok(&u.c, &u.g, p)) {
        return KI_ERR_INTERNAL;
    }
    ki_conv2d_run(&u.c, &u.g, p, in[f->x].data, out[0].data, ex);
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
