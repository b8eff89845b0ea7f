/* softmax.c - nn.Softmax / F.softmax and nn.LogSoftmax / F.log_softmax over any dim.
 *
 * Numerically stable: the maximum along the dim is subtracted before exp. The tensor is seen as
 * (outer, n, inner) around the softmax dim; work is split into tiles of up to TILE adjacent inner
 * positions of one outer index, so every pass reads contiguous memory whatever the dim. The
 * state is the malloc'd softmax_state, read-only after create. */
#include "softmax.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/layer.h"

#define TILE 64

typedef struct softmax_state {
    bool has_dim; /* false: PyTorch's legacy implicit dim (nn.Softmax(dim=None)) */
    int64_t dim;
    bool take_log;         /* log_softmax */
    float sign;            /* -1: softmin, the softmax of -x */
    ki_softmax_row_fn row; /* softmax over the last dim, row by row */
} softmax_state;

static ki_status softmax_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int64_t dim;
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    ki_status st = ki_op_get_int(op, "dim", 0, &dim, err);
    if (st != KI_OK) {
        return st;
    }
    softmax_state *p = malloc(sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->has_dim = ki_op_has(op, "dim");
    p->dim = dim;
    p->take_log = strstr(op->type, "log_softmax") || strstr(op->type, "LogSoftmax");
    p->sign = strstr(op->type, "oftmin") ? -1.0f : 1.0f;
    p->row = ki_softmax_row_for(ki_cpu_isa());
    if (strcmp(op->type, "nn.Softmax2d") ==
        0) { /* over the channels of (N, C, H, W) or (C, H, W) */
        p->has_dim = true, p->dim = -3;
    }
    *state = p;
    return KI_OK;
}

/* The dim to reduce over for a rank-ndim input, or -1 when it is out of range. */
static int softmax_dim(const softmax_state *p, int ndim)
{
    int axis;
    if (!p->has_dim) {
        /* torch.nn.functional._get_softmax_dim */
        return (ndim == 0 || ndim == 1 || ndim == 3) ? 0 : 1;
    }
    if (ndim == 0) {
        /* A 0-d tensor accepts dim 0 and -1 and is treated as one element. */
        return (p->dim == 0 || p->dim == -1) ? 0 : -1;
    }
    return ki_axis_norm(p->dim, ndim, &axis) ? axis : -1;
}

static ki_status softmax_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    const softmax_state *p = state;
    char buf[128];
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 1 input and 1 output");
    }
    if (in[0].kind != KI_KIND_TENSOR) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "input is not a tensor");
    }
    if (softmax_dim(p, in[0].ndim) < 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "dim=%lld is out of range for input %s",
                       (long long)p->dim, ki_shape_str(&in[0], buf, sizeof buf));
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

void ki_softmax_row_ref(float *row, int64_t n)
{
    float mx = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        mx = row[j] > mx ? row[j] : mx;
    }
    if (n > 0 && mx == -INFINITY) { /* every value -inf: NaN, as PyTorch's -inf - -inf */
        mx = NAN;
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        row[j] = expf(row[j] - mx);
        sum += row[j];
    }
    for (int64_t j = 0; j < n; j++) {
        row[j] = (float)(row[j] / sum);
    }
}

ki_softmax_row_fn ki_softmax_row_for(ki_isa isa)
{
    return isa >= KI_ISA_AVX512 ? KI_X86(ki_softmax_row_avx512)
           : isa >= KI_ISA_AVX2 ? KI_X86(ki_softmax_row_avx2)
                                : ki_softmax_row_ref;
}

/* Softmax of w adjacent columns: x[k * inner + t] for k < n, t < w. y may equal x. */
static void softmax_tile(const float *x, float *y, int64_t n, int64_t inner, int w, bool take_log,
                         float sg)
{
    float mx[TILE], sum[TILE];
    for (int t = 0; t < w; t++) {
        mx[t] = sg * x[t];
        sum[t] = 0.0f;
    }
    for (int64_t k = 1; k < n; k++) {
        for (int t = 0; t < w; t++) {
            const float v = sg * x[k * inner + t];
            mx[t] = v > mx[t] ? v : mx[t];
        }
    }
    for (int64_t k = 0; k < n; k++) {
        for (int t = 0; t < w; t++) {
            const float e = expf(sg * x[k * inner + t] - mx[t]);
            sum[t] += e;
            if (!take_log) {
                y[k * inner + t] = e;
            }
        }
    }
    for (int t = 0; t < w; t++) {
        /* softmax scales by 1/sum; log_softmax computes (x - max) - log(sum) as PyTorch does,
         * which stays exact for large x where x - (max + log(sum)) would round. */
        sum[t] = take_log ? logf(sum[t]) : 1.0f / sum[t];
    }
    for (int64_t k = 0; k < n; k++) {
        for (int t = 0; t < w; t++) {
            const int64_t i = k * inner + t;
            y[i] = take_log ? (sg * x[i] - mx[t]) - sum[t] : y[i] * sum[t];
        }
    }
}

static ki_status softmax_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                 int n_out, const ki_exec *ex)
{
    const softmax_state *p = state;
    const ki_shape *s = &in[0].shape;
    const int axis = softmax_dim(p, s->ndim);
    int64_t outer = 1, inner = 1;
    (void)n_in;
    (void)n_out;
    for (int i = 0; i < s->ndim; i++) {
        outer *= i < axis ? s->d[i] : 1;
        inner *= i > axis ? s->d[i] : 1;
    }
    const int64_t n = s->ndim > 0 ? s->d[axis] : 1;
    if (inner == 1 && !p->take_log && p->sign > 0 && n > 0) { /* the last dim: whole rows */
        const float *x = in[0].data;
        float *y = out[0].data;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (outer * n > 16384)
        for (int64_t o = 0; o < outer; o++) {
            if (y != x) {
                memcpy(y + o * n, x + o * n, (size_t)n * sizeof *y);
            }
            p->row(y + o * n, n);
        }
        return KI_OK;
    }
    const int64_t per_outer = (inner + TILE - 1) / TILE;
    const int64_t tiles = n > 0 ? outer * per_outer : 0;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (tiles * n * TILE > 16384)
    for (int64_t tl = 0; tl < tiles; tl++) {
        const int64_t o = tl / per_outer;
        const int64_t t0 = (tl % per_outer) * TILE;
        const int w = (int)(inner - t0 < TILE ? inner - t0 : TILE);
        const int64_t base = o * n * inner + t0;
        softmax_tile(in[0].data + base, out[0].data + base, n, inner, w, p->take_log, p->sign);
    }
    return KI_OK;
}

static void softmax_destroy(void *state)
{
    free(state);
}

#define SOFTMAX_LAYER(sym, name)                                                                   \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = softmax_create,                                           \
                               .shape = softmax_shape,                                             \
                               .workspace = NULL,                                                  \
                               .forward = softmax_forward,                                         \
                               .destroy = softmax_destroy }

SOFTMAX_LAYER(ki_layer_nn_softmax, "nn.Softmax");
SOFTMAX_LAYER(ki_layer_f_softmax, "F.softmax");
SOFTMAX_LAYER(ki_layer_nn_log_softmax, "nn.LogSoftmax");
SOFTMAX_LAYER(ki_layer_f_log_softmax, "F.log_softmax");
SOFTMAX_LAYER(ki_layer_nn_softmin, "nn.Softmin");
SOFTMAX_LAYER(ki_layer_f_softmin, "F.softmin");
SOFTMAX_LAYER(ki_layer_nn_softmax2d, "nn.Softmax2d");
