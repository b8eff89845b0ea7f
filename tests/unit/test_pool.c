/* test_pool.c - max/avg pooling and the adaptive pools: hand-computed cases, PyTorch's
 * ceil_mode / count_include_pad / divisor_override / index rules, errors, and random shapes
 * against naive per-tap loops at 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "../../layers/conv_common.h"
#include "test_conv_util.h"

static const float grid4[16] = { 3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3 };

/* Runs t on x (shape d) and checks outputs 0 (and 1 when want1) at 1 and 2 threads. */
static void run_expect(const top *t, int ndim, const int64_t *d, const float *x, const int64_t *od,
                       const float *want0, const float *want1)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_tensor in = { ki_shape_make(ndim, d), (float *)x }, out[2];
    if (top_create(t, &ops, &st, &err) != KI_OK) {
        fail_msg("create: %s", err.msg);
    }
    int n_out = t->d.n_outputs;
    for (int th = 1; th <= 2; th++) {
        if (top_run(ops, st, &in, 1, out, n_out, th, &err) != KI_OK) {
            fail_msg("%s", err.msg);
        }
        assert_memory_equal(out[0].shape.d, od, (size_t)ndim * sizeof *od);
        for (int64_t i = 0; i < ki_shape_count(&out[0].shape); i++) {
            if (isnan(want0[i])) {
                assert_true(isnan(out[0].data[i]));
            } else {
                assert_float_equal(out[0].data[i], want0[i], 1e-5);
            }
            if (want1) {
                assert_float_equal(out[1].data[i], want1[i], 0);
            }
        }
        for (int i = 0; i < n_out; i++) {
            free(out[i].data);
        }
    }
    ops->destroy(st);
}

static void pool_op(top *t, const char *type, int n_out, int64_t kh, int64_t kw)
{
    top_init(t, type, 1, n_out);
    top_ints2(t, "kernel_size", kh, kw);
}

static void test_max_hand(void **unused)
{
    (void)unused;
    int64_t d[4] = { 1, 1, 4, 4 };
    top t;
    pool_op(&t, "F.max_pool2d", 2, 2, 2);
    top_none(&t, "stride");
    top_bool(&t, "return_indices", 1);
    run_expect(&t, 4, d, grid4, (const int64_t[]){ 1, 1, 2, 2 }, (const float[]){ 9, 6, 9, 9 },
               (const float[]){ 5, 7, 12, 14 });
    /* 3x3, stride 2, padding 1: windows clipped at the border; unbatched input */
    pool_op(&t, "nn.MaxPool2d", 2, 3, 3);
    top_ints2(&t, "stride", 2, 2);
    top_ints2(&t, "padding", 1, 1);
    top_bool(&t, "return_indices", 1);
    run_expect(&t, 3, d + 1, grid4, (const int64_t[]){ 1, 2, 2 }, (const float[]){ 9, 9, 9, 9 },
               (const float[]){ 5, 5, 5, 5 });
    /* dilation 2: taps 0 and 2 of each row and column */
    pool_op(&t, "nn.MaxPool2d", 1, 2, 2);
    top_ints2(&t, "stride", 1, 1);
    top_ints2(&t, "dilation", 2, 2);
    run_expect(&t, 4, d, grid4, (const int64_t[]){ 1, 1, 2, 2 }, (const float[]){ 5, 8, 9, 9 },
               NULL);
    /* a NaN always wins */
    float xn[4] = { 1, NAN, 3, 2 };
    pool_op(&t, "nn.MaxPool2d", 2, 2, 2);
    top_bool(&t, "return_indices", 1);
    run_expect(&t, 4, (const int64_t[]){ 1, 1, 2, 2 }, xn, (const int64_t[]){ 1, 1, 1, 1 },
               (const float[]){ NAN }, (const float[]){ 1 });
}

