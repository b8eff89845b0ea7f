/* test_ops_tv.c - the torchvision layers (deform_conv.c, roi_align.c; modules and functions):
 * malformed parameters and shapes fail with a message, boxes torchvision would read out of
 * bounds fail the run, NaN offsets and boxes do not crash, and outputs of several tiles are
 * bitwise equal at 1 and 2 threads. PyTorch's values are checked by the zoo cases
 * (tests/data/ops/tv_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "test_conv_util.h"

#define DCN  "torchvision.ops.DeformConv2d"
#define ROIA "torchvision.ops.RoIAlign"

/* A DeformConv2d with a k x k kernel, padding 1, in -> out channels, no bias. */
static void dcn_op(top *t, int n_in, int64_t in, int64_t out, int64_t k, int64_t groups,
                   const float *w)
{
    top_init(t, DCN, n_in, 1);
    top_ints2(t, "kernel_size", k, k);
    top_ints2(t, "padding", 1, 1);
    top_int(t, "groups", groups);
    top_bool(t, "bias", 0);
    top_attr(t, "weight", 4, (const int64_t[]){ out, in / groups, k, k }, w);
}

static void roi_op(top *t, int64_t ph, int64_t pw, int64_t ratio, int aligned)
{
    top_init(t, ROIA, 2, 1);
    top_ints2(t, "output_size", ph, pw);
    top_param(t, "spatial_scale", "0.5", KI_PARAM_FLOAT)->f = 0.5;
    top_int(t, "sampling_ratio", ratio);
    top_bool(t, "aligned", aligned);
}

static void test_create_errors(void **unused)
{
    (void)unused;
    static float w[8 * 4 * 9];
    top t;
    dcn_op(&t, 1, 4, 8, 3, 1, w);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "offset");
    dcn_op(&t, 3, 4, 8, 3, 1, w);
    top_ints2(&t, "stride", 1, 0);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "stride");
    dcn_op(&t, 2, 4, 8, 3, 1, w);
    top_ints2(&t, "dilation", -1, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "dilation");
    dcn_op(&t, 2, 4, 8, 3, 3, w);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "groups");
    dcn_op(&t, 2, 4, 8, 3, 1, w);
    top_int(&t, "in_channels", 5);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "in_channels");
    top_init(&t, DCN, 2, 1);
    top_ints2(&t, "kernel_size", 3, 2);
    top_attr(&t, "weight", 4, (const int64_t[]){ 8, 4, 3, 3 }, w);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "kernel_size");
    dcn_op(&t, 2, 4, 8, 3, 1, w);
    t.params[3].i = 1; /* bias=True without @bias */
    top_expect_create_fail(&t, KI_ERR_FORMAT, "bias");
    top_init(&t, DCN, 2, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "weight");

    roi_op(&t, 0, 2, 2, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "output_size");
    roi_op(&t, 2, 2, 1 << 20, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "sampling_ratio");
    top_init(&t, ROIA, 2, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "output_size");
    roi_op(&t, 2, 2, 2, 1);
    t.d.n_inputs = 3;
    top_expect_create_fail(&t, KI_ERR_FORMAT, "inputs");
}

/* pnnx.custom_op.torchvision.deform_conv2d with its five inputs named (keys, which t points to)
 * and its nine constants: stride, padding, dilation, groups and offset groups 1, use_mask. */
static void dcn_custom_op(top *t, const char **keys)
{
    static const char *const consts[8] = { "arg_5", "arg_6",  "arg_7",  "arg_8",
                                           "arg_9", "arg_10", "arg_11", "arg_12" };
    static const char *const names[5] = { "arg_0", "arg_1", "arg_2", "arg_3", "arg_4" };
    top_init(t, "pnnx.custom_op.torchvision.deform_conv2d", 5, 1);
    for (int i = 0; i < 5; i++) {
        keys[i] = names[i];
    }
    t->d.input_keys = keys;
    for (int i = 0; i < 8; i++) {
        top_int(t, consts[i], 1);
    }
    top_bool(t, "arg_13", 1);
}

static void test_custom_errors(void **unused)
{
    (void)unused;
    top t;
    const char *keys[5];
    dcn_custom_op(&t, keys);
    keys[3] = NULL;
    top_expect_create_fail(&t, KI_ERR_UNSUPPORTED, "$arg_0 .. $arg_4");
    dcn_custom_op(&t, keys);
    t.d.n_params--; /* no use_mask */
    top_expect_create_fail(&t, KI_ERR_UNSUPPORTED, "arg_13");
    dcn_custom_op(&t, keys);
    t.params[6].i = 0; /* groups */
    top_expect_create_fail(&t, KI_ERR_FORMAT, "groups");
    dcn_custom_op(&t, keys);
    t.params[0].i = -1; /* stride_h */
    top_expect_create_fail(&t, KI_ERR_FORMAT, "stride");
    roi_op(&t, 2, 2, 2, 1);
    t.d.type = "pnnx.custom_op.torchvision.roi_align";
    top_expect_create_fail(&t, KI_ERR_UNSUPPORTED, "arg_2");
}

