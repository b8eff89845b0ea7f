/* test_softmax.c - softmax / log_softmax on every dim against a double reference. */
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
#include "../../layers/registry.h"
#include "../../layers/softmax.h"

static const char *const in_keys[1] = { "input" };

/* Runs `type` with dim (has_dim false: no dim parameter) on x into y (y may equal x). */
static ki_status run(const char *type, bool has_dim, int64_t dim, const ki_shape *s, const float *x,
                     float *y, int threads, ki_error *err)
{
    ki_param p;
    ki_op_desc op;
    memset(&p, 0, sizeof p);
    p.key = "dim";
    p.raw = "d";
    p.kind = KI_PARAM_INT;
    p.i = dim;
    memset(&op, 0, sizeof op);
    op.type = type;
    op.n_inputs = op.n_outputs = 1;
    op.input_keys = in_keys;
    op.params = &p;
    op.n_params = has_dim ? 1 : 0;
    const ki_layer_ops *ops = ki_registry_find(type);
    void *st = NULL;
    ki_shape out;
    assert_non_null(ops);
    assert_true(ops->flags & KI_LAYER_INPLACE);
    ki_status rc = ops->create(&op, &st, err);
    if (rc != KI_OK) {
        return rc;
    }
    rc = ops->shape(st, s, 1, &out, 1, err);
    if (rc == KI_OK) {
        assert_true(ki_shape_equal(&out, s));
        ki_tensor tin = { *s, (float *)x }, tout = { out, y };
        ki_exec ex = { threads, NULL, 0, NULL };
        rc = ops->forward(st, &tin, 1, &tout, 1, &ex);
    }
    ops->destroy(st);
    return rc;
}

/* Reference (log_)softmax of x along axis, in double. */
static void reference(const ki_shape *s, int axis, bool take_log, const float *x, double *want)
{
    int64_t outer = 1, inner = 1;
    for (int i = 0; i < s->ndim; i++) {
        outer *= i < axis ? s->d[i] : 1;
        inner *= i > axis ? s->d[i] : 1;
    }
    const int64_t n = s->d[axis];
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t t = 0; t < inner; t++) {
            const float *px = x + o * n * inner + t;
            double *pw = want + o * n * inner + t;
            double mx = -INFINITY, sum = 0;
            for (int64_t k = 0; k < n; k++) {
                mx = fmax(mx, px[k * inner]);
            }
            for (int64_t k = 0; k < n; k++) {
                sum += exp(px[k * inner] - mx);
            }
            for (int64_t k = 0; k < n; k++) {
                pw[k * inner] =
                    take_log ? px[k * inner] - mx - log(sum) : exp(px[k * inner] - mx) / sum;
            }
        }
    }
}

static void fill(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)(sin(0.7 * (double)i) * 4.0 + cos(0.13 * (double)i));
    }
}

#define NO_DIM 99 /* check(): run without a dim parameter */

static void check(const char *type, bool log, const ki_shape *s, int64_t dim, int axis,
                  bool inplace)
{
    const int64_t n = ki_shape_count(s);
    float *x = malloc((size_t)n * sizeof *x), *y = malloc((size_t)n * sizeof *y);
    double *want = malloc((size_t)n * sizeof *want);
    ki_error err;
    fill(x, n);
    memcpy(y, x, (size_t)n * sizeof *x);
    reference(s, axis, log, x, want);
    assert_int_equal(run(type, dim != NO_DIM, dim, s, inplace ? y : x, y, 2, &err), KI_OK);
    for (int64_t i = 0; i < n; i++) {
        if (fabs(y[i] - want[i]) > 1e-5 + 1e-5 * fabs(want[i])) {
            fail_msg("%s dim=%lld [%lld]: got %.9g want %.9g", type, (long long)dim, (long long)i,
                     (double)y[i], want[i]);
        }
    }
    free(x);
    free(y);
    free(want);
}

/* The row kernels of every level this CPU runs against the reference row: lengths around the
 * vector widths, a row with masked (-inf) entries, and a row of -inf only (NaN everywhere). */
