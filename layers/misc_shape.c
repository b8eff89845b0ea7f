/* misc_shape.c - data-movement operators with parameters known at load:
 * torch.repeat_interleave(input, repeats, dim) (each element repeated `repeats` times along dim;
 * no dim: over the flattened input), torch.tensor_split(input, sections | indices, dim) (the first
 * len % sections pieces one longer; indices cut like Python slices, so a piece may be empty),
 * Tensor.unflatten(dim, sizes) (a view, one size may be -1), torch.as_strided(input, size, stride,
 * storage_offset) (over the input's contiguous storage, every reach checked at shape time),
 * Tensor.fill(value) and Tensor.new_ones / Tensor.new_zeros (size from a parameter or a list known
 * at shape time; the input only lends its dtype, which is float32 here). State: the parsed
 * parameters, immutable; thread-safe. */
#include <string.h>

#include "../core/ckd.h"
#include "shape_common.h"

/* ---- torch.repeat_interleave ---- */
typedef struct repint_state {
    int64_t repeats, dim;
    bool flat; /* dim=None */
} repint_state;

static ki_status repint_create(const ki_op_desc *op, void **state, ki_error *err)
{
    repint_state t;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    if (st != KI_OK) {
        return op->n_inputs > 1
                   ? KI_FAIL(err, KI_ERR_UNSUPPORTED, "repeats given as a tensor is not supported")
                   : st;
    }
    const ki_param *p = ki_op_param(op, "repeats");
    if (!p || p->kind != KI_PARAM_INT || p->i < 0 || p->i > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "repeats must be an integer in [0, 2^31]");
    }
    t.repeats = p->i;
    t.flat = !ki_op_has(op, "dim");
    st = ki_op_get_int(op, "dim", 0, &t.dim, err);
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(repint_state *)*state = t;
    }
    return st;
}

static ki_status repint_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const repint_state *s = state;
    int64_t d[KI_MAX_DIMS], n;
    int ax;
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || !ki_shape_numel(&in[0], &n)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input is not a tensor");
    }
    if (s->flat) {
        if (!ki_ckd_mul_i64(&d[0], n, s->repeats)) {
            return KI_FAIL(err, KI_ERR_LIMIT, "output is too large");
        }
        return ki_shapeop_make(&out[0], 1, d, err);
    }
    if (!ki_axis_norm(s->dim, in[0].ndim > 0 ? in[0].ndim : 1, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    if (in[0].ndim == 0) {
        d[0] = s->repeats;
        return ki_shapeop_make(&out[0], 1, d, err);
    }
    memcpy(d, in[0].d, sizeof d);
    if (!ki_ckd_mul_i64(&d[ax], in[0].d[ax], s->repeats)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "output is too large");
    }
    return ki_shapeop_make(&out[0], in[0].ndim, d, err);
}

static ki_status repint_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const repint_state *s = state;
    int64_t outer = 1, n = ki_shape_count(&in[0].shape), inner = 1;
    int ax;
    (void)n_in, (void)n_out, (void)ex;
    if (!s->flat && in[0].shape.ndim > 0 && ki_axis_norm(s->dim, in[0].shape.ndim, &ax)) {
        ki_shapeop_blocks(&in[0].shape, ax, &outer, &n, &inner);
    }
    const int64_t r = s->repeats;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < n; j++) {
            const float *src = in[0].data + (o * n + j) * inner;
            float *dst = out[0].data + ((o * n + j) * r) * inner;
            for (int64_t q = 0; q < r; q++) {
                memcpy(dst + q * inner, src, (size_t)inner * sizeof *dst);
            }
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_repeat_interleave = { .type = "torch.repeat_interleave",
                                                        .create = repint_create,
                                                        .shape = repint_shape,
                                                        .forward = repint_forward,
                                                        .destroy = ki_shapeop_free };

/* ---- torch.tensor_split ---- */
#define TSPLIT_MAX 64

typedef struct tsplit_state {
    int64_t dim, sections; /* sections > 0, or 0 when indices are given */
    int n_idx;
    int64_t idx[TSPLIT_MAX];
} tsplit_state;

static ki_status tsplit_create(const ki_op_desc *op, void **state, ki_error *err)
{
    tsplit_state t = { 0 };
    ki_status st = ki_shapeop_check_io(op, 1, -1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", 0, &t.dim, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "sections", 0, &t.sections, err);
    if (st == KI_OK && t.sections == 0) {
        st = ki_op_get_int_list(op, "indices", TSPLIT_MAX - 1, t.idx, &t.n_idx, err);
        if (st == KI_OK && t.n_idx < 0) {
            st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "needs sections > 0 or indices as parameters");
        }
    }
    if (st == KI_OK && t.sections != 0 && (t.sections < 0 || t.sections != op->n_outputs)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "sections=%lld does not match %d outputs",
                     (long long)t.sections, op->n_outputs);
    }
    if (st == KI_OK && t.sections == 0 && t.n_idx + 1 != op->n_outputs) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "%d indices do not match %d outputs", t.n_idx,
                     op->n_outputs);
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(tsplit_state *)*state = t;
    }
    return st;
}

