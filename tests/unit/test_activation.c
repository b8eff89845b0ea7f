/* test_activation.c - activation layers against PyTorch's formulas evaluated in double. */
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
#include "../../layers/activation.h"
#include "../../layers/registry.h"
#include "param_test_util.h"

#define N_VALS 96

static const char *const in_keys[1] = { NULL };

static ki_op_desc make_op(const char *type, const ki_param *params, int n_params,
                          const ki_attr *attrs, int n_attrs)
{
    return op_desc(type, 1, in_keys, params, n_params, attrs, n_attrs);
}

/* Runs op on x of the given shape into y (y may equal x); returns the status of the first
 * failing step. */
static ki_status run(const ki_op_desc *op, const ki_shape *s, const float *x, float *y, int threads,
                     ki_error *err)
{
    const ki_layer_ops *ops = ki_registry_find(op->type);
    void *st = NULL;
    ki_shape out;
    assert_non_null(ops);
    ki_status rc = ops->create(op, &st, err);
    if (rc != KI_OK) {
        return rc;
    }
    rc = ops->shape(st, s, 1, &out, 1, err);
    if (rc == KI_OK) {
        assert_true(ki_shape_equal(&out, s));
        assert_true(ops->flags & KI_LAYER_INPLACE);
        ki_tensor tin = { *s, (float *)x }, tout = { out, y };
        ki_exec ex = { threads, NULL, 0, NULL };
        rc = ops->forward(st, &tin, 1, &tout, 1, &ex);
    }
    if (ops->destroy) {
        ops->destroy(st);
    }
    return rc;
}

static void fill(float *x, int64_t n)
{
    /* -12 .. 12 in uneven steps, plus the kinks of relu6 / hardswish / hardtanh. */
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)(-12.0 + 24.0 * (double)(i % N_VALS) / (N_VALS - 1) +
                       0.01 * (double)(i / N_VALS));
    }
    x[0] = -3.0f;
    x[1] = 3.0f;
    x[2] = 0.0f;
    x[3] = 6.0f;
    x[4] = -30.0f;
    x[5] = 30.0f;
}

typedef double (*ref_fn)(double x, double a, double b);

