/* misc_scatter.c - operators that write one tensor into a copy of another:
 * torch.slice_scatter(input, src, dim, start, end, step) (src placed at input[..., start:end:step,
 * ...], with Python's slice rules for None, negative and out-of-range bounds) and
 * torch.scatter_add(input, dim, index, src) (out[.., index[i..], ..] += src[i..] along dim, in
 * index order, as PyTorch's CPU kernel sums). Indices arrive as float32 holding whole numbers;
 * one negative or out of range fails the run (KI_ERR_LIMIT), as PyTorch raises. State: the parsed
 * parameters, immutable; thread-safe. */
#include <math.h>
#include <string.h>

#include "shape_common.h"

static int input_slot(const ki_op_desc *op, const char *key, int pos)
{
    int i = ki_op_input_index(op, key);
    return i >= 0 ? i : pos;
}

/* ---- torch.slice_scatter ---- */
typedef struct sscat_state {
    int in, src;
    int64_t dim, start, end, step;
    bool has_start, has_end;
} sscat_state;

static ki_status sscat_create(const ki_op_desc *op, void **state, ki_error *err)
{
    sscat_state t;
    ki_status st = ki_shapeop_check_io(op, 2, 1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", 0, &t.dim, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "start", 0, &t.start, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "end", 0, &t.end, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "step", 1, &t.step, err);
    if (st == KI_OK && t.step < 1) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "step must be positive");
    }
    t.has_start = ki_op_has(op, "start");
    t.has_end = ki_op_has(op, "end");
    t.in = input_slot(op, "input", 0);
    t.src = input_slot(op, "src", 1 - t.in);
    if (st == KI_OK && (t.in == t.src || t.in > 1 || t.src > 1)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "inputs are bound twice");
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(sscat_state *)*state = t;
    }
    return st;
}

/* Python's slice start:end:step over n: the first index and the count. */
static void slice_range(const sscat_state *s, int64_t n, int64_t *first, int64_t *count)
{
    int64_t b = s->has_start ? s->start : 0, e = s->has_end ? s->end : n;
    b = b < 0 ? (b + n < 0 ? 0 : b + n) : (b > n ? n : b);
    e = e < 0 ? (e + n < 0 ? 0 : e + n) : (e > n ? n : e);
    *first = b;
    *count = e > b ? (e - b + s->step - 1) / s->step : 0;
}

static ki_status sscat_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const sscat_state *s = state;
    const ki_shape *x = &in[s->in], *y = &in[s->src];
    int ax;
    int64_t first, count;
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || y->kind != KI_KIND_TENSOR || x->ndim == 0 ||
        !ki_axis_norm(s->dim, x->ndim, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    slice_range(s, x->d[ax], &first, &count);
    bool ok = y->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++) {
        ok = y->d[i] == (i == ax ? count : x->d[i]);
    }
    if (!ok) {
        return KI_FAIL(err, KI_ERR_SHAPE, "src does not have the slice's shape (%lld along dim %d)",
                       (long long)count, ax);
    }
    return ki_shapeop_make(&out[0], x->ndim, x->d, err);
}

static ki_status sscat_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    const sscat_state *s = state;
    int64_t outer, n, inner, first, count;
    int ax;
    (void)n_in, (void)n_out, (void)ex;
    if (!ki_axis_norm(s->dim, in[s->in].shape.ndim, &ax)) {
        return KI_ERR_SHAPE;
    }
    ki_shapeop_view_copy(&in[s->in], &out[0]);
    ki_shapeop_blocks(&in[s->in].shape, ax, &outer, &n, &inner);
    slice_range(s, n, &first, &count);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < count; j++) {
            memcpy(out[0].data + (o * n + first + j * s->step) * inner,
                   in[s->src].data + (o * count + j) * inner, (size_t)inner * sizeof(float));
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_slice_scatter = { .type = "torch.slice_scatter",
                                                    .create = sscat_create,
                                                    .shape = sscat_shape,
                                                    .forward = sscat_forward,
                                                    .destroy = ki_shapeop_free };

/* ---- torch.scatter_add ---- */
typedef struct scadd_state {
    int in, idx, src;
    int64_t dim;
} scadd_state;

static ki_status scadd_create(const ki_op_desc *op, void **state, ki_error *err)
{
    scadd_state t;
    ki_status st = ki_shapeop_check_io(op, 3, 1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", INT64_MIN, &t.dim, err);
    if (st == KI_OK && t.dim == INT64_MIN) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dim");
    }
    t.in = input_slot(op, "input", 0);
    t.idx = input_slot(op, "index", 1);
    t.src = input_slot(op, "src", 2);
    if (st == KI_OK && (t.in == t.idx || t.in == t.src || t.idx == t.src)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "inputs are bound twice");
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(scadd_state *)*state = t;
    }
    return st;
}

static ki_status scadd_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const scadd_state *s = state;
    const ki_shape *x = &in[s->in], *ix = &in[s->idx], *y = &in[s->src];
    int ax;
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || ix->kind != KI_KIND_TENSOR || y->kind != KI_KIND_TENSOR ||
        !ki_axis_norm(s->dim, x->ndim > 0 ? x->ndim : 1, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    if (ix->ndim != x->ndim || y->ndim != x->ndim) {
        return KI_FAIL(err, KI_ERR_SHAPE, "index and src must have the input's rank");
    }
    for (int i = 0; i < x->ndim; i++) {
        if (ix->d[i] > y->d[i] || (i != ax && ix->d[i] > x->d[i])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "index is larger than src or input in dim %d", i);
        }
    }
    return ki_shapeop_make(&out[0], x->ndim, x->d, err);
}

/* A whole-number index into n slots, or -1 when it is not one. */
static int64_t slot_of(float v, int64_t n)
{
    return v == floorf(v) && v >= 0.0f && v < (float)n ? (int64_t)v : -1;
}

static ki_status scadd_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    const scadd_state *s = state;
    const ki_shape *xs = &in[s->in].shape, *is = &in[s->idx].shape, *ys = &in[s->src].shape;
    int64_t xst[KI_MAX_DIMS], yst[KI_MAX_DIMS];
    int ax;
    (void)n_in, (void)n_out, (void)ex;
    if (!ki_axis_norm(s->dim, xs->ndim > 0 ? xs->ndim : 1, &ax)) {
        return KI_ERR_SHAPE;
    }
    ki_shapeop_view_copy(&in[s->in], &out[0]);
    ki_shapeop_strides(xs->ndim, xs->d, xst);
    ki_shapeop_strides(ys->ndim, ys->d, yst);
    const int64_t total = ki_shape_count(is), n = xs->ndim > 0 ? xs->d[ax] : 1;
    /* sequential, in index order: the sums then match PyTorch's CPU kernel bit for bit */
    for (int64_t e = 0; e < total; e++) {
        int64_t r = e, xo = 0, yo = 0;
        for (int d = is->ndim - 1; d >= 0; d--) {
            const int64_t c = r % is->d[d];
            r /= is->d[d];
            yo += c * yst[d];
            xo += d == ax ? 0 : c * xst[d];
        }
        const int64_t at = slot_of(in[s->idx].data[e], n);
        if (at < 0) {
            return KI_ERR_LIMIT;
        }
        out[0].data[xo + (xs->ndim > 0 ? at * xst[ax] : 0)] += in[s->src].data[yo];
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_scatter_add = { .type = "torch.scatter_add",
                                                  .create = scadd_create,
                                                  .shape = scadd_shape,
                                                  .forward = scadd_forward,
                                                  .destroy = ki_shapeop_free };
