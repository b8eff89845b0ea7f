/* embedding.c - nn.Embedding at inference: each id of the input (any shape; token
 * ids arrive as float32 holding whole numbers, e.g. from an int64 .npy) picks a row of the
 * weight (num_embeddings, embedding_dim); the output is the input's shape plus embedding_dim.
 * An id outside [0, num_embeddings) fails the run (KI_ERR_LIMIT), as PyTorch raises. State: the
 * weight (the model's) and its sizes, immutable; thread-safe. */
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

static ki_status emb_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const embedding *e = state;
    int64_t d[KI_MAX_DIMS];
    (void)n_in, (void)n_out;
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim >= KI_MAX_DIMS) {
        return KI_FAIL(err, KI_ERR_SHAPE, "ids must be a tensor of at most %d dims",
                       KI_MAX_DIMS - 1);
    }
    memcpy(d, in[0].d, (size_t)in[0].ndim * sizeof *d);
    d[in[0].ndim] = e->dim;
    out[0] = ki_shape_make(in[0].ndim + 1, d);
    return ki_shape_check(&out[0], err);
}

static ki_status emb_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const embedding *e = state;
    const int64_t n = ki_shape_count(&in[0].shape);
    (void)n_in, (void)n_out, (void)ex;
    for (int64_t i = 0; i < n; i++) {
        const float id = in[0].data[i];
        if (!(id >= 0.0f && id < (float)e->num) || id != floorf(id)) {
            return KI_ERR_LIMIT; /* an id PyTorch would reject */
        }
        memcpy(out[0].data + i * e->dim, e->weight + (int64_t)id * e->dim,
               (size_t)e->dim * sizeof(float));
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_embedding = {
    .type = "nn.Embedding",
    .create = emb_create,
    .shape = emb_shape,
    .forward = emb_forward,
    .destroy = free,
};
