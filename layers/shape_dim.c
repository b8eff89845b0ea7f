/* shape_dim.c - operators along one or a few dims given as parameters: torch.cumsum and
 * torch.cumprod (running sum / product along dim, in order, in float32 as PyTorch's CPU kernel
 * accumulates), torch.flip (dims reversed), torch.roll (shifts along dims, or of the flattened
 * tensor without dims) and torch.narrow (length elements of dim from start). Each is a walk over
 * (outer, n, inner) blocks of the input; Tensor.repeat / torch.tile (the tensor repeated along
 * each dim, new leading dims for extra counts) map every output index back into the input. State:
 * the parsed parameters, immutable; thread-safe. */
#include <string.h>

#include "../core/ckd.h"
#include "shape_common.h"

typedef enum dim_kind { DK_CUMSUM, DK_CUMPROD, DK_FLIP, DK_ROLL, DK_NARROW, DK_REPEAT } dim_kind;

typedef struct dim_state {
    dim_kind kind;
    int n_dims;
    int64_t dims[KI_MAX_DIMS];   /* as given (may be negative) */
    int64_t shifts[KI_MAX_DIMS]; /* roll */
    int64_t start, length;       /* narrow */
    bool tile;                   /* torch.tile: fewer counts than dims are padded with 1s */
} dim_state;

static ki_status dim_create_kind(const ki_op_desc *op, dim_kind kind, void **state, ki_error *err)
{
    dim_state t = { .kind = kind };
    int ns = 0;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    if (st == KI_OK && kind == DK_REPEAT) { /* Tensor.repeat(sizes) or torch.tile(dims) */
        t.tile = strcmp(op->type, "torch.tile") == 0;
        const char *key = t.tile ? "dims" : "sizes";
        st = ki_op_get_int_list(op, key, KI_MAX_DIMS, t.shifts, &t.n_dims, err);
        for (int i = 0; st == KI_OK && i < t.n_dims; i++) {
            st = t.shifts[i] < 0 ? KI_FAIL(err, KI_ERR_FORMAT, "negative repeat count") : KI_OK;
        }
        if (st == KI_OK && t.n_dims < 0) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter %s", key);
        }
    } else if (st == KI_OK && (kind == DK_CUMSUM || kind == DK_CUMPROD || kind == DK_NARROW)) {
        st = ki_op_get_int(op, "dim", INT64_MIN, &t.dims[0], err);
        t.n_dims = 1;
        if (st == KI_OK && t.dims[0] == INT64_MIN) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dim");
        }
    } else if (st == KI_OK) {
        st = ki_op_get_int_list(op, "dims", KI_MAX_DIMS, t.dims, &t.n_dims, err);
    }
    if (st == KI_OK && kind == DK_FLIP && t.n_dims < 0) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dims");
    }
    if (st == KI_OK && kind == DK_ROLL) {
        st = ki_op_get_int_list(op, "shifts", KI_MAX_DIMS, t.shifts, &ns, err);
        if (st == KI_OK &&
            (ns < 1 || (t.n_dims >= 0 && ns != t.n_dims) || (t.n_dims < 0 && ns != 1))) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "shifts and dims do not match");
        }
    }
    if (st == KI_OK && kind == DK_NARROW) {
        st = ki_op_get_int(op, "start", INT64_MIN, &t.start, err);
        st = st != KI_OK ? st : ki_op_get_int(op, "length", -1, &t.length, err);
        if (st == KI_OK && (t.start == INT64_MIN || t.length < 0)) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "narrow needs start and a length >= 0");
        }
    }
    if (st == KI_OK) {
        st = ki_shapeop_alloc(sizeof t, state, err);
    }
    if (st == KI_OK) {
        *(dim_state *)*state = t;
    }
    return st;
}

/* dims normalised against ndim (a 0-d tensor is treated as 1-d); false when out of range. */
static bool norm_dims(const dim_state *s, int ndim, int *out)
{
    for (int i = 0; i < s->n_dims; i++) {
        if (!ki_axis_norm(s->dims[i], ndim > 0 ? ndim : 1, &out[i])) {
            return false;
        }
    }
    return true;
}

static ki_status dim_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const dim_state *s = state;
    int ax[KI_MAX_DIMS];
    int64_t d[KI_MAX_DIMS];
    (void)n_out;
    if (n_in != 1 || in[0].kind != KI_KIND_TENSOR) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects a tensor");
    }
    if (s->kind == DK_REPEAT) { /* the counts (repeat: at least ndim of them) times the dims */
        int n = s->n_dims > in[0].ndim ? s->n_dims : in[0].ndim;
        if (s->n_dims < in[0].ndim && !s->tile) {
            return KI_FAIL(err, KI_ERR_SHAPE, "repeat needs at least %d counts", in[0].ndim);
        }
        for (int i = 0; i < n; i++) {
            int j = i - (n - in[0].ndim), k = i - (n - s->n_dims);
            int64_t di = j >= 0 ? in[0].d[j] : 1, r = k >= 0 ? s->shifts[k] : 1;
            if (!ki_ckd_mul_i64(&d[i], di, r)) {
                return KI_FAIL(err, KI_ERR_LIMIT, "repeated size too large");
            }
        }
        return ki_shapeop_make(&out[0], n, d, err);
    }
    if (!norm_dims(s, in[0].ndim, ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim out of range for %d dims", in[0].ndim);
    }
    memcpy(d, in[0].d, sizeof d);
    if (s->kind == DK_NARROW) {
        int64_t n = in[0].ndim ? in[0].d[ax[0]] : 1, st = s->start < 0 ? s->start + n : s->start;
        if (st < 0 || st > n || s->length > n - st) {
            return KI_FAIL(err, KI_ERR_SHAPE, "narrow(start %lld, length %lld) of a dim of %lld",
                           (long long)s->start, (long long)s->length, (long long)n);
        }
        d[ax[0]] = s->length;
    }
    return ki_shapeop_make(&out[0], in[0].ndim, d, err);
}

