/* test_ops3d.c - the 3-D layers (conv3d.c, deconv3d.c, pool3d.c): malformed parameters and
 * shapes fail with a message, and convolutions large enough to run in several column chunks
 * match naive per-tap loops, bitwise equal at 1 and 2 threads. PyTorch's values are checked by
 * the zoo cases (tests/data/ops/conv3d*, deconv3d, f_conv3d, f_deconv3d, pool3d_*). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "test_conv_util.h"

static void top_ints3(top *t, const char *key, int64_t a, int64_t b, int64_t c)
{
    int64_t v[3] = { a, b, c };
    top_ints(t, key, 3, v);
}

/* An nn.Conv3d (or nn.ConvTranspose3d) with a cubic kernel k, no bias. */
static void conv3d_op(top *t, const char *type, int64_t in, int64_t out, int64_t k, int64_t groups,
                      const float *w)
{
    bool transposed = strcmp(type, "nn.ConvTranspose3d") == 0;
    int64_t wd[5] = { transposed ? in : out, (transposed ? out : in) / groups, k, k, k };
    top_init(t, type, 1, 1);
    top_ints3(t, "kernel_size", k, k, k);
    top_int(t, "groups", groups);
    top_attr(t, "weight", 5, wd, w);
}

/* Creates t; fails the test when that fails. */
static void *create_ok(const top *t, const ki_layer_ops **ops)
{
    void *st = NULL;
    ki_error err = { 0 };
    if (top_create(t, ops, &st, &err) != KI_OK) {
        fail_msg("create: %s", err.msg);
    }
    return st;
}

static void expect_msg(const ki_error *err, const char *needle)
{
    if (!strstr(err->msg, needle)) {
        fail_msg("message '%s' lacks '%s'", err->msg, needle);
    }
}

static void test_create_errors(void **unused)
{
    (void)unused;
    static float w[4 * 2 * 27];
    top t;
    conv3d_op(&t, "nn.Conv3d", 2, 4, 3, 1, w);
    top_str(&t, "padding_mode", "mirror");
    top_expect_create_fail(&t, KI_ERR_UNSUPPORTED, "padding_mode");
    conv3d_op(&t, "nn.Conv3d", 2, 4, 3, 1, w);
    top_ints3(&t, "stride", 1, 0, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "stride");
    top_init(&t, "nn.Conv3d", 1, 1);
    top_ints3(&t, "kernel_size", 3, 3, 2);
    top_attr(&t, "weight", 5, (const int64_t[]){ 4, 2, 3, 3, 3 }, w);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "kernel_size");
    conv3d_op(&t, "nn.Conv3d", 2, 4, 3, 3, w);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "groups");
    conv3d_op(&t, "nn.Conv3d", 2, 4, 3, 1, w);
    top_str(&t, "padding", "same");
    top_ints3(&t, "stride", 2, 2, 2);
    top_expect_create_fail(&t, KI_ERR_UNSUPPORTED, "same needs stride 1");
    top_init(&t, "nn.Conv3d", 1, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "weight");
    conv3d_op(&t, "nn.ConvTranspose3d", 4, 2, 3, 1, w);
    top_ints3(&t, "output_padding", 0, 1, 0);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "output_padding");
    top_init(&t, "F.conv3d", 1, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "inputs");
    top_init(&t, "nn.MaxPool3d", 1, 1);
    top_ints3(&t, "kernel_size", 2, 2, 2);
    top_ints3(&t, "padding", 0, 2, 0);
    top_expect_create_fail(&t, KI_ERR_SHAPE, "half");
    top_init(&t, "nn.MaxPool3d", 1, 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "kernel_size");
    top_init(&t, "F.max_pool3d", 1, 1);
    top_ints3(&t, "kernel_size", 2, 2, 2);
    top_bool(&t, "return_indices", 1);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "outputs");
    top_init(&t, "nn.AvgPool3d", 1, 1);
    top_ints3(&t, "kernel_size", 2, 2, 2);
    top_int(&t, "divisor_override", 0);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "divisor_override");
    top_init(&t, "nn.AdaptiveAvgPool3d", 1, 1);
    top_ints2(&t, "output_size", 2, 2);
    top_expect_create_fail(&t, KI_ERR_FORMAT, "output_size");
}

