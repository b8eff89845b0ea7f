/* shape_permute.c - torch.permute / Tensor.permute, torch.transpose / Tensor.transpose and
 * Tensor.expand. Each output is a strided walk over the input (ki_shapeop_copy). */
#include <string.h>

#include "shape_common.h"

typedef struct permute_state {
    bool transpose; /* dims[0], dims[1] are dim0, dim1 */
    int n;
    int64_t dims[KI_MAX_DIMS];
} permute_state;

typedef struct expand_state {
    int n; /* entries in sizes[], or -1 when they come from input sizes_input */
    int sizes_input;
    int64_t sizes[KI_MAX_DIMS];
} expand_state;

static ki_status permute_create(const ki_op_desc *op, void **state, ki_error *err)
{
    permute_state tmp = { .transpose = false };
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK) {
        s = ki_op_get_int_list(op, "dims", KI_MAX_DIMS, tmp.dims, &tmp.n, err);
    }
    if (s == KI_OK && tmp.n < 0) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dims");
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(permute_state *)*state = tmp;
    }
    return s;
}

static ki_status transpose_create(const ki_op_desc *op, void **state, ki_error *err)
{
    permute_state tmp = { .transpose = true, .n = 2 };
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK && (!ki_op_has(op, "dim0") || !ki_op_has(op, "dim1"))) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dim0 or dim1");
    }
    if (s == KI_OK) {
        s = ki_op_get_int(op, "dim0", 0, &tmp.dims[0], err);
    }
    if (s == KI_OK) {
        s = ki_op_get_int(op, "dim1", 0, &tmp.dims[1], err);
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(permute_state *)*state = tmp;
    }
    return s;
}

/* perm[i] = the input dim that becomes output dim i. */
static ki_status make_perm(const permute_state *st, int ndim, int *perm, ki_error *err)
{
    bool seen[KI_MAX_DIMS] = { false };
    int axes[KI_MAX_DIMS];
    if (!st->transpose && st->n != ndim) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dims has %d entries for an input of rank %d", st->n,
                       ndim);
    }
    for (int k = 0; k < st->n; k++) {
        if (!ki_axis_norm(st->dims[k], ndim, &axes[k])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for rank %d",
                           (long long)st->dims[k], ndim);
        }
        if (!st->transpose && seen[axes[k]]) {
            return KI_FAIL(err, KI_ERR_SHAPE, "dim %d appears twice in dims", axes[k]);
        }
        seen[axes[k]] = true;
    }
    for (int i = 0; i < ndim; i++) {
        if (!st->transpose) {
            perm[i] = axes[i];
        } else {
            perm[i] = i == axes[0] ? axes[1] : i == axes[1] ? axes[0] : i;
        }
    }
    return KI_OK;
}

static ki_status permute_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    int perm[KI_MAX_DIMS];
    int64_t d[KI_MAX_DIMS];
    (void)n_in;
    (void)n_out;
    ki_status s = make_perm(state, in[0].ndim, perm, err);
    if (s != KI_OK) {
        return s;
    }
    for (int i = 0; i < in[0].ndim; i++) {
        d[i] = in[0].d[perm[i]];
    }
    return ki_shapeop_make(&out[0], in[0].ndim, d, err);
}

static ki_status permute_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                 int n_out, const ki_exec *ex)
{
    int perm[KI_MAX_DIMS];
    int64_t strides[KI_MAX_DIMS];
    ki_shapeop_copy c;
    ki_error err;
    (void)n_in;
    (void)n_out;
    if (make_perm(state, in[0].shape.ndim, perm, &err) != KI_OK) {
        return err.code; /* shape() accepted these dims, so this cannot happen */
    }
    ki_shapeop_strides(in[0].shape.ndim, in[0].shape.d, strides);
    ki_shapeop_copy_init(&c, out[0].shape.ndim, out[0].shape.d);
    for (int i = 0; i < c.ndim; i++) {
        c.src[i] = strides[perm[i]];
    }
    ki_shapeop_copy_run(&c, in[0].data, out[0].data, ex->n_threads);
    return KI_OK;
}

