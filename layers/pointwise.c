/* pointwise.c - elementwise operators of up to three broadcast operands, each an input tensor
 * or a number from the parameters: the comparisons torch.eq / ne / gt / ge / lt / le, the
 * logical torch.logical_and / or / xor / not, torch.where(condition, input, other) and
 * Tensor.masked_fill(input, mask, value). Booleans are float 0 / 1 (kinfer's tensors are
 * float32), and a condition or mask is true where it is not 0. Broadcasting is PyTorch's
 * (right-aligned, size-1 dims stretch). State: the operands' sources, immutable; thread-safe. */
#include <math.h>
#include <stdlib.h>

#include "shape_common.h"

typedef enum pw_op {
    PW_EQ,
    PW_NE,
    PW_GT,
    PW_GE,
    PW_LT,
    PW_LE,
    PW_AND,
    PW_OR,
    PW_XOR,
    PW_NOT,
    PW_WHERE,
    PW_FILL
} pw_op;

typedef struct pw_state {
    pw_op op;
    int n;        /* operands: 1 (not), 2, or 3 (where, masked_fill) */
    int input[3]; /* the input index of each operand, or -1 for value[i] */
    double value[3];
} pw_state;

/* Operand i: the input named key (or the next unnamed one), else the number param key. */
static ki_status operand(const ki_op_desc *op, const char *key, int i, int *next_unnamed,
                         pw_state *s, ki_error *err)
{
    int idx = ki_op_input_index(op, key);
    if (idx < 0) {
        while (*next_unnamed < op->n_inputs && op->input_keys && op->input_keys[*next_unnamed]) {
            (*next_unnamed)++;
        }
        if (*next_unnamed < op->n_inputs && !ki_op_has(op, key)) {
            idx = (*next_unnamed)++;
        }
    }
    s->input[i] = idx;
    if (idx >= 0) {
        return KI_OK;
    }
    const ki_param *p = ki_op_param(op, key);
    if (p && p->kind == KI_PARAM_BOOL) {
        s->value[i] = p->i ? 1.0 : 0.0;
        return KI_OK;
    }
    ki_status st = ki_op_get_float(op, key, NAN, &s->value[i], err);
    if (st == KI_OK && !ki_op_has(op, key)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "operand %s is missing", key);
    }
    return st;
}

static ki_status pw_create_op(const ki_op_desc *op, pw_op kind, void **state, ki_error *err)
{
    static const char *const keys2[] = { "input", "other", NULL };
    static const char *const keys_where[] = { "condition", "input", "other" };
    static const char *const keys_fill[] = { "input", "mask", "value" };
    pw_state t = { .op = kind };
    const char *const *keys = kind == PW_WHERE ? keys_where : kind == PW_FILL ? keys_fill : keys2;
    t.n = kind == PW_NOT ? 1 : kind >= PW_WHERE ? 3 : 2;
    int next = 0;
    ki_status st = op->n_outputs == 1 ? KI_OK : KI_FAIL(err, KI_ERR_FORMAT, "expects one output");
    for (int i = 0; st == KI_OK && i < t.n; i++) {
        st = operand(op, keys[i], i, &next, &t, err);
    }
    if (st == KI_OK && t.input[0] < 0 && (t.n < 2 || t.input[1] < 0) &&
        (t.n < 3 || t.input[2] < 0)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "needs at least one tensor operand");
    }
    if (st == KI_OK) {
        st = ki_shapeop_alloc(sizeof t, state, err);
    }
    if (st == KI_OK) {
        *(pw_state *)*state = t;
    }
    return st;
}

/* The broadcast of the tensor operands' shapes. */
static ki_status pw_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const pw_state *s = state;
    int64_t d[KI_MAX_DIMS];
    int nd = 0;
    char a[96], b[96];
    (void)n_out;
    for (int i = 0; i < s->n; i++) {
        const int k = s->input[i];
        if (k < 0) {
            continue;
        }
        if (k >= n_in || in[k].kind != KI_KIND_TENSOR) {
            return KI_FAIL(err, KI_ERR_SHAPE, "operand %d is not a tensor", i);
        }
        const ki_shape *x = &in[k];
        const ki_shape cur = ki_shape_make(nd, d); /* for the message */
        if (ki_shapeop_broadcast(d, &nd, x) >= 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "shapes %s and %s do not broadcast",
                           ki_shape_str(&cur, a, sizeof a), ki_shape_str(x, b, sizeof b));
        }
    }
    return ki_shapeop_make(&out[0], nd, d, err);
}

