/* as2d.c - the 1-D operators run as their 2-D forms over a height of one: nn.Conv1d,
 * nn.ConvTranspose1d, nn.MaxPool1d / F.max_pool1d, nn.AvgPool1d / F.avg_pool1d and
 * nn.AdaptiveAvgPool1d / nn.AdaptiveMaxPool1d and nn.LPPool1d (and their F. forms), F.conv1d and
 * F.conv_transpose1d (whose 3-D weight input gains the height like the data). create() rewrites the
 * description: each spatial parameter v becomes (1, v) (padding and output_padding (0, v)), a 3-D
 * weight (a, b, k) becomes (a, b, 1, k) and the declared shapes gain the height; the 2-D layer
 * is created from it and keeps everything it needs. Tensors keep their memory: (N, C, L) is
 * (N, C, 1, L). Only activations are fused (a residual operand would lack the height). State:
 * the 2-D layer's and the rewritten description, owned; thread-safe as that layer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "registry.h"

static const char *const spatial[] = { "kernel_size", "stride",         "padding",
                                       "dilation",    "output_padding", "output_size" };

/* The 2-D type for a 1-D one, or NULL. */
static const char *type2d(const char *t)
{
    static const char *const map[][2] = {
        { "nn.Conv1d", "nn.Conv2d" },
        { "nn.ConvTranspose1d", "nn.ConvTranspose2d" },
        { "nn.MaxPool1d", "nn.MaxPool2d" },
        { "F.max_pool1d", "F.max_pool2d" },
        { "nn.AvgPool1d", "nn.AvgPool2d" },
        { "F.avg_pool1d", "F.avg_pool2d" },
        { "nn.AdaptiveAvgPool1d", "nn.AdaptiveAvgPool2d" },
        { "F.adaptive_avg_pool1d", "F.adaptive_avg_pool2d" },
        { "nn.AdaptiveMaxPool1d", "nn.AdaptiveMaxPool2d" },
        { "F.adaptive_max_pool1d", "F.adaptive_max_pool2d" },
        { "F.conv1d", "F.conv2d" },
        { "nn.LPPool1d", "nn.LPPool2d" },
        { "F.lp_pool1d", "F.lp_pool2d" },
        { "F.conv_transpose1d", "F.conv_transpose2d" },
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(t, map[i][0]) == 0) {
            return map[i][1];
        }
    }
    return NULL;
}

/* (N, C, L) -> (N, C, 1, L) and (C, L) -> (C, 1, L); other shapes as they are. */
static ki_shape add_h(ki_shape s)
{
    if (s.kind != KI_KIND_TENSOR || (s.ndim != 2 && s.ndim != 3)) {
        return s;
    }
    int64_t d[KI_MAX_DIMS];
    memcpy(d, s.d, (size_t)s.ndim * sizeof *d);
    d[s.ndim] = d[s.ndim - 1];
    d[s.ndim - 1] = 1;
    ki_shape r = ki_shape_make(s.ndim + 1, d);
    return r;
}

static ki_shape drop_h(ki_shape s)
{
    if (s.kind != KI_KIND_TENSOR || (s.ndim != 3 && s.ndim != 4) || s.d[s.ndim - 2] != 1) {
        return s;
    }
    int64_t d[KI_MAX_DIMS];
    memcpy(d, s.d, (size_t)s.ndim * sizeof *d);
    d[s.ndim - 2] = d[s.ndim - 1];
    return ki_shape_make(s.ndim - 1, d);
}

/* The rewritten description's owned arrays. */
typedef struct desc2d {
    ki_op_desc d;
    ki_param *params;
    int64_t (*ints)[2];
    char (*raw)[48];
    ki_attr *attrs;
    ki_shape *in_decl, *out_decl;
} desc2d;

/* The state: the 2-D layer and its description, which it may keep pointing at (F.conv2d). */
typedef struct as2d {
    const ki_layer_ops *inner;
    void *st;
    desc2d x;
} as2d;

