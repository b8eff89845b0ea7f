/* opdesc.c - typed access to an operator's parameters and attributes. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bigbuf.h"
#include "layer.h"

const ki_param *ki_op_param(const ki_op_desc *op, const char *key)
{
    for (int i = 0; i < op->n_params; i++) {
        if (strcmp(op->params[i].key, key) == 0) {
            return &op->params[i];
        }
    }
    return NULL;
}

bool ki_op_has(const ki_op_desc *op, const char *key)
{
    const ki_param *p = ki_op_param(op, key);
    return p && p->kind != KI_PARAM_NONE;
}

static ki_status bad_kind(const ki_param *p, const char *want, ki_error *err)
{
    return KI_FAIL(err, KI_ERR_FORMAT, "parameter %s=%s is not %s", p->key, p->raw, want);
}

ki_status ki_op_get_int(const ki_op_desc *op, const char *key, int64_t def, int64_t *out,
                        ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    if (!p || p->kind == KI_PARAM_NONE) {
        *out = def;
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INT || p->kind == KI_PARAM_BOOL) {
        *out = p->i;
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INTS && p->n == 1) {
        *out = p->ints[0];
        return KI_OK;
    }
    return bad_kind(p, "an integer", err);
}

ki_status ki_op_get_bool(const ki_op_desc *op, const char *key, bool def, bool *out, ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    if (!p || p->kind == KI_PARAM_NONE) {
        *out = def;
        return KI_OK;
    }
    if (p->kind == KI_PARAM_BOOL || p->kind == KI_PARAM_INT) {
        *out = p->i != 0;
        return KI_OK;
    }
    return bad_kind(p, "a bool", err);
}

static bool nonfinite_word(const char *s, double *out)
{
    const char *t = s[0] == '-' ? s + 1 : s;
    double sign = s[0] == '-' ? -1.0 : 1.0;
    if (strcmp(t, "inf") == 0) {
        *out = sign * INFINITY;
        return true;
    }
    if (strcmp(t, "nan") == 0 || strcmp(t, "nan.0") == 0) {
        *out = NAN;
        return true;
    }
    return false;
}

ki_status ki_op_get_float(const ki_op_desc *op, const char *key, double def, double *out,
                          ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    if (!p || p->kind == KI_PARAM_NONE) {
        *out = def;
        return KI_OK;
    }
    if (p->kind == KI_PARAM_FLOAT) {
        *out = p->f;
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INT) {
        *out = (double)p->i;
        return KI_OK;
    }
    if (p->kind == KI_PARAM_STRING && nonfinite_word(p->s, out)) {
        return KI_OK;
    }
    if ((p->kind == KI_PARAM_FLOATS || p->kind == KI_PARAM_INTS) && p->n == 1) {
        *out = p->floats[0];
        return KI_OK;
    }
    return bad_kind(p, "a number", err);
}

ki_status ki_op_get_string(const ki_op_desc *op, const char *key, const char *def, const char **out,
                           ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    if (!p || p->kind == KI_PARAM_NONE) {
        *out = def;
        return KI_OK;
    }
    (void)err;
    /* Any spelling is a string: `padding=same` is a string, but a mode named `1` reads as int. */
    *out = p->raw;
    return KI_OK;
}

ki_status ki_op_get_ints(const ki_op_desc *op, const char *key, int n, const int64_t *def,
                         int64_t *out, ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    if (!p || p->kind == KI_PARAM_NONE) {
        if (!def) {
            return KI_FAIL(err, KI_ERR_FORMAT, "missing parameter %s", key);
        }
        memcpy(out, def, (size_t)n * sizeof *out);
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INT) {
        for (int i = 0; i < n; i++) {
            out[i] = p->i;
        }
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INTS && p->n == n) {
        memcpy(out, p->ints, (size_t)n * sizeof *out);
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INTS && p->n == 1) {
        for (int i = 0; i < n; i++) {
            out[i] = p->ints[0];
        }
        return KI_OK;
    }
    return KI_FAIL(err, KI_ERR_FORMAT, "parameter %s=%s is not %d integers", key, p->raw, n);
}

