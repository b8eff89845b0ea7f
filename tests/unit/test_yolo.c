/* test_yolo.c - torch.arange and aten::meshgrid / torch.meshgrid (the layers the dynamic YOLOv5
 * export rebuilds its grids with) on hand-made inputs. */
/* cmocka needs these first, in this order */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../layers/registry.h"

typedef struct fixture {
    ki_op_desc op;
    ki_param params[4];
    const char *in_keys[8];
} fixture;

static void fx_init(fixture *f, const char *type, int n_in, int n_out)
{
    memset(f, 0, sizeof *f);
    f->op.type = type;
    f->op.n_inputs = n_in;
    f->op.n_outputs = n_out;
    f->op.input_keys = f->in_keys;
    f->op.params = f->params;
}

static void fx_param(fixture *f, const char *key, ki_param_kind kind, double v, const char *s)
{
    ki_param *p = &f->params[f->op.n_params++];
    p->key = key;
    p->raw = s ? s : "0";
    p->kind = kind;
    p->i = (int64_t)v;
    p->f = v;
    p->s = s;
}

static ki_shape scalar(double v)
{
    ki_shape s;
    memset(&s, 0, sizeof s);
    s.kind = KI_KIND_SCALAR;
    s.has_values = true;
    s.values[0] = v;
    return s;
}

/* ---- torch.arange ---- */

/* Runs arange; returns the status of create or shape and fills y (room for 16) on success. */
static ki_status arange(fixture *f, const ki_shape *in, int n_in, float *y, int64_t *len,
                        ki_error *err)
{
    const ki_layer_ops *ops = ki_registry_find("torch.arange");
    assert_non_null(ops);
    void *st = NULL;
    ki_status rc = ops->create(&f->op, &st, err);
    ki_shape out[2];
    if (rc == KI_OK) {
        rc = ops->shape(st, in, n_in, out, 1, err);
    }
    if (rc == KI_OK) {
        assert_int_equal(out[0].ndim, 1);
        assert_true(out[0].d[0] <= 16);
        *len = out[0].d[0];
        ki_tensor ti[3], to = { out[0], y };
        float vals[3];
        for (int i = 0; i < n_in; i++) {
            vals[i] = (float)in[i].values[0];
            ti[i].shape = in[i];
            ti[i].data = &vals[i];
        }
        ki_exec ex = { 1, NULL, 0, NULL };
        assert_int_equal(ops->forward(st, ti, n_in, &to, 1, &ex), KI_OK);
    }
    if (ops->destroy) {
        ops->destroy(st);
    }
    return rc;
}

static void test_arange(void **state)
{
    (void)state;
    fixture f;
    float y[16];
    int64_t n;
    ki_error err;
    fx_init(&f, "torch.arange", 0, 1);
    fx_param(&f, "end", KI_PARAM_INT, 5, NULL);
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_OK);
    assert_int_equal(n, 5);
    assert_float_equal(y[4], 4.0f, 0);
    fx_init(&f, "torch.arange", 0, 1);
    fx_param(&f, "start", KI_PARAM_INT, 1, NULL);
    fx_param(&f, "end", KI_PARAM_INT, 2, NULL);
    fx_param(&f, "step", KI_PARAM_FLOAT, 0.3, NULL);
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_OK);
    assert_int_equal(n, 4);
    assert_float_equal(y[3], 1.9f, 1e-6);
    fx_init(&f, "torch.arange", 0, 1); /* counting down */
    fx_param(&f, "start", KI_PARAM_INT, 5, NULL);
    fx_param(&f, "end", KI_PARAM_INT, 0, NULL);
    fx_param(&f, "step", KI_PARAM_INT, -2, NULL);
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_OK);
    assert_int_equal(n, 3);
    assert_float_equal(y[2], 1.0f, 0);
    fx_init(&f, "torch.arange", 0, 1); /* int64: start truncated, length from doubles */
    fx_param(&f, "start", KI_PARAM_FLOAT, 0.5, NULL);
    fx_param(&f, "end", KI_PARAM_FLOAT, 5.5, NULL);
    fx_param(&f, "dtype", KI_PARAM_STRING, 0, "torch.int64");
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_OK);
    assert_int_equal(n, 5);
    assert_float_equal(y[0], 0.0f, 0);
    assert_float_equal(y[4], 4.0f, 0);
}

