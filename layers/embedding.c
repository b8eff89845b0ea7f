/* embedding.c - nn.Embedding at inference: each id of the input (any shape; token
 * ids arrive as float32 holding whole numbers, e.g. from an int64 .npy) picks a row of the
 * weight (num_embeddings, embedding_dim); the output is the input's shape plus embedding_dim.
 * An id outside [0, num_embeddings) fails the run (KI_ERR_LIMIT), as PyTorch raises. State: the
 * weight (the model's) and its sizes, immutable; thread-safe. F.embedding takes the weight as its
 * second input ($weight), read each run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_common.h"

typedef struct embedding {
    int64_t num, dim;
    const float *weight;
} embedding;

static ki_status emb_create(const ki_op_desc *op, void **state, ki_error *err)
{
    static const int64_t any2[2] = { -1, -1 };
    embedding *e = calloc(1, sizeof *e);
    const ki_attr *w;
    if (!e) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_cv_check_io(op, 1, 1, err);
    st = st != KI_OK ? st : ki_op_require_attr(op, "weight", 2, any2, &w, err);
    if (st == KI_OK) {
        e->num = w->shape.d[0], e->dim = w->shape.d[1], e->weight = w->data;
    }
    if (st != KI_OK) {
        free(e);
        return st;
    }
    *state = e;
    return KI_OK;
}

/* The output: the ids' shape plus dim. */
static ki_status ids_shape(const ki_shape *ids, int64_t dim, ki_shape *out, ki_error *err)
{
    int64_t d[KI_MAX_DIMS];
    if (ids->kind != KI_KIND_TENSOR || ids->ndim >= KI_MAX_DIMS) {
        return KI_FAIL(err, KI_ERR_SHAPE, "ids must be a tensor of at most %d dims",
                       KI_MAX_DIMS - 1);
    }
    memcpy(d, ids->d, (size_t)ids->ndim * sizeof *d);
    d[ids->ndim] = dim;
    *out = ki_shape_make(ids->ndim + 1, d);
    return ki_shape_check(out, err);
}

static ki_status emb_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const embedding *e = state;
    (void)n_in, (void)n_out;
    return ids_shape(&in[0], e->dim, &out[0], err);
}

static ki_status lookup(const embedding *e, const ki_tensor *ids, float *out)
{
    const int64_t n = ki_shape_count(&ids->shape);
    for (int64_t i = 0; i < n; i++) {
        const float id = ids->data[i];
        if (!(id >= 0.0f && id < (float)e->num) || id != floorf(id)) {
            return KI_ERR_LIMIT; /* an id PyTorch would reject */
        }
        memcpy(out + i * e->dim, e->weight + (int64_t)id * e->dim, (size_t)e->dim * sizeof(float));
    }
    return KI_OK;
}

static ki_status emb_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    (void)n_in, (void)n_out, (void)ex;
    return lookup(state, &in[0], out[0].data);
}

const ki_layer_ops ki_layer_embedding = {
    .type = "nn.Embedding",
    .create = emb_create,
    .shape = emb_shape,
    .forward = emb_forward,
    .destroy = free,
};

/* ---- F.embedding(input, weight): no state; max_norm (which rewrites rows) is not supported,
 * padding_idx and the gradient options do not change the lookup ---- */

static ki_status femb_create(const ki_op_desc *op, void **state, ki_error *err)
{
    if (op->n_inputs != 2 || op->n_outputs != 1 || ki_op_input_slot(op, "input", 0) != 0 ||
        ki_op_input_slot(op, "weight", 1) != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects $input, $weight and 1 output");
    }
    if (ki_op_has(op, "max_norm")) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "max_norm (renormalised rows)");
    }
    *state = NULL;
    return KI_OK;
}

static ki_status femb_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    char buf[96];
    (void)state;
    if (n_in != 2 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 2 inputs and 1 output");
    }
    if (in[1].kind != KI_KIND_TENSOR || in[1].ndim != 2) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not 2-D",
                       ki_shape_str(&in[1], buf, sizeof buf));
    }
    return ids_shape(&in[0], in[1].d[1], &out[0], err);
}

static ki_status femb_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const embedding e = { in[1].shape.d[0], in[1].shape.d[1], in[1].data };
    (void)state, (void)n_in, (void)n_out, (void)ex;
    return lookup(&e, &in[0], out[0].data);
}

const ki_layer_ops ki_layer_f_embedding = {
    .type = "F.embedding",
    .create = femb_create,
    .shape = femb_shape,
    .forward = femb_forward,
};
