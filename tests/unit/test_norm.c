/* test_norm.c - BatchNorm, LayerNorm and GroupNorm against formulas evaluated in double. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/layer.h"
#include "../../layers/layernorm.h"
#include "../../layers/registry.h"
#include "param_test_util.h"

#define TOL 1e-5

typedef struct op_spec {
    const char *type;
    const ki_param *params;
    int n_params;
    const ki_attr *attrs;
    int n_attrs;
    int n_inputs;
    const char *const *keys;
} op_spec;

/* Runs the op; in[0].data may equal out->data. */
static ki_status run(const op_spec *sp, const ki_tensor *in, ki_tensor *out, int threads,
                     ki_error *err)
{
    static const char *const no_keys[4] = { NULL, NULL, NULL, NULL };
    ki_op_desc op =
        op_desc(sp->type, sp->n_inputs ? sp->n_inputs : 1, sp->keys ? sp->keys : no_keys,
                sp->params, sp->n_params, sp->attrs, sp->n_attrs);
    const ki_layer_ops *ops = ki_registry_find(sp->type);
    void *st = NULL;
    ki_shape shapes[4];
    assert_non_null(ops);
    ki_status rc = ops->create(&op, &st, err);
    if (rc != KI_OK) {
        return rc;
    }
    for (int i = 0; i < op.n_inputs; i++) {
        shapes[i] = in[i].shape;
    }
    rc = ops->shape(st, shapes, op.n_inputs, &out->shape, 1, err);
    if (rc == KI_OK) {
        assert_true(ki_shape_equal(&out->shape, &in[0].shape));
        ki_exec ex = { threads, NULL, 0, NULL };
        rc = ops->forward(st, in, op.n_inputs, out, 1, &ex);
    }
    ops->destroy(st);
    return rc;
}

static void fill(float *x, int n, int seed)
{
    for (int i = 0; i < n; i++) {
        x[i] = (float)sin(0.37 * i + seed) * 3.0f + (float)(i % 7) * 0.25f;
    }
}

static void expect_close(const float *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > TOL + TOL * fabs(want[i])) {
            fail_msg("%s[%d]: got %.9g want %.9g", what, i, (double)got[i], want[i]);
        }
    }
}

static const float bn_mean[3] = { 0.5f, -1.0f, 2.0f }, bn_var[3] = { 1.0f, 0.25f, 4.0f },
                   bn_w[3] = { 1.5f, -2.0f, 0.5f }, bn_b[3] = { 0.1f, 0.2f, -0.3f };

static void bn_check(bool affine, bool inplace, int ndim)
{
    const int64_t d4[4] = { 2, 3, 4, 5 }; /* batch 2 */
    const ki_shape s = ki_shape_make(ndim, d4);
    const int n = (int)ki_shape_count(&s), inner = n / 6;
    float x[120], y[120];
    double want[120];
    ki_attr at[4] = { attr1("running_mean", 3, bn_mean), attr1("running_var", 3, bn_var),
                      attr1("weight", 3, bn_w), attr1("bias", 3, bn_b) };
    ki_param pr[3] = { p_int("num_features", 3), p_float("eps", 1e-3), p_bool("affine", affine) };
    op_spec sp = {
        ndim == 4 ? "nn.BatchNorm2d" : "nn.BatchNorm1d", pr, 3, at, affine ? 4 : 2, 1, NULL
    };
    ki_error err;
    fill(x, n, 1);
    for (int i = 0; i < n; i++) {
        const int c = (i / inner) % 3;
        want[i] = (x[i] - bn_mean[c]) / sqrt((double)bn_var[c] + 1e-3);
        want[i] = affine ? want[i] * bn_w[c] + bn_b[c] : want[i];
    }
    memcpy(y, x, sizeof x);
    ki_tensor tin = { s, inplace ? y : x }, tout = { s, y };
    assert_int_equal(run(&sp, &tin, &tout, 2, &err), KI_OK);
    expect_close(y, want, n, "batchnorm");
}

static void test_batchnorm(void **state)
{
    (void)state;
    bn_check(true, false, 4);
    bn_check(true, true, 4);
    bn_check(false, false, 4);
    bn_check(true, false, 3);
    bn_check(true, true, 2);
}

