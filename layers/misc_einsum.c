/* misc_einsum.c - torch.einsum(equation, *operands) with a plain reference kernel.
 *
 * The equation is parsed once at load: one term of letters per operand, separated by commas, and
 * an optional '->' output term; without it the output is every letter that appears exactly once,
 * in alphabetical order with capitals first (PyTorch's rule). A letter repeated inside one term
 * takes that operand's diagonal; letters missing from the output are summed over. As in PyTorch,
 * a dimension of size 1 broadcasts against the same letter's size in another operand. The
 * ellipsis ('...') is rejected. Every output element sums its products in double over the summed
 * letters in a fixed order, so results do not depend on the thread count. State: the parsed
 * equation, immutable; thread-safe. */
#include <string.h>

#include "../core/ckd.h"
#include "shape_common.h"

#define EIN_MAX_OPS    8
#define EIN_MAX_LABELS 52 /* A-Z and a-z */

typedef struct ein_state {
    int n_ops;
    int n_terms[EIN_MAX_OPS];
    signed char term[EIN_MAX_OPS][KI_MAX_DIMS]; /* label ids of each operand's dims */
    int n_out;
    signed char out[KI_MAX_DIMS];
    int n_sum;
    signed char sum[EIN_MAX_LABELS]; /* labels summed over, in id order */
} ein_state;

/* A letter's id in PyTorch's order (capitals first), or -1. */
static int label_id(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    return c >= 'a' && c <= 'z' ? 26 + (c - 'a') : -1;
}

/* Parses the operand terms of eq (up to "->" or the end) into s; counts each label in used. */
static ki_status parse_terms(const char *eq, ein_state *s, int *used, const char **rest,
                             ki_error *err)
{
    const char *p = eq;
    s->n_ops = 1;
    for (; *p && !(p[0] == '-' && p[1] == '>'); p++) {
        const int id = label_id(*p);
        if (*p == ',') {
            if (s->n_ops == EIN_MAX_OPS) {
                return KI_FAIL(err, KI_ERR_LIMIT, "more than %d operands", EIN_MAX_OPS);
            }
            s->n_ops++;
            continue;
        }
        if (*p == ' ') {
            continue;
        }
        if (*p == '.') {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "equation '%s': '...' is not supported", eq);
        }
        int *n = &s->n_terms[s->n_ops - 1];
        if (id < 0 || *n == KI_MAX_DIMS) {
            return KI_FAIL(err, KI_ERR_FORMAT, "equation '%s': bad term at '%c'", eq, *p);
        }
        s->term[s->n_ops - 1][(*n)++] = (signed char)id;
        used[id]++;
    }
    *rest = p;
    return KI_OK;
}

static ki_status parse_equation(const char *eq, ein_state *s, ki_error *err)
{
    int used[EIN_MAX_LABELS] = { 0 };
    bool in_out[EIN_MAX_LABELS] = { false };
    const char *p = eq;
    ki_status st = parse_terms(eq, s, used, &p, err);
    if (st != KI_OK) {
        return st;
    }
    if (*p) { /* explicit output */
        for (p += 2; *p; p++) {
            const int id = label_id(*p);
            if (*p == ' ') {
                continue;
            }
            if (*p == '.') {
                return KI_FAIL(err, KI_ERR_UNSUPPORTED, "equation '%s': '...' is not supported",
                               eq);
            }
            if (id < 0 || !used[id] || in_out[id] || s->n_out == KI_MAX_DIMS) {
                return KI_FAIL(err, KI_ERR_FORMAT, "equation '%s': bad output label '%c'", eq, *p);
            }
            in_out[id] = true;
            s->out[s->n_out++] = (signed char)id;
        }
    } else {
        for (int id = 0; id < EIN_MAX_LABELS; id++) {
            if (used[id] == 1) {
                if (s->n_out == KI_MAX_DIMS) {
                    return KI_FAIL(err, KI_ERR_LIMIT, "equation '%s': output has too many dims",
                                   eq);
                }
                in_out[id] = true;
                s->out[s->n_out++] = (signed char)id;
            }
        }
    }
    for (int id = 0; id < EIN_MAX_LABELS; id++) {
        if (used[id] && !in_out[id]) {
            s->sum[s->n_sum++] = (signed char)id;
        }
    }
    return KI_OK;
}

static ki_status ein_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ein_state t;
    const char *eq = NULL;
    memset(&t, 0, sizeof t);
    ki_status st = ki_shapeop_check_io(op, -1, 1, err);
    st = st != KI_OK ? st : ki_op_get_string(op, "equation", NULL, &eq, err);
    if (st == KI_OK && !eq) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter equation");
    }
    st = st != KI_OK ? st : parse_equation(eq, &t, err);
    if (st == KI_OK && t.n_ops != op->n_inputs) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "equation '%s' has %d operands, the operator %d", eq,
                     t.n_ops, op->n_inputs);
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(ein_state *)*state = t;
    }
    return st;
}