/* Start and length of piece p of a dim of length len. */
static void tsplit_piece(const tsplit_state *s, int64_t len, int p, int64_t *start, int64_t *n)
{
    if (s->sections > 0) {
        const int64_t q = len / s->sections, rem = len % s->sections;
        *start = p * q + (p < rem ? p : rem);
        *n = q + (p < rem);
        return;
    }
    int64_t b = 0, e = len;
    if (p > 0) {
        b = s->idx[p - 1] < 0 ? s->idx[p - 1] + len : s->idx[p - 1];
        b = b < 0 ? 0 : (b > len ? len : b);
    }
    if (p < s->n_idx) {
        e = s->idx[p] < 0 ? s->idx[p] + len : s->idx[p];
        e = e < 0 ? 0 : (e > len ? len : e);
    }
    *start = b;
    *n = e > b ? e - b : 0;
}

static ki_status tsplit_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const tsplit_state *s = state;
    int ax;
    (void)n_in;
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim == 0 || !ki_axis_norm(s->dim, in[0].ndim, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    ki_status st = KI_OK;
    for (int p = 0; st == KI_OK && p < n_out; p++) {
        int64_t d[KI_MAX_DIMS], start;
        memcpy(d, in[0].d, sizeof d);
        tsplit_piece(s, in[0].d[ax], p, &start, &d[ax]);
        st = ki_shapeop_make(&out[p], in[0].ndim, d, err);
    }
    return st;
}

static ki_status tsplit_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const tsplit_state *s = state;
    int64_t outer, len, inner, start, n;
    int ax;
    (void)n_in, (void)ex;
    if (!ki_axis_norm(s->dim, in[0].shape.ndim, &ax)) {
        return KI_ERR_SHAPE;
    }
    ki_shapeop_blocks(&in[0].shape, ax, &outer, &len, &inner);
    for (int p = 0; p < n_out; p++) {
        tsplit_piece(s, len, p, &start, &n);
        for (int64_t o = 0; o < outer && n > 0; o++) {
            memcpy(out[p].data + o * n * inner, in[0].data + (o * len + start) * inner,
                   (size_t)(n * inner) * sizeof(float));
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_tensor_split = { .type = "torch.tensor_split",
                                                   .create = tsplit_create,
                                                   .shape = tsplit_shape,
                                                   .forward = tsplit_forward,
                                                   .destroy = ki_shapeop_free };

/* ---- Tensor.unflatten ---- */
typedef struct unflat_state {
    int64_t dim;
    int n;
    int64_t sizes[KI_MAX_DIMS];
} unflat_state;

static ki_status unflat_create(const ki_op_desc *op, void **state, ki_error *err)
{
    unflat_state t;
    int n_neg = 0;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", INT64_MIN, &t.dim, err);
    st = st != KI_OK ? st : ki_op_get_int_list(op, "sizes", KI_MAX_DIMS, t.sizes, &t.n, err);
    if (st == KI_OK && (t.dim == INT64_MIN || t.n < 1)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "needs dim and a non-empty sizes");
    }
    for (int i = 0; st == KI_OK && i < t.n; i++) {
        n_neg += t.sizes[i] == -1;
        if (t.sizes[i] < -1 || t.sizes[i] > KI_MAX_DIM || n_neg > 1) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "sizes[%d] = %lld is invalid", i,
                         (long long)t.sizes[i]);
        }
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(unflat_state *)*state = t;
    }
    return st;
}

