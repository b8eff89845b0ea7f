/* test_upsample.c - nearest / (bi,tri)linear upsampling against hand-computed values. */
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
#include "param_test_util.h"

typedef struct up_run {
    const char *type;
    const ki_param *params;
    int n_params;
    const ki_shape *in_shape;
    const float *x;
    const ki_shape *size_in; /* a $size input, or NULL */
    int threads;
} up_run;

/* Runs the op, allocating *y (freed by the caller); the output shape goes to *os. */
static ki_status run(const up_run *r, ki_shape *os, float **y, ki_error *err)
{
    static const char *const keys[2] = { "input", "size" };
    ki_op_desc op = op_desc(r->type, r->size_in ? 2 : 1, keys, r->params, r->n_params, NULL, 0);
    const ki_layer_ops *ops = ki_registry_find(r->type);
    void *st = NULL;
    ki_shape shapes[2] = { *r->in_shape, r->size_in ? *r->size_in : *r->in_shape };
    float size_data[KI_MAX_VALUES] = { 0 };
    *y = NULL;
    assert_non_null(ops);
    ki_status rc = ops->create(&op, &st, err);
    if (rc != KI_OK) {
        return rc;
    }
    rc = ops->shape(st, shapes, op.n_inputs, os, 1, err);
    if (rc == KI_OK) {
        for (int i = 0; r->size_in && i < (int)r->size_in->d[0]; i++) {
            size_data[i] = (float)r->size_in->values[i];
        }
        ki_tensor tin[2] = { { shapes[0], (float *)r->x }, { shapes[1], size_data } };
        ki_tensor tout = { *os, NULL };
        *y = tout.data = malloc((size_t)ki_shape_count(os) * sizeof(float));
        size_t ws = ops->workspace ? ops->workspace(st, shapes, op.n_inputs, os, 1, r->threads)
                                   : 0; /* as the session gives it: per thread */
        ki_exec ex = { .n_threads = r->threads, .ws_per_thread = ws };
        ex.workspace = ws ? malloc(ws * (size_t)r->threads) : NULL;
        rc = ops->forward(st, tin, op.n_inputs, &tout, 1, &ex);
        free(ex.workspace);
    }
    ops->destroy(st);
    return rc;
}

static void expect(const float *got, const double *want, int n, const char *what)
{
    for (int i = 0; i < n; i++) {
        if (fabs(got[i] - want[i]) > 1e-6 + 1e-6 * fabs(want[i])) {
            fail_msg("%s[%d]: got %.9g want %.9g", what, i, (double)got[i], want[i]);
        }
    }
}

static const float x22[4] = { 1, 2, 3, 4 };

static void test_nearest_scale2(void **state)
{
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 1, 1, 2, 2 });
    const double sf[2] = { 2.0, 2.0 };
    ki_param pr[3] = { p_str("mode", "nearest"), p_list("scale_factor", 2, NULL, sf),
                       p_list("size", 0, NULL, NULL) };
    pr[2].kind = KI_PARAM_NONE;
    up_run r = { "nn.Upsample", pr, 3, &s, x22, NULL, 1 };
    static const double want[16] = { 1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4 };
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    assert_int_equal(os.ndim, 4);
    assert_true(os.d[2] == 4 && os.d[3] == 4);
    expect(y, want, 16, "nearest x2");
    free(y);
}

static void test_bilinear_align_corners(void **state)
{
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 1, 1, 2, 2 });
    const int64_t size[2] = { 4, 4 };
    ki_param pr[3] = { p_str("mode", "bilinear"), p_list("size", 2, size, NULL),
                       p_bool("align_corners", true) };
    up_run r = { "F.interpolate", pr, 3, &s, x22, NULL, 1 };
    double want[16];
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    /* Corners map onto corners: source = o * (2-1)/(4-1), and x is 1 + col + 2 * row. */
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 4; j++) {
            want[i * 4 + j] = 1.0 + j / 3.0 + 2.0 * i / 3.0;
        }
    }
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    expect(y, want, 16, "bilinear align_corners=True");
    free(y);
    /* F.upsample_bilinear defaults to align_corners=True. */
    ki_param pb[1] = { p_list("size", 2, size, NULL) };
    up_run rb = { "F.upsample_bilinear", pb, 1, &s, x22, NULL, 1 };
    assert_int_equal(run(&rb, &os, &y, &err), KI_OK);
    expect(y, want, 16, "F.upsample_bilinear");
    free(y);
}

