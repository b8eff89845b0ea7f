/* test_conv_transpose.c - nn.ConvTranspose2d: hand-computed cases, errors, and the GEMM +
 * col2im path against the scalar reference on random shapes at each level the CPU has, on 1, 2
 * and 3 threads (bitwise equal to one another) and with the weight transposed per run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "../../layers/conv2d.h"
#include "test_conv_util.h"

static void deconv_op(top *t, int64_t in, int64_t out, int64_t kh, int64_t kw, int64_t groups,
                      const float *w, const float *b)
{
    top_conv_like(t, "nn.ConvTranspose2d", in, out, kh, kw, groups, w, b);
}

static void run_expect(const top *t, const int64_t *d, const float *x, const int64_t *od,
                       const float *want)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_tensor in = { ki_shape_make(4, d), (float *)x }, out;
    assert_int_equal(top_create(t, &ops, &st, &err), KI_OK);
    for (int threads = 1; threads <= 2; threads++) {
        if (top_run(ops, st, &in, 1, &out, 1, threads, &err) != KI_OK) {
            fail_msg("%s", err.msg);
        }
        assert_memory_equal(out.shape.d, od, 4 * sizeof *od);
        for (int64_t i = 0; i < ki_shape_count(&out.shape); i++) {
            assert_float_equal(out.data[i], want[i], 1e-5);
        }
        free(out.data);
    }
    ops->destroy(st);
}

static void test_hand(void **unused)
{
    (void)unused;
    static const float x[4] = { 1, 2, 3, 4 }, ones[4] = { 1, 1, 1, 1 }, b[1] = { 0.5f };
    int64_t d[4] = { 1, 1, 2, 2 };
    top t;
    /* stride 1: every input spreads over a 2x2 block */
    static const float want1[9] = { 1, 3, 2, 4, 10, 6, 3, 7, 4 };
    deconv_op(&t, 1, 1, 2, 2, 1, ones, NULL);
    run_expect(&t, d, x, (const int64_t[]){ 1, 1, 3, 3 }, want1);
    /* padding 1 crops one ring: only the centre is left */
    top_ints2(&t, "padding", 1, 1);
    run_expect(&t, d, x, (const int64_t[]){ 1, 1, 1, 1 }, (const float[]){ 10 });
    /* stride 2: non-overlapping 2x2 blocks, plus bias */
    static const float want2[16] = { 1.5f, 1.5f, 2.5f, 2.5f, 1.5f, 1.5f, 2.5f, 2.5f,
                                     3.5f, 3.5f, 4.5f, 4.5f, 3.5f, 3.5f, 4.5f, 4.5f };
    deconv_op(&t, 1, 1, 2, 2, 1, ones, b);
    top_ints2(&t, "stride", 2, 2);
    run_expect(&t, d, x, (const int64_t[]){ 1, 1, 4, 4 }, want2);
    /* 1x1, stride 2, output_padding 1: inputs on even positions, the extra row/col is bias */
    static const float want3[16] = { 1.5f, .5f, 2.5f, .5f, .5f, .5f, .5f, .5f,
                                     3.5f, .5f, 4.5f, .5f, .5f, .5f, .5f, .5f };
    deconv_op(&t, 1, 1, 1, 1, 1, ones, b);
    top_ints2(&t, "stride", 2, 2);
    top_ints2(&t, "output_padding", 1, 1);
    run_expect(&t, d, x, (const int64_t[]){ 1, 1, 4, 4 }, want3);
}

static void test_errors(void **unused)
{
    (void)unused;
    static const float w[16] = { 0 };
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    top t;
    deconv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    top_ints2(&t, "output_padding", 1, 1); /* not below stride 1 or dilation 1 */
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "output_padding"));
    deconv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    top_str(&t, "padding_mode", "reflect");
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_ERR_UNSUPPORTED);
    deconv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    t.params[1].i = 3;
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "out_channels"));
    /* padding that crops everything */
    deconv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    top_ints2(&t, "padding", 3, 3);
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    ki_shape in = ki_shape_make(4, (const int64_t[]){ 1, 2, 2, 2 }), out;
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    in.d[1] = 3;
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    ops->destroy(st);
}