/* Creates t and expects shape() to fail on the input shapes with a message holding needle. */
static void expect_shape_fail(const top *t, const ki_shape *in, int n_in, const char *needle)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_shape out[1];
    assert_int_equal(top_create(t, &ops, &st, &err), KI_OK);
    ki_status s = ops->shape(st, in, n_in, out, 1, &err);
    ops->destroy(st);
    if (s == KI_OK || !strstr(err.msg, needle)) {
        fail_msg("%s: status %d, message '%s'; expected '%s'", t->d.type, (int)s, err.msg, needle);
    }
}

static void test_shape_errors(void **unused)
{
    (void)unused;
    static float w[8 * 4 * 9];
    top t;
    ki_shape in[3];
    dcn_op(&t, 3, 4, 8, 3, 1, w);
    in[0] = ki_shape_make(3, (const int64_t[]){ 4, 6, 6 });
    in[1] = ki_shape_make(4, (const int64_t[]){ 1, 18, 6, 6 });
    in[2] = ki_shape_make(4, (const int64_t[]){ 1, 9, 6, 6 });
    expect_shape_fail(&t, in, 3, "input");
    in[0] = ki_shape_make(4, (const int64_t[]){ 1, 4, 6, 6 });
    in[1] = ki_shape_make(4, (const int64_t[]){ 1, 17, 6, 6 });
    expect_shape_fail(&t, in, 3, "offset");
    in[1] = ki_shape_make(4, (const int64_t[]){ 1, 18, 6, 5 });
    expect_shape_fail(&t, in, 3, "offset");
    in[1] = ki_shape_make(4, (const int64_t[]){ 1, 3 * 18, 6, 6 });
    in[2] = ki_shape_make(4, (const int64_t[]){ 1, 27, 6, 6 });
    expect_shape_fail(&t, in, 3, "offset groups do not divide");
    in[1] = ki_shape_make(4, (const int64_t[]){ 1, 36, 6, 6 });
    expect_shape_fail(&t, in, 3, "mask has 3 groups");
    in[2] = ki_shape_make(4, (const int64_t[]){ 2, 18, 6, 6 });
    expect_shape_fail(&t, in, 3, "mask");
    dcn_op(&t, 2, 4, 8, 3, 1, w);
    t.ints[1][0] = t.ints[1][1] = 0; /* padding 0 */
    in[0] = ki_shape_make(4, (const int64_t[]){ 1, 4, 2, 6 });
    in[1] = ki_shape_make(4, (const int64_t[]){ 1, 18, 1, 4 });
    expect_shape_fail(&t, in, 2, "too small");

    roi_op(&t, 2, 2, 2, 1);
    in[0] = ki_shape_make(3, (const int64_t[]){ 4, 6, 6 });
    in[1] = ki_shape_make(2, (const int64_t[]){ 3, 5 });
    expect_shape_fail(&t, in, 2, "4-D");
    in[0] = ki_shape_make(4, (const int64_t[]){ 1, 4, 6, 6 });
    in[1] = ki_shape_make(2, (const int64_t[]){ 3, 4 });
    expect_shape_fail(&t, in, 2, "(K, 5)");
    in[1] = ki_shape_make(1, (const int64_t[]){ 5 });
    expect_shape_fail(&t, in, 2, "(K, 5)");

    const char *keys[5];
    ki_shape cin[5] = { ki_shape_make(4, (const int64_t[]){ 1, 4, 6, 6 }),
                        ki_shape_make(4, (const int64_t[]){ 8, 4, 3, 3 }),
                        ki_shape_make(4, (const int64_t[]){ 1, 18, 6, 6 }),
                        ki_shape_make(4, (const int64_t[]){ 1, 9, 6, 6 }),
                        ki_shape_make(1, (const int64_t[]){ 8 }) };
    dcn_custom_op(&t, keys);
    cin[1] = ki_shape_make(3, (const int64_t[]){ 8, 4, 3 });
    expect_shape_fail(&t, cin, 5, "weight");
    cin[1] = ki_shape_make(4, (const int64_t[]){ 8, 4, 3, 3 });
    cin[4] = ki_shape_make(1, (const int64_t[]){ 7 });
    expect_shape_fail(&t, cin, 5, "bias");
    cin[4] = ki_shape_make(1, (const int64_t[]){ 8 });
    cin[2] = ki_shape_make(4, (const int64_t[]){ 1, 36, 6, 6 });
    expect_shape_fail(&t, cin, 5, "offset_groups is 1");
}