static void test_ceil_mode(void **unused)
{
    (void)unused;
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    ki_shape out[1];
    top t;
    /* {H, k, s, pad, ceil, expected}: the zoo's cases and the "last window starts in the right
     * padding" rule (H=1, k=2, s=2, p=1 gives 1, not 2). */
    static const int64_t cases[][6] = { { 15, 3, 2, 1, 0, 8 }, { 15, 3, 2, 0, 1, 7 },
                                        { 16, 3, 2, 0, 1, 8 }, { 16, 3, 2, 1, 1, 9 },
                                        { 1, 2, 2, 1, 1, 1 },  { 1, 2, 2, 1, 0, 1 },
                                        { 5, 2, 2, 0, 1, 3 },  { 5, 2, 2, 0, 0, 2 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int64_t *c = cases[i];
        pool_op(&t, "nn.MaxPool2d", 1, c[1], c[1]);
        top_ints2(&t, "stride", c[2], c[2]);
        top_ints2(&t, "padding", c[3], c[3]);
        top_bool(&t, "ceil_mode", (int)c[4]);
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_shape in = ki_shape_make(4, (const int64_t[]){ 2, 3, c[0], c[0] });
        assert_int_equal(ops->shape(st, &in, 1, out, 1, &err), KI_OK);
        if (out[0].d[2] != c[5]) {
            fail_msg("case %zu: output %lld, expected %lld", i, (long long)out[0].d[2],
                     (long long)c[5]);
        }
        ops->destroy(st);
    }
}

static void test_avg_hand(void **unused)
{
    (void)unused;
    static const float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    int64_t d[4] = { 1, 1, 3, 3 }, o22[4] = { 1, 1, 2, 2 };
    top t;
    pool_op(&t, "nn.AvgPool2d", 1, 2, 2);
    top_ints2(&t, "stride", 1, 1);
    run_expect(&t, 4, d, x, o22, (const float[]){ 3, 4, 6, 7 }, NULL);
    pool_op(&t, "F.avg_pool2d", 1, 2, 2);
    top_ints2(&t, "padding", 1, 1);
    run_expect(&t, 4, d, x, o22, (const float[]){ 0.25f, 1.25f, 2.75f, 7 }, NULL);
    top_bool(&t, "count_include_pad", 0);
    run_expect(&t, 4, d, x, o22, (const float[]){ 1, 2.5f, 5.5f, 7 }, NULL);
    top_int(&t, "divisor_override", 2);
    run_expect(&t, 4, d, x, o22, (const float[]){ 0.5f, 2.5f, 5.5f, 14 }, NULL);
    /* ceil_mode: the last window is cut at the input's edge and divides by what it covers */
    pool_op(&t, "nn.AvgPool2d", 1, 1, 2);
    top_ints2(&t, "stride", 1, 2);
    top_bool(&t, "ceil_mode", 1);
    run_expect(&t, 4, (const int64_t[]){ 1, 1, 1, 3 }, x, (const int64_t[]){ 1, 1, 1, 2 },
               (const float[]){ 1.5f, 3 }, NULL);
}

static void test_adaptive_hand(void **unused)
{
    (void)unused;
    static const float x[5] = { 1, 2, 3, 4, 5 };
    int64_t d[4] = { 1, 1, 1, 5 }, o[4] = { 1, 1, 1, 3 };
    top t;
    top_init(&t, "nn.AdaptiveAvgPool2d", 1, 1);
    top_ints2(&t, "output_size", 1, 3);
    run_expect(&t, 4, d, x, o, (const float[]){ 1.5f, 3, 4.5f }, NULL);
    top_init(&t, "F.adaptive_max_pool2d", 1, 2);
    top_ints2(&t, "output_size", 1, 3);
    top_bool(&t, "return_indices", 1);
    run_expect(&t, 4, d, x, o, (const float[]){ 2, 4, 5 }, (const float[]){ 1, 3, 4 });
    /* (None,3): the None keeps the input height; a single int applies to both */
    static const char *const none3[2] = { "None", "3" };
    top_init(&t, "F.adaptive_avg_pool2d", 1, 1);
    ki_param *p = top_param(&t, "output_size", "(None,3)", KI_PARAM_STRINGS);
    p->n = 2, p->strs = none3;
    run_expect(&t, 3, d + 1, x, o + 1, (const float[]){ 1.5f, 3, 4.5f }, NULL);
    top_init(&t, "nn.AdaptiveMaxPool2d", 1, 1);
    top_int(&t, "output_size", 1);
    run_expect(&t, 4, (const int64_t[]){ 1, 1, 4, 4 }, grid4, (const int64_t[]){ 1, 1, 1, 1 },
               (const float[]){ 9 }, NULL);
}

/* Adaptive average pooling (whole-row cells: the contiguous summation) against a double mean on
 * random shapes, output sizes 1 (global), (2,1) and (3,3), 1 and 2 threads. */
static void test_adaptive_random(void **unused)
{
    (void)unused;
    static const int64_t sizes[3][2] = { { 1, 1 }, { 2, 1 }, { 3, 3 } };
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        int64_t d[4] = { 1, trng_int(&s, 1, 4), trng_int(&s, 3, 30), trng_int(&s, 3, 40) };
        const int64_t *os = sizes[seed % 3];
        size_t nx = (size_t)(d[1] * d[2] * d[3]);
        float *x = malloc(nx * 4);
        trng_fill(&s, x, nx);
        top t;
        top_init(&t, "nn.AdaptiveAvgPool2d", 1, 1);
        top_ints2(&t, "output_size", os[0], os[1]);
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        ki_tensor in = { ki_shape_make(4, d), x }, out;
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        assert_int_equal(top_run(ops, st, &in, 1, &out, 1, (int)(seed % 2) + 1, &err), KI_OK);
        for (int64_t i = 0; i < d[1] * os[0] * os[1]; i++) {
            int64_t pl = i / (os[0] * os[1]), oy = i / os[1] % os[0], ox = i % os[1];
            int64_t y0 = oy * d[2] / os[0], y1 = ((oy + 1) * d[2] + os[0] - 1) / os[0];
            int64_t x0 = ox * d[3] / os[1], x1 = ((ox + 1) * d[3] + os[1] - 1) / os[1];
            double acc = 0;
            for (int64_t y = y0; y < y1; y++) {
                for (int64_t xx = x0; xx < x1; xx++) {
                    acc += x[(pl * d[2] + y) * d[3] + xx];
                }
            }
            assert_float_equal(out.data[i], acc / (double)((y1 - y0) * (x1 - x0)), 1e-5);
        }
        free(out.data);
        ops->destroy(st);
        free(x);
    }
}

