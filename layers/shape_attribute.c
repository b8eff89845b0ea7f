/* shape_attribute.c - pnnx.Attribute: no inputs, one output that is the operator's single
 * attribute (normally @data, but any key works). Its shape is fixed by the file and does not
 * follow the batch of the model's inputs. */
#include <string.h>

#include "shape_common.h"

typedef struct attr_state {
    const ki_attr *attr; /* owned by the model, which outlives this state */
} attr_state;

static ki_status attr_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ki_status s = ki_shapeop_check_io(op, 0, 1, err);
    if (s != KI_OK) {
        return s;
    }
    if (op->n_attrs != 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d attributes, expected exactly one", op->n_attrs);
    }
    const ki_attr *a = &op->attrs[0];
    int64_t numel;
    if (!ki_shape_numel(&a->shape, &numel) || numel != a->numel) {
        return KI_FAIL(err, KI_ERR_FORMAT, "attribute @%s has %lld values for its shape", a->key,
                       (long long)a->numel);
    }
    if (!a->data && numel > 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "attribute @%s has no data (no .bin loaded)", a->key);
    }
    s = ki_shapeop_alloc(sizeof(attr_state), state, err);
    if (s == KI_OK) {
        ((attr_state *)*state)->attr = a;
    }
    return s;
}

static ki_status attr_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const attr_state *st = state;
    (void)in;
    (void)n_in;
    (void)n_out;
    return ki_shapeop_make(&out[0], st->attr->shape.ndim, st->attr->shape.d, err);
}

static ki_status attr_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const attr_state *st = state;
    (void)in;
    (void)n_in;
    (void)n_out;
    (void)ex;
    if (st->attr->numel > 0) {
        memcpy(out[0].data, st->attr->data, (size_t)st->attr->numel * sizeof(float));
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_pnnx_attribute = {
    .type = "pnnx.Attribute",
    .create = attr_create,
    .shape = attr_shape,
    .forward = attr_forward,
    .destroy = ki_shapeop_free,
};
