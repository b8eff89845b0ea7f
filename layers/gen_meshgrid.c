/* gen_meshgrid.c - torch.meshgrid / aten::meshgrid: n tensors of rank 0 or 1 (lengths
 * l0..l(n-1)) give n outputs of shape (l0, l1, ..., l(n-1)); output k repeats input k along
 * axis k. With indexing=xy the first two axes are swapped (shape (l1, l0, l2, ...)), so input 0
 * runs along axis 1 and input 1 along axis 0, as in NumPy. PyTorch's default is ij.
 * The loader hands the tensors over directly (TorchScript's list plumbing is folded away).
 * State is immutable after create; thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "../core/layer.h"

typedef struct meshgrid_state {
    bool xy;
} meshgrid_state;

static ki_status meshgrid_create(const ki_op_desc *op, void **state, ki_error *err)
{
    if (op->n_inputs < 1 || op->n_inputs > KI_MAX_DIMS || op->n_outputs != op->n_inputs) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "expected 1..%d inputs and as many outputs, got %d and %d", KI_MAX_DIMS,
                       op->n_inputs, op->n_outputs);
    }
    const char *ix = NULL;
    ki_status st = ki_op_get_string(op, "indexing", "ij", &ix, err);
    if (st != KI_OK) {
        return st;
    }
    if (strcmp(ix, "ij") != 0 && strcmp(ix, "xy") != 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "indexing='%s', expected 'ij' or 'xy'", ix);
    }
    meshgrid_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->xy = strcmp(ix, "xy") == 0;
    *state = s;
    return KI_OK;
}

/* The output axis along which input k varies. */
static int axis_of(const meshgrid_state *s, int k, int n)
{
    if (s->xy && n >= 2 && k < 2) {
        return 1 - k;
    }
    return k;
}

static ki_status meshgrid_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                                int n_out, ki_error *err)
{
    const meshgrid_state *s = state;
    int64_t d[KI_MAX_DIMS];
    if (n_out != n_in) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%d inputs but %d outputs", n_in, n_out);
    }
    for (int k = 0; k < n_in; k++) {
        if (in[k].kind != KI_KIND_TENSOR || in[k].ndim > 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %d must be a 0-D or 1-D tensor, got rank %d",
                           k, in[k].ndim);
        }
        d[axis_of(s, k, n_in)] = in[k].ndim == 0 ? 1 : in[k].d[0];
    }
    ki_shape o = ki_shape_make(n_in, d);
    ki_status st = ki_shape_check(&o, err);
    for (int k = 0; k < n_out && st == KI_OK; k++) {
        out[k] = o;
    }
    return st;
}

static ki_status meshgrid_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                  int n_out, const ki_exec *ex)
{
    const meshgrid_state *s = state;
    (void)n_out, (void)ex;
    const ki_shape *sh = &out[0].shape;
    int64_t numel = ki_shape_count(sh);
    for (int k = 0; k < n_in; k++) {
        int ax = axis_of(s, k, n_in);
        int64_t inner = 1;
        for (int i = ax + 1; i < sh->ndim; i++) {
            inner *= sh->d[i];
        }
        int64_t len = sh->d[ax];
        const float *x = in[k].data;
        float *y = out[k].data;
        /* element j of the output sits at index (j / inner) % len along axis ax */
        for (int64_t j = 0; j < numel; j++) {
            y[j] = x[(j / inner) % len];
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_aten_meshgrid = {
    .type = "aten::meshgrid",
    .create = meshgrid_create,
    .shape = meshgrid_shape,
    .forward = meshgrid_forward,
    .destroy = free,
};

const ki_layer_ops ki_layer_torch_meshgrid = {
    .type = "torch.meshgrid",
    .create = meshgrid_create,
    .shape = meshgrid_shape,
    .forward = meshgrid_forward,
    .destroy = free,
};