static double r_relu(double x, double a, double b)
{
    (void)a, (void)b;
    return x < 0.0 ? 0.0 : x;
}
static double r_relu6(double x, double a, double b)
{
    (void)a, (void)b;
    return fmin(fmax(x, 0.0), 6.0);
}
static double r_leaky(double x, double a, double b)
{
    (void)b;
    return x > 0 ? x : x * a;
}
static double r_hardtanh(double x, double a, double b)
{
    return fmin(fmax(x, a), b);
}
static double r_sigmoid(double x, double a, double b)
{
    (void)a, (void)b;
    return 1.0 / (1.0 + exp(-x));
}
static double r_silu(double x, double a, double b)
{
    return x * r_sigmoid(x, a, b);
}
static double r_tanh(double x, double a, double b)
{
    (void)a, (void)b;
    return tanh(x);
}
static double r_hardswish(double x, double a, double b)
{
    return x * r_relu6(x + 3.0, a, b) / 6.0;
}
static double r_hardsigmoid(double x, double a, double b)
{
    return r_relu6(x + 3.0, a, b) / 6.0;
}
static double r_gelu(double x, double a, double b)
{
    (void)a, (void)b;
    return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
}
static double r_gelu_tanh(double x, double a, double b)
{
    (void)a, (void)b;
    return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
static double r_elu(double x, double a, double b)
{
    (void)b;
    return x > 0 ? x : a * (exp(x) - 1.0);
}
static double r_softplus(double x, double a, double b)
{
    return a * x > b ? x : log1p(exp(a * x)) / a;
}
static double r_mish(double x, double a, double b)
{
    (void)a, (void)b;
    return x * tanh(log1p(exp(x)));
}

typedef struct act_case {
    const char *type;
    ref_fn ref;
    const char *k1, *k2; /* parameter names, or NULL */
    double a, b;         /* parameter values (also the defaults the ref needs) */
    const char *approx;  /* GELU approximate, or NULL */
} act_case;

static const act_case cases[] = {
    { "nn.ReLU", r_relu, NULL, NULL, 0, 0, NULL },
    { "F.relu", r_relu, NULL, NULL, 0, 0, NULL },
    { "nn.ReLU6", r_relu6, NULL, NULL, 0, 0, NULL },
    { "F.relu6", r_relu6, NULL, NULL, 0, 0, NULL },
    { "nn.LeakyReLU", r_leaky, NULL, NULL, 0.01, 0, NULL },
    { "F.leaky_relu", r_leaky, "negative_slope", NULL, 0.2, 0, NULL },
    { "nn.Hardtanh", r_hardtanh, NULL, NULL, -1.0, 1.0, NULL },
    { "F.hardtanh", r_hardtanh, "min_val", "max_val", -0.5, 2.5, NULL },
    { "nn.Sigmoid", r_sigmoid, NULL, NULL, 0, 0, NULL },
    { "F.sigmoid", r_sigmoid, NULL, NULL, 0, 0, NULL },
    { "nn.SiLU", r_silu, NULL, NULL, 0, 0, NULL },
    { "F.silu", r_silu, NULL, NULL, 0, 0, NULL },
    { "nn.Tanh", r_tanh, NULL, NULL, 0, 0, NULL },
    { "F.tanh", r_tanh, NULL, NULL, 0, 0, NULL },
    { "nn.Hardswish", r_hardswish, NULL, NULL, 0, 0, NULL },
    { "F.hardswish", r_hardswish, NULL, NULL, 0, 0, NULL },
    { "nn.Hardsigmoid", r_hardsigmoid, NULL, NULL, 0, 0, NULL },
    { "F.hardsigmoid", r_hardsigmoid, NULL, NULL, 0, 0, NULL },
    { "nn.GELU", r_gelu, NULL, NULL, 0, 0, NULL },
    { "F.gelu", r_gelu, NULL, NULL, 0, 0, "none" },
    { "nn.GELU", r_gelu_tanh, NULL, NULL, 0, 0, "tanh" },
    { "F.gelu", r_gelu_tanh, NULL, NULL, 0, 0, "tanh" },
    { "nn.ELU", r_elu, "alpha", NULL, 0.7, 0, NULL },
    { "F.elu", r_elu, NULL, NULL, 1.0, 0, NULL },
    { "nn.Mish", r_mish, NULL, NULL, 0, 0, NULL },
    { "F.mish", r_mish, NULL, NULL, 0, 0, NULL },
    { "nn.Softplus", r_softplus, NULL, NULL, 1.0, 20.0, NULL },
    { "F.softplus", r_softplus, "beta", "threshold", 2.0, 5.0, NULL },
};

static int case_params(const act_case *c, ki_param *p)
{
    int n = 0;
    if (c->k1) {
        p[n++] = p_float(c->k1, c->a);
    }
    if (c->k2) {
        p[n++] = p_float(c->k2, c->b);
    }
    if (c->approx) {
        p[n++] = p_str("approximate", c->approx);
    }
    return n;
}

static void check_case(const act_case *c, bool inplace)
{
    const int64_t dims[3] = { 2, 4, N_VALS / 4 }; /* batch 2 */
    const ki_shape s = ki_shape_make(3, dims);
    float x[2 * N_VALS], y[2 * N_VALS];
    ki_param p[3];
    ki_error err;
    ki_op_desc op = make_op(c->type, p, case_params(c, p), NULL, 0);
    fill(x, 2 * N_VALS);
    memcpy(y, x, sizeof x);
    assert_int_equal(run(&op, &s, inplace ? y : x, y, 1, &err), KI_OK);
    for (int i = 0; i < 2 * N_VALS; i++) {
        const double want = c->ref(x[i], c->a, c->b);
        if (fabs(y[i] - want) > 1e-5 + 1e-5 * fabs(want)) {
            fail_msg("%s%s: x=%g got %.9g want %.9g", c->type, inplace ? " (in place)" : "",
                     (double)x[i], (double)y[i], want);
        }
    }
}

static void test_all_formulas(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(&cases[i], false);
    }
}

