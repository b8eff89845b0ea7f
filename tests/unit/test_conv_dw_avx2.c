/* test_conv_dw_avx2.c - the AVX2 3x3 depthwise kernels (conv2d_dw_avx2.c) against
 * ki_conv2d_forward_ref: whole planes in place (the depthwise path at the AVX2 level, 1 and 2
 * threads) for every width 1..40 and height 1..20 at strides 1 and 2, and random cases over
 * padding 0 / 1 in each direction, activations none / ReLU / ReLU6 / Hardtanh, bias on / off, a
 * residual, batch 1 / 2; and the band entry on random bands of rows and channels, from a buffer
 * holding only the rows the band reads (NaN between channels, the buffer ending with the last
 * channel's rows), leaving every other output untouched. Skipped without AVX2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "../../core/cpu.h"
#include "../../layers/conv2d.h"
#include "test_conv_util.h"

#if KI_HAVE_X86
static bool have_avx2(void)
{
    return ki_cpu_get()->isa >= KI_ISA_AVX2 && ki_gemm_ukernel_for(KI_ISA_AVX2) != NULL;
}

/* One depthwise layer: ch channels, stride s, padding (ph, pw), input n x ch x h x w. */
typedef struct dwcase {
    int64_t ch, s, ph, pw, h, w, n;
} dwcase;

static const ki_act acts[4] = { { KI_ACT_NONE, 0, 0 },
                                { KI_ACT_RELU, 0, 0 },
                                { KI_ACT_RELU6, 0, 0 },
                                { KI_ACT_HARDTANH, -0.25f, 0.5f } };

/* The layer of case d (weights w, bias b or NULL) at the AVX2 level; geometry into *g. */
static ki_conv2d *make(const dwcase *d, const float *w, const float *b, const ki_layer_ops **ops,
                       ki_conv2d_geom *g)
{
    void *st;
    top t;
    ki_error err = { 0 };
    top_conv_like(&t, "nn.Conv2d", d->ch, d->ch, 3, 3, d->ch, w, b);
    top_ints2(&t, "stride", d->s, d->s);
    top_ints2(&t, "padding", d->ph, d->pw);
    assert_int_equal(top_create(&t, ops, &st, &err), KI_OK);
    ki_conv2d *c = st;
    ki_conv2d_set_isa(c, KI_ISA_AVX2);
    assert_true(c->dw3_planes == ki_conv2d_dw3_planes_avx2);
    assert_true(c->dw3_band == ki_conv2d_dw3_band_avx2);
    ki_shape in = ki_shape_make(4, (const int64_t[]){ d->n, d->ch, d->h, d->w });
    assert_int_equal(ki_conv2d_geom_make(c, &in, g, &err), KI_OK);
    return c;
}

static void check(const float *got, const float *want, size_t n, const char *what, const dwcase *d)
{
    for (size_t i = 0; i < n; i++) {
        if (!(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])))) {
            fail_msg("%s ch %lld s %lld pad %lld,%lld in %lldx%lld n %lld: out[%zu] %g vs ref %g",
                     what, (long long)d->ch, (long long)d->s, (long long)d->ph, (long long)d->pw,
                     (long long)d->h, (long long)d->w, (long long)d->n, i, got[i], want[i]);
        }
    }
}

/* Case d through the depthwise path (in place, no workspace) on 1 and 2 threads against the
 * reference, with activation act, bias when `bias`, a residual when `res`. */
static void planes_case(const dwcase *d, uint64_t *s, int act, bool bias, bool res)
{
    const size_t nw = (size_t)(d->ch * 9), nx = (size_t)(d->n * d->ch * d->h * d->w);
    float *w = malloc(nw * 4), *b = malloc((size_t)d->ch * 4), *x = malloc(nx * 4);
    trng_fill(s, w, nw), trng_fill(s, b, (size_t)d->ch), trng_fill(s, x, nx);
    const ki_layer_ops *ops;
    ki_conv2d_geom g;
    ki_conv2d *c = make(d, w, bias ? b : NULL, &ops, &g);
    c->ep.act = acts[act];
    const size_t n = (size_t)(d->n * d->ch * g.oh * g.ow);
    float *ref = malloc(n * 4), *out = malloc(n * 4), *r = malloc(n * 4);
    trng_fill(s, r, n);
    c->residual = res, c->res = res ? r : NULL;
    assert_true(ki_conv2d_dw_in_place(c));
    assert_int_equal(ki_conv2d_workspace_for(c, &g, KI_CONV2D_DW, 2), 0);
    ki_conv2d_forward_ref(c, &g, x, ref);
    for (int th = 1; th <= 2; th++) {
        ki_exec ex = { th, NULL, 0 };
        omp_set_num_threads(th);
        memset(out, 0xff, n * 4);
        ki_conv2d_run(c, &g, KI_CONV2D_DW, x, out, &ex);
        check(out, ref, n, th == 1 ? "planes, 1 thread" : "planes, 2 threads", d);
    }
    ops->destroy(c);
    free(w), free(b), free(x), free(ref), free(out), free(r);
}

