/* index_ops.c - torch.index_select(input, dim, index) (the slices of input along dim that the
 * 1-D index names) and torch.gather(input, dim, index) (out[i..][j][k..] = input[i..][index[i..][j]
 * [k..]][k..] along dim; index has input's rank, no larger in the other dims). Indices arrive as
 * float32 holding whole numbers (int64 .npy or an integer-valued tensor); negative ones count from
 * the end; one out of range fails the run (KI_ERR_LIMIT), as PyTorch raises. State: the dim,
 * immutable; thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape_common.h"

typedef struct index_state {
    int64_t dim;
    int in, idx; /* input indices of the data and the index tensors */
    bool gather;
} index_state;

static ki_status index_create_kind(const ki_op_desc *op, bool gather, void **state, ki_error *err)
{
    index_state t = { .gather = gather };
    ki_status st = ki_shapeop_check_io(op, 2, 1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", INT64_MIN, &t.dim, err);
    if (st == KI_OK && t.dim == INT64_MIN) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dim");
    }
    int a = ki_op_input_index(op, "input"), b = ki_op_input_index(op, "index");
    t.in = a >= 0 ? a : (b == 0 ? 1 : 0);
    t.idx = b >= 0 ? b : 1 - t.in;
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(index_state *)*state = t;
    }
    return st;
}

static ki_status index_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const index_state *s = state;
    const ki_shape *x = &in[s->in], *ix = &in[s->idx];
    int ax;
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || ix->kind != KI_KIND_TENSOR ||
        !ki_axis_norm(s->dim, x->ndim > 0 ? x->ndim : 1, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    if (!s->gather) {
        if (ix->ndim > 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "index must be 1-D");
        }
        int64_t d[KI_MAX_DIMS];
        memcpy(d, x->d, sizeof d);
        if (x->ndim > 0) {
            d[ax] = ix->ndim == 1 ? ix->d[0] : 1;
        }
        return ki_shapeop_make(&out[0], x->ndim, d, err);
    }
    if (ix->ndim != x->ndim) {
        return KI_FAIL(err, KI_ERR_SHAPE, "index must have the input's rank");
    }
    for (int i = 0; i < x->ndim; i++) {
        if (i != ax && ix->d[i] > x->d[i]) {
            return KI_FAIL(err, KI_ERR_SHAPE, "index is larger than the input in dim %d", i);
        }
    }
    return ki_shapeop_make(&out[0], ix->ndim, ix->d, err);
}

/* A whole-number index into n slots (negative from the end), or -1 when it is not one. */
static int64_t slot(float v, int64_t n)
{
    if (v != floorf(v) || !(v >= (float)-n && v < (float)n)) {
        return -1;
    }
    int64_t k = (int64_t)v;
    return k < 0 ? k + n : k;
}

static ki_status index_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    const index_state *s = state;
    const ki_shape *xs = &in[s->in].shape, *os = &out[0].shape;
    const float *x = in[s->in].data, *ix = in[s->idx].data;
    int ax;
    (void)n_in, (void)n_out, (void)ex;
    if (!ki_axis_norm(s->dim, xs->ndim > 0 ? xs->ndim : 1, &ax)) {
        return KI_ERR_SHAPE;
    }
    const int64_t n = xs->ndim > 0 ? xs->d[ax] : 1, total = ki_shape_count(os);
    int64_t xst[KI_MAX_DIMS];
    ki_shapeop_strides(xs->ndim, xs->d, xst);
    for (int64_t e = 0; e < total; e++) {
        /* the output position's coordinates, the one along dim replaced by the index */
        int64_t r = e, off = 0, jd = 0;
        for (int d = os->ndim - 1; d >= 0; d--) {
            const int64_t c = r % os->d[d];
            r /= os->d[d];
            if (d == ax) {
                jd = c;
            } else {
                off += c * xst[d];
            }
        }
        const int64_t at = slot(s->gather ? ix[e] : ix[jd], n);
        if (at < 0) {
            return KI_ERR_LIMIT;
        }
        out[0].data[e] = x[off + (xs->ndim > 0 ? at * xst[ax] : 0)];
    }
    return KI_OK;
}

static ki_status index_select_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return index_create_kind(op, false, state, err);
}

static ki_status gather_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return index_create_kind(op, true, state, err);
}

const ki_layer_ops ki_layer_torch_index_select = { .type = "torch.index_select",
                                                   .create = index_select_create,
                                                   .shape = index_shape,
                                                   .forward = index_forward,
                                                   .destroy = ki_shapeop_free };
const ki_layer_ops ki_layer_torch_gather = { .type = "torch.gather",
                                             .create = gather_create,
                                             .shape = index_shape,
                                             .forward = index_forward,
                                             .destroy = ki_shapeop_free };