/* Creates t and expects shape() to fail on the input shapes with a message holding needle. */
static void expect_shape_fail(const top *t, const ki_shape *in, int n_in, const char *needle)
{
    const ki_layer_ops *ops;
    void *st = create_ok(t, &ops);
    ki_error err = { 0 };
    ki_shape out[2];
    ki_status s = ops->shape(st, in, n_in, out, t->d.n_outputs, &err);
    ops->destroy(st);
    assert_int_equal(s, KI_ERR_SHAPE);
    expect_msg(&err, needle);
}

static void test_shape_errors(void **unused)
{
    (void)unused;
    static float w[4 * 2 * 27];
    top t;
    ki_shape in[3];
    conv3d_op(&t, "nn.Conv3d", 2, 4, 3, 1, w);
    in[0] = ki_shape_make(3, (const int64_t[]){ 2, 5, 5 });
    expect_shape_fail(&t, in, 1, "5-D");
    in[0] = ki_shape_make(5, (const int64_t[]){ 1, 3, 5, 5, 5 });
    expect_shape_fail(&t, in, 1, "channels");
    in[0] = ki_shape_make(5, (const int64_t[]){ 1, 2, 2, 5, 5 });
    expect_shape_fail(&t, in, 1, "kernel");
    conv3d_op(&t, "nn.Conv3d", 2, 4, 3, 1, w);
    top_ints3(&t, "padding", 2, 0, 0);
    top_str(&t, "padding_mode", "reflect");
    expect_shape_fail(&t, in, 1, "reflect");
    top_init(&t, "F.conv3d", 3, 1);
    in[0] = ki_shape_make(5, (const int64_t[]){ 1, 2, 5, 5, 5 });
    in[1] = ki_shape_make(5, (const int64_t[]){ 4, 2, 3, 3, 3 });
    in[2] = ki_shape_make(1, (const int64_t[]){ 3 });
    expect_shape_fail(&t, in, 3, "bias");
    in[1] = ki_shape_make(4, (const int64_t[]){ 4, 2, 3, 3 });
    expect_shape_fail(&t, in, 3, "weight");
    top_init(&t, "nn.MaxPool3d", 1, 1);
    top_ints3(&t, "kernel_size", 3, 3, 3);
    in[0] = ki_shape_make(5, (const int64_t[]){ 1, 2, 5, 2, 5 });
    expect_shape_fail(&t, in, 1, "too small");
    top_init(&t, "nn.AdaptiveMaxPool3d", 1, 1);
    top_ints3(&t, "output_size", 2, 2, 2);
    in[0] = ki_shape_make(5, (const int64_t[]){ 1, 2, 5, 0, 5 });
    expect_shape_fail(&t, in, 1, "empty");
}

/* Naive nn.Conv3d with zero padding p and stride s in every dim (no bias). */
static void naive_conv(const float *x, const int64_t *xd, const float *w, int64_t oc_n,
                       int64_t groups, int64_t k, int64_t s, int64_t p, const int64_t *od, float *y)
{
    int64_t cig = xd[1] / groups, cog = oc_n / groups;
    for (int64_t oc = 0; oc < oc_n; oc++) {
        for (int64_t i = 0; i < od[2] * od[3] * od[4]; i++) {
            int64_t oz = i / (od[3] * od[4]), oy = i / od[4] % od[3], ox = i % od[4];
            double acc = 0;
            for (int64_t ic = 0; ic < cig; ic++) {
                for (int64_t t = 0; t < k * k * k; t++) {
                    int64_t iz = oz * s - p + t / (k * k), iy = oy * s - p + t / k % k;
                    int64_t ix = ox * s - p + t % k;
                    if (iz < 0 || iy < 0 || ix < 0 || iz >= xd[2] || iy >= xd[3] || ix >= xd[4]) {
                        continue;
                    }
                    acc += (double)x[(((oc / cog) * cig + ic) * xd[2] + iz) * xd[3] * xd[4] +
                                     iy * xd[4] + ix] *
                           w[(oc * cig + ic) * k * k * k + t];
                }
            }
            y[oc * od[2] * od[3] * od[4] + i] = (float)acc;
        }
    }
}