/* Every width 1..40 and height 1..20, strides 1 and 2, padding 1 (0 for every third width). */
static void test_dw3_planes_sizes(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    uint64_t s = 11;
    for (int64_t w = 1; w <= 40; w++) {
        for (int64_t h = 1; h <= 20; h++) {
            for (int64_t st = 1; st <= 2; st++) {
                const int64_t p = w % 3 == 0 ? 0 : 1;
                const dwcase d = { 2, st, p, p, h, w, 1 };
                if (h + 2 * p >= 3 && w + 2 * p >= 3) {
                    planes_case(&d, &s, (int)((w + h) % 4), h % 2 == 0, w % 5 == 0);
                }
            }
        }
    }
}

/* Random cases: paddings apart, every activation, bias, residual, batch 2. */
static void test_dw3_planes_random(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    int runs = 0;
    for (int seed = 1; seed <= 400; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        dwcase d = { trng_int(&s, 1, 5), trng_int(&s, 1, 2),  trng_int(&s, 0, 1),
                     trng_int(&s, 0, 1), trng_int(&s, 1, 20), trng_int(&s, 1, 40),
                     trng_int(&s, 1, 2) };
        if (d.h + 2 * d.ph < 3 || d.w + 2 * d.pw < 3) {
            continue;
        }
        planes_case(&d, &s, seed % 4, seed % 3 != 0, seed % 5 < 2);
        runs++;
    }
    assert_true(runs >= 300);
}

/* Output rows [y0, y1) of channels [c0, c1) through the band entry, from a buffer of exactly the
 * input rows they read (channels cstride apart), against the reference; the other outputs keep
 * their fill. */
static void test_dw3_band(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    for (int seed = 1; seed <= 300; seed++) {
        uint64_t s = (uint64_t)seed * 0x2545F4914F6CDD1Dull;
        const dwcase d = { trng_int(&s, 1, 6),
                           trng_int(&s, 1, 2),
                           trng_int(&s, 0, 1),
                           trng_int(&s, 0, 1),
                           trng_int(&s, 3, 20),
                           trng_int(&s, 1, 40),
                           1 };
        if (d.w + 2 * d.pw < 3) {
            continue;
        }
        const size_t nw = (size_t)(d.ch * 9), nx = (size_t)(d.ch * d.h * d.w);
        float *w = malloc(nw * 4), *b = malloc((size_t)d.ch * 4), *x = malloc(nx * 4);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)d.ch), trng_fill(&s, x, nx);
        const ki_layer_ops *ops;
        ki_conv2d_geom g;
        ki_conv2d *c = make(&d, w, seed % 3 ? b : NULL, &ops, &g);
        c->ep.act = acts[seed % 4];
        const int64_t ohw = g.oh * g.ow, n = d.ch * ohw;
        const int64_t y0 = trng_int(&s, 0, g.oh - 1), y1 = trng_int(&s, y0 + 1, g.oh);
        const int64_t c0 = trng_int(&s, 0, d.ch - 1), c1 = trng_int(&s, c0 + 1, d.ch);
        int64_t lo = y0 * d.s - d.ph, hi = (y1 - 1) * d.s - d.ph + 3;
        lo = lo < 0 ? 0 : lo;
        hi = hi > d.h ? d.h : hi;
        const int64_t cstride = (hi - lo) * d.w + trng_int(&s, 0, 3);
        /* NaN where a row the band does not hold would be, and the last channel's rows end the
         * buffer */
        float *band = malloc((size_t)((c1 - 1) * cstride + (hi - lo) * d.w) * 4);
        memset(band, 0xff, (size_t)((c1 - 1) * cstride + (hi - lo) * d.w) * 4);
        for (int64_t ch = c0; ch < c1; ch++) {
            memcpy(band + ch * cstride, x + ch * d.h * d.w + lo * d.w,
                   (size_t)((hi - lo) * d.w) * 4);
        }
        float *ref = malloc((size_t)n * 4), *out = malloc((size_t)n * 4);
        ki_conv2d_forward_ref(c, &g, x, ref);
        memset(out, 0xff, (size_t)n * 4);
        ki_conv2d_dw3_band_avx2(c, &g, band, lo, cstride, c0, c1, y0, y1, out);
        for (int64_t ch = 0; ch < d.ch; ch++) {
            for (int64_t i = 0; i < ohw; i++) {
                const int64_t y = i / g.ow, at = ch * ohw + i;
                if (ch >= c0 && ch < c1 && y >= y0 && y < y1) {
                    check(out + at, ref + at, 1, "band", &d);
                } else {
                    assert_true(out[at] != out[at]); /* still the NaN fill */
                }
            }
        }
        ops->destroy(c);
        free(w), free(b), free(x), free(band), free(ref), free(out);
    }
}

#else
/* The x86 kernels are not built for this target: each test is skipped. */
static void test_dw3_planes_sizes(void **unused)
{
    (void)unused;
    skip();
}

static void test_dw3_planes_random(void **unused)
{
    (void)unused;
    skip();
}

static void test_dw3_band(void **unused)
{
    (void)unused;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw3_planes_sizes),
        cmocka_unit_test(test_dw3_planes_random),
        cmocka_unit_test(test_dw3_band),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
