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

/* ---- torch.topk(input, k, dim=-1, largest=True, sorted=True): values and their indices along
 * dim, best first (NaN counts as the largest, as in PyTorch); a tie keeps the lower index ---- */
typedef struct topk_state {
    int64_t k, dim;
    bool largest;
} topk_state;

static ki_status topk_create(const ki_op_desc *op, void **state, ki_error *err)
{
    topk_state t;
    ki_status st = ki_shapeop_check_io(op, 1, -1, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "k", -1, &t.k, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "dim", -1, &t.dim, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "largest", true, &t.largest, err);
    if (st == KI_OK && (t.k < 0 || op->n_outputs > 2)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "k must be given and at most 2 outputs taken");
    }
    st = st != KI_OK ? st : ki_shapeop_alloc(sizeof t, state, err);
    if (st == KI_OK) {
        *(topk_state *)*state = t;
    }
    return st;
}

static ki_status topk_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const topk_state *s = state;
    int ax;
    int64_t d[KI_MAX_DIMS];
    (void)n_in;
    if (in[0].kind != KI_KIND_TENSOR ||
        !ki_axis_norm(s->dim, in[0].ndim > 0 ? in[0].ndim : 1, &ax) ||
        (in[0].ndim > 0 ? in[0].d[ax] : 1) < s->k) {
        return KI_FAIL(err, KI_ERR_SHAPE, "k=%lld is larger than dim %lld", (long long)s->k,
                       (long long)s->dim);
    }
    memcpy(d, in[0].d, sizeof d);
    if (in[0].ndim > 0) {
        d[ax] = s->k;
    }
    ki_status st = KI_OK;
    for (int i = 0; st == KI_OK && i < n_out; i++) {
        st = ki_shapeop_make(&out[i], in[0].ndim, d, err);
    }
    return st;
}

/* Whether a goes before b (position ia, ib) for largest / smallest first. */
static bool before(float a, int64_t ia, float b, int64_t ib, bool largest)
{
    if (isnan(a) || isnan(b)) {
        return isnan(a) && (!isnan(b) || ia < ib);
    }
    return largest ? (a > b || (a == b && ia < ib)) : (a < b || (a == b && ia < ib));
}

static ki_status topk_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const topk_state *s = state;
    const ki_shape *xs = &in[0].shape;
    int ax;
    (void)n_in, (void)ex;
    if (!ki_axis_norm(s->dim, xs->ndim > 0 ? xs->ndim : 1, &ax)) {
        return KI_ERR_SHAPE;
    }
    int64_t outer, n, inner;
    ki_shapeop_blocks(xs, ax, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t t = 0; t < inner; t++) {
            const float *x = in[0].data + o * n * inner + t;
            float *v = out[0].data + o * s->k * inner + t;
            float *ix = n_out > 1 ? out[1].data + o * s->k * inner + t : NULL;
            /* selection by insertion into the k best so far (k is small in practice) */
            for (int64_t j = 0, have = 0; j < n; j++) {
                const float a = x[j * inner];
                int64_t pos = have;
                while (pos > 0 && before(a, j, v[(pos - 1) * inner],
                                         ix ? (int64_t)ix[(pos - 1) * inner] : 0, s->largest)) {
                    pos--;
                }
                if (pos >= s->k) {
                    continue;
                }
                for (int64_t q = (have < s->k ? have : s->k - 1); q > pos; q--) {
                    v[q * inner] = v[(q - 1) * inner];
                    if (ix) {
                        ix[q * inner] = ix[(q - 1) * inner];
                    }
                }
                v[pos * inner] = a;
                if (ix) {
                    ix[pos * inner] = (float)j;
                }
                have += have < s->k;
            }
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_topk = { .type = "torch.topk",
                                           .create = topk_create,
                                           .shape = topk_shape,
                                           .forward = topk_forward,
                                           .destroy = ki_shapeop_free };