/* Naive nn.ConvTranspose3d (scatter) with padding p and stride s in every dim (no bias). */
static void naive_deconv(const float *x, const int64_t *xd, const float *w, int64_t oc_n,
                         int64_t groups, int64_t k, int64_t s, int64_t p, const int64_t *od,
                         double *acc)
{
    int64_t cig = xd[1] / groups, cog = oc_n / groups, ov = od[2] * od[3] * od[4];
    memset(acc, 0, (size_t)(oc_n * ov) * sizeof *acc);
    for (int64_t ic = 0; ic < xd[1]; ic++) {
        for (int64_t i = 0; i < xd[2] * xd[3] * xd[4]; i++) {
            int64_t iz = i / (xd[3] * xd[4]), iy = i / xd[4] % xd[3], ix = i % xd[4];
            for (int64_t c = 0; c < cog; c++) {
                for (int64_t t = 0; t < k * k * k; t++) {
                    int64_t oz = iz * s - p + t / (k * k), oy = iy * s - p + t / k % k;
                    int64_t ox = ix * s - p + t % k;
                    if (oz < 0 || oy < 0 || ox < 0 || oz >= od[2] || oy >= od[3] || ox >= od[4]) {
                        continue;
                    }
                    acc[((ic / cig) * cog + c) * ov + (oz * od[3] + oy) * od[4] + ox] +=
                        (double)x[ic * xd[2] * xd[3] * xd[4] + i] *
                        w[(ic * cog + c) * k * k * k + t];
                }
            }
        }
    }
}

/* Runs t on x at 1 and 2 threads: the same bits both times, close to want. */
static void run_check(const top *t, const ki_tensor *x, const float *want, size_t n)
{
    const ki_layer_ops *ops;
    void *st = create_ok(t, &ops);
    ki_error err = { 0 };
    ki_tensor out[2];
    for (int th = 1; th <= 2; th++) {
        if (top_run(ops, st, x, 1, &out[th - 1], 1, th, &err) != KI_OK) {
            fail_msg("%s", err.msg);
        }
        assert_int_equal(ki_shape_count(&out[th - 1].shape), (int64_t)n);
        long bad = tclose(out[th - 1].data, want, n, 1e-4f, 1e-4f);
        if (bad >= 0) {
            fail_msg("%s at %d threads: [%ld] %g vs %g", t->d.type, th, bad,
                     (double)out[th - 1].data[bad], (double)want[bad]);
        }
    }
    assert_memory_equal(out[0].data, out[1].data, n * sizeof(float));
    free(out[0].data), free(out[1].data);
    ops->destroy(st);
}

/* n floats from the seeded generator, malloc'd. */
static float *rand_floats(uint64_t *seed, size_t n)
{
    float *p = malloc(n * sizeof *p);
    trng_fill(seed, p, n);
    return p;
}

/* y[i] = acc[i] for the n values of a naive_deconv result. */
static void to_float(const double *acc, float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        y[i] = (float)acc[i];
    }
}

/* Gives t stride s and padding p in every dim, then runs it on x (dims xd) against want. */
static void run_strided(top *t, int64_t s, int64_t p, const int64_t xd[5], float *x,
                        const float *want, size_t n)
{
    top_ints3(t, "stride", s, s, s);
    top_ints3(t, "padding", p, p, p);
    ki_tensor in = { ki_shape_make(5, xd), x };
    run_check(t, &in, want, n);
}

/* 8 -> 4 channels, 3x3x3 on 20x32x32: in two groups with stride 2 and padding, then ungrouped,
 * stride 1, unpadded (216 column rows x 18 planes of 30x30: two chunks of output planes). */
static void test_conv_chunks(void **unused)
{
    (void)unused;
    uint64_t seed = 0x3d3d;
    const int64_t xd[5] = { 1, 8, 20, 32, 32 }, od[5] = { 1, 4, 10, 16, 16 };
    size_t nx = 8 * 20 * 32 * 32, nw = 4 * 8 * 27, ny = 4 * 10 * 16 * 16;
    float *x = rand_floats(&seed, nx), *w = rand_floats(&seed, nw);
    float *y = malloc(ny * sizeof *y);
    naive_conv(x, xd, w, 4, 2, 3, 2, 1, od, y);
    top t;
    conv3d_op(&t, "nn.Conv3d", 8, 4, 3, 2, w);
    run_strided(&t, 2, 1, xd, x, y, ny);
    const int64_t od1[5] = { 1, 4, 18, 30, 30 };
    size_t ny1 = 4 * 18 * 30 * 30;
    float *y1 = malloc(ny1 * sizeof *y1);
    naive_conv(x, xd, w, 4, 1, 3, 1, 0, od1, y1);
    conv3d_op(&t, "nn.Conv3d", 8, 4, 3, 1, w);
    run_strided(&t, 1, 0, xd, x, y1, ny1);
    free(x), free(w), free(y), free(y1);
}