static ki_status unflat_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const unflat_state *s = state;
    int64_t d[KI_MAX_DIMS], known = 1;
    int ax, neg = -1;
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim == 0 || !ki_axis_norm(s->dim, in[0].ndim, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    if (in[0].ndim - 1 + s->n > KI_MAX_DIMS) {
        return KI_FAIL(err, KI_ERR_LIMIT, "the result has more than %d dims", KI_MAX_DIMS);
    }
    for (int i = 0; i < s->n; i++) {
        if (s->sizes[i] < 0) {
            neg = i;
        } else if (!ki_ckd_mul_i64(&known, known, s->sizes[i])) {
            return KI_FAIL(err, KI_ERR_LIMIT, "sizes overflow");
        }
    }
    const int64_t len = in[0].d[ax];
    if (neg >= 0 ? (known == 0 || len % known != 0) : known != len) {
        return KI_FAIL(err, KI_ERR_SHAPE, "sizes do not multiply to dim %d's %lld", ax,
                       (long long)len);
    }
    memcpy(d, in[0].d, (size_t)ax * sizeof *d);
    for (int i = 0; i < s->n; i++) {
        d[ax + i] = i == neg ? len / known : s->sizes[i];
    }
    memcpy(d + ax + s->n, in[0].d + ax + 1, (size_t)(in[0].ndim - ax - 1) * sizeof *d);
    return ki_shapeop_make(&out[0], in[0].ndim - 1 + s->n, d, err);
}

static ki_status view_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    (void)state, (void)n_in, (void)n_out, (void)ex;
    ki_shapeop_view_copy(&in[0], &out[0]);
    return KI_OK;
}

const ki_layer_ops ki_layer_tensor_unflatten = { .type = "Tensor.unflatten",
                                                 .flags = KI_LAYER_VIEW,
                                                 .create = unflat_create,
                                                 .shape = unflat_shape,
                                                 .forward = view_forward,
                                                 .destroy = ki_shapeop_free };

/* ---- torch.as_strided ---- */
typedef struct strided_state {
    int n;
    int64_t size[KI_MAX_DIMS], stride[KI_MAX_DIMS], offset;
} strided_state;

static ki_status strided_create(const ki_op_desc *op, void **state, ki_error *err)
{
    strided_state t;
    int ns = -1;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    st = st != KI_OK ? st : ki_op_get_int_list(op, "size", KI_MAX_DIMS, t.size, &t.n, err);
    st = st != KI_OK ? st : ki_op_get_int_list(op, "stride", KI_MAX_DIMS, t.stride, &ns, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "storage_offset", 0, &t.offset, err);
    if (st == KI_OK && (t.n < 0 || ns != t.n)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "size and stride must be lists of one length");
    }
    for (int i = 0; st == KI_OK && i < t.n; i++) {
        if (t.size[i] < 0 || t.size[i] > KI_MAX_DIM || t.stride[i] < 0 ||
            t.stride[i] > KI_MAX_NUMEL) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "size[%d] or stride[%d] is out of range", i, i);
        }
    }
    if (st == KI_OK && (t.offset < 0 || t.offset > KI_MAX_NUMEL)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "storage_offset is out of range");
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(strided_state *)*state = t;
    }
    return st;
}

static ki_status strided_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    const strided_state *s = state;
    int64_t numel, reach = s->offset, step;
    bool empty = false;
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || !ki_shape_numel(&in[0], &numel)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input is not a tensor");
    }
    for (int i = 0; i < s->n; i++) {
        empty = empty || s->size[i] == 0;
        if (s->size[i] > 0 && (!ki_ckd_mul_i64(&step, s->size[i] - 1, s->stride[i]) ||
                               !ki_ckd_add_i64(&reach, reach, step))) {
            return KI_FAIL(err, KI_ERR_LIMIT, "size and stride overflow");
        }
    }
    if (!empty && reach >= numel) {
        return KI_FAIL(err, KI_ERR_SHAPE, "reaches element %lld of an input of %lld",
                       (long long)reach, (long long)numel);
    }
    return ki_shapeop_make(&out[0], s->n, s->size, err);
}