static void test_all_in_place(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        check_case(&cases[i], true);
    }
}

static void test_threads_match(void **state)
{
    /* Several parallel chunks with a tail: 2 threads must give the bits of 1 thread. */
    const int64_t dims[4] = { 3, 5, 37, 41 };
    const ki_shape s = ki_shape_make(4, dims);
    const int64_t n = 3 * 5 * 37 * 41;
    float *x = malloc((size_t)n * sizeof *x), *y1 = malloc((size_t)n * sizeof *x),
          *y2 = malloc((size_t)n * sizeof *x);
    ki_error err;
    ki_op_desc op = make_op("nn.SiLU", NULL, 0, NULL, 0);
    (void)state;
    fill(x, n);
    assert_int_equal(run(&op, &s, x, y1, 1, &err), KI_OK);
    assert_int_equal(run(&op, &s, x, y2, 2, &err), KI_OK);
    assert_memory_equal(y1, y2, (size_t)n * sizeof *x);
    assert_true(fabsf(y1[n - 1] - (float)r_silu(x[n - 1], 0, 0)) < 1e-5f);
    free(x);
    free(y1);
    free(y2);
}

static void test_nan_and_extremes(void **state)
{
    const int64_t dims[1] = { 3 };
    const ki_shape s = ki_shape_make(1, dims);
    float x[3] = { NAN, -INFINITY, INFINITY }, y[3];
    ki_error err;
    ki_op_desc op = make_op("nn.ReLU6", NULL, 0, NULL, 0);
    (void)state;
    assert_int_equal(run(&op, &s, x, y, 1, &err), KI_OK);
    assert_true(isnan(y[0])); /* clamp propagates NaN */
    assert_true(y[1] == 0.0f && y[2] == 6.0f);
    /* torch.relu(nan) is nan, as in the convolutions' fused ReLU (the standalone layer had made
     * it 0) */
    for (int k = 0; k < 2; k++) {
        op = make_op(k ? "F.relu" : "nn.ReLU", NULL, 0, NULL, 0);
        assert_int_equal(run(&op, &s, x, y, 1, &err), KI_OK);
        assert_true(isnan(y[0]));
        assert_true(y[1] == 0.0f && y[2] == INFINITY);
    }
    op = make_op("nn.Sigmoid", NULL, 0, NULL, 0);
    assert_int_equal(run(&op, &s, x, y, 1, &err), KI_OK);
    assert_true(y[1] == 0.0f && y[2] == 1.0f);
}

static void test_prelu(void **state)
{
    const int64_t dims[4] = { 2, 3, 2, 2 };
    const ki_shape s = ki_shape_make(4, dims);
    static const float w[3] = { 0.25f, -0.5f, 2.0f };
    float x[24], y[24];
    ki_attr attr;
    ki_param np;
    ki_error err;
    (void)state;
    memset(&attr, 0, sizeof attr);
    attr.key = "weight";
    attr.shape = ki_shape_make(1, (const int64_t[]){ 3 });
    attr.data = w;
    attr.numel = 3;
    memset(&np, 0, sizeof np);
    np.key = "num_parameters";
    np.raw = "3";
    np.kind = KI_PARAM_INT;
    np.i = 3;
    ki_op_desc op = make_op("nn.PReLU", &np, 1, &attr, 1);
    for (int i = 0; i < 24; i++) {
        x[i] = (float)(i % 5) - 2.0f;
    }
    for (int inplace = 0; inplace < 2; inplace++) {
        memcpy(y, x, sizeof x);
        assert_int_equal(run(&op, &s, inplace ? y : x, y, 2, &err), KI_OK);
        for (int i = 0; i < 24; i++) {
            const float c = w[(i / 4) % 3];
            assert_true(y[i] == (x[i] > 0 ? x[i] : c * x[i]));
        }
    }
    /* A channel count that does not match num_parameters is rejected in shape. */
    const ki_shape bad = ki_shape_make(4, (const int64_t[]){ 2, 4, 2, 2 });
    assert_int_equal(run(&op, &bad, x, y, 1, &err), KI_ERR_SHAPE);
    /* The default single weight applies to any rank. */
    attr.shape = ki_shape_make(1, (const int64_t[]){ 1 });
    ki_op_desc one = make_op("nn.PReLU", NULL, 0, &attr, 1);
    const ki_shape flat = ki_shape_make(1, (const int64_t[]){ 24 });
    assert_int_equal(run(&one, &flat, x, y, 1, &err), KI_OK);
    assert_true(y[0] == 0.25f * x[0]);
    /* Missing weights fail in create. */
    ki_op_desc none = make_op("nn.PReLU", NULL, 0, NULL, 0);
    assert_int_equal(run(&none, &s, x, y, 1, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "weight"));
}