/* Each label's size (-1 when unused); fails on a mismatch. */
static ki_status label_sizes(const ein_state *s, const ki_shape *in, int64_t *size, ki_error *err)
{
    for (int id = 0; id < EIN_MAX_LABELS; id++) {
        size[id] = -1;
    }
    for (int i = 0; i < s->n_ops; i++) {
        if (in[i].kind != KI_KIND_TENSOR || in[i].ndim != s->n_terms[i]) {
            return KI_FAIL(err, KI_ERR_SHAPE, "operand %d has %d dims, its term %d", i, in[i].ndim,
                           s->n_terms[i]);
        }
        for (int k = 0; k < s->n_terms[i]; k++) {
            int64_t *z = &size[(int)s->term[i][k]];
            const int64_t d = in[i].d[k];
            int prev = -1; /* the label already seen in this operand: a diagonal */
            for (int j = 0; j < k; j++) {
                prev = s->term[i][j] == s->term[i][k] ? j : prev;
            }
            if (prev >= 0 ? d != in[i].d[prev] : (*z >= 0 && d != *z && d != 1 && *z != 1)) {
                return KI_FAIL(err, KI_ERR_SHAPE, "operand %d dim %d (%lld) does not match %lld", i,
                               k, (long long)d, (long long)*z);
            }
            *z = (*z < 0 || *z == 1) ? d : *z;
        }
    }
    return KI_OK;
}

static ki_status ein_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const ein_state *s = state;
    int64_t size[EIN_MAX_LABELS], d[KI_MAX_DIMS], n_sum = 1;
    (void)n_in, (void)n_out;
    ki_status st = label_sizes(s, in, size, err);
    for (int i = 0; st == KI_OK && i < s->n_sum; i++) {
        if (!ki_ckd_mul_i64(&n_sum, n_sum, size[(int)s->sum[i]]) || n_sum > KI_MAX_NUMEL) {
            st = KI_FAIL(err, KI_ERR_LIMIT, "too many products per output element");
        }
    }
    for (int i = 0; i < s->n_out; i++) {
        d[i] = size[(int)s->out[i]];
    }
    return st != KI_OK ? st : ki_shapeop_make(&out[0], s->n_out, d, err);
}

/* Strides of every operand along each label (summed for a diagonal, 0 when broadcast). */
static void label_strides(const ein_state *s, const ki_tensor *in, const int64_t *size,
                          int64_t (*st)[EIN_MAX_LABELS])
{
    for (int i = 0; i < s->n_ops; i++) {
        int64_t dst[KI_MAX_DIMS];
        ki_shapeop_strides(in[i].shape.ndim, in[i].shape.d, dst);
        memset(st[i], 0, sizeof st[i]);
        for (int k = 0; k < s->n_terms[i]; k++) {
            const int id = s->term[i][k];
            if (in[i].shape.d[k] == size[id]) {
                st[i][id] += dst[k];
            }
        }
    }
}

static ki_status ein_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const ein_state *s = state;
    int64_t size[EIN_MAX_LABELS], st[EIN_MAX_OPS][EIN_MAX_LABELS], n_sum = 1;
    ki_shape shapes[EIN_MAX_OPS];
    (void)n_in, (void)n_out;
    for (int i = 0; i < s->n_ops; i++) {
        shapes[i] = in[i].shape;
    }
    if (label_sizes(s, shapes, size, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    label_strides(s, in, size, st);
    for (int i = 0; i < s->n_sum; i++) {
        n_sum *= size[(int)s->sum[i]];
    }
    const int64_t total = ki_shape_count(&out[0].shape);
#pragma omp parallel for num_threads(ex->n_threads)                                                \
    schedule(static) if (total * n_sum > KI_SHAPEOP_PAR_MIN)
    for (int64_t e = 0; e < total; e++) {
        int64_t off[EIN_MAX_OPS] = { 0 }, idx[EIN_MAX_LABELS] = { 0 }, r = e;
        for (int k = s->n_out - 1; k >= 0; k--) { /* the output element's base offsets */
            const int id = s->out[k];
            const int64_t c = r % size[id];
            r /= size[id];
            for (int i = 0; i < s->n_ops; i++) {
                off[i] += c * st[i][id];
            }
        }
        double acc = 0.0;
        for (int64_t t = 0; t < n_sum; t++) {
            double prod = 1.0;
            for (int i = 0; i < s->n_ops; i++) {
                prod *= in[i].data[off[i]];
            }
            acc += prod;
            /* the next summed index, last label fastest; offsets follow */
            for (int k = s->n_sum - 1; k >= 0; k--) {
                const int id = s->sum[k];
                for (int i = 0; i < s->n_ops; i++) {
                    off[i] += st[i][id];
                }
                if (++idx[id] < size[id]) {
                    break;
                }
                for (int i = 0; i < s->n_ops; i++) {
                    off[i] -= size[id] * st[i][id];
                }
                idx[id] = 0;
            }
        }
        out[0].data[e] = (float)acc;
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_einsum = { .type = "torch.einsum",
                                             .create = ein_create,
                                             .shape = ein_shape,
                                             .forward = ein_forward,
                                             .destroy = ki_shapeop_free };