static void expect_fail(const top *t, ki_status code)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    assert_int_equal(top_create(t, &ops, &st, &err), code);
    assert_true(err.msg[0] != '\0');
}

static void test_errors(void **unused)
{
    (void)unused;
    top t;
    pool_op(&t, "nn.MaxPool2d", 1, 2, 2);
    top_ints2(&t, "padding", 2, 2);
    expect_fail(&t, KI_ERR_SHAPE);
    pool_op(&t, "nn.AvgPool2d", 1, 2, 2);
    top_ints2(&t, "dilation", 2, 2);
    expect_fail(&t, KI_ERR_FORMAT);
    pool_op(&t, "nn.MaxPool2d", 1, 2, 2);
    top_bool(&t, "return_indices", 1); /* but only one output */
    expect_fail(&t, KI_ERR_FORMAT);
    pool_op(&t, "nn.AvgPool2d", 1, 2, 2);
    top_int(&t, "divisor_override", 0);
    expect_fail(&t, KI_ERR_FORMAT);
    top_init(&t, "nn.MaxPool2d", 1, 1); /* no kernel_size */
    expect_fail(&t, KI_ERR_FORMAT);
    top_init(&t, "nn.AdaptiveAvgPool2d", 1, 1);
    top_str(&t, "output_size", "big");
    expect_fail(&t, KI_ERR_FORMAT);

    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    ki_shape out;
    pool_op(&t, "nn.MaxPool2d", 1, 3, 3);
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    ki_shape in = ki_shape_make(4, (const int64_t[]){ 1, 1, 2, 5 });
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    in = ki_shape_make(2, (const int64_t[]){ 5, 5 });
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    ops->destroy(st);
}