static void test_row_kernels(void **state)
{
    (void)state;
    enum { MAXN = 1000 };
    static float x[MAXN], a[MAXN], b[MAXN];
    for (int level = KI_ISA_GENERIC; level <= (int)ki_cpu_get()->isa; level++) {
        ki_softmax_row_fn fn = ki_softmax_row_for((ki_isa)level);
        assert_non_null(fn);
        for (int64_t n = 1; n <= MAXN; n = n < 70 ? n + 1 : n * 3 - 13) {
            for (int masked = 0; masked < 3; masked++) {
                for (int64_t i = 0; i < n; i++) {
                    x[i] = (float)(sin(1.3 * (double)(i + n)) * 9.0);
                    if ((masked == 1 && i % 3 == 1) || masked == 2) {
                        x[i] = -INFINITY;
                    }
                }
                memcpy(a, x, (size_t)n * sizeof *x);
                memcpy(b, x, (size_t)n * sizeof *x);
                fn(a, n);
                ki_softmax_row_ref(b, n);
                for (int64_t i = 0; i < n; i++) {
                    bool ok = masked == 2 ? isnan(a[i]) && isnan(b[i])
                                          : fabsf(a[i] - b[i]) <= 1e-9f + 4e-6f * fabsf(b[i]);
                    if (!ok) {
                        fail_msg("%s n=%lld masked=%d [%lld]: %.9g, reference %.9g",
                                 ki_isa_name((ki_isa)level), (long long)n, masked, (long long)i,
                                 (double)a[i], (double)b[i]);
                    }
                }
            }
        }
    }
}

static void test_every_dim(void **state)
{
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 2, 5, 4, 70 }); /* inner > one tile */
    (void)state;
    for (int axis = 0; axis < 4; axis++) {
        check("nn.Softmax", false, &s, axis, axis, false);
        check("F.softmax", false, &s, axis - 4, axis, true);
        check("F.log_softmax", true, &s, axis, axis, false);
        check("nn.LogSoftmax", true, &s, axis - 4, axis, true);
    }
}

static void test_small_by_hand(void **state)
{
    /* softmax([1, 2, 3]) = e^k / (e + e^2 + e^3); rows of a 2x3 along dim 1. */
    const ki_shape s = ki_shape_make(2, (const int64_t[]){ 2, 3 });
    const float x[6] = { 1, 2, 3, 1000, 1000, 1000 };
    float y[6];
    ki_error err;
    (void)state;
    assert_int_equal(run("F.softmax", true, 1, &s, x, y, 1, &err), KI_OK);
    const double z = exp(1) + exp(2) + exp(3);
    assert_true(fabs(y[0] - exp(1) / z) < 1e-7 && fabs(y[2] - exp(3) / z) < 1e-7);
    /* Large equal values do not overflow: stable softmax gives 1/3 each. */
    assert_true(fabs(y[3] - 1.0 / 3) < 1e-7 && fabs(y[5] - 1.0 / 3) < 1e-7);
    assert_int_equal(run("F.log_softmax", true, -1, &s, x, y, 1, &err), KI_OK);
    assert_true(fabs(y[1] - (2 - log(z))) < 1e-6 && fabs(y[4] + log(3.0)) < 1e-6);
}

static void test_implicit_dim(void **state)
{
    /* nn.Softmax(dim=None): dim 0 for 1-D and 3-D input, dim 1 otherwise (PyTorch legacy). */
    const ki_shape s3 = ki_shape_make(3, (const int64_t[]){ 3, 2, 5 });
    const ki_shape s4 = ki_shape_make(4, (const int64_t[]){ 2, 3, 2, 2 });
    (void)state;
    check("nn.Softmax", false, &s3, NO_DIM, 0, false);
    check("nn.Softmax", false, &s4, NO_DIM, 1, false);
}

static void test_threads_and_errors(void **state)
{
    const ki_shape s = ki_shape_make(3, (const int64_t[]){ 8, 33, 150 });
    const int64_t n = 8 * 33 * 150;
    float *x = malloc((size_t)n * sizeof *x), *y1 = malloc((size_t)n * sizeof *x),
          *y2 = malloc((size_t)n * sizeof *x);
    ki_error err;
    (void)state;
    fill(x, n);
    for (int64_t dim = 0; dim < 3; dim++) {
        assert_int_equal(run("F.softmax", true, dim, &s, x, y1, 1, &err), KI_OK);
        assert_int_equal(run("F.softmax", true, dim, &s, x, y2, 2, &err), KI_OK);
        assert_memory_equal(y1, y2, (size_t)n * sizeof *x);
    }
    assert_int_equal(run("F.softmax", true, 3, &s, x, y1, 1, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "dim"));
    assert_int_equal(run("F.softmax", true, -4, &s, x, y1, 1, &err), KI_ERR_SHAPE);
    /* A 0-d tensor is one element: softmax 1, log_softmax 0. */
    const ki_shape s0 = ki_shape_make(0, NULL);
    assert_int_equal(run("F.softmax", true, -1, &s0, x, y1, 1, &err), KI_OK);
    assert_true(y1[0] == 1.0f);
    free(x);
    free(y1);
    free(y2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_kernels),
        cmocka_unit_test(test_every_dim),
        cmocka_unit_test(test_small_by_hand),
        cmocka_unit_test(test_implicit_dim),
        cmocka_unit_test(test_threads_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
