/* gen_full.c - tensors of one value: torch.full(size, fill_value), torch.zeros(size),
 * torch.ones(size), and the _like forms (torch.full_like(input, fill_value), torch.zeros_like,
 * torch.ones_like) whose shape is their input's.
 *
 * size is the parameter size=(...) or an input (bound to $size, or the first) whose value is a
 * list or a number known at shape time (dynamic exports take it from size(@0,0) and the like).
 * The value is the fill_value parameter (the type's constant for zeros / ones); integer dtypes
 * truncate it as PyTorch's conversion does. Tensors are float32 (kinfer's element type). State
 * is immutable after create; thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/layer.h"

#define FULL_MAX_DIMS KI_MAX_DIMS

typedef struct full_state {
    double value;
    bool like;   /* the _like form: the output takes input 0's shape */
    int size_in; /* the input carrying size, or -1 */
    int ndim;    /* size=(...) when size_in < 0 */
    int64_t size[FULL_MAX_DIMS];
} full_state;

static bool integral_dtype(const char *dt)
{
    static const char *const ints[] = { "torch.int64", "torch.long",  "torch.int",
                                        "torch.int32", "torch.int16", "torch.short",
                                        "torch.int8",  "torch.uint8", "torch.bool" };
    for (size_t i = 0; dt && i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(dt, ints[i]) == 0) {
            return true;
        }
    }
    return false;
}

/* kind: 0 full, 1 zeros, 2 ones; like: the _like form. */
static ki_status full_create_kind(const ki_op_desc *op, int kind, bool like, void **state,
                                  ki_error *err)
{
    full_state *s = calloc(1, sizeof *s);
    const char *dt = NULL;
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->like = like;
    s->size_in = -1;
    s->value = kind == 2 ? 1.0 : 0.0;
    ki_status st = kind == 0 ? ki_op_get_float(op, "fill_value", NAN, &s->value, err) : KI_OK;
    if (st == KI_OK && kind == 0 && isnan(s->value) && !ki_op_has(op, "fill_value")) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "fill_value is missing");
    }
    if (st == KI_OK) {
        st = ki_op_get_string(op, "dtype", NULL, &dt, err);
    }
    if (st == KI_OK && integral_dtype(dt) && isfinite(s->value)) {
        s->value = strcmp(dt, "torch.bool") == 0 ? (s->value != 0.0) : trunc(s->value);
    }
    if (st == KI_OK && like && op->n_inputs < 1) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "needs an input");
    }
    for (int i = 0; st == KI_OK && !like && i < op->n_inputs; i++) {
        const char *k = op->input_keys ? op->input_keys[i] : NULL;
        if (!k || strcmp(k, "size") == 0) {
            s->size_in = s->size_in < 0 ? i : s->size_in;
        }
    }
    if (st == KI_OK && !like && s->size_in < 0) {
        st = ki_op_get_int_list(op, "size", FULL_MAX_DIMS, s->size, &s->ndim, err);
        if (st == KI_OK && s->ndim < 0) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "size is missing");
        }
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status full_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const full_state *s = state;
    int64_t d[FULL_MAX_DIMS];
    int n = s->ndim;
    (void)n_out;
    if (s->like) {
        if (n_in < 1 || in[0].kind != KI_KIND_TENSOR) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input is not a tensor");
        }
        out[0] = ki_shape_make(in[0].ndim, in[0].d);
        return KI_OK;
    }
    memcpy(d, s->size, sizeof d);
    if (s->size_in >= 0) {
        const ki_shape *v = s->size_in < n_in ? &in[s->size_in] : NULL;
        if (!v || !v->has_values || (v->kind != KI_KIND_LIST && v->kind != KI_KIND_SCALAR)) {
            return KI_FAIL(err, KI_ERR_SHAPE, "size must be a list known before the run");
        }
        n = v->kind == KI_KIND_SCALAR ? 1 : (int)v->d[0];
        if (n > FULL_MAX_DIMS || n > KI_MAX_VALUES) {
            return KI_FAIL(err, KI_ERR_LIMIT, "size has %d dimensions", n);
        }
        for (int i = 0; i < n; i++) {
            d[i] = (int64_t)v->values[i];
        }
    }
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || d[i] > KI_MAX_DIM) {
            return KI_FAIL(err, KI_ERR_SHAPE, "size[%d] = %lld is out of range", i,
                           (long long)d[i]);
        }
    }
    out[0] = ki_shape_make(n, d);
    return KI_OK;
}

static ki_status full_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const full_state *s = state;
    const float v = (float)s->value;
    (void)in, (void)n_in, (void)n_out, (void)ex;
    const int64_t n = ki_shape_count(&out[0].shape);
    for (int64_t i = 0; i < n; i++) {
        out[0].data[i] = v;
    }
    return KI_OK;
}

#define FULL_LAYER(sym, name, kind, like)                                                          \
    static ki_status sym##_create(const ki_op_desc *op, void **state, ki_error *err)               \
    {                                                                                              \
        return full_create_kind(op, kind, like, state, err);                                       \
    }                                                                                              \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = sym##_create,                                             \
                               .shape = full_shape,                                                \
                               .forward = full_forward,                                            \
                               .destroy = free }

FULL_LAYER(ki_layer_torch_full, "torch.full", 0, false);
FULL_LAYER(ki_layer_torch_zeros, "torch.zeros", 1, false);
FULL_LAYER(ki_layer_torch_ones, "torch.ones", 2, false);
FULL_LAYER(ki_layer_torch_full_like, "torch.full_like", 0, true);
FULL_LAYER(ki_layer_torch_zeros_like, "torch.zeros_like", 1, true);
FULL_LAYER(ki_layer_torch_ones_like, "torch.ones_like", 2, true);