static float pw_apply(pw_op op, float a, float b, float c)
{
    switch (op) {
    case PW_EQ:
        return (float)(a == b);
    case PW_NE:
        return (float)(a != b);
    case PW_GT:
        return (float)(a > b);
    case PW_GE:
        return (float)(a >= b);
    case PW_LT:
        return (float)(a < b);
    case PW_LE:
        return (float)(a <= b);
    case PW_AND:
        return (float)(a != 0.0f && b != 0.0f);
    case PW_OR:
        return (float)(a != 0.0f || b != 0.0f);
    case PW_XOR:
        return (float)((a != 0.0f) != (b != 0.0f));
    case PW_NOT:
        return (float)(a == 0.0f);
    case PW_WHERE:
        return a != 0.0f ? b : c;
    case PW_FILL:
        return b != 0.0f ? c : a;
    }
    return a;
}

static ki_status pw_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const pw_state *s = state;
    const ki_shape *os = &out[0].shape;
    int64_t st[3][KI_MAX_DIMS] = { { 0 } };
    const float *src[3] = { NULL, NULL, NULL };
    float cval[3];
    (void)n_in, (void)n_out;
    for (int i = 0; i < s->n; i++) {
        cval[i] = (float)s->value[i];
        if (s->input[i] < 0) {
            continue;
        }
        ki_shapeop_broadcast_strides(&in[s->input[i]].shape, os, st[i]);
        src[i] = in[s->input[i]].data;
    }
    const int64_t total = ki_shape_count(os);
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (total > 65536)
    for (int64_t e = 0; e < total; e++) {
        int64_t off[3] = { 0, 0, 0 }, r = e;
        for (int j = os->ndim - 1; j >= 0; j--) {
            int64_t k = r % os->d[j];
            r /= os->d[j];
            off[0] += k * st[0][j], off[1] += k * st[1][j], off[2] += k * st[2][j];
        }
        float v[3];
        for (int i = 0; i < 3; i++) {
            v[i] = i < s->n && src[i] ? src[i][off[i]] : i < s->n ? cval[i] : 0.0f;
        }
        out[0].data[e] = pw_apply(s->op, v[0], v[1], v[2]);
    }
    return KI_OK;
}

#define PW_LAYER(sym, name, kind)                                                                  \
    static ki_status sym##_create(const ki_op_desc *op, void **state, ki_error *err)               \
    {                                                                                              \
        return pw_create_op(op, kind, state, err);                                                 \
    }                                                                                              \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = sym##_create,                                             \
                               .shape = pw_shape,                                                  \
                               .forward = pw_forward,                                              \
                               .destroy = ki_shapeop_free }

PW_LAYER(ki_layer_torch_eq, "torch.eq", PW_EQ);
PW_LAYER(ki_layer_torch_ne, "torch.ne", PW_NE);
PW_LAYER(ki_layer_torch_gt, "torch.gt", PW_GT);
PW_LAYER(ki_layer_torch_ge, "torch.ge", PW_GE);
PW_LAYER(ki_layer_torch_lt, "torch.lt", PW_LT);
PW_LAYER(ki_layer_torch_le, "torch.le", PW_LE);
PW_LAYER(ki_layer_torch_logical_and, "torch.logical_and", PW_AND);
PW_LAYER(ki_layer_torch_logical_or, "torch.logical_or", PW_OR);
PW_LAYER(ki_layer_torch_logical_xor, "torch.logical_xor", PW_XOR);
PW_LAYER(ki_layer_torch_logical_not, "torch.logical_not", PW_NOT);
PW_LAYER(ki_layer_torch_where, "torch.where", PW_WHERE);
PW_LAYER(ki_layer_tensor_masked_fill, "Tensor.masked_fill", PW_FILL);
