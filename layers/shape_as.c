/* shape_as.c - the shape operators that take their shape from a second tensor or are a fixed
 * permutation: Tensor.reshape_as(input, other) (other's shape, a view), Tensor.type_as(input,
 * other) (input itself: tensors are float32), Tensor.expand_as(input, other) (a broadcast copy
 * to other's shape) and torch.t (a matrix transposed; 0-D and 1-D unchanged). Stateless. */
#include <string.h>

#include "shape_common.h"

static ki_status two_tensors(const ki_shape *in, int n_in, ki_error *err)
{
    if (n_in != 2 || in[0].kind != KI_KIND_TENSOR || in[1].kind != KI_KIND_TENSOR) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects two tensors");
    }
    return KI_OK;
}

static ki_status reshape_as_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                                  int n_out, ki_error *err)
{
    char a[96], b[96];
    (void)state, (void)n_out;
    ki_status st = two_tensors(in, n_in, err);
    if (st == KI_OK && ki_shape_count(&in[0]) != ki_shape_count(&in[1])) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "cannot reshape %s as %s", ki_shape_str(&in[0], a, 96),
                     ki_shape_str(&in[1], b, 96));
    }
    return st == KI_OK ? ki_shapeop_make(&out[0], in[1].ndim, in[1].d, err) : st;
}

static ki_status type_as_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    (void)state, (void)n_out;
    ki_status st = two_tensors(in, n_in, err);
    return st == KI_OK ? ki_shapeop_make(&out[0], in[0].ndim, in[0].d, err) : st;
}

static ki_status view_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    (void)state, (void)n_in, (void)n_out, (void)ex;
    ki_shapeop_view_copy(&in[0], &out[0]);
    return KI_OK;
}

/* Tensor.expand_as: input broadcast to other's shape (new dims in front, size-1 dims grow). */
static ki_status expand_as_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                                 int n_out, ki_error *err)
{
    char a[96], b[96];
    (void)state, (void)n_out;
    ki_status st = two_tensors(in, n_in, err);
    for (int i = 0; st == KI_OK && i < in[0].ndim; i++) {
        int j = i + in[1].ndim - in[0].ndim;
        if (j < 0 || (in[0].d[i] != 1 && in[0].d[i] != in[1].d[j])) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "cannot expand %s as %s", ki_shape_str(&in[0], a, 96),
                         ki_shape_str(&in[1], b, 96));
        }
    }
    return st == KI_OK ? ki_shapeop_make(&out[0], in[1].ndim, in[1].d, err) : st;
}

static ki_status expand_as_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                   int n_out, const ki_exec *ex)
{
    const ki_shape *is = &in[0].shape, *os = &out[0].shape;
    int64_t strides[KI_MAX_DIMS];
    ki_shapeop_copy c;
    (void)state, (void)n_in, (void)n_out;
    ki_shapeop_strides(is->ndim, is->d, strides);
    ki_shapeop_copy_init(&c, os->ndim, os->d);
    for (int i = 0; i < os->ndim; i++) {
        int j = i - (os->ndim - is->ndim);
        c.src[i] = (j < 0 || is->d[j] != os->d[i]) ? 0 : strides[j]; /* 0 repeats */
    }
    ki_shapeop_copy_run(&c, in[0].data, out[0].data, ex->n_threads);
    return KI_OK;
}

static ki_status t_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                         ki_error *err)
{
    (void)state, (void)n_out;
    if (n_in != 1 || in[0].kind != KI_KIND_TENSOR || in[0].ndim > 2) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects a tensor of at most 2 dims");
    }
    int64_t d[2] = { in[0].ndim == 2 ? in[0].d[1] : in[0].d[0], in[0].d[0] };
    return ki_shapeop_make(&out[0], in[0].ndim, in[0].ndim == 2 ? d : in[0].d, err);
}

static ki_status t_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                           int n_out, const ki_exec *ex)
{
    const ki_shape *s = &in[0].shape;
    (void)state, (void)n_in, (void)n_out;
    if (s->ndim < 2) {
        memcpy(out[0].data, in[0].data, (size_t)ki_shape_count(s) * sizeof(float));
        return KI_OK;
    }
    ki_shapeop_copy c;
    ki_shapeop_copy_init(&c, 2, out[0].shape.d);
    c.src[0] = 1, c.src[1] = s->d[1]; /* out[i][j] = in[j][i] */
    ki_shapeop_copy_run(&c, in[0].data, out[0].data, ex->n_threads);
    return KI_OK;
}

const ki_layer_ops ki_layer_tensor_reshape_as = { .type = "Tensor.reshape_as",
                                                  .flags = KI_LAYER_VIEW,
                                                  .shape = reshape_as_shape,
                                                  .forward = view_forward };
const ki_layer_ops ki_layer_tensor_type_as = { .type = "Tensor.type_as",
                                               .flags = KI_LAYER_VIEW,
                                               .shape = type_as_shape,
                                               .forward = view_forward };
const ki_layer_ops ki_layer_tensor_expand_as = { .type = "Tensor.expand_as",
                                                 .shape = expand_as_shape,
                                                 .forward = expand_as_forward };
const ki_layer_ops ki_layer_torch_t = { .type = "torch.t", .shape = t_shape, .forward = t_forward };