/* Naive max/avg over every kernel tap of a padded window, written independently of the layer. */
static void naive_pool(bool is_max, const int64_t *p, const float *x, int64_t h, int64_t w,
                       int64_t oh, int64_t ow, float *out)
{
    /* p: kh kw sh sw ph pw dh dw */
    for (int64_t oy = 0; oy < oh; oy++) {
        for (int64_t ox = 0; ox < ow; ox++) {
            double acc = is_max ? -INFINITY : 0;
            int64_t cnt = 0;
            for (int64_t t = 0; t < p[0] * p[1]; t++) {
                int64_t y = oy * p[2] - p[4] + t / p[1] * p[6];
                int64_t xx = ox * p[3] - p[5] + t % p[1] * p[7];
                cnt += y < h + p[4] && xx < w + p[5]; /* inside the padded extent */
                if (y >= 0 && y < h && xx >= 0 && xx < w) {
                    double v = x[y * w + xx];
                    acc = is_max ? (v > acc ? v : acc) : acc + v;
                }
            }
            out[oy * ow + ox] = (float)(is_max ? acc : acc / (double)cnt);
        }
    }
}

/* Runs a 2-D pooling op with kernel p[0..1], stride p[2..3], padding p[4..5], dilation p[6..7]
 * and a random ceil_mode drawn from s on x of shape d, at 1 or 2 threads by seed; *out gets the
 * result (caller frees out->data) when KI_OK is returned. */
static ki_status random_pool_run(const char *type, const int64_t p[8], const int64_t d[4],
                                 const float *x, uint64_t seed, uint64_t *s, ki_tensor *out)
{
    top t;
    pool_op(&t, type, 1, p[0], p[1]);
    top_ints2(&t, "stride", p[2], p[3]);
    top_ints2(&t, "padding", p[4], p[5]);
    top_ints2(&t, "dilation", p[6], p[7]);
    top_bool(&t, "ceil_mode", (int)trng_int(s, 0, 1));
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    ki_tensor in = { ki_shape_make(4, d), (float *)x };
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    ki_status rc = top_run(ops, st, &in, 1, out, 1, (int)(seed % 2) + 1, &err);
    ops->destroy(st);
    return rc;
}

static void test_random_vs_naive(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        bool is_max = seed % 2;
        int64_t p[8] = { trng_int(&s, 1, 4),
                         trng_int(&s, 1, 4),
                         trng_int(&s, 1, 3),
                         trng_int(&s, 1, 3),
                         0,
                         0,
                         is_max ? trng_int(&s, 1, 2) : 1,
                         1 };
        p[7] = is_max ? trng_int(&s, 1, 2) : 1;
        p[4] = trng_int(&s, 0, ((p[0] - 1) * p[6] + 1) / 2);
        p[5] = trng_int(&s, 0, ((p[1] - 1) * p[7] + 1) / 2);
        int64_t d[4] = { trng_int(&s, 1, 2), trng_int(&s, 1, 3), trng_int(&s, 1, 11),
                         trng_int(&s, 1, 12) };
        size_t nx = (size_t)(d[0] * d[1] * d[2] * d[3]);
        float *x = malloc(nx * 4);
        trng_fill(&s, x, nx);
        ki_tensor out;
        if (random_pool_run(is_max ? "nn.MaxPool2d" : "nn.AvgPool2d", p, d, x, seed, &s, &out) ==
            KI_OK) {
            int64_t oh = out.shape.d[2], ow = out.shape.d[3];
            float *want = malloc((size_t)(oh * ow) * 4);
            for (int64_t pl = 0; pl < d[0] * d[1]; pl++) {
                naive_pool(is_max, p, x + pl * d[2] * d[3], d[2], d[3], oh, ow, want);
                long bad = tclose(out.data + pl * oh * ow, want, (size_t)(oh * ow), 1e-6f, 1e-5f);
                if (bad >= 0) {
                    fail_msg("seed %llu plane %lld: out[%ld]", (unsigned long long)seed,
                             (long long)pl, bad);
                }
            }
            free(want);
            free(out.data);
        }
        free(x);
    }
}