ki_status ki_op_get_int_list(const ki_op_desc *op, const char *key, int max, int64_t *out,
                             int *n_out, ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    *n_out = -1;
    if (!p || p->kind == KI_PARAM_NONE) {
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INT && max >= 1) {
        out[0] = p->i;
        *n_out = 1;
        return KI_OK;
    }
    if (p->kind != KI_PARAM_INTS) {
        return bad_kind(p, "an integer list", err);
    }
    if (p->n > max) {
        return KI_FAIL(err, KI_ERR_LIMIT, "parameter %s has %d entries, at most %d allowed", key,
                       p->n, max);
    }
    memcpy(out, p->ints, (size_t)p->n * sizeof *out);
    *n_out = p->n;
    return KI_OK;
}

ki_status ki_op_get_float_list(const ki_op_desc *op, const char *key, int max, double *out,
                               int *n_out, ki_error *err)
{
    const ki_param *p = ki_op_param(op, key);
    *n_out = -1;
    if (!p || p->kind == KI_PARAM_NONE) {
        return KI_OK;
    }
    if ((p->kind == KI_PARAM_INT || p->kind == KI_PARAM_FLOAT) && max >= 1) {
        out[0] = p->kind == KI_PARAM_INT ? (double)p->i : p->f;
        *n_out = 1;
        return KI_OK;
    }
    if (p->kind != KI_PARAM_INTS && p->kind != KI_PARAM_FLOATS) {
        return bad_kind(p, "a number list", err);
    }
    if (p->n > max) {
        return KI_FAIL(err, KI_ERR_LIMIT, "parameter %s has %d entries, at most %d allowed", key,
                       p->n, max);
    }
    memcpy(out, p->floats, (size_t)p->n * sizeof *out);
    *n_out = p->n;
    return KI_OK;
}

bool ki_op_release_attr(const ki_op_desc *op, const ki_attr *a)
{
    if (!op->attrs_releasable || !a || !a->data || a->numel <= 0 ||
        (size_t)a->numel > SIZE_MAX / sizeof(float)) {
        return false;
    }
    ki_bigbuf_discard((void *)a->data, (size_t)a->numel * sizeof(float));
    return true;
}

const ki_attr *ki_op_attr(const ki_op_desc *op, const char *key)
{
    for (int i = 0; i < op->n_attrs; i++) {
        if (strcmp(op->attrs[i].key, key) == 0) {
            return &op->attrs[i];
        }
    }
    return NULL;
}

ki_status ki_op_require_attr(const ki_op_desc *op, const char *key, int ndim, const int64_t *dims,
                             const ki_attr **out, ki_error *err)
{
    char have[128], want[128];
    const ki_attr *a = ki_op_attr(op, key);
    if (!a) {
        return KI_FAIL(err, KI_ERR_FORMAT, "missing attribute @%s", key);
    }
    bool ok = a->shape.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) {
        ok = dims[i] < 0 || dims[i] == a->shape.d[i];
    }
    if (!ok) {
        ki_shape w = ki_shape_make(ndim, dims);
        return KI_FAIL(err, KI_ERR_SHAPE, "attribute @%s has shape %s, expected %s", key,
                       ki_shape_str(&a->shape, have, sizeof have),
                       ki_shape_str(&w, want, sizeof want));
    }
    if (!a->data) {
        return KI_FAIL(err, KI_ERR_FORMAT, "attribute @%s has no data (no .bin loaded)", key);
    }
    *out = a;
    return KI_OK;
}

int ki_op_input_index(const ki_op_desc *op, const char *key)
{
    for (int i = 0; i < op->n_inputs; i++) {
        if (op->input_keys[i] && strcmp(op->input_keys[i], key) == 0) {
            return i;
        }
    }
    return -1;
}

int ki_op_input_slot(const ki_op_desc *op, const char *key, int pos)
{
    int i = ki_op_input_index(op, key);
    if (i >= 0) {
        return i;
    }
    return pos >= 0 && pos < op->n_inputs && !op->input_keys[pos] ? pos : -1;
}
