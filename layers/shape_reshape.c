/* shape_reshape.c - layers that only relabel the shape of their input: Tensor.view,
 * Tensor.reshape, torch.squeeze and torch.unsqueeze (also their Tensor.* spellings). They are
 * KI_LAYER_VIEW: the planner normally aliases the output to the input and forward does nothing;
 * otherwise forward copies the data unchanged. */
#include "../core/ckd.h"
#include "shape_common.h"

typedef struct reshape_state {
    int n; /* entries in shape[], or -1 when the shape comes from input shape_input */
    int shape_input;
    int64_t shape[KI_MAX_DIMS];
} reshape_state;

typedef struct dims_state {
    int n; /* -1: no dim given (squeeze every size-1 dim) */
    int64_t dims[KI_MAX_DIMS];
} dims_state;

/* A view's data must be input 0, since the planner aliases output 0 to input 0. */
static ki_status check_data_first(const ki_op_desc *op, ki_error *err)
{
    int idx = ki_op_input_index(op, "input");
    if (idx > 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "the data input must come first");
    }
    return KI_OK;
}

static ki_status check_request(const int64_t *req, int n, ki_error *err)
{
    int n_infer = 0;
    for (int i = 0; i < n; i++) {
        if (req[i] < -1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "shape entry %d is %lld", i, (long long)req[i]);
        }
        n_infer += req[i] == -1;
    }
    if (n_infer > 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "shape has more than one -1");
    }
    return KI_OK;
}

static ki_status reshape_create(const ki_op_desc *op, void **state, ki_error *err)
{
    reshape_state tmp = { .n = -1, .shape_input = ki_op_input_index(op, "shape") };
    ki_status s = ki_shapeop_check_io(op, tmp.shape_input >= 0 ? 2 : 1, 1, err);
    if (s == KI_OK) {
        s = check_data_first(op, err);
    }
    if (s == KI_OK && tmp.shape_input == 0) {
        s = KI_FAIL(err, KI_ERR_UNSUPPORTED, "the data input must come first");
    }
    if (s == KI_OK && tmp.shape_input < 0) {
        s = ki_op_get_int_list(op, "shape", KI_MAX_DIMS, tmp.shape, &tmp.n, err);
        if (s == KI_OK && tmp.n < 0) {
            s = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter shape");
        }
        if (s == KI_OK) {
            s = check_request(tmp.shape, tmp.n, err);
        }
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(reshape_state *)*state = tmp;
    }
    return s;
}

/* PyTorch infers the one -1 from the element count. A 0 copies the input's dim at the same
 * position (only ONNX-derived files write it; PyTorch itself never passes 0 here). */
static ki_status reshape_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    const reshape_state *st = state;
    int64_t req[KI_MAX_DIMS], known = 1, numel = ki_shape_count(&in[0]);
    int n = st->n, infer = -1;
    char buf[128];
    (void)n_in;
    (void)n_out;
    if (n < 0) {
        ki_status s =
            ki_shapeop_list_values(&in[st->shape_input], "shape", req, KI_MAX_DIMS, &n, err);
        if (s == KI_OK) {
            s = check_request(req, n, err);
        }
        if (s != KI_OK) {
            return s;
        }
    } else {
        for (int i = 0; i < n; i++) {
            req[i] = st->shape[i];
        }
    }
    for (int i = 0; i < n; i++) {
        if (req[i] == 0 && i < in[0].ndim) {
            req[i] = in[0].d[i];
        }
        if (req[i] == -1) {
            infer = i;
        } else if (!ki_ckd_mul_i64(&known, known, req[i])) {
            return KI_FAIL(err, KI_ERR_LIMIT, "shape is too large");
        }
    }
    if (infer >= 0 && known > 0 && numel % known == 0) {
        req[infer] = numel / known;
        known = numel;
    }
    if (known != numel || (infer >= 0 && req[infer] < 0)) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "cannot reshape %s (%lld elements) to the requested shape",
                       ki_shape_str(&in[0], buf, sizeof buf), (long long)numel);
    }
    return ki_shapeop_make(&out[0], n, req, err);
}

static ki_status view_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    (void)state;
    (void)n_in;
    (void)n_out;
    (void)ex;
    ki_shapeop_view_copy(&in[0], &out[0]);
    return KI_OK;
}

static ki_status dims_create(const ki_op_desc *op, bool required, void **state, ki_error *err)
{
    dims_state tmp;
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK) {
        s = ki_op_get_int_list(op, "dim", KI_MAX_DIMS, tmp.dims, &tmp.n, err);
    }
    if (s == KI_OK && required && tmp.n != 1) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "parameter dim must be one integer");
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(dims_state *)*state = tmp;
    }
    return s;
}

static ki_status squeeze_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return dims_create(op, false, state, err);
}

static ki_status unsqueeze_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return dims_create(op, true, state, err);
}

/* torch.squeeze drops the given dims only where they have size 1, and every size-1 dim when
 * no dim is given. */
static ki_status squeeze_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    const dims_state *st = state;
    bool drop[KI_MAX_DIMS] = { false };
    int64_t d[KI_MAX_DIMS];
    int n = 0;
    (void)n_in;
    (void)n_out;
    for (int k = 0; k < st->n; k++) {
        int axis;
        if (!ki_axis_norm(st->dims[k], in[0].ndim, &axis)) {
            return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for rank %d",
                           (long long)st->dims[k], in[0].ndim);
        }
        drop[axis] = in[0].d[axis] == 1;
    }
    for (int i = 0; i < in[0].ndim; i++) {
        if (st->n < 0 ? in[0].d[i] != 1 : !drop[i]) {
            d[n++] = in[0].d[i];
        }
    }
    return ki_shapeop_make(&out[0], n, d, err);
}

static ki_status unsqueeze_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                                 int n_out, ki_error *err)
{
    const dims_state *st = state;
    int ndim = in[0].ndim, axis;
    int64_t d[KI_MAX_DIMS];
    (void)n_in;
    (void)n_out;
    if (ndim >= KI_MAX_DIMS || !ki_axis_norm(st->dims[0], ndim + 1, &axis)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for unsqueezing rank %d",
                       (long long)st->dims[0], ndim);
    }
    for (int i = 0, j = 0; i <= ndim; i++) {
        d[i] = i == axis ? 1 : in[0].d[j++];
    }
    return ki_shapeop_make(&out[0], ndim + 1, d, err);
}

#define VIEW_LAYER(sym, name, create_fn, shape_fn)                                                 \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .flags = KI_LAYER_VIEW,                                                                    \
        .create = create_fn,                                                                       \
        .shape = shape_fn,                                                                         \
        .forward = view_forward,                                                                   \
        .destroy = ki_shapeop_free,                                                                \
    };

VIEW_LAYER(ki_layer_tensor_view, "Tensor.view", reshape_create, reshape_shape)
VIEW_LAYER(ki_layer_tensor_reshape, "Tensor.reshape", reshape_create, reshape_shape)
VIEW_LAYER(ki_layer_torch_squeeze, "torch.squeeze", squeeze_create, squeeze_shape)
VIEW_LAYER(ki_layer_tensor_squeeze, "Tensor.squeeze", squeeze_create, squeeze_shape)
VIEW_LAYER(ki_layer_torch_unsqueeze, "torch.unsqueeze", unsqueeze_create, unsqueeze_shape)
VIEW_LAYER(ki_layer_tensor_unsqueeze, "Tensor.unsqueeze", unsqueeze_create, unsqueeze_shape)