/* NaN-aware naive max: any NaN tap makes the window NaN (torch.max_pool2d propagates it). */
static void naive_max_nan(const int64_t *p, const float *x, int64_t h, int64_t w, int64_t oh,
                          int64_t ow, float *out)
{
    naive_pool(true, p, x, h, w, oh, ow, out);
    for (int64_t i = 0; i < oh * ow; i++) {
        for (int64_t t = 0; t < p[0] * p[1]; t++) {
            int64_t y = i / ow * p[2] - p[4] + t / p[1] * p[6];
            int64_t xx = i % ow * p[3] - p[5] + t % p[1] * p[7];
            if (y >= 0 && y < h && xx >= 0 && xx < w && isnan(x[y * w + xx])) {
                out[i] = NAN;
            }
        }
    }
}

/* Ties keep the first maximum in the window's row-major order, which tells -0 from +0: the
 * separable rows path must give the bits the per-window reference gives (a column-first pass
 * would take the +0 below instead of the -0 to the right). */
static void test_max_ties_first(void **unused)
{
    (void)unused;
    static const float planes[3][4] = { { -1.0f, -0.0f, 0.0f, -1.0f },
                                        { -0.0f, 0.0f, 0.0f, -0.0f },
                                        { 0.0f, -0.0f, -0.0f, 0.0f } };
    static const bool neg[3] = { true, true, false };
    const int64_t p[8] = { 2, 2, 1, 1, 0, 0, 1, 1 }, d[4] = { 1, 1, 2, 2 };
    for (int i = 0; i < 3; i++) {
        uint64_t s = 7;
        ki_tensor out;
        assert_int_equal(random_pool_run("nn.MaxPool2d", p, d, planes[i], 1, &s, &out), KI_OK);
        assert_int_equal(out.shape.d[2] * out.shape.d[3], 1);
        assert_true(out.data[0] == 0.0f);
        assert_int_equal(signbit(out.data[0]) != 0, neg[i]);
        free(out.data);
    }
    /* the same through the separable form (5x5 windows): output (0, 0) sees -0 at row 0,
     * column 1 before +0 at row 1, column 0 */
    float big[25];
    for (int i = 0; i < 25; i++) {
        big[i] = -1.0f;
    }
    big[1] = -0.0f, big[5] = 0.0f;
    const int64_t p5[8] = { 5, 5, 1, 1, 2, 2, 1, 1 }, d5[4] = { 1, 1, 5, 5 };
    uint64_t s = 7;
    ki_tensor out;
    assert_int_equal(random_pool_run("nn.MaxPool2d", p5, d5, big, 2, &s, &out), KI_OK);
    assert_true(out.data[0] == 0.0f && signbit(out.data[0]));
    free(out.data);
}

/* The row kernels of max pooling (wide rows for the vector loop, strides 1 and 2, NaN in some
 * planes) against the naive loops, and the AVX2 row kernel against the plain one. */