/* 4 -> 4 channels in two groups, 3x3x3, stride 2, on 40x32x32: 54 column rows x 40 planes of
 * 32x32, two chunks of input planes. */
static void test_deconv_chunks(void **unused)
{
    (void)unused;
    uint64_t seed = 0xdec3;
    const int64_t xd[5] = { 1, 4, 40, 32, 32 }, od[5] = { 1, 4, 79, 63, 63 };
    size_t nx = 4 * 40 * 32 * 32, nw = 4 * 2 * 27, ny = 4 * 79 * 63 * 63;
    float *x = rand_floats(&seed, nx), *w = rand_floats(&seed, nw);
    float *y = malloc(ny * sizeof *y);
    double *acc = malloc(ny * sizeof *acc);
    naive_deconv(x, xd, w, 4, 2, 3, 2, 1, od, acc);
    to_float(acc, y, ny);
    top t;
    conv3d_op(&t, "nn.ConvTranspose3d", 4, 4, 3, 2, w);
    run_strided(&t, 2, 1, xd, x, y, ny);
    /* one output channel, 1x1x1, stride 1: a column matrix of one row */
    const int64_t od1[5] = { 1, 1, 40, 32, 32 };
    naive_deconv(x, xd, w, 1, 1, 1, 1, 0, od1, acc);
    to_float(acc, y, nx / 4);
    conv3d_op(&t, "nn.ConvTranspose3d", 4, 1, 1, 1, w);
    run_strided(&t, 1, 0, xd, x, y, nx / 4);
    free(x), free(w), free(y), free(acc);
}

/* Random small shapes: groups, stride, padding, kernel sizes, both directions. */
static void test_random(void **unused)
{
    (void)unused;
    uint64_t seed = 0x5eed3d;
    for (int it = 0; it < 40; it++) {
        bool tr = it % 2;
        int64_t groups = trng_int(&seed, 1, 3), cin = groups * trng_int(&seed, 1, 3);
        int64_t cout = groups * trng_int(&seed, 1, 3), k = trng_int(&seed, 1, 3);
        int64_t s = trng_int(&seed, 1, 2), p = trng_int(&seed, 0, k - 1);
        int64_t xd[5] = { 1, cin, trng_int(&seed, k, 6), trng_int(&seed, k, 7),
                          trng_int(&seed, k, 9) };
        int64_t od[5] = { 1, cout, 0, 0, 0 };
        for (int i = 2; i < 5; i++) {
            od[i] = tr ? (xd[i] - 1) * s - 2 * p + k : (xd[i] + 2 * p - k) / s + 1;
        }
        size_t nx = (size_t)(cin * xd[2] * xd[3] * xd[4]), nw = (size_t)(cin * cout * k * k * k);
        size_t ny = (size_t)(cout * od[2] * od[3] * od[4]);
        float *x = rand_floats(&seed, nx), *w = rand_floats(&seed, nw);
        float *y = malloc(ny * sizeof *y);
        double *acc = malloc(ny * sizeof *acc);
        if (tr) {
            naive_deconv(x, xd, w, cout, groups, k, s, p, od, acc);
            to_float(acc, y, ny);
        } else {
            naive_conv(x, xd, w, cout, groups, k, s, p, od, y);
        }
        top t;
        conv3d_op(&t, tr ? "nn.ConvTranspose3d" : "nn.Conv3d", cin, cout, k, groups, w);
        run_strided(&t, s, p, xd, x, y, ny);
        free(x), free(w), free(y), free(acc);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_errors), cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_conv_chunks),   cmocka_unit_test(test_deconv_chunks),
        cmocka_unit_test(test_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