/* Runs the layer t at 1 and 2 threads: both succeed with bitwise equal outputs of n floats
 * (the first returned, to free), or both fail with `want` (an output to free all the same). */
static float *run_both(const top *t, const ki_tensor *in, int n_in, ki_status want, int64_t n)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_tensor out[2];
    assert_int_equal(top_create(t, &ops, &st, &err), KI_OK);
    for (int th = 1; th <= 2; th++) {
        ki_status s = top_run(ops, st, in, n_in, &out[th - 1], 1, th, &err);
        assert_int_equal(s, want);
        assert_int_equal(ki_shape_count(&out[th - 1].shape), n);
    }
    ops->destroy(st);
    if (want == KI_OK) {
        assert_memory_equal(out[0].data, out[1].data, (size_t)n * sizeof(float));
    }
    free(out[1].data);
    return out[0].data;
}

static void fill(uint64_t *rng, float *p, int64_t n, float lo, float hi)
{
    for (int64_t i = 0; i < n; i++) {
        p[i] = lo + (hi - lo) * (float)trng_int(rng, 0, 1 << 20) / (float)(1 << 20);
    }
}

/* 2 images of 11 x 13 output pixels (three tiles each), 2 groups, 2 offset groups, a mask; NaN
 * offsets sample zero. */
static void test_deform_tiles(void **unused)
{
    (void)unused;
    enum { C = 4, O = 6, H = 11, W = 13 };
    static float w[O * (C / 2) * 9], x[2 * C * H * W], off[2 * 36 * H * W], m[2 * 18 * H * W];
    uint64_t rng = 7;
    fill(&rng, w, O * (C / 2) * 9, -1, 1);
    fill(&rng, x, 2 * C * H * W, -1, 1);
    fill(&rng, off, 2 * 36 * H * W, -4, 4);
    fill(&rng, m, 2 * 18 * H * W, 0, 1);
    off[5] = NAN;
    top t;
    dcn_op(&t, 3, C, O, 3, 2, w);
    ki_tensor in[3] = { { ki_shape_make(4, (const int64_t[]){ 2, C, H, W }), x },
                        { ki_shape_make(4, (const int64_t[]){ 2, 36, H, W }), off },
                        { ki_shape_make(4, (const int64_t[]){ 2, 18, H, W }), m } };
    float *y = run_both(&t, in, 3, KI_OK, 2 * O * H * W);
    for (int i = 0; i < 2 * O * H * W; i++) {
        assert_true(isfinite(y[i]));
    }
    free(y);
}

static void test_roi_boxes(void **unused)
{
    (void)unused;
    static float x[2 * 3 * 8 * 8];
    float boxes[3 * 5] = { 1, 0, 0, 6, 6, 0.5f, 1, 1, 3, 7, 0, NAN, 2, 5, 5 };
    uint64_t rng = 3;
    fill(&rng, x, 2 * 3 * 8 * 8, -1, 1);
    top t;
    roi_op(&t, 2, 3, 2, 1);
    ki_tensor in[2] = { { ki_shape_make(4, (const int64_t[]){ 2, 3, 8, 8 }), x },
                        { ki_shape_make(2, (const int64_t[]){ 3, 5 }), boxes } };
    float *y = run_both(&t, in, 2, KI_OK, 3 * 3 * 6);
    for (int i = 0; i < 3 * 3 * 6; i++) {
        assert_true(isfinite(y[i]));
    }
    free(y);
    boxes[10] = 2.0f; /* batch index N */
    free(run_both(&t, in, 2, KI_ERR_LIMIT, 3 * 3 * 6));
    boxes[10] = NAN;
    free(run_both(&t, in, 2, KI_ERR_LIMIT, 3 * 3 * 6));
    boxes[10] = -0.5f; /* truncates to 0, as in torchvision */
    free(run_both(&t, in, 2, KI_OK, 3 * 3 * 6));
    roi_op(&t, 2, 3, 0, 0); /* adaptive: a huge box would need a huge grid */
    boxes[13] = 1e30f;
    free(run_both(&t, in, 2, KI_ERR_LIMIT, 3 * 3 * 6));
    boxes[13] = INFINITY;
    free(run_both(&t, in, 2, KI_ERR_LIMIT, 3 * 3 * 6));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors), cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_custom_errors), cmocka_unit_test(test_deform_tiles),
        cmocka_unit_test(test_roi_boxes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