static void test_max_rows(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 150; seed++) {
        uint64_t s = seed * 0x2545F4914F6CDD1Dull;
        int64_t p[8] = {
            trng_int(&s, 1, 4), trng_int(&s, 1, 4), trng_int(&s, 1, 3), trng_int(&s, 1, 2), 0, 0,
            trng_int(&s, 1, 2), trng_int(&s, 1, 2)
        };
        p[4] = trng_int(&s, 0, ((p[0] - 1) * p[6] + 1) / 2);
        p[5] = trng_int(&s, 0, ((p[1] - 1) * p[7] + 1) / 2);
        int64_t d[4] = { 1, trng_int(&s, 1, 3), trng_int(&s, 2, 9), trng_int(&s, 5, 70) };
        size_t nx = (size_t)(d[1] * d[2] * d[3]);
        float *x = malloc(nx * 4);
        trng_fill(&s, x, nx);
        if (seed % 3 == 0) {
            x[trng_int(&s, 0, (int64_t)nx - 1)] = NAN;
        }
        ki_tensor out;
        if (random_pool_run("nn.MaxPool2d", p, d, x, seed, &s, &out) == KI_OK) {
            int64_t oh = out.shape.d[2], ow = out.shape.d[3];
            float *want = malloc((size_t)(oh * ow) * 4);
            for (int64_t pl = 0; pl < d[1]; pl++) {
                naive_max_nan(p, x + pl * d[2] * d[3], d[2], d[3], oh, ow, want);
                long bad = tclose(out.data + pl * oh * ow, want, (size_t)(oh * ow), 0, 0);
                if (bad >= 0) {
                    fail_msg("seed %llu plane %lld: out[%ld] %g want %g", (unsigned long long)seed,
                             (long long)pl, bad, out.data[pl * oh * ow + bad], want[bad]);
                }
            }
            free(want);
            free(out.data);
        }
#if KI_HAVE_X86 /* the AVX2 row kernel exists only there */
        if (ki_cpu_get()->isa >= KI_ISA_AVX2) {
            float a[40], b[40];
            int64_t n = (int64_t)(nx < 81 ? (nx - 1) / 2 : 40), sw = p[3];
            trng_fill(&s, a, 40);
            memcpy(b, a, sizeof a);
            int na = ki_pool_rowmax_avx2(x, sw, a, n), nb = ki_pool_rowmax_ref(x, sw, b, n);
            assert_int_equal(na != 0, nb != 0);
            assert_memory_equal(a, b, sizeof a);
        }
#endif
        free(x);
    }
}

/* A NaN anywhere a window reads makes that window NaN, at every position of the plane: plane i
 * has its NaN at element i. Stride 2 with 2- and 3-wide windows (the stride-2 plane kernels,
 * whose NaN checks skip columns the vectors next to them cover), padded or not, widths around
 * the vectors' steps, against the naive scan. */
static void test_max_s2_nan_everywhere(void **unused)
{
    (void)unused;
    static const int64_t widths[] = { 9, 23, 40, 55 };
    uint64_t s = 0x243F6A8885A308D3ull;
    for (int64_t k = 2; k <= 3; k++) {
        for (int64_t pad = 0; pad <= 1; pad++) {
            for (size_t wi = 0; wi < sizeof widths / sizeof widths[0]; wi++) {
                const int64_t h = 7 + 2 * pad + (int64_t)wi, w = widths[wi], hw = h * w;
                const int64_t p[8] = { k, k, 2, 2, pad, pad, 1, 1 }, d[4] = { 1, hw, h, w };
                float *x = malloc((size_t)(hw * hw) * 4);
                trng_fill(&s, x, (size_t)(hw * hw));
                for (int64_t i = 0; i < hw; i++) {
                    x[i * hw + i] = NAN;
                }
                ki_tensor out;
                uint64_t s2 = (uint64_t)(k * 8 + pad * 4 + (int64_t)wi);
                assert_int_equal(random_pool_run("nn.MaxPool2d", p, d, x, s2, &s2, &out), KI_OK);
                const int64_t oh = out.shape.d[2], ow = out.shape.d[3];
                float *want = malloc((size_t)(oh * ow) * 4);
                for (int64_t i = 0; i < hw; i++) {
                    naive_max_nan(p, x + i * hw, h, w, oh, ow, want);
                    long bad = tclose(out.data + i * oh * ow, want, (size_t)(oh * ow), 0, 0);
                    if (bad >= 0) {
                        fail_msg("k %lld pad %lld w %lld NaN at %lld: out[%ld] %g want %g",
                                 (long long)k, (long long)pad, (long long)w, (long long)i, bad,
                                 out.data[i * oh * ow + bad], want[bad]);
                    }
                }
                free(want);
                free(out.data);
                free(x);
            }
        }
    }
}