static void test_bilinear_half_pixel(void **state)
{
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 1, 1, 2, 2 });
    const double sf[1] = { 2.0 };
    ki_param pr[3] = { p_str("mode", "bilinear"), p_list("scale_factor", 1, NULL, sf),
                       p_bool("align_corners", false) };
    up_run r = { "F.upsample", pr, 3, &s, x22, NULL, 1 };
    /* source = 0.5 * (o + 0.5) - 0.5 clamped to [0, 1]: 0, 0.25, 0.75, 1 along each axis. */
    static const double t[4] = { 0, 0.25, 0.75, 1 };
    double want[16];
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    for (int i = 0; i < 16; i++) {
        want[i] = 1.0 + t[i % 4] + 2.0 * t[i / 4];
    }
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    assert_true(os.d[2] == 4 && os.d[3] == 4);
    expect(y, want, 16, "bilinear align_corners=False");
    free(y);
}

static void test_nearest_by_size_and_batch(void **state)
{
    /* 2 x 3 planes of 2x2 -> 3x5: rows floor(o * 2/3) = 0,0,1; cols floor(o * 0.4) = 0,0,0,1,1. */
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 2, 3, 2, 2 });
    const int64_t size[2] = { 3, 5 };
    float x[24];
    double want[2 * 3 * 15];
    static const int rows[3] = { 0, 0, 1 }, cols[5] = { 0, 0, 0, 1, 1 };
    ki_param pr[1] = { p_list("size", 2, size, NULL) };
    up_run r = { "F.upsample_nearest", pr, 1, &s, x, NULL, 2 };
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    for (int i = 0; i < 24; i++) {
        x[i] = (float)(i * 10);
    }
    for (int p = 0; p < 6; p++) {
        for (int i = 0; i < 15; i++) {
            want[p * 15 + i] = x[p * 4 + rows[i / 5] * 2 + cols[i % 5]];
        }
    }
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    expect(y, want, 90, "nearest by size");
    free(y);
    /* The same through a $size list input (dynamic models). */
    ki_shape list = ki_shape_make(1, (const int64_t[]){ 2 });
    list.kind = KI_KIND_LIST;
    list.has_values = true;
    list.values[0] = 3;
    list.values[1] = 5;
    up_run rd = { "F.interpolate", NULL, 0, &s, x, &list, 1 };
    assert_int_equal(run(&rd, &os, &y, &err), KI_OK);
    assert_true(os.d[0] == 2 && os.d[1] == 3 && os.d[2] == 3 && os.d[3] == 5);
    expect(y, want, 90, "nearest by $size");
    free(y);
}

static void test_fractional_scale(void **state)
{
    /* scale_factor 1.5 on 4 / 5 pixels: out floor(6.0) = 6 and floor(7.5) = 7; source
     * floor(o * float(1 / 1.5)). */
    const ki_shape s = ki_shape_make(3, (const int64_t[]){ 1, 1, 5 });
    const float x[5] = { 10, 11, 12, 13, 14 };
    const double sf[1] = { 1.5 };
    ki_param pr[2] = { p_str("mode", "nearest"), p_list("scale_factor", 1, NULL, sf) };
    up_run r = { "F.interpolate", pr, 2, &s, x, NULL, 1 };
    static const double want[7] = { 10, 10, 11, 12, 12, 13, 14 };
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    assert_int_equal(os.d[2], 7);
    expect(y, want, 7, "nearest x1.5");
    free(y);
}

static void test_linear_1d(void **state)
{
    /* linear, 3 -> 5, half-pixel: sources 0, 0.4, 1.0, 1.6, 2 (clamped). */
    const ki_shape s = ki_shape_make(3, (const int64_t[]){ 1, 1, 3 });
    const float x[3] = { 0, 10, 20 };
    const int64_t size[1] = { 5 };
    ki_param pr[2] = { p_str("mode", "linear"), p_list("size", 1, size, NULL) };
    up_run r = { "nn.Upsample", pr, 2, &s, x, NULL, 1 };
    static const double want[5] = { 0, 4, 10, 16, 20 };
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    expect(y, want, 5, "linear 1d");
    free(y);
}