static void desc_free(desc2d *x)
{
    free(x->params), free(x->ints), free(x->raw), free(x->attrs);
    free(x->in_decl), free(x->out_decl);
}

static bool is_spatial(const char *k)
{
    for (size_t i = 0; i < sizeof spatial / sizeof spatial[0]; i++) {
        if (strcmp(k, spatial[i]) == 0) {
            return true;
        }
    }
    return false;
}

static ki_status desc_make(const ki_op_desc *op, const char *type, desc2d *x, ki_error *err)
{
    memset(x, 0, sizeof *x);
    x->d = *op;
    x->d.type = type;
    x->d.attrs_releasable = false;
    int np = op->n_params > 0 ? op->n_params : 1, na = op->n_attrs > 0 ? op->n_attrs : 1;
    int ni = op->n_inputs > 0 ? op->n_inputs : 1, no = op->n_outputs > 0 ? op->n_outputs : 1;
    x->params = calloc((size_t)np, sizeof *x->params);
    x->ints = calloc((size_t)np, sizeof *x->ints);
    x->raw = calloc((size_t)np, sizeof *x->raw);
    x->attrs = calloc((size_t)na, sizeof *x->attrs);
    x->in_decl = calloc((size_t)ni, sizeof *x->in_decl);
    x->out_decl = calloc((size_t)no, sizeof *x->out_decl);
    if (!x->params || !x->ints || !x->raw || !x->attrs || !x->in_decl || !x->out_decl) {
        desc_free(x);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < op->n_params; i++) {
        ki_param p = op->params[i];
        bool one = p.kind == KI_PARAM_INT || (p.kind == KI_PARAM_INTS && p.n == 1);
        if (is_spatial(p.key) && one) {
            const int64_t v = p.kind == KI_PARAM_INT ? p.i : p.ints[0];
            const bool zero = strcmp(p.key, "padding") == 0 || strcmp(p.key, "output_padding") == 0;
            x->ints[i][0] = zero ? 0 : 1, x->ints[i][1] = v;
            snprintf(x->raw[i], sizeof x->raw[i], "(%lld,%lld)", (long long)x->ints[i][0],
                     (long long)v);
            p.kind = KI_PARAM_INTS, p.n = 2, p.ints = x->ints[i], p.floats = NULL,
            p.raw = x->raw[i];
        }
        x->params[i] = p;
    }
    for (int i = 0; i < op->n_attrs; i++) {
        ki_attr a = op->attrs[i];
        if (strcmp(a.key, "weight") == 0 && a.shape.ndim == 3) {
            int64_t d[4] = { a.shape.d[0], a.shape.d[1], 1, a.shape.d[2] };
            a.shape = ki_shape_make(4, d);
        }
        x->attrs[i] = a;
    }
    for (int i = 0; i < op->n_inputs; i++) {
        x->in_decl[i] = op->input_decl ? add_h(op->input_decl[i]) : ki_shape_make(-1, NULL);
    }
    for (int i = 0; i < op->n_outputs; i++) {
        x->out_decl[i] = op->output_decl ? add_h(op->output_decl[i]) : ki_shape_make(-1, NULL);
    }
    x->d.params = x->params, x->d.attrs = x->attrs;
    x->d.input_decl = op->input_decl ? x->in_decl : NULL;
    x->d.output_decl = op->output_decl ? x->out_decl : NULL;
    return KI_OK;
}

static ki_status as2d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const char *t2 = type2d(op->type);
    const ki_layer_ops *inner = t2 ? ki_registry_find(t2) : NULL;
    if (!inner) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "no 2-D form of %s", op->type);
    }
    as2d *a = calloc(1, sizeof *a);
    ki_status st = a ? desc_make(op, t2, &a->x, err) : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    if (st == KI_OK) {
        a->inner = inner;
        st = inner->create(&a->x.d, &a->st, err);
        if (st != KI_OK) {
            desc_free(&a->x);
        }
    }
    if (st != KI_OK) {
        free(a);
        return st;
    }
    *state = a;
    return KI_OK;
}

