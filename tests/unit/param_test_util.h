/* param_test_util.h - parameters, attributes and operator descriptors built by hand for the
 * layer-family unit tests (activations, normalisation, upsampling). Static inline only. */
#ifndef PARAM_TEST_UTIL_H
#define PARAM_TEST_UTIL_H

#include <stdbool.h>
#include <string.h>

#include "../../core/layer.h"

static inline ki_param p_make(const char *key, const char *raw, ki_param_kind kind)
{
    ki_param p;
    memset(&p, 0, sizeof p);
    p.key = key;
    p.raw = raw;
    p.kind = kind;
    return p;
}

static inline ki_param p_int(const char *key, int64_t v)
{
    ki_param p = p_make(key, "n", KI_PARAM_INT);
    p.i = v;
    return p;
}

static inline ki_param p_bool(const char *key, bool v)
{
    ki_param p = p_make(key, v ? "True" : "False", KI_PARAM_BOOL);
    p.i = v;
    return p;
}

static inline ki_param p_float(const char *key, double v)
{
    ki_param p = p_make(key, "f", KI_PARAM_FLOAT);
    p.f = v;
    return p;
}

static inline ki_param p_str(const char *key, const char *v)
{
    ki_param p = p_make(key, v, KI_PARAM_STRING);
    p.s = v;
    return p;
}

/* A list: ints when v is given (f, if given too, holds the same values as floats), else floats. */
static inline ki_param p_list(const char *key, int n, const int64_t *v, const double *f)
{
    ki_param p = p_make(key, "(..)", v ? KI_PARAM_INTS : KI_PARAM_FLOATS);
    p.n = n;
    p.ints = v;
    p.floats = f;
    return p;
}

/* A 1-D float32 attribute of n values. */
static inline ki_attr attr1(const char *key, int64_t n, const float *data)
{
    ki_attr a;
    memset(&a, 0, sizeof a);
    a.key = key;
    a.shape = ki_shape_make(1, &n);
    a.dtype = KI_DT_F32;
    a.data = data;
    a.numel = n;
    return a;
}

/* An operator named "t" with one output; keys holds the n_inputs input keys. */
static inline ki_op_desc op_desc(const char *type, int n_inputs, const char *const *keys,
                                 const ki_param *params, int n_params, const ki_attr *attrs,
                                 int n_attrs)
{
    ki_op_desc op;
    memset(&op, 0, sizeof op);
    op.type = type;
    op.name = "t";
    op.n_inputs = n_inputs;
    op.n_outputs = 1;
    op.input_keys = keys;
    op.params = params;
    op.n_params = n_params;
    op.attrs = attrs;
    op.n_attrs = n_attrs;
    return op;
}

#endif
