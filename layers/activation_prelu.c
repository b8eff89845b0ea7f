/* activation_prelu.c - nn.PReLU: y = x > 0 ? x : w[c] * x, with one weight or one per channel
 * (dim 1), as torch.nn.PReLU. The state points at the @weight data, which outlives it. F.prelu
 * takes the weight as its second input ($weight), read each run. */
#include <stdlib.h>

#include "../core/layer.h"

/* Elements per parallel block when one weight covers the whole tensor. */
#define PRELU_CHUNK 8192

typedef struct prelu_state {
    int64_t n_weights; /* 1 or the channel count */
    const float *weight;
} prelu_state;

static ki_status prelu_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int64_t n_w;
    const ki_attr *w;
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    ki_status st = ki_op_get_int(op, "num_parameters", 1, &n_w, err);
    if (st != KI_OK) {
        return st;
    }
    if (n_w < 1 || n_w > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_FORMAT, "num_parameters=%lld is not positive", (long long)n_w);
    }
    st = ki_op_require_attr(op, "weight", 1, &n_w, &w, err);
    if (st != KI_OK) {
        return st;
    }
    prelu_state *p = malloc(sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->n_weights = n_w;
    p->weight = w->data;
    *state = p;
    return KI_OK;
}

/* out = x's shape; with more than one weight, dim 1 is the channel dim and must match (PyTorch). */
static ki_status check_input(int64_t n_weights, const ki_shape *x, ki_shape *out, ki_error *err)
{
    if (x->kind != KI_KIND_TENSOR) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "input is not a tensor");
    }
    if (n_weights > 1 && (x->ndim < 2 || x->d[1] != n_weights)) {
        char buf[128];
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s has no dim 1 of size %lld (num_parameters)",
                       ki_shape_str(x, buf, sizeof buf), (long long)n_weights);
    }
    *out = ki_shape_make(x->ndim, x->d);
    return KI_OK;
}

static ki_status prelu_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const prelu_state *p = state;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 1 input and 1 output");
    }
    return check_input(p->n_weights, &in[0], &out[0], err);
}

static void prelu_run(const prelu_state *p, const ki_tensor *x, float *dst, int nt)
{
    const float *src = x->data;
    const int64_t n = ki_shape_count(&x->shape);
    int64_t block = PRELU_CHUNK;
    if (p->n_weights > 1) {
        /* One block per (batch, channel) plane, so each block has a single weight. */
        block = 1;
        for (int i = 2; i < x->shape.ndim; i++) {
            block *= x->shape.d[i];
        }
    }
    const int64_t n_blocks = block > 0 ? (n + block - 1) / block : 0;
#pragma omp parallel for num_threads(nt) schedule(static) if (n_blocks > 1)
    for (int64_t b = 0; b < n_blocks; b++) {
        const float w = p->weight[p->n_weights > 1 ? b % p->n_weights : 0];
        const int64_t lo = b * block;
        const int64_t hi = n - lo < block ? n : lo + block;
        for (int64_t i = lo; i < hi; i++) {
            dst[i] = src[i] > 0.0f ? src[i] : w * src[i];
        }
    }
}

static ki_status prelu_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    (void)n_in;
    (void)n_out;
    prelu_run(state, &in[0], out[0].data, ex->n_threads);
    return KI_OK;
}

static void prelu_destroy(void *state)
{
    free(state);
}

const ki_layer_ops ki_layer_nn_prelu = { .type = "nn.PReLU",
                                         .flags = KI_LAYER_INPLACE,
                                         .create = prelu_create,
                                         .shape = prelu_shape,
                                         .workspace = NULL,
                                         .forward = prelu_forward,
                                         .destroy = prelu_destroy };

/* ---- F.prelu(input, weight): no state; the weight (one value, or one per channel) is input 1 */

static ki_status fprelu_create(const ki_op_desc *op, void **state, ki_error *err)
{
    if (op->n_inputs != 2 || op->n_outputs != 1 || ki_op_input_slot(op, "input", 0) != 0 ||
        ki_op_input_slot(op, "weight", 1) != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects $input, $weight and 1 output");
    }
    *state = NULL;
    return KI_OK;
}

static ki_status fprelu_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    char buf[96];
    int64_t n_w;
    (void)state;
    if (n_in != 2 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 2 inputs and 1 output");
    }
    if (in[1].kind != KI_KIND_TENSOR || in[1].ndim > 1 || !ki_shape_numel(&in[1], &n_w) ||
        n_w < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not one value or one per channel",
                       ki_shape_str(&in[1], buf, sizeof buf));
    }
    return check_input(n_w, &in[0], &out[0], err);
}

static ki_status fprelu_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const prelu_state p = { ki_shape_count(&in[1].shape), in[1].data };
    (void)state, (void)n_in, (void)n_out;
    prelu_run(&p, &in[0], out[0].data, ex->n_threads);
    return KI_OK;
}

const ki_layer_ops ki_layer_f_prelu = { .type = "F.prelu",
                                        .flags = KI_LAYER_INPLACE,
                                        .create = fprelu_create,
                                        .shape = fprelu_shape,
                                        .forward = fprelu_forward };
