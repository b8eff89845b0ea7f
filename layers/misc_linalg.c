/* misc_linalg.c - small linear-algebra operators with plain reference kernels:
 * torch.addmm(input, mat1, mat2, beta, alpha) = beta * input + alpha * (mat1 @ mat2) and
 * torch.baddbmm (the same per batch entry), input broadcast to the product's shape and ignored
 * when beta is 0 (PyTorch does not propagate its NaN then); torch.cross(input, other, dim) over
 * a dim of 3 (inputs broadcast; no dim: the first dim of 3, as torch.cross's default);
 * torch.diag(input, diagonal) (1-D: the square matrix with input on that diagonal; 2-D: that
 * diagonal as a vector). Products accumulate in double, so results do not depend on the thread
 * count. State: the parsed parameters, immutable; thread-safe. */
#include <string.h>

#include "../core/ckd.h"
#include "shape_common.h"

/* The input bound to `$key`, else position pos. */
static int input_slot(const ki_op_desc *op, const char *key, int pos)
{
    int i = ki_op_input_index(op, key);
    return i >= 0 ? i : pos;
}

/* ---- torch.addmm / torch.baddbmm ---- */
typedef struct addmm_state {
    int in, a, b; /* input indices of input, mat1 / batch1, mat2 / batch2 */
    double alpha, beta;
    bool batched;
} addmm_state;

static ki_status addmm_create_kind(const ki_op_desc *op, bool batched, void **state, ki_error *err)
{
    addmm_state t = { .batched = batched };
    ki_status st = ki_shapeop_check_io(op, 3, 1, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "alpha", 1.0, &t.alpha, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "beta", 1.0, &t.beta, err);
    if (st != KI_OK) {
        return st;
    }
    t.in = input_slot(op, "input", 0);
    t.a = input_slot(op, batched ? "batch1" : "mat1", 1);
    t.b = input_slot(op, batched ? "batch2" : "mat2", 2);
    if (t.in == t.a || t.in == t.b || t.a == t.b) {
        return KI_FAIL(err, KI_ERR_FORMAT, "inputs are bound twice");
    }
    return ki_shapeop_save(&t, sizeof t, state, err);
}

static ki_status addmm_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const addmm_state *s = state;
    const ki_shape *x = &in[s->in], *a = &in[s->a], *b = &in[s->b];
    const int nd = s->batched ? 3 : 2;
    (void)n_in, (void)n_out;
    if (a->kind != KI_KIND_TENSOR || b->kind != KI_KIND_TENSOR || a->ndim != nd || b->ndim != nd) {
        return KI_FAIL(err, KI_ERR_SHAPE, "the matrices must be %d-D tensors", nd);
    }
    if (a->d[nd - 1] != b->d[nd - 2] || (s->batched && a->d[0] != b->d[0])) {
        return KI_FAIL(err, KI_ERR_SHAPE, "matrix shapes do not match for a product");
    }
    int64_t d[KI_MAX_DIMS] = { a->d[0], s->batched ? a->d[1] : b->d[1], b->d[2] };
    int n = nd;
    if (x->kind != KI_KIND_TENSOR && x->kind != KI_KIND_SCALAR) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input is not a tensor");
    }
    if (x->kind == KI_KIND_TENSOR && (ki_shapeop_broadcast(d, &n, x) >= 0 || n != nd)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input does not broadcast to the product's shape");
    }
    return ki_shapeop_make(&out[0], nd, d, err);
}

static ki_status addmm_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    const addmm_state *s = state;
    const ki_shape *os = &out[0].shape;
    const int nd = os->ndim;
    const int64_t nb = nd == 3 ? os->d[0] : 1, m = os->d[nd - 2], p = os->d[nd - 1];
    const int64_t k = in[s->a].shape.d[nd - 1], rows = nb * m;
    const float *x = in[s->in].data, *a = in[s->a].data, *b = in[s->b].data;
    int64_t xs[KI_MAX_DIMS];
    float *o = out[0].data;
    (void)n_in, (void)n_out;
    ki_shapeop_broadcast_strides(&in[s->in].shape, os, xs);
#pragma omp parallel for num_threads(ex->n_threads)                                                \
    schedule(static) if (rows * p * k > KI_SHAPEOP_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t bi = r / m, i = r % m;
        const float *ar = a + r * k, *bm = b + bi * k * p;
        const float *xr = x + (nd == 3 ? bi * xs[0] : 0) + i * xs[nd - 2];
        for (int64_t j = 0; j < p; j++) {
            double acc = 0.0;
            for (int64_t q = 0; q < k; q++) {
                acc += (double)ar[q] * bm[q * p + j];
            }
            double v = s->alpha * acc;
            if (s->beta != 0.0) {
                v += s->beta * xr[j * xs[nd - 1]];
            }
            o[r * p + j] = (float)v;
        }
    }
    return KI_OK;
}

static ki_status addmm_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return addmm_create_kind(op, false, state, err);
}

static ki_status baddbmm_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return addmm_create_kind(op, true, state, err);
}

KI_SHAPEOP_OPS(ki_layer_torch_addmm, "torch.addmm", addmm_create, addmm_shape, addmm_forward);
KI_SHAPEOP_OPS(ki_layer_torch_baddbmm, "torch.baddbmm", baddbmm_create, addmm_shape, addmm_forward);

/* ---- torch.cross ---- */
typedef struct cross_state {
    int a, b;
    bool has_dim;
    int64_t dim;
} cross_state;