static void cumulate(const float *x, float *y, const ki_shape *s, int ax, bool prod)
{
    int64_t outer, n, inner;
    ki_shapeop_blocks(s, ax, &outer, &n, &inner);
    for (int64_t o = 0; o < outer; o++) {
        const float *xo = x + o * n * inner;
        float *yo = y + o * n * inner;
        for (int64_t i = 0; i < inner; i++) {
            float acc = prod ? 1.0f : 0.0f;
            for (int64_t k = 0; k < n; k++) {
                acc = prod ? acc * xo[k * inner + i] : acc + xo[k * inner + i];
                yo[k * inner + i] = acc;
            }
        }
    }
}

/* One strided copy: out index k along each dim reads in index f(k) (flip, roll, narrow). */
static void remap(const dim_state *s, const ki_tensor *in, ki_tensor *out, const int *ax,
                  int n_threads)
{
    const ki_shape *is = &in[0].shape, *os = &out[0].shape;
    int64_t strides[KI_MAX_DIMS];
    ki_shapeop_strides(is->ndim, is->d, strides);
    if (s->kind == DK_NARROW) {
        int64_t n = is->d[ax[0]], st = s->start < 0 ? s->start + n : s->start;
        ki_shapeop_copy c;
        ki_shapeop_copy_init(&c, os->ndim, os->d);
        memcpy(c.src, strides, (size_t)os->ndim * sizeof *strides);
        ki_shapeop_copy_run(&c, in[0].data + st * strides[ax[0]], out[0].data, n_threads);
        return;
    }
    /* flip and roll: element by element through the index map */
    const int64_t total = ki_shape_count(os);
    for (int64_t e = 0; e < total; e++) {
        int64_t r = e, src = 0;
        for (int dd = os->ndim - 1; dd >= 0; dd--) {
            int64_t k = r % os->d[dd], n = os->d[dd];
            r /= os->d[dd];
            for (int j = 0; j < s->n_dims; j++) {
                if (ax[j] != dd) {
                    continue;
                }
                if (s->kind == DK_FLIP) {
                    k = n - 1 - k;
                } else {
                    int64_t sh = s->shifts[j] % n;
                    k = ((k - sh) % n + n) % n;
                }
            }
            src += k * strides[dd];
        }
        out[0].data[e] = in[0].data[src];
    }
}

/* out[k] = in[k mod the input's dims], the input right-aligned under the output's dims. */
static void repeat_copy(const ki_tensor *in, ki_tensor *out)
{
    const ki_shape *is = &in->shape, *os = &out->shape;
    int64_t strides[KI_MAX_DIMS];
    ki_shapeop_strides(is->ndim, is->d, strides);
    const int64_t total = ki_shape_count(os);
    for (int64_t e = 0; e < total; e++) {
        int64_t r = e, src = 0;
        for (int dd = os->ndim - 1; dd >= 0; dd--) {
            int64_t k = r % os->d[dd];
            int j = dd - (os->ndim - is->ndim);
            r /= os->d[dd];
            src += j >= 0 ? (k % is->d[j]) * strides[j] : 0;
        }
        out->data[e] = in->data[src];
    }
}

static ki_status dim_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const dim_state *s = state;
    int ax[KI_MAX_DIMS];
    (void)n_in, (void)n_out;
    if (!norm_dims(s, in[0].shape.ndim, ax)) {
        return KI_ERR_SHAPE;
    }
    if (s->kind == DK_REPEAT) {
        repeat_copy(&in[0], &out[0]);
        return KI_OK;
    }
    if (s->kind == DK_CUMSUM || s->kind == DK_CUMPROD) {
        cumulate(in[0].data, out[0].data, &in[0].shape, ax[0], s->kind == DK_CUMPROD);
    } else if (s->kind == DK_ROLL && s->n_dims < 0) { /* the flattened tensor */
        const int64_t n = ki_shape_count(&in[0].shape);
        const int64_t sh = n ? ((s->shifts[0] % n) + n) % n : 0;
        for (int64_t e = 0; e < n; e++) {
            out[0].data[(e + sh) % n] = in[0].data[e];
        }
    } else {
        remap(s, in, out, ax, ex->n_threads);
    }
    return KI_OK;
}

#define DIM_LAYER(sym, name, kind)                                                                 \
    static ki_status sym##_create(const ki_op_desc *op, void **state, ki_error *err)               \
    {                                                                                              \
        return dim_create_kind(op, kind, state, err);                                              \
    }                                                                                              \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = sym##_create,                                             \
                               .shape = dim_shape,                                                 \
                               .forward = dim_forward,                                             \
                               .destroy = ki_shapeop_free }

DIM_LAYER(ki_layer_torch_cumsum, "torch.cumsum", DK_CUMSUM);
DIM_LAYER(ki_layer_torch_cumprod, "torch.cumprod", DK_CUMPROD);
DIM_LAYER(ki_layer_torch_flip, "torch.flip", DK_FLIP);
DIM_LAYER(ki_layer_torch_roll, "torch.roll", DK_ROLL);
DIM_LAYER(ki_layer_torch_narrow, "torch.narrow", DK_NARROW);
DIM_LAYER(ki_layer_tensor_repeat, "Tensor.repeat", DK_REPEAT);
DIM_LAYER(ki_layer_torch_tile, "torch.tile", DK_REPEAT);