/* Up to 4 inputs / outputs, their shapes with the height of one. */
#define AS2D_MAX_IO 4

static ki_status as2d_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const as2d *a = state;
    ki_shape i2[AS2D_MAX_IO], o2[AS2D_MAX_IO];
    if (n_in > AS2D_MAX_IO || n_out > AS2D_MAX_IO) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "too many inputs or outputs");
    }
    for (int i = 0; i < n_in; i++) {
        i2[i] = add_h(in[i]);
    }
    memset(o2, 0, sizeof o2);
    ki_status st = a->inner->shape(a->st, i2, n_in, o2, n_out, err);
    for (int i = 0; st == KI_OK && i < n_out; i++) {
        out[i] = drop_h(o2[i]);
    }
    return st;
}

static size_t as2d_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                             int n_out, int n_threads)
{
    const as2d *a = state;
    ki_shape i2[AS2D_MAX_IO], o2[AS2D_MAX_IO];
    if (!a->inner->workspace || n_in > AS2D_MAX_IO || n_out > AS2D_MAX_IO) {
        return 0;
    }
    for (int i = 0; i < n_in; i++) {
        i2[i] = add_h(in[i]);
    }
    for (int i = 0; i < n_out; i++) {
        o2[i] = add_h(out[i]);
    }
    return a->inner->workspace(a->st, i2, n_in, o2, n_out, n_threads);
}

static ki_status as2d_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const as2d *a = state;
    ki_tensor i2[AS2D_MAX_IO], o2[AS2D_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        i2[i] = in[i], i2[i].shape = add_h(in[i].shape);
    }
    for (int i = 0; i < n_out; i++) {
        o2[i] = out[i], o2[i].shape = add_h(out[i].shape);
    }
    return a->inner->forward(a->st, i2, n_in, o2, n_out, ex);
}

static void as2d_destroy(void *state)
{
    as2d *a = state;
    if (a && a->inner->destroy) {
        a->inner->destroy(a->st);
    }
    if (a) {
        desc_free(&a->x);
    }
    free(a);
}

static bool as2d_fuse(void *state, const ki_op_desc *next, int slot)
{
    as2d *a = state;
    return next->n_inputs == 1 && a->inner->fuse && a->inner->fuse(a->st, next, slot);
}

#define AS2D_LAYER(sym, name)                                                                      \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = as2d_create,                                              \
                               .shape = as2d_shape,                                                \
                               .workspace = as2d_workspace,                                        \
                               .forward = as2d_forward,                                            \
                               .destroy = as2d_destroy,                                            \
                               .fuse = as2d_fuse }

AS2D_LAYER(ki_layer_conv1d, "nn.Conv1d");
AS2D_LAYER(ki_layer_conv_transpose1d, "nn.ConvTranspose1d");
AS2D_LAYER(ki_layer_max_pool1d, "nn.MaxPool1d");
AS2D_LAYER(ki_layer_f_max_pool1d, "F.max_pool1d");
AS2D_LAYER(ki_layer_avg_pool1d, "nn.AvgPool1d");
AS2D_LAYER(ki_layer_f_avg_pool1d, "F.avg_pool1d");
AS2D_LAYER(ki_layer_adaptive_avg_pool1d, "nn.AdaptiveAvgPool1d");
AS2D_LAYER(ki_layer_f_adaptive_avg_pool1d, "F.adaptive_avg_pool1d");
AS2D_LAYER(ki_layer_adaptive_max_pool1d, "nn.AdaptiveMaxPool1d");
AS2D_LAYER(ki_layer_f_adaptive_max_pool1d, "F.adaptive_max_pool1d");
AS2D_LAYER(ki_layer_f_conv1d, "F.conv1d");
AS2D_LAYER(ki_layer_lp_pool1d, "nn.LPPool1d");
AS2D_LAYER(ki_layer_f_lp_pool1d, "F.lp_pool1d");
AS2D_LAYER(ki_layer_f_conv_transpose1d, "F.conv_transpose1d");
