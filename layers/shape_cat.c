/* shape_cat.c - torch.cat, torch.stack (N inputs, one output) and torch.chunk, torch.split,
 * torch.unbind (one input, N outputs). All of them see the tensor as (outer, pieces along the
 * axis, inner) and move contiguous runs with ki_shapeop_join/split. */
#include <stdlib.h>

#include "../core/ckd.h"
#include "shape_common.h"

enum split_kind { SPLIT_CHUNK, SPLIT_SIZE, SPLIT_SECTIONS, SPLIT_UNBIND };

typedef struct cat_state {
    int64_t dim;
} cat_state;

typedef struct split_state {
    enum split_kind kind;
    int64_t dim;
    int64_t size;   /* chunks (CHUNK) or split size (SIZE) */
    int n_sections; /* SECTIONS: one length per output */
    int64_t sections[];
} split_state;

static ki_status cat_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int64_t dim;
    ki_status s = ki_shapeop_check_io(op, -1, 1, err);
    if (s == KI_OK) {
        s = ki_op_get_int(op, "dim", 0, &dim, err);
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof(cat_state), state, err);
    }
    if (s == KI_OK) {
        ((cat_state *)*state)->dim = dim;
    }
    return s;
}

static ki_status cat_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const cat_state *st = state;
    int ndim = in[0].ndim, axis;
    (void)n_out;
    if (ndim < 1 || !ki_axis_norm(st->dim, ndim, &axis)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for rank %d",
                       (long long)st->dim, ndim);
    }
    int64_t d[KI_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        d[i] = in[0].d[i];
    }
    for (int k = 1; k < n_in; k++) {
        bool ok = in[k].ndim == ndim;
        for (int i = 0; ok && i < ndim; i++) {
            ok = i == axis || in[k].d[i] == d[i];
        }
        if (!ok) {
            char a[128], b[128];
            return KI_FAIL(
                err, KI_ERR_SHAPE, "input %d has shape %s, which does not fit %s on dim %d", k,
                ki_shape_str(&in[k], a, sizeof a), ki_shape_str(&in[0], b, sizeof b), axis);
        }
        if (!ki_ckd_add_i64(&d[axis], d[axis], in[k].d[axis])) {
            return KI_FAIL(err, KI_ERR_LIMIT, "concatenated size overflows");
        }
    }
    return ki_shapeop_make(&out[0], ndim, d, err);
}

static ki_status cat_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const cat_state *st = state;
    int axis = 0;
    (void)n_out;
    ki_axis_norm(st->dim, out[0].shape.ndim, &axis);
    int64_t outer = ki_shapeop_prod(out[0].shape.d, 0, axis);
    ki_shapeop_join(in, n_in, outer, out[0].data, ex);
    return KI_OK;
}

/* Input i is output bytes [off[i], ...) when nothing before the axis has more than one element
 * (e.g. channels of a batch of one). */
static bool cat_joins(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                      size_t *off)
{
    const cat_state *st = state;
    int axis;
    if (!ki_axis_norm(st->dim, out->ndim, &axis) || ki_shapeop_prod(out->d, 0, axis) != 1) {
        return false;
    }
    size_t at = 0;
    for (int i = 0; i < n_in; i++) {
        off[i] = at;
        at += (size_t)ki_shape_count(&in[i]) * sizeof(float);
    }
    return true;
}

/* torch.stack: every input has the same shape; the result gains a dim of size n_in at dim. */
static ki_status stack_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const cat_state *st = state;
    int ndim = in[0].ndim, axis;
    (void)n_out;
    if (ndim >= KI_MAX_DIMS || !ki_axis_norm(st->dim, ndim + 1, &axis)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for stacking rank %d",
                       (long long)st->dim, ndim);
    }
    for (int k = 1; k < n_in; k++) {
        if (!ki_shape_equal(&in[k], &in[0])) {
            char a[128], b[128];
            return KI_FAIL(err, KI_ERR_SHAPE, "input %d has shape %s, expected %s", k,
                           ki_shape_str(&in[k], a, sizeof a), ki_shape_str(&in[0], b, sizeof b));
        }
    }
    int64_t d[KI_MAX_DIMS];
    for (int i = 0, j = 0; i <= ndim; i++) {
        d[i] = i == axis ? n_in : in[0].d[j++];
    }
    return ki_shapeop_make(&out[0], ndim + 1, d, err);
}

static ki_status split_alloc(const ki_op_desc *op, enum split_kind kind, int n_sections,
                             void **state, ki_error *err)
{
    size_t size;
    if (!ki_ckd_mul(&size, (size_t)n_sections, sizeof(int64_t)) ||
        !ki_ckd_add(&size, size, sizeof(split_state))) {
        return KI_FAIL(err, KI_ERR_LIMIT, "too many outputs");
    }
    ki_status s = ki_shapeop_alloc(size, state, err);
    if (s != KI_OK) {
        return s;
    }
    split_state *st = *state;
    st->kind = kind;
    st->n_sections = n_sections;
    s = ki_op_get_int(op, "dim", 0, &st->dim, err);
    if (s != KI_OK) {
        free(st);
        *state = NULL;
    }
    return s;
}

static ki_status chunk_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int64_t chunks;
    ki_status s = ki_shapeop_check_io(op, 1, -1, err);
    if (s == KI_OK) {
        s = ki_op_get_int(op, "chunks", -1, &chunks, err);
    }
    if (s == KI_OK && chunks < 1) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "chunks must be a positive integer");
    }
    if (s == KI_OK) {
        s = split_alloc(op, SPLIT_CHUNK, 0, state, err);
    }
    if (s == KI_OK) {
        ((split_state *)*state)->size = chunks;
    }
    return s;
}

