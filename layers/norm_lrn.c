/* norm_lrn.c - nn.LocalResponseNorm: across channels (dim 1) of an input (N, C, *),
 * y = x / (k + alpha * avg(x^2))^beta, where avg is the mean over the window of `size` channels
 * c - size/2 .. c + (size-1)/2, zero-padded and always divided by size (PyTorch pads and runs
 * avg_pool with count_include_pad). State: the four parameters; immutable, thread-safe.
 * (pnnx writes F.local_response_norm out as pow, pad, avg_pool3d and an expression.) */
#include <math.h>
#include <stdlib.h>

#include "../core/layer.h"

typedef struct lrn_state {
    int64_t size;
    float alpha, beta, k;
} lrn_state;

static ki_status lrn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    double alpha, beta, k;
    int64_t size;
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    ki_status st = ki_op_get_int(op, "size", -1, &size, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "alpha", 1e-4, &alpha, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "beta", 0.75, &beta, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "k", 1.0, &k, err);
    if (st == KI_OK &&
        (size < 1 || size > KI_MAX_DIM || !isfinite(alpha) || !isfinite(beta) || !isfinite(k))) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "size must be positive and alpha, beta, k finite");
    }
    lrn_state *p = st == KI_OK ? malloc(sizeof *p) : NULL;
    if (st == KI_OK && !p) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    if (st != KI_OK) {
        return st;
    }
    p->size = size, p->alpha = (float)alpha, p->beta = (float)beta, p->k = (float)k;
    *state = p;
    return KI_OK;
}

static ki_status lrn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    char buf[96];
    (void)state;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 1 input and 1 output");
    }
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim < 3) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s has fewer than 3 dims",
                       ki_shape_str(&in[0], buf, sizeof buf));
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

static ki_status lrn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const lrn_state *p = state;
    const ki_shape *s = &in[0].shape;
    const float *src = in[0].data;
    float *dst = out[0].data;
    int64_t inner = 1;
    (void)n_in, (void)n_out;
    for (int i = 2; i < s->ndim; i++) {
        inner *= s->d[i];
    }
    const int64_t ch = s->d[1], planes = s->d[0] * ch;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (planes * inner > 8192)
    for (int64_t pl = 0; pl < planes; pl++) {
        const int64_t c = pl % ch, lo = c - p->size / 2, hi = c + (p->size - 1) / 2;
        const float *img = src + (pl - c) * inner;
        for (int64_t i = 0; i < inner; i++) {
            float sum = 0.0f;
            for (int64_t j = lo > 0 ? lo : 0; j <= hi && j < ch; j++) {
                const float v = img[j * inner + i];
                sum += v * v;
            }
            const float div = powf(sum / (float)p->size * p->alpha + p->k, p->beta);
            dst[pl * inner + i] = src[pl * inner + i] / div;
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_local_response_norm = { .type = "nn.LocalResponseNorm",
                                                    .create = lrn_create,
                                                    .shape = lrn_shape,
                                                    .forward = lrn_forward,
                                                    .destroy = free };