static void check_one(uint64_t seed, const ki_deconv2d *c, const int64_t *d, const float *x)
{
    ki_conv2d_geom g;
    ki_error err = { 0 };
    ki_shape in = ki_shape_make(4, d);
    if (ki_deconv2d_geom_make(c, &in, &g, &err) != KI_OK) {
        return;
    }
    size_t n = (size_t)(d[0] * c->out_ch * g.oh * g.ow);
    float *ref = malloc(n * 4 + 4), *fast = malloc(n * 4 + 4), *first = malloc(n * 4 + 4);
    ki_deconv2d_run(c, &g, KI_DECONV2D_REF, x, ref, NULL);
    /* runs 1-3: 1, 2 and 3 threads; run 4: 2 threads with the weight transposed per run (as for
     * F.conv_transpose2d) */
    for (int run = 1; run <= 4; run++) {
        const int th = run == 4 ? 2 : run;
        ki_deconv2d cr = *c;
        cr.wt = run == 4 ? NULL : c->wt;
        size_t ws = ki_deconv2d_workspace_for(&cr, &g, KI_DECONV2D_GEMM, th);
        ki_exec ex = { th, aligned_alloc(64, (ws * (size_t)th + 64) / 64 * 64 + 64), ws, NULL };
        omp_set_num_threads(th);
        ki_deconv2d_run(&cr, &g, KI_DECONV2D_GEMM, x, fast, &ex);
        free(ex.workspace);
        long bad = tclose(fast, ref, n, 1e-5f, 1e-4f);
        if (bad >= 0) {
            fail_msg("seed %llu threads %d: out[%ld] %g vs ref %g", (unsigned long long)seed, th,
                     bad, fast[bad], ref[bad]);
        }
        if (run == 1) {
            memcpy(first, fast, n * 4);
        } else if (memcmp(first, fast, n * 4) != 0) {
            fail_msg("seed %llu: run %d (%d threads) differs from one thread",
                     (unsigned long long)seed, run, th);
        }
    }
    free(ref), free(fast), free(first);
}

/* One random layer and input (seed) against the reference. tiling: a kernel the size of its
 * stride (1 to 3 each way, so 2x2 stride 2 among them), no padding, dilation or output padding,
 * so that the column rows tile the output (tiles_plane in deconv2d_gemm.c). */
static void random_case(uint64_t seed, bool tiling)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull;
    int64_t groups = trng_int(&s, 1, 3), in = groups * trng_int(&s, 1, 3);
    int64_t out = groups * trng_int(&s, 1, 3), kh = trng_int(&s, 1, 4);
    int64_t kw = trng_int(&s, 1, 4), sh = trng_int(&s, 1, 3), sw = trng_int(&s, 1, 3);
    int64_t dh = trng_int(&s, 1, 2), dw = trng_int(&s, 1, 2);
    if (tiling) {
        kh = sh, kw = sw, dh = dw = 1;
    }
    /* every fourth case large enough for many GEMM panels per thread */
    const bool big = seed % 4 == 0;
    int64_t d[4] = { trng_int(&s, 1, 2), in, trng_int(&s, 1, big ? 20 : 7),
                     trng_int(&s, 1, big ? 40 : 9) };
    int64_t oph = trng_int(&s, 0, (sh > dh ? sh : dh) - 1);
    int64_t opw = trng_int(&s, 0, (sw > dw ? sw : dw) - 1);
    size_t nw = (size_t)(in * (out / groups) * kh * kw), nx = (size_t)(d[0] * in * d[2] * d[3]);
    float *w = malloc(nw * 4), *b = malloc((size_t)out * 4), *x = malloc(nx * 4);
    trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)out), trng_fill(&s, x, nx);
    top t;
    deconv_op(&t, in, out, kh, kw, groups, w, trng_int(&s, 0, 1) ? b : NULL);
    top_ints2(&t, "stride", sh, sw);
    top_ints2(&t, "dilation", dh, dw);
    top_ints2(&t, "padding", tiling ? 0 : trng_int(&s, 0, 2), tiling ? 0 : trng_int(&s, 0, 2));
    top_ints2(&t, "output_padding", tiling ? 0 : oph, tiling ? 0 : opw);
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    if (top_create(&t, &ops, &st, &err) != KI_OK) {
        fail_msg("seed %llu: %s", (unsigned long long)seed, err.msg);
    }
    check_one(seed, st, d, x);
    ops->destroy(st);
    free(w), free(b), free(x);
}

/* At each level the CPU has (the GEMM's micro-kernel follows ki_cpu_isa() at run time): 300
 * random layers, then 100 whose kernel tiles the output. */
static void test_random_vs_ref(void **unused)
{
    (void)unused;
    const ki_isa have = ki_cpu_get()->isa;
    ki_error cap = { 0 };
    for (uint64_t seed = 1; seed <= 400; seed++) {
        assert_int_equal(ki_cpu_set_isa((ki_isa)(seed % ((uint64_t)have + 1)), &cap), KI_OK);
        random_case(seed, seed > 300);
    }
    assert_int_equal(ki_cpu_set_isa(have, &cap), KI_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_random_vs_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