static void test_trilinear(void **state)
{
    /* A linear function of (z, y, x) is reproduced exactly: v = 1 + x + 2y + 4z. */
    const ki_shape s = ki_shape_make(5, (const int64_t[]){ 1, 1, 2, 2, 2 });
    float x[8];
    const int64_t size[3] = { 3, 4, 5 };
    ki_param pr[3] = { p_str("mode", "trilinear"), p_list("size", 3, size, NULL),
                       p_bool("align_corners", true) };
    up_run r = { "F.interpolate", pr, 3, &s, x, NULL, 1 };
    double want[60];
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    for (int i = 0; i < 8; i++) {
        x[i] = (float)(1 + (i & 1) + 2 * ((i >> 1) & 1) + 4 * (i >> 2));
    }
    for (int i = 0; i < 60; i++) {
        want[i] = 1.0 + (i % 5) / 4.0 + 2.0 * ((i / 5) % 4) / 3.0 + 4.0 * (i / 20) / 2.0;
    }
    assert_int_equal(run(&r, &os, &y, &err), KI_OK);
    expect(y, want, 60, "trilinear");
    free(y);
}

static void test_threads_match(void **state)
{
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 2, 3, 17, 23 });
    const int n = 2 * 3 * 17 * 23;
    float *x = malloc((size_t)n * sizeof *x), *y1, *y2;
    const double sf[2] = { 2.5, 3.0 };
    ki_param pr[2] = { p_str("mode", "bilinear"), p_list("scale_factor", 2, NULL, sf) };
    up_run r = { "F.interpolate", pr, 2, &s, x, NULL, 1 };
    ki_shape os;
    ki_error err;
    (void)state;
    for (int i = 0; i < n; i++) {
        x[i] = (float)sin(i * 0.3);
    }
    assert_int_equal(run(&r, &os, &y1, &err), KI_OK);
    r.threads = 2;
    assert_int_equal(run(&r, &os, &y2, &err), KI_OK);
    assert_true(os.d[2] == 42 && os.d[3] == 69);
    assert_memory_equal(y1, y2, (size_t)ki_shape_count(&os) * sizeof(float));
    free(x);
    free(y1);
    free(y2);
}

static void test_errors(void **state)
{
    const ki_shape s4 = ki_shape_make(4, (const int64_t[]){ 1, 1, 2, 2 });
    const ki_shape s3 = ki_shape_make(3, (const int64_t[]){ 1, 1, 2 });
    const int64_t size[3] = { 4, 4, 4 };
    const double sf[1] = { 2.0 };
    ki_param pr[3] = { p_str("mode", "bilinear"), p_list("size", 2, size, NULL),
                       p_list("scale_factor", 1, NULL, sf) };
    up_run r = { "F.interpolate", pr, 3, &s4, x22, NULL, 1 };
    ki_shape os;
    float *y;
    ki_error err;
    (void)state;
    assert_int_equal(run(&r, &os, &y, &err), KI_ERR_FORMAT); /* both size and scale_factor */
    r.n_params = 2;
    r.in_shape = &s3;
    assert_int_equal(run(&r, &os, &y, &err), KI_ERR_SHAPE); /* bilinear needs 4-D */
    assert_non_null(strstr(err.msg, "rank"));
    r.in_shape = &s4;
    pr[1] = p_list("size", 3, size, NULL);
    assert_int_equal(run(&r, &os, &y, &err), KI_ERR_SHAPE); /* 3 sizes for 2 spatial dims */
    pr[0] = p_str("mode", "area"); /* bicubic is supported since issue #22; area is not */
    assert_int_equal(run(&r, &os, &y, &err), KI_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "area"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_scale2),
        cmocka_unit_test(test_bilinear_align_corners),
        cmocka_unit_test(test_bilinear_half_pixel),
        cmocka_unit_test(test_nearest_by_size_and_batch),
        cmocka_unit_test(test_fractional_scale),
        cmocka_unit_test(test_linear_1d),
        cmocka_unit_test(test_trilinear),
        cmocka_unit_test(test_threads_match),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