static void test_batchnorm_errors(void **state)
{
    ki_attr at[1] = { attr1("running_mean", 3, bn_mean) };
    ki_param pr[1] = { p_int("num_features", 3) };
    op_spec sp = { "nn.BatchNorm2d", pr, 1, at, 1, 1, NULL };
    float x[24] = { 0 }, y[24];
    ki_tensor tin = { ki_shape_make(4, (const int64_t[]){ 1, 3, 2, 4 }), x },
              tout = { tin.shape, y };
    ki_error err;
    (void)state;
    assert_int_equal(run(&sp, &tin, &tout, 1, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "running_var"));
    ki_attr at2[4] = { attr1("running_mean", 3, bn_mean), attr1("running_var", 3, bn_var),
                       attr1("weight", 3, bn_w), attr1("bias", 3, bn_b) };
    sp.attrs = at2;
    sp.n_attrs = 4;
    tin.shape.d[1] = 4;
    assert_int_equal(run(&sp, &tin, &tout, 1, &err), KI_ERR_SHAPE);
    pr[0] = p_int("num_features", 5);
    tin.shape.d[1] = 3;
    assert_int_equal(run(&sp, &tin, &tout, 1, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "num_features"));
}

/* LayerNorm reference over rows of length row, optional weight/bias. */
static void ln_ref(const float *x, int n, int row, const float *w, const float *b, double eps,
                   double *want)
{
    for (int r = 0; r < n / row; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < row; i++) {
            m += x[r * row + i];
        }
        m /= row;
        for (int i = 0; i < row; i++) {
            v += (x[r * row + i] - m) * (x[r * row + i] - m);
        }
        v /= row;
        for (int i = 0; i < row; i++) {
            double t = (x[r * row + i] - m) / sqrt(v + eps);
            want[r * row + i] = (w ? t * w[i] : t) + (b ? b[i] : 0.0);
        }
    }
}

static void test_layer_norm(void **state)
{
    const ki_shape s = ki_shape_make(3, (const int64_t[]){ 2, 3, 4 });
    float x[24], y[24], w[12], b[12];
    double want[24];
    ki_error err;
    (void)state;
    fill(x, 24, 2);
    fill(w, 12, 3);
    fill(b, 12, 4);
    /* nn.LayerNorm over the last dim with weight and bias, in place. */
    const int64_t ns1[1] = { 4 };
    const double nf1[1] = { 4 };
    ki_param pr[3] = { p_list("normalized_shape", 1, ns1, nf1), p_float("eps", 1e-5),
                       p_bool("elementwise_affine", true) };
    ki_attr at[2] = { attr1("weight", 4, w), attr1("bias", 4, b) };
    op_spec sp = { "nn.LayerNorm", pr, 3, at, 2, 1, NULL };
    ln_ref(x, 24, 4, w, b, 1e-5, want);
    memcpy(y, x, sizeof x);
    ki_tensor tin = { s, y }, tout = { s, y };
    assert_int_equal(run(&sp, &tin, &tout, 2, &err), KI_OK);
    expect_close(y, want, 24, "layer_norm affine");
    /* F.layer_norm over the last two dims, weight=None bias=None. */
    const int64_t ns2[2] = { 3, 4 };
    const double nf2[2] = { 3, 4 };
    ki_param pf[2] = { p_list("normalized_shape", 2, ns2, nf2), p_float("eps", 1e-5) };
    op_spec sf = { "F.layer_norm", pf, 2, NULL, 0, 1, NULL };
    ln_ref(x, 24, 12, NULL, NULL, 1e-5, want);
    tin.data = x;
    assert_int_equal(run(&sf, &tin, &tout, 1, &err), KI_OK);
    expect_close(y, want, 24, "layer_norm plain");
    /* F.layer_norm with runtime $weight and $bias inputs. */
    static const char *const keys[3] = { "input", "weight", "bias" };
    op_spec sr = { "F.layer_norm", pf, 2, NULL, 0, 3, keys };
    ki_tensor ins[3] = { { s, x }, { ki_shape_make(2, ns2), w }, { ki_shape_make(2, ns2), b } };
    ln_ref(x, 24, 12, w, b, 1e-5, want);
    assert_int_equal(run(&sr, ins, &tout, 2, &err), KI_OK);
    expect_close(y, want, 24, "layer_norm inputs");
    /* A shape whose tail is not normalized_shape is rejected. */
    tin.shape = ki_shape_make(3, (const int64_t[]){ 2, 4, 3 });
    assert_int_equal(run(&sf, &tin, &tout, 1, &err), KI_ERR_SHAPE);
    /* nn.LayerNorm with affine but no weights fails in create. */
    op_spec sm = { "nn.LayerNorm", pr, 3, NULL, 0, 1, NULL };
    assert_int_equal(run(&sm, &tin, &tout, 1, &err), KI_ERR_FORMAT);
}

