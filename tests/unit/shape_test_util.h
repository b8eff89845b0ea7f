/* shape_test_util.h - building operators by hand and running them, for the shape-family
 * tests (test_shape.c, test_shape_reduce.c). Include after cmocka.h. */
#ifndef KI_SHAPE_TEST_UTIL_H
#define KI_SHAPE_TEST_UTIL_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../../layers/registry.h"

#define MAXP 8

/* ---- building operators by hand ---- */

typedef struct op_builder {
    ki_op_desc op;
    ki_param params[MAXP];
    int64_t ints[MAXP][12];
    double floats[MAXP][12];
    const char *keys[8];
} op_builder;

static inline void op_init(op_builder *b, const char *type, int n_in, int n_out)
{
    memset(b, 0, sizeof *b);
    b->op.type = type;
    b->op.name = "t";
    b->op.n_inputs = n_in;
    b->op.n_outputs = n_out;
    b->op.input_keys = b->keys;
    b->op.params = b->params;
}

static inline void p_int(op_builder *b, const char *key, int64_t v)
{
    ki_param *p = &b->params[b->op.n_params++];
    p->key = key;
    p->raw = key;
    p->kind = KI_PARAM_INT;
    p->i = v;
}

/* ints list; n = 0 gives None */
static inline void p_ints(op_builder *b, const char *key, int n, const int64_t *v)
{
    int k = b->op.n_params++;
    ki_param *p = &b->params[k];
    p->key = key;
    p->raw = key;
    p->kind = n ? KI_PARAM_INTS : KI_PARAM_NONE;
    p->n = n;
    for (int i = 0; i < n; i++) {
        b->ints[k][i] = v[i];
        b->floats[k][i] = (double)v[i];
    }
    p->ints = b->ints[k];
    p->floats = b->floats[k];
}

static inline void p_float(op_builder *b, const char *key, double v)
{
    ki_param *p = &b->params[b->op.n_params++];
    p->key = key;
    p->raw = key;
    p->kind = KI_PARAM_FLOAT;
    p->f = v;
}

static inline void p_bool(op_builder *b, const char *key, bool v)
{
    ki_param *p = &b->params[b->op.n_params++];
    p->key = key;
    p->raw = v ? "True" : "False";
    p->kind = KI_PARAM_BOOL;
    p->i = v;
}

static inline void p_str(op_builder *b, const char *key, const char *v)
{
    ki_param *p = &b->params[b->op.n_params++];
    p->key = key;
    p->raw = v;
    p->kind = KI_PARAM_STRING;
    p->s = v;
}

static inline void *create_ok(const ki_op_desc *op)
{
    const ki_layer_ops *ops = ki_registry_find(op->type);
    ki_error err;
    void *st = NULL;
    assert_non_null(ops);
    ki_status s = ops->create(op, &st, &err);
    if (s != KI_OK) {
        fail_msg("%s create: %s", op->type, err.msg);
    }
    return st;
}

static inline ki_status create_err(const ki_op_desc *op)
{
    const ki_layer_ops *ops = ki_registry_find(op->type);
    ki_error err;
    void *st = NULL;
    ki_status s = ops->create(op, &st, &err);
    assert_int_not_equal(s, KI_OK);
    assert_true(err.msg[0] != '\0');
    return s;
}

static inline ki_shape shp(int ndim, int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t v[4] = { a, b, c, d };
    return ki_shape_make(ndim, v);
}

static float g_in[4][512];
static float g_out[8][512];
static bool g_keep_input; /* run() uses g_in as the test set it instead of iota */

static inline void iota(float *x, int n, float base)
{
    for (int i = 0; i < n; i++) {
        x[i] = base + (float)i;
    }
}

/* Runs op on the given input shapes (data from g_in, iota-filled with base 100*k) and returns
 * the status of shape(); on success forward() has filled g_out and out[] holds the shapes. */
static inline ki_status run(const ki_op_desc *op, const ki_shape *in, int n_in, ki_shape *out)
{
    const ki_layer_ops *ops = ki_registry_find(op->type);
    ki_tensor ti[4], to[8];
    ki_error err;
    void *st = create_ok(op);
    ki_status s = ops->shape(st, in, n_in, out, op->n_outputs, &err);
    if (s == KI_OK) {
        for (int k = 0; k < n_in; k++) {
            if (!g_keep_input) {
                iota(g_in[k], (int)ki_shape_count(&in[k]), 100.0f * (float)k);
            }
            ti[k].shape = in[k];
            ti[k].data = g_in[k];
        }
        for (int k = 0; k < op->n_outputs; k++) {
            to[k].shape = out[k];
            to[k].data = g_out[k];
            memset(g_out[k], 0xff, sizeof g_out[k]);
        }
        ki_exec ex = { .n_threads = 2 };
        assert_int_equal(ops->forward(st, ti, n_in, to, op->n_outputs, &ex), KI_OK);
    } else {
        assert_true(err.msg[0] != '\0');
    }
    if (ops->destroy) {
        ops->destroy(st);
    }
    return s;
}

static inline void expect_shape(const ki_shape *s, int ndim, const int64_t *d)
{
    assert_int_equal(s->ndim, ndim);
    for (int i = 0; i < ndim; i++) {
        assert_int_equal(s->d[i], d[i]);
    }
}

static inline void expect_vals(const float *got, const float *want, int n)
{
    for (int i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fail_msg("element %d: got %g, want %g", i, got[i], want[i]);
        }
    }
}

#endif