static ki_status strided_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                 int n_out, const ki_exec *ex)
{
    const strided_state *s = state;
    ki_shapeop_copy c;
    (void)n_in, (void)n_out;
    ki_shapeop_copy_init(&c, s->n, s->size);
    memcpy(c.src, s->stride, (size_t)s->n * sizeof *c.src);
    if (ki_shape_count(&out[0].shape) > 0) {
        ki_shapeop_copy_run(&c, in[0].data + s->offset, out[0].data, ex->n_threads);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_as_strided = { .type = "torch.as_strided",
                                                 .create = strided_create,
                                                 .shape = strided_shape,
                                                 .forward = strided_forward,
                                                 .destroy = ki_shapeop_free };

/* ---- Tensor.fill, Tensor.new_ones, Tensor.new_zeros ---- */
typedef struct fill_state {
    float value;
    int size_in; /* new_*: the input carrying the size list, or -1 for the size parameter */
    int n;       /* new_* with a size parameter */
    int64_t size[KI_MAX_DIMS];
    bool like; /* Tensor.fill: the input's shape */
} fill_state;

static ki_status fill_create(const ki_op_desc *op, void **state, ki_error *err)
{
    fill_state t = { .like = true, .size_in = -1 };
    double v = 0.0;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    if (st == KI_OK && !ki_op_has(op, "value")) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "needs value as a parameter");
    }
    st = st != KI_OK ? st : ki_op_get_float(op, "value", 0.0, &v, err);
    t.value = (float)v;
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(fill_state *)*state = t;
    }
    return st;
}

static ki_status new_create_kind(const ki_op_desc *op, float value, void **state, ki_error *err)
{
    fill_state t = { .value = value, .size_in = ki_op_input_index(op, "size") };
    ki_status st = ki_shapeop_check_io(op, -1, 1, err);
    if (st == KI_OK && op->n_inputs > 2) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs, expected 1 or 2", op->n_inputs);
    }
    if (st == KI_OK && t.size_in < 0 && op->n_inputs == 2) {
        int self = ki_op_input_index(op, "input");
        t.size_in = self == 0 ? 1 : (self == 1 ? 0 : 1);
    }
    if (st == KI_OK && t.size_in < 0) {
        st = ki_op_get_int_list(op, "size", KI_MAX_DIMS, t.size, &t.n, err);
        if (st == KI_OK && t.n < 0) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "size is missing");
        }
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(fill_state *)*state = t;
    }
    return st;
}

static ki_status new_ones_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return new_create_kind(op, 1.0f, state, err);
}

static ki_status new_zeros_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return new_create_kind(op, 0.0f, state, err);
}

static ki_status fill_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const fill_state *s = state;
    int64_t d[KI_MAX_DIMS];
    int n = s->n;
    (void)n_out;
    if (s->like) {
        if (in[0].kind != KI_KIND_TENSOR) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input is not a tensor");
        }
        return ki_shapeop_make(&out[0], in[0].ndim, in[0].d, err);
    }
    memcpy(d, s->size, sizeof d);
    if (s->size_in >= 0) {
        ki_status st = s->size_in < n_in ? ki_shapeop_list_values(&in[s->size_in], "size", d,
                                                                  KI_MAX_DIMS, &n, err)
                                         : KI_FAIL(err, KI_ERR_SHAPE, "size input is missing");
        if (st != KI_OK) {
            return st;
        }
    }
    for (int i = 0; i < n; i++) {
        if (d[i] < 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "size[%d] = %lld is negative", i, (long long)d[i]);
        }
    }
    return ki_shapeop_make(&out[0], n, d, err);
}

static ki_status fill_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const fill_state *s = state;
    const int64_t n = ki_shape_count(&out[0].shape);
    (void)in, (void)n_in, (void)n_out, (void)ex;
    for (int64_t i = 0; i < n; i++) {
        out[0].data[i] = s->value;
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_tensor_fill = { .type = "Tensor.fill",
                                            .flags = KI_LAYER_INPLACE,
                                            .create = fill_create,
                                            .shape = fill_shape,
                                            .forward = fill_forward,
                                            .destroy = ki_shapeop_free };
const ki_layer_ops ki_layer_tensor_new_ones = { .type = "Tensor.new_ones",
                                                .create = new_ones_create,
                                                .shape = fill_shape,
                                                .forward = fill_forward,
                                                .destroy = ki_shapeop_free };
const ki_layer_ops ki_layer_tensor_new_zeros = { .type = "Tensor.new_zeros",
                                                 .create = new_zeros_create,
                                                 .shape = fill_shape,
                                                 .forward = fill_forward,
                                                 .destroy = ki_shapeop_free };