static ki_status expand_create(const ki_op_desc *op, void **state, ki_error *err)
{
    expand_state tmp = { .n = -1, .sizes_input = ki_op_input_index(op, "sizes") };
    ki_status s = ki_shapeop_check_io(op, tmp.sizes_input >= 0 ? 2 : 1, 1, err);
    if (s == KI_OK && tmp.sizes_input == 0) {
        s = KI_FAIL(err, KI_ERR_UNSUPPORTED, "the data input must come first");
    }
    if (s == KI_OK && tmp.sizes_input < 0) {
        s = ki_op_get_int_list(op, "sizes", KI_MAX_DIMS, tmp.sizes, &tmp.n, err);
        if (s == KI_OK && tmp.n < 0) {
            s = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter sizes");
        }
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(expand_state *)*state = tmp;
    }
    return s;
}

/* Tensor.expand: new dims go in front; -1 keeps a dim; only size-1 dims may grow. */
static ki_status expand_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const expand_state *st = state;
    int64_t d[KI_MAX_DIMS];
    int n = st->n, ndim = in[0].ndim;
    char buf[128];
    (void)n_in;
    (void)n_out;
    if (n < 0) {
        ki_status s =
            ki_shapeop_list_values(&in[st->sizes_input], "sizes", d, KI_MAX_DIMS, &n, err);
        if (s != KI_OK) {
            return s;
        }
    } else {
        memcpy(d, st->sizes, (size_t)n * sizeof *d);
    }
    if (n < ndim) {
        return KI_FAIL(err, KI_ERR_SHAPE, "cannot expand %s to %d dims",
                       ki_shape_str(&in[0], buf, sizeof buf), n);
    }
    for (int i = 0; i < n; i++) {
        int j = i - (n - ndim);
        if (j >= 0 && d[i] == -1) {
            d[i] = in[0].d[j];
        }
        if (d[i] < 0 || (j >= 0 && in[0].d[j] != 1 && in[0].d[j] != d[i])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "cannot expand %s: size %lld at dim %d",
                           ki_shape_str(&in[0], buf, sizeof buf), (long long)d[i], i);
        }
    }
    return ki_shapeop_make(&out[0], n, d, err);
}

static ki_status expand_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const ki_shape *is = &in[0].shape, *os = &out[0].shape;
    int64_t strides[KI_MAX_DIMS];
    ki_shapeop_copy c;
    (void)state;
    (void)n_in;
    (void)n_out;
    ki_shapeop_strides(is->ndim, is->d, strides);
    ki_shapeop_copy_init(&c, os->ndim, os->d);
    for (int i = 0; i < os->ndim; i++) {
        int j = i - (os->ndim - is->ndim);
        /* stride 0 repeats a size-1 (or new) dim across the expanded size */
        c.src[i] = (j < 0 || is->d[j] != os->d[i]) ? 0 : strides[j];
    }
    ki_shapeop_copy_run(&c, in[0].data, out[0].data, ex->n_threads);
    return KI_OK;
}

KI_SHAPEOP_OPS(ki_layer_torch_permute, "torch.permute", permute_create, permute_shape,
               permute_forward);
KI_SHAPEOP_OPS(ki_layer_tensor_permute, "Tensor.permute", permute_create, permute_shape,
               permute_forward);
KI_SHAPEOP_OPS(ki_layer_torch_transpose, "torch.transpose", transpose_create, permute_shape,
               permute_forward);
KI_SHAPEOP_OPS(ki_layer_tensor_transpose, "Tensor.transpose", transpose_create, permute_shape,
               permute_forward);
KI_SHAPEOP_OPS(ki_layer_tensor_expand, "Tensor.expand", expand_create, expand_shape,
               expand_forward);
