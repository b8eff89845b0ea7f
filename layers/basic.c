/* basic.c - the wiring operators (pnnx.Input, pnnx.Output), the no-ops Dropout and Identity, and
 * torch.flatten. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/layer.h"

/* ---- pnnx.Input / pnnx.Output: handled by the graph ---- */
const ki_layer_ops ki_layer_input = { .type = "pnnx.Input", .flags = KI_LAYER_GRAPH };
const ki_layer_ops ki_layer_output = { .type = "pnnx.Output", .flags = KI_LAYER_GRAPH };

/* ---- shape = input shape, one input, one output ---- */
static ki_status same_shape(const void *st, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                            ki_error *err)
{
    (void)st;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "expected 1 input and 1 output, got %d and %d", n_in,
                       n_out);
    }
    if (in[0].kind != KI_KIND_TENSOR) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input is not a tensor");
    }
    out[0] = in[0];
    return KI_OK;
}

static ki_status copy_forward(const void *st, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    (void)st, (void)n_in, (void)n_out, (void)ex;
    if (out[0].data != in[0].data) {
        memcpy(out[0].data, in[0].data, (size_t)ki_shape_count(&in[0].shape) * sizeof(float));
    }
    return KI_OK;
}

/* A stateless layer whose output has its input's shape. */
#define SAME_SHAPE_OP(sym, name, flag, fwd)                                                        \
    const ki_layer_ops sym = { .type = name, .flags = flag, .shape = same_shape, .forward = fwd }

/* ---- no-ops at inference ---- */
SAME_SHAPE_OP(ki_layer_dropout, "nn.Dropout", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_dropout2d, "nn.Dropout2d", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_f_dropout, "F.dropout", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_identity, "nn.Identity", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_dropout3d, "nn.Dropout3d", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_f_dropout23d, "F.dropout23d", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_alpha_dropout, "nn.AlphaDropout", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_f_alpha_dropout, "F.alpha_dropout", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_f_feature_alpha_dropout, "F.feature_alpha_dropout", KI_LAYER_VIEW,
              copy_forward);
SAME_SHAPE_OP(ki_layer_torch_clone, "torch.clone", KI_LAYER_VIEW, copy_forward);
SAME_SHAPE_OP(ki_layer_torch_positive, "torch.positive", KI_LAYER_VIEW, copy_forward);

/* ---- Tensor.to(dtype): float types keep the values; integer types truncate them toward zero
 * and bool makes 0 / 1, as PyTorch's conversions (tensors stay float32 in kinfer) ---- */
typedef enum to_kind { TO_COPY = 0, TO_TRUNC, TO_BOOL } to_kind;

static ki_status to_create(const ki_op_desc *op, void **state, ki_error *err)
{
    static const char *const ints[] = { "torch.int64", "torch.long",  "torch.int",  "torch.int32",
                                        "torch.int16", "torch.short", "torch.int8", "torch.uint8" };
    const char *dt = NULL;
    ki_status st = ki_op_get_string(op, "dtype", NULL, &dt, err);
    to_kind *k = st == KI_OK ? malloc(sizeof *k) : NULL;
    if (st != KI_OK) {
        return st;
    }
    if (!k) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    *k = dt && strcmp(dt, "torch.bool") == 0 ? TO_BOOL : TO_COPY;
    for (size_t i = 0; dt && i < sizeof ints / sizeof ints[0]; i++) {
        *k = strcmp(dt, ints[i]) == 0 ? TO_TRUNC : *k;
    }
    *state = k;
    return KI_OK;
}

static ki_status to_forward(const void *st, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const to_kind k = *(const to_kind *)st;
    const int64_t n = ki_shape_count(&in[0].shape);
    (void)n_in, (void)n_out, (void)ex;
    for (int64_t i = 0; i < n; i++) {
        const float v = in[0].data[i];
        out[0].data[i] = k == TO_TRUNC ? truncf(v) : k == TO_BOOL ? (float)(v != 0.0f) : v;
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_tensor_to = { .type = "Tensor.to",
                                          .flags = KI_LAYER_INPLACE,
                                          .create = to_create,
                                          .shape = same_shape,
                                          .forward = to_forward,
                                          .destroy = free };

/* ---- torch.flatten(input, start_dim, end_dim) ---- */
typedef struct flatten_state {
    int64_t start, end;
} flatten_state;

static ki_status flatten_create(const ki_op_desc *op, void **state, ki_error *err)
{
    flatten_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_op_get_int(op, "start_dim", 0, &s->start, err);
    if (st == KI_OK) {
        st = ki_op_get_int(op, "end_dim", -1, &s->end, err);
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status flatten_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    const flatten_state *s = state;
    ki_status st = same_shape(state, in, n_in, out, n_out, err);
    if (st != KI_OK) {
        return st;
    }
    int nd = in[0].ndim > 0 ? in[0].ndim : 1, a, b;
    if (!ki_axis_norm(s->start, nd, &a) || !ki_axis_norm(s->end, nd, &b) || a > b) {
        return KI_FAIL(err, KI_ERR_SHAPE, "start_dim=%lld end_dim=%lld do not fit rank %d",
                       (long long)s->start, (long long)s->end, in[0].ndim);
    }
    if (in[0].ndim == 0) {
        out[0].ndim = 1;
        out[0].d[0] = 1;
        return KI_OK;
    }
    int64_t merged = 1;
    for (int i = a; i <= b; i++) {
        merged *= in[0].d[i]; /* the input's element count is already checked */
    }
    out[0].ndim = in[0].ndim - (b - a);
    out[0].d[a] = merged;
    for (int i = b + 1; i < in[0].ndim; i++) {
        out[0].d[i - (b - a)] = in[0].d[i];
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_flatten = { .type = "torch.flatten",
                                        .flags = KI_LAYER_VIEW,
                                        .create = flatten_create,
                                        .shape = flatten_shape,
                                        .forward = copy_forward,
                                        .destroy = free };