static ki_status split_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ki_status s = ki_shapeop_check_io(op, 1, -1, err);
    const ki_param *p = ki_op_param(op, "split_size_or_sections");
    if (s != KI_OK) {
        return s;
    }
    if (p && p->kind == KI_PARAM_INT) {
        if (p->i < 1) {
            return KI_FAIL(err, KI_ERR_FORMAT, "split_size_or_sections must be positive");
        }
        s = split_alloc(op, SPLIT_SIZE, 0, state, err);
        if (s == KI_OK) {
            ((split_state *)*state)->size = p->i;
        }
        return s;
    }
    if (!p || p->kind != KI_PARAM_INTS || p->n != op->n_outputs) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "split_size_or_sections must be an integer or %d integers (one per output)",
                       op->n_outputs);
    }
    s = split_alloc(op, SPLIT_SECTIONS, p->n, state, err);
    for (int i = 0; s == KI_OK && i < p->n; i++) {
        if (p->ints[i] < 0) {
            ki_shapeop_free(*state);
            *state = NULL;
            return KI_FAIL(err, KI_ERR_FORMAT, "split_size_or_sections has a negative entry");
        }
        ((split_state *)*state)->sections[i] = p->ints[i];
    }
    return s;
}

static ki_status unbind_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ki_status s = ki_shapeop_check_io(op, 1, -1, err);
    return s != KI_OK ? s : split_alloc(op, SPLIT_UNBIND, 0, state, err);
}

/* Length along the axis of each piece; PyTorch's chunk uses ceil(size / chunks)-long pieces and
 * may give fewer than `chunks` of them. Returns the number of pieces. */
static int64_t split_count(const split_state *st, int64_t size, int64_t *step)
{
    switch (st->kind) {
    case SPLIT_CHUNK:
        *step = (size + st->size - 1) / st->size;
        return *step == 0 ? 1 : (size + *step - 1) / *step;
    case SPLIT_SIZE:
        *step = st->size;
        return size == 0 ? 1 : (size + *step - 1) / *step;
    case SPLIT_SECTIONS:
        *step = 0;
        return st->n_sections;
    case SPLIT_UNBIND:
    default:
        *step = 1;
        return size;
    }
}

static ki_status split_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const split_state *st = state;
    int ndim = in[0].ndim, axis;
    int64_t step, size, d[KI_MAX_DIMS], total = 0;
    (void)n_in;
    if (ndim < 1 || !ki_axis_norm(st->dim, ndim, &axis)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for rank %d",
                       (long long)st->dim, ndim);
    }
    size = in[0].d[axis];
    int64_t count = split_count(st, size, &step);
    if (count != n_out) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "dim %d of size %lld gives %lld pieces, but the operator has %d outputs",
                       axis, (long long)size, (long long)count, n_out);
    }
    for (int k = 0; k < n_out; k++) {
        int64_t len = st->kind == SPLIT_SECTIONS ? st->sections[k] : step;
        if (st->kind != SPLIT_SECTIONS && k == n_out - 1) {
            len = size - step * k; /* the last piece takes what is left */
        }
        total += len;
        for (int i = 0; i < ndim; i++) {
            d[i] = i == axis ? len : in[0].d[i];
        }
        bool drop = st->kind == SPLIT_UNBIND; /* unbind removes the dim */
        for (int i = axis; drop && i + 1 < ndim; i++) {
            d[i] = d[i + 1];
        }
        ki_status s = ki_shapeop_make(&out[k], drop ? ndim - 1 : ndim, d, err);
        if (s != KI_OK) {
            return s;
        }
    }
    if (total != size) {
        return KI_FAIL(err, KI_ERR_SHAPE, "split sections sum to %lld, but dim %d has size %lld",
                       (long long)total, axis, (long long)size);
    }
    return KI_OK;
}

static ki_status split_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    const split_state *st = state;
    int axis = 0;
    (void)n_in;
    ki_axis_norm(st->dim, in[0].shape.ndim, &axis);
    int64_t outer = ki_shapeop_prod(in[0].shape.d, 0, axis);
    ki_shapeop_split(in[0].data, outer, out, n_out, ex->n_threads);
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_cat = {
    .type = "torch.cat",
    .flags = KI_LAYER_TEAM,
    .create = cat_create,
    .shape = cat_shape,
    .forward = cat_forward,
    .destroy = ki_shapeop_free,
    .joins = cat_joins,
};

const ki_layer_ops ki_layer_torch_stack = {
    .type = "torch.stack",
    .flags = KI_LAYER_TEAM,
    .create = cat_create,
    .shape = stack_shape,
    .forward = cat_forward,
    .destroy = ki_shapeop_free,
};

const ki_layer_ops ki_layer_torch_chunk = {
    .type = "torch.chunk",
    .create = chunk_create,
    .shape = split_shape,
    .forward = split_forward,
    .destroy = ki_shapeop_free,
};

const ki_layer_ops ki_layer_torch_split = {
    .type = "torch.split",
    .create = split_create,
    .shape = split_shape,
    .forward = split_forward,
    .destroy = ki_shapeop_free,
};

const ki_layer_ops ki_layer_torch_unbind = {
    .type = "torch.unbind",
    .create = unbind_create,
    .shape = split_shape,
    .forward = split_forward,
    .destroy = ki_shapeop_free,
};
