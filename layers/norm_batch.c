/* norm_batch.c - nn.BatchNorm1d/2d/3d in inference mode: y = x * scale[c] + shift[c] over dim 1,
 * with scale = weight / sqrt(running_var + eps) and shift = bias - running_mean * scale,
 * precomputed in create in float as PyTorch's CPU kernel does. The state owns both arrays. */
#include <math.h>
#include <stdlib.h>

#include "../core/ckd.h"
#include "../core/layer.h"

typedef struct bn_state {
    int64_t channels;
    float *scale; /* channels entries, then shift: one allocation */
    float *shift;
} bn_state;

/* Finds the four attributes; weight/bias are NULL when affine is false. */
static ki_status bn_attrs(const ki_op_desc *op, bool affine, const ki_attr **a, ki_error *err)
{
    static const char *const keys[4] = { "running_mean", "running_var", "weight", "bias" };
    int64_t c = -1;
    ki_status st = ki_op_require_attr(op, keys[0], 1, &c, &a[0], err);
    if (st != KI_OK) {
        return st;
    }
    c = a[0]->shape.d[0];
    a[2] = a[3] = NULL;
    for (int i = 1; i < (affine ? 4 : 2); i++) {
        st = ki_op_require_attr(op, keys[i], 1, &c, &a[i], err);
        if (st != KI_OK) {
            return st;
        }
    }
    return KI_OK;
}

static ki_status bn_fill(const ki_op_desc *op, const ki_attr *const *a, float eps, void **state,
                         ki_error *err)
{
    const int64_t c = a[0]->shape.d[0];
    size_t bytes;
    int64_t n_feat;
    ki_status st = ki_op_get_int(op, "num_features", c, &n_feat, err);
    if (st != KI_OK) {
        return st;
    }
    if (c < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@running_mean is empty");
    }
    if (n_feat != c) {
        return KI_FAIL(err, KI_ERR_SHAPE, "num_features=%lld but @running_mean has %lld entries",
                       (long long)n_feat, (long long)c);
    }
    bn_state *p = malloc(sizeof *p);
    if (!p || !ki_ckd_mul(&bytes, (size_t)c, 2 * sizeof(float)) || !(p->scale = malloc(bytes))) {
        free(p);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->channels = c;
    p->shift = p->scale + c;
    for (int64_t i = 0; i < c; i++) {
        const float invstd = 1.0f / sqrtf(a[1]->data[i] + eps);
        const float w = a[2] ? a[2]->data[i] : 1.0f;
        const float b = a[3] ? a[3]->data[i] : 0.0f;
        p->scale[i] = invstd * w;
        p->shift[i] = b - a[0]->data[i] * p->scale[i];
    }
    *state = p;
    return KI_OK;
}

static ki_status bn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    bool affine;
    double eps;
    const ki_attr *a[4];
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    ki_status st = ki_op_get_bool(op, "affine", true, &affine, err);
    if (st == KI_OK) {
        st = ki_op_get_float(op, "eps", 1e-5, &eps, err);
    }
    if (st == KI_OK && !(eps >= 0.0)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "eps must be a non-negative number");
    }
    if (st == KI_OK) {
        st = bn_attrs(op, affine, a, err);
    }
    return st != KI_OK ? st : bn_fill(op, a, (float)eps, state, err);
}

static ki_status bn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const bn_state *p = state;
    char buf[128];
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 1 input and 1 output");
    }
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim < 2 || in[0].d[1] != p->channels) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s has no dim 1 of size %lld (num_features)",
                       ki_shape_str(&in[0], buf, sizeof buf), (long long)p->channels);
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

static ki_status bn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const bn_state *p = state;
    const ki_shape *s = &in[0].shape;
    const float *src = in[0].data;
    float *dst = out[0].data;
    int64_t inner = 1;
    (void)n_in;
    (void)n_out;
    for (int i = 2; i < s->ndim; i++) {
        inner *= s->d[i];
    }
    const int64_t planes = s->d[0] * p->channels;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (planes * inner > 8192)
    for (int64_t pl = 0; pl < planes; pl++) {
        const float a = p->scale[pl % p->channels];
        const float b = p->shift[pl % p->channels];
        const float *x = src + pl * inner;
        float *y = dst + pl * inner;
        for (int64_t i = 0; i < inner; i++) {
            y[i] = x[i] * a + b;
        }
    }
    return KI_OK;
}

static void bn_destroy(void *state)
{
    bn_state *p = state;
    if (p) {
        free(p->scale);
        free(p);
    }
}

#define BN_LAYER(sym, name)                                                                        \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = bn_create,                                                \
                               .shape = bn_shape,                                                  \
                               .workspace = NULL,                                                  \
                               .forward = bn_forward,                                              \
                               .destroy = bn_destroy }

BN_LAYER(ki_layer_nn_batchnorm1d, "nn.BatchNorm1d");
BN_LAYER(ki_layer_nn_batchnorm2d, "nn.BatchNorm2d");
BN_LAYER(ki_layer_nn_batchnorm3d, "nn.BatchNorm3d");
