/* norm_misc.c - nn.GLU / F.glu (a * sigmoid(b) of the halves along dim), nn.RMSNorm / F.rms_norm (x
 * / sqrt(mean(x^2) + eps) * weight over the last dims of normalized_shape; eps None: float32's
 * machine epsilon, as PyTorch) and F.normalize (x / max(||x||_p, eps) along dim, p = 1 or 2). Sums
 * accumulate in double. State: the parameters and the weight (the model's), immutable; thread-safe.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/layer.h"
#include "shape_common.h"

typedef struct rms_state {
    int n_norm; /* dims normalised (the last ones) */
    int64_t norm_numel;
    double eps;
    const float *w; /* (norm_numel) or NULL */
} rms_state;

typedef struct l2n_state {
    int64_t dim;
    double p, eps;
} l2n_state;

static ki_status rms_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int64_t shape[KI_MAX_DIMS];
    int n = 0;
    const ki_attr *w = ki_op_attr(op, "weight");
    rms_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_op_get_int_list(op, "normalized_shape", KI_MAX_DIMS, shape, &n, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "eps", FLT_EPSILON, &s->eps, err);
    if (st == KI_OK && n < 1) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "normalized_shape is missing");
    }
    s->n_norm = n;
    s->norm_numel = 1;
    for (int i = 0; st == KI_OK && i < n; i++) {
        s->norm_numel *= shape[i] > 0 && shape[i] <= KI_MAX_DIM ? shape[i] : 0;
    }
    if (st == KI_OK && (s->norm_numel <= 0 || s->norm_numel > KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "normalized_shape is out of range");
    }
    if (st == KI_OK && w) {
        st = w->numel == s->norm_numel
                 ? KI_OK
                 : KI_FAIL(err, KI_ERR_SHAPE, "weight has %lld elements", (long long)w->numel);
        s->w = w->data;
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status rms_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const rms_state *s = state;
    (void)n_in, (void)n_out;
    int64_t last = 1;
    for (int i = in[0].ndim - s->n_norm; i >= 0 && i < in[0].ndim; i++) {
        last *= in[0].d[i];
    }
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim < s->n_norm || last != s->norm_numel) {
        return KI_FAIL(err, KI_ERR_SHAPE, "the last dims do not match normalized_shape");
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

static ki_status rms_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const rms_state *s = state;
    const int64_t m = s->norm_numel, rows = ki_shape_count(&in[0].shape) / m;
    (void)n_in, (void)n_out;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (rows * m > 8192)
    for (int64_t r = 0; r < rows; r++) {
        const float *x = in[0].data + r * m;
        float *y = out[0].data + r * m;
        double ss = 0.0;
        for (int64_t i = 0; i < m; i++) {
            ss += (double)x[i] * x[i];
        }
        const float rs = (float)(1.0 / sqrt(ss / (double)m + s->eps));
        for (int64_t i = 0; i < m; i++) {
            y[i] = x[i] * rs * (s->w ? s->w[i] : 1.0f);
        }
    }
    return KI_OK;
}

static ki_status l2n_create(const ki_op_desc *op, void **state, ki_error *err)
{
    l2n_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_op_get_int(op, "dim", 1, &s->dim, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "p", 2.0, &s->p, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "eps", 1e-12, &s->eps, err);
    if (st == KI_OK && s->p != 1.0 && s->p != 2.0) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "p=%g (1 and 2 are)", s->p);
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

/* x seen as (outer, n, inner) around the state's dim (F.normalize, GLU); false when the dim is out
 * of range, which shape() has already refused. */
static bool dim_blocks(const l2n_state *s, const ki_shape *x, int64_t *outer, int64_t *n,
                       int64_t *inner)
{
    int ax;
    if (!ki_axis_norm(s->dim, x->ndim, &ax)) {
        return false;
    }
    ki_shapeop_blocks(x, ax, outer, n, inner);
    return true;
}

static ki_status l2n_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const l2n_state *s = state;
    int ax;
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || !ki_axis_norm(s->dim, in[0].ndim, &ax)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range", (long long)s->dim);
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

static ki_status l2n_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const l2n_state *s = state;
    int64_t outer, n, inner;
    (void)n_in, (void)n_out, (void)ex;
    if (!dim_blocks(s, &in[0].shape, &outer, &n, &inner)) {
        return KI_ERR_SHAPE;
    }
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t j = 0; j < inner; j++) {
            const float *x = in[0].data + o * n * inner + j;
            float *y = out[0].data + o * n * inner + j;
            double acc = 0.0;
            for (int64_t k = 0; k < n; k++) {
                acc +=
                    s->p == 1.0 ? fabs((double)x[k * inner]) : (double)x[k * inner] * x[k * inner];
            }
            double norm = s->p == 1.0 ? acc : sqrt(acc);
            const float d = (float)(norm > s->eps ? norm : s->eps);
            for (int64_t k = 0; k < n; k++) {
                y[k * inner] = x[k * inner] / d;
            }
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_nn_rms_norm = { .type = "nn.RMSNorm",
                                            .create = rms_create,
                                            .shape = rms_shape,
                                            .forward = rms_forward,
                                            .destroy = free };
const ki_layer_ops ki_layer_f_rms_norm = { .type = "F.rms_norm",
                                           .create = rms_create,
                                           .shape = rms_shape,
                                           .forward = rms_forward,
                                           .destroy = free };
const ki_layer_ops ki_layer_f_normalize = { .type = "F.normalize",
                                            .create = l2n_create,
                                            .shape = l2n_shape,
                                            .forward = l2n_forward,
                                            .destroy = free };

/* ---- nn.GLU / F.glu: the input halved along dim (default -1) into a and b, a * sigmoid(b) ---- */
static ki_status glu_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const l2n_state *s = state;
    int ax;
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || !ki_axis_norm(s->dim, in[0].ndim, &ax) ||
        in[0].d[ax] % 2 != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld must exist and have an even size",
                       (long long)s->dim);
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    out[0].d[ax] /= 2;
    return KI_OK;
}

static ki_status glu_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const l2n_state *s = state;
    int64_t outer, n, inner;
    (void)n_in, (void)n_out, (void)ex;
    if (!dim_blocks(s, &in[0].shape, &outer, &n, &inner)) {
        return KI_ERR_SHAPE;
    }
    const int64_t half = n / 2;
    for (int64_t o = 0; o < outer; o++) {
        const float *a = in[0].data + o * 2 * half * inner, *b = a + half * inner;
        float *y = out[0].data + o * half * inner;
        for (int64_t i = 0; i < half * inner; i++) {
            y[i] = a[i] * (1.0f / (1.0f + expf(-b[i])));
        }
    }
    return KI_OK;
}

static ki_status glu_create(const ki_op_desc *op, void **state, ki_error *err)
{
    l2n_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_op_get_int(op, "dim", -1, &s->dim, err);
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

const ki_layer_ops ki_layer_nn_glu = { .type = "nn.GLU",
                                       .create = glu_create,
                                       .shape = glu_shape,
                                       .forward = glu_forward,
                                       .destroy = free };
const ki_layer_ops ki_layer_f_glu = { .type = "F.glu",
                                      .create = glu_create,
                                      .shape = glu_shape,
                                      .forward = glu_forward,
                                      .destroy = free };