static void test_group_norm(void **state)
{
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 2, 4, 3, 2 });
    float x[48], y[48], w[4] = { 1.0f, -0.5f, 2.0f, 0.25f }, b[4] = { 0.0f, 1.0f, -1.0f, 0.5f };
    double want[48];
    ki_error err;
    (void)state;
    fill(x, 48, 5);
    /* Groups of 2 channels x 6 pixels = 12 contiguous values; per-channel affine after. */
    ln_ref(x, 48, 12, NULL, NULL, 1e-5, want);
    for (int i = 0; i < 48; i++) {
        const int c = (i / 6) % 4;
        want[i] = want[i] * w[c] + b[c];
    }
    ki_param pr[4] = { p_int("num_groups", 2), p_int("num_channels", 4), p_float("eps", 1e-5),
                       p_bool("affine", true) };
    ki_attr at[2] = { attr1("weight", 4, w), attr1("bias", 4, b) };
    op_spec sp = { "nn.GroupNorm", pr, 4, at, 2, 1, NULL };
    for (int inplace = 0; inplace < 2; inplace++) {
        memcpy(y, x, sizeof x);
        ki_tensor tin = { s, inplace ? y : x }, tout = { s, y };
        assert_int_equal(run(&sp, &tin, &tout, 2, &err), KI_OK);
        expect_close(y, want, 48, "group_norm");
    }
    /* num_channels not divisible by num_groups fails in create; a wrong C fails in shape. */
    pr[0] = p_int("num_groups", 3);
    ki_tensor tin = { s, x }, tout = { s, y };
    assert_int_equal(run(&sp, &tin, &tout, 1, &err), KI_ERR_FORMAT);
    pr[0] = p_int("num_groups", 2);
    tin.shape.d[1] = 6;
    assert_int_equal(run(&sp, &tin, &tout, 1, &err), KI_ERR_SHAPE);
}

/* The LayerNorm row kernels of every level this CPU runs against the reference row: lengths
 * around the vector widths and a transformer's 192 / 768, with and without weight and bias, on
 * rows with a large common offset (where a one-pass variance would cancel). */
static void test_ln_row_kernels(void **state)
{
    (void)state;
    enum { MAXN = 1000 };
    static float x[MAXN], w[MAXN], b[MAXN], a[MAXN], r[MAXN];
    for (int i = 0; i < MAXN; i++) {
        w[i] = 0.5f + (float)(i % 7) * 0.25f;
        b[i] = (float)(i % 5) - 2.0f;
    }
    static const int64_t lens[] = { 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 64, 65, 192, 768, 1000 };
    for (int level = KI_ISA_GENERIC; level <= (int)ki_cpu_get()->isa; level++) {
        ki_ln_row_fn fn = ki_ln_row_for((ki_isa)level);
        assert_non_null(fn);
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            const int64_t n = lens[li];
            for (int64_t i = 0; i < n; i++) {
                x[i] = 100.0f + (float)sin(0.37 * (double)i + (double)n) * 3.0f;
            }
            for (int affine = 0; affine < 2; affine++) {
                fn(x, n, 1e-5f, affine ? w : NULL, affine ? b : NULL, a);
                ki_ln_row_ref(x, n, 1e-5f, affine ? w : NULL, affine ? b : NULL, r);
                for (int64_t i = 0; i < n; i++) {
                    if (!(fabsf(a[i] - r[i]) <= 2e-6f * (1.0f + fabsf(r[i])))) {
                        fail_msg("%s n=%lld affine=%d [%lld]: %.9g, reference %.9g",
                                 ki_isa_name((ki_isa)level), (long long)n, affine, (long long)i,
                                 (double)a[i], (double)r[i]);
                    }
                }
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_batchnorm_errors),
        cmocka_unit_test(test_layer_norm),
        cmocka_unit_test(test_ln_row_kernels),
        cmocka_unit_test(test_group_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