static void test_bad_params(void **state)
{
    const ki_shape s = ki_shape_make(1, (const int64_t[]){ 4 });
    float x[4] = { 0 }, y[4];
    ki_error err;
    ki_param p = p_str("approximate", "fast");
    (void)state;
    ki_op_desc op = make_op("nn.GELU", &p, 1, NULL, 0);
    assert_int_equal(run(&op, &s, x, y, 1, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "approximate"));
    p = p_str("negative_slope", "abc");
    op = make_op("nn.LeakyReLU", &p, 1, NULL, 0);
    assert_int_equal(run(&op, &s, x, y, 1, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "negative_slope"));
    p = p_float("beta", 0.0);
    op = make_op("nn.Softplus", &p, 1, NULL, 0);
    assert_int_equal(run(&op, &s, x, y, 1, &err), KI_ERR_FORMAT);
    op = make_op("nn.Tanh", NULL, 0, NULL, 0);
    op.n_inputs = 2;
    assert_int_equal(run(&op, &s, x, y, 1, &err), KI_ERR_UNSUPPORTED);
}

static void test_act_from_op(void **state)
{
    ki_act act;
    ki_error err;
    ki_param p = p_float("negative_slope", 0.3);
    (void)state;
    ki_op_desc op = make_op("nn.ReLU", NULL, 0, NULL, 0);
    assert_int_equal(ki_act_from_op(&op, &act, &err), KI_OK);
    assert_int_equal(act.kind, KI_ACT_RELU);
    assert_true(ki_act_apply(&act, -2.0f) == 0.0f && ki_act_apply(&act, 2.0f) == 2.0f);
    op = make_op("F.leaky_relu", &p, 1, NULL, 0);
    assert_int_equal(ki_act_from_op(&op, &act, &err), KI_OK);
    assert_true(fabsf(ki_act_apply(&act, -2.0f) + 0.6f) < 1e-7f);
    op = make_op("nn.PReLU", NULL, 0, NULL, 0);
    assert_int_equal(ki_act_from_op(&op, &act, &err), KI_ERR_UNSUPPORTED);
    /* ki_act_apply and ki_act_apply_n agree for every kind. */
    for (int k = KI_ACT_NONE; k <= KI_ACT_SOFTPLUS; k++) {
        ki_act a = { (ki_act_kind)k, 0.5f, 4.0f };
        float x[N_VALS], y[N_VALS];
        fill(x, N_VALS);
        ki_act_apply_n(&a, y, x, N_VALS);
        for (int i = 0; i < N_VALS; i++) {
            assert_memory_equal(&y[i], &(float){ ki_act_apply(&a, x[i]) }, sizeof(float));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_formulas),  cmocka_unit_test(test_all_in_place),
        cmocka_unit_test(test_threads_match), cmocka_unit_test(test_nan_and_extremes),
        cmocka_unit_test(test_prelu),         cmocka_unit_test(test_bad_params),
        cmocka_unit_test(test_act_from_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