static ki_status cross_create(const ki_op_desc *op, void **state, ki_error *err)
{
    cross_state t;
    ki_status st = ki_shapeop_check_io(op, 2, 1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", 0, &t.dim, err);
    if (st != KI_OK) {
        return st;
    }
    t.has_dim = ki_op_has(op, "dim");
    t.a = input_slot(op, "input", 0);
    t.b = input_slot(op, "other", 1 - t.a);
    if (t.a == t.b || t.a > 1 || t.b > 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "inputs are bound twice");
    }
    return ki_shapeop_save(&t, sizeof t, state, err);
}

/* The dim the product runs along in the broadcast shape, or -1. */
static int cross_axis(const cross_state *s, const ki_shape *o)
{
    int ax = -1;
    if (s->has_dim) {
        return ki_axis_norm(s->dim, o->ndim, &ax) && o->d[ax] == 3 ? ax : -1;
    }
    for (int i = 0; i < o->ndim && ax < 0; i++) {
        ax = o->d[i] == 3 ? i : -1;
    }
    return ax;
}

static ki_status cross_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const cross_state *s = state;
    int64_t d[KI_MAX_DIMS] = { 0 };
    int n = 0;
    (void)n_in, (void)n_out;
    if (in[s->a].kind != KI_KIND_TENSOR || in[s->b].kind != KI_KIND_TENSOR ||
        ki_shapeop_broadcast(d, &n, &in[s->a]) >= 0 ||
        ki_shapeop_broadcast(d, &n, &in[s->b]) >= 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input and other do not broadcast");
    }
    ki_status st = ki_shapeop_make(&out[0], n, d, err);
    if (st == KI_OK && cross_axis(s, &out[0]) < 0) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "dim %lld does not have size 3", (long long)s->dim);
    }
    return st;
}

static ki_status cross_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    const cross_state *s = state;
    const ki_shape *os = &out[0].shape;
    const int ax = cross_axis(s, os);
    int64_t sa[KI_MAX_DIMS], sb[KI_MAX_DIMS], so[KI_MAX_DIMS];
    (void)n_in, (void)n_out, (void)ex;
    if (ax < 0) {
        return KI_ERR_SHAPE;
    }
    ki_shapeop_broadcast_strides(&in[s->a].shape, os, sa);
    ki_shapeop_broadcast_strides(&in[s->b].shape, os, sb);
    ki_shapeop_strides(os->ndim, os->d, so);
    const int64_t total = ki_shape_count(os) / 3;
    for (int64_t e = 0; e < total; e++) {
        int64_t r = e, oa = 0, ob = 0, oo = 0;
        for (int d = os->ndim - 1; d >= 0; d--) {
            if (d == ax) {
                continue;
            }
            const int64_t c = r % os->d[d];
            r /= os->d[d];
            oa += c * sa[d], ob += c * sb[d], oo += c * so[d];
        }
        const float *x = in[s->a].data + oa, *y = in[s->b].data + ob;
        const int64_t xa = sa[ax], ya = sb[ax], za = so[ax];
        float *z = out[0].data + oo;
        z[0] = x[xa] * y[2 * ya] - x[2 * xa] * y[ya];
        z[za] = x[2 * xa] * y[0] - x[0] * y[2 * ya];
        z[2 * za] = x[0] * y[ya] - x[xa] * y[0];
    }
    return KI_OK;
}

KI_SHAPEOP_OPS(ki_layer_torch_cross, "torch.cross", cross_create, cross_shape, cross_forward);

/* ---- torch.diag ---- */
typedef struct diag_state {
    int64_t k;
} diag_state;

static ki_status diag_create(const ki_op_desc *op, void **state, ki_error *err)
{
    diag_state t;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "diagonal", 0, &t.k, err);
    if (st == KI_OK && (t.k > KI_MAX_DIM || t.k < -KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "diagonal %lld is out of range", (long long)t.k);
    }
    return st != KI_OK ? st : ki_shapeop_save(&t, sizeof t, state, err);
}

static ki_status diag_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const diag_state *s = state;
    const int64_t ak = s->k < 0 ? -s->k : s->k;
    int64_t d[KI_MAX_DIMS];
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim < 1 || in[0].ndim > 2) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input must be 1-D or 2-D");
    }
    if (in[0].ndim == 1) {
        d[0] = d[1] = in[0].d[0] + ak;
        return ki_shapeop_make(&out[0], 2, d, err);
    }
    const int64_t r = in[0].d[0], c = in[0].d[1];
    int64_t len = s->k >= 0 ? (c - s->k < r ? c - s->k : r) : (r + s->k < c ? r + s->k : c);
    d[0] = len > 0 ? len : 0;
    return ki_shapeop_make(&out[0], 1, d, err);
}

static ki_status diag_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const diag_state *s = state;
    const float *x = in[0].data;
    float *o = out[0].data;
    const int64_t row0 = s->k < 0 ? -s->k : 0, col0 = s->k > 0 ? s->k : 0;
    (void)n_in, (void)n_out, (void)ex;
    if (in[0].shape.ndim == 1) {
        const int64_t n = out[0].shape.d[0];
        memset(o, 0, (size_t)(n * n) * sizeof *o);
        for (int64_t i = 0; i < in[0].shape.d[0]; i++) {
            o[(row0 + i) * n + col0 + i] = x[i];
        }
        return KI_OK;
    }
    const int64_t c = in[0].shape.d[1];
    for (int64_t i = 0; i < out[0].shape.d[0]; i++) {
        o[i] = x[(row0 + i) * c + col0 + i];
    }
    return KI_OK;
}

KI_SHAPEOP_OPS(ki_layer_torch_diag, "torch.diag", diag_create, diag_shape, diag_forward);