static void test_arange_inputs(void **state)
{
    (void)state;
    fixture f;
    float y[16];
    int64_t n;
    ki_error err;
    fx_init(&f, "torch.arange", 1, 1); /* the dynamic export: $end from size(@0,2) */
    f.in_keys[0] = "end";
    fx_param(&f, "dtype", KI_PARAM_STRING, 0, "torch.float");
    ki_shape e = scalar(7);
    assert_int_equal(arange(&f, &e, 1, y, &n, &err), KI_OK);
    assert_int_equal(n, 7);
    assert_float_equal(y[6], 6.0f, 0);
    fx_init(&f, "torch.arange", 2, 1); /* positional: (start, end) */
    ki_shape se[2] = { scalar(3), scalar(6) };
    assert_int_equal(arange(&f, se, 2, y, &n, &err), KI_OK);
    assert_int_equal(n, 3);
    assert_float_equal(y[0], 3.0f, 0);
    e.has_values = false; /* a value unknown at shape time */
    fx_init(&f, "torch.arange", 1, 1);
    f.in_keys[0] = "end";
    assert_int_equal(arange(&f, &e, 1, y, &n, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "end"));
    fx_init(&f, "torch.arange", 0, 1);
    fx_param(&f, "end", KI_PARAM_INT, 5, NULL);
    fx_param(&f, "step", KI_PARAM_INT, 0, NULL);
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_ERR_SHAPE);
    fx_init(&f, "torch.arange", 0, 1);
    fx_param(&f, "end", KI_PARAM_INT, -5, NULL);
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_ERR_SHAPE);
    fx_init(&f, "torch.arange", 0, 1); /* no end at all */
    assert_int_equal(arange(&f, NULL, 0, y, &n, &err), KI_ERR_FORMAT);
}

/* ---- meshgrid ---- */

static void meshgrid(const char *type, const char *indexing, int n, const ki_shape *in,
                     const float *const *x, ki_shape *os, float y[][32])
{
    fixture f;
    fx_init(&f, type, n, n);
    if (indexing) {
        fx_param(&f, "indexing", KI_PARAM_STRING, 0, indexing);
    }
    const ki_layer_ops *ops = ki_registry_find(type);
    assert_non_null(ops);
    void *st = NULL;
    ki_error err;
    assert_int_equal(ops->create(&f.op, &st, &err), KI_OK);
    ki_shape out[4];
    assert_int_equal(ops->shape(st, in, n, out, n, &err), KI_OK);
    ki_tensor ti[4], to[4];
    for (int i = 0; i < n; i++) {
        assert_true(ki_shape_count(&out[i]) <= 32);
        ti[i].shape = in[i];
        ti[i].data = (float *)x[i];
        to[i].shape = out[i];
        to[i].data = y[i];
    }
    ki_exec ex = { 1, NULL, 0, NULL };
    assert_int_equal(ops->forward(st, ti, n, to, n, &ex), KI_OK);
    *os = out[0];
    ops->destroy(st);
}

static void test_meshgrid(void **state)
{
    (void)state;
    static const float a[3] = { 1, 2, 3 }, b[2] = { 10, 20 }, c[1] = { 7 };
    const float *x[3] = { a, b, c };
    int64_t la = 3, lb = 2;
    ki_shape in[3] = { ki_shape_make(1, &la), ki_shape_make(1, &lb), ki_shape_make(0, NULL) };
    ki_shape os;
    float y[3][32];
    meshgrid("aten::meshgrid", "ij", 2, in, x, &os, y);
    assert_int_equal(os.ndim, 2);
    assert_int_equal(os.d[0], 3);
    assert_int_equal(os.d[1], 2);
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 2; j++) {
            assert_float_equal(y[0][i * 2 + j], a[i], 0);
            assert_float_equal(y[1][i * 2 + j], b[j], 0);
        }
    }
    meshgrid("torch.meshgrid", "xy", 2, in, x, &os, y);
    assert_int_equal(os.d[0], 2);
    assert_int_equal(os.d[1], 3);
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 3; j++) {
            assert_float_equal(y[0][i * 3 + j], a[j], 0);
            assert_float_equal(y[1][i * 3 + j], b[i], 0);
        }
    }
    meshgrid("torch.meshgrid", NULL, 3, in, x, &os, y); /* default ij, a 0-d input */
    assert_int_equal(os.ndim, 3);
    assert_int_equal(os.d[2], 1);
    assert_float_equal(y[1][5], 20.0f, 0);
    assert_float_equal(y[2][5], 7.0f, 0);
}

static void test_meshgrid_errors(void **state)
{
    (void)state;
    fixture f;
    void *st = NULL;
    ki_error err;
    const ki_layer_ops *ops = ki_registry_find("aten::meshgrid");
    fx_init(&f, "aten::meshgrid", 2, 1);
    assert_int_equal(ops->create(&f.op, &st, &err), KI_ERR_FORMAT);
    fx_init(&f, "aten::meshgrid", 2, 2);
    fx_param(&f, "indexing", KI_PARAM_STRING, 0, "ji");
    assert_int_equal(ops->create(&f.op, &st, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "ji"));
    fx_init(&f, "aten::meshgrid", 2, 2);
    assert_int_equal(ops->create(&f.op, &st, &err), KI_OK);
    int64_t d[2] = { 2, 2 };
    ki_shape in[2] = { ki_shape_make(2, d), ki_shape_make(1, d) }, out[2];
    assert_int_equal(ops->shape(st, in, 2, out, 2, &err), KI_ERR_SHAPE);
    ops->destroy(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arange),
        cmocka_unit_test(test_arange_inputs),
        cmocka_unit_test(test_meshgrid),
        cmocka_unit_test(test_meshgrid_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