/* The global average pool's plane sums of the CPU's level (four planes side by side at AVX2)
 * against the reference loop, bit for bit: plane sizes around the vector width and the
 * networks' 49 / 196 / 3136, 1-9 planes (whole groups of four and the rest), a stride past the
 * plane, values of very different sizes, -0.0, an infinity and a NaN. */
static void test_plane_sums(void **unused)
{
    (void)unused;
#if KI_HAVE_X86
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    static const int64_t sizes[] = { 1, 7, 8, 9, 15, 16, 17, 31, 49, 196, 3136 };
    uint64_t s = 0x9E3779B97F4A7C15ull;
    float *x = malloc((size_t)9 * 3200 * 4);
    trng_fill(&s, x, (size_t)9 * 3200);
    for (int64_t i = 0; i < 9 * 3200; i += 97) {
        x[i] *= 1e6f; /* sums whose rounding depends on the order */
    }
    x[5] = -0.0f, x[3200 + 3] = INFINITY, x[2 * 3200 + 10] = NAN;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int64_t planes = 1; planes <= 9; planes++) {
            float a[9], b[9];
            ki_plane_sums_avx2(x, 3200, sizes[k], planes, a);
            ki_plane_sums_ref(x, 3200, sizes[k], planes, b);
            assert_memory_equal(a, b, (size_t)planes * sizeof(float));
        }
    }
    free(x);
#else
    skip();
#endif
}

/* Stride-2 columns with 2- and 3-wide windows (the AVX-512 kernel where the CPU has it, 16
 * output columns a vector, the row maxima shared between output rows; AVX2's in chunks of 256
 * output columns): planes of -1, -0, +0
 * and 1 full of ties, padded or not, rows strides 1 and 2, bit for bit the naive window scan's
 * first maximum, +0 and -0 told apart. */
static void test_max_s2_ties(void **unused)
{
    (void)unused;
    static const float vals[4] = { -1.0f, -0.0f, 0.0f, 1.0f };
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        const int64_t kw = trng_int(&s, 2, 3), kh = trng_int(&s, 1, 3);
        int64_t p[8] = { kh, kw, trng_int(&s, 1, 2), 2, 0, 0, 1, 1 };
        p[4] = trng_int(&s, 0, kh / 2), p[5] = trng_int(&s, 0, kw / 2);
        /* every tenth plane wider than a column chunk of the AVX2 kernel (256 outputs) */
        const int64_t d[4] = { 1, 2, trng_int(&s, 3, 12),
                               trng_int(&s, 3, seed % 10 == 0 ? 600 : 75) };
        const size_t nx = (size_t)(d[1] * d[2] * d[3]);
        float *x = malloc(nx * 4);
        for (size_t i = 0; i < nx; i++) {
            x[i] = vals[trng_int(&s, 0, seed % 2 ? 2 : 3)]; /* odd seeds: -1 and zeros only */
        }
        ki_tensor out;
        uint64_t s2 = seed;
        if (random_pool_run("nn.MaxPool2d", p, d, x, seed, &s2, &out) == KI_OK) {
            const int64_t oh = out.shape.d[2], ow = out.shape.d[3];
            float *want = malloc((size_t)(oh * ow) * 4);
            for (int64_t pl = 0; pl < d[1]; pl++) {
                naive_pool(true, p, x + pl * d[2] * d[3], d[2], d[3], oh, ow, want);
                assert_memory_equal(out.data + pl * oh * ow, want, (size_t)(oh * ow) * 4);
            }
            free(want);
            free(out.data);
        }
        free(x);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_max_hand),
        cmocka_unit_test(test_ceil_mode),
        cmocka_unit_test(test_avg_hand),
        cmocka_unit_test(test_adaptive_hand),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_random_vs_naive),
        cmocka_unit_test(test_max_rows),
        cmocka_unit_test(test_max_ties_first),
        cmocka_unit_test(test_max_s2_ties),
        cmocka_unit_test(test_adaptive_random),
        cmocka_unit_test(test_max_s2_nan_everywhere),
        cmocka_unit_test(test_plane_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
