/* test_conv_dw_avx2.c - the in-place depthwise kernels (conv2d_dw3_loops.h with the pieces of
 * conv2d_dw_avx2.c and conv2d_dw_avx512.c) against ki_conv2d_forward_ref, at each level the CPU
 * has (AVX2, AVX-512; a missing level is skipped), 3x3 and 5x5: whole planes in place (the
 * depthwise path, 1 and 2 threads) for every width 1..40 and height 1..20 at strides 1 and 2,
 * and random cases over padding 0 / kernel/2 in each direction, the activations applied at the
 * store (none / ReLU / ReLU6 / Hardtanh / LeakyReLU / Hardswish / Hardsigmoid / SiLU / Sigmoid),
 * bias on / off, a residual, batch 1 / 2; and the band entry on random bands of rows and
 * channels, from a buffer holding only the rows the band reads (NaN between channels, the buffer
 * ending with the last channel's rows), leaving every other output untouched. */
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
static bool have(ki_isa isa)
{
    return ki_cpu_get()->isa >= isa && ki_gemm_ukernel_for(isa) != NULL;
}

/* One depthwise layer: ch channels, stride s, padding (ph, pw), input n x ch x h x w, a k x k
 * kernel, run at level isa. */
typedef struct dwcase {
    int64_t ch, s, ph, pw, h, w, n, k;
    ki_isa isa;
} dwcase;

#define N_ACTS 9
static const ki_act acts[N_ACTS] = {
    { KI_ACT_NONE, 0, 0 },          { KI_ACT_RELU, 0, 0 },
    { KI_ACT_RELU6, 0, 0 },         { KI_ACT_HARDTANH, -0.25f, 0.5f },
    { KI_ACT_LEAKY_RELU, 0.1f, 0 }, { KI_ACT_HARDSWISH, 0, 0 },
    { KI_ACT_HARDSIGMOID, 0, 0 },   { KI_ACT_SILU, 0, 0 },
    { KI_ACT_SIGMOID, 0, 0 }
};

/* The layer of case d (weights w, bias b or NULL) at its level; geometry into *g. */
static ki_conv2d *make(const dwcase *d, const float *w, const float *b, const ki_layer_ops **ops,
                       ki_conv2d_geom *g)
{
    void *st;
    top t;
    ki_error err = { 0 };
    top_conv_like(&t, "nn.Conv2d", d->ch, d->ch, d->k, d->k, d->ch, w, b);
    top_ints2(&t, "stride", d->s, d->s);
    top_ints2(&t, "padding", d->ph, d->pw);
    assert_int_equal(top_create(&t, ops, &st, &err), KI_OK);
    ki_conv2d *c = st;
    ki_conv2d_set_isa(c, d->isa);
    const bool avx512 = d->isa == KI_ISA_AVX512;
    assert_true(c->dw3_planes ==
                (avx512 ? ki_conv2d_dw3_planes_avx512 : ki_conv2d_dw3_planes_avx2));
    assert_true(c->dw3_band == (avx512 ? ki_conv2d_dw3_band_avx512 : ki_conv2d_dw3_band_avx2));
    ki_shape in = ki_shape_make(4, (const int64_t[]){ d->n, d->ch, d->h, d->w });
    assert_int_equal(ki_conv2d_geom_make(c, &in, g, &err), KI_OK);
    return c;
}

static void check(const float *got, const float *want, size_t n, const char *what, const dwcase *d)
{
    for (size_t i = 0; i < n; i++) {
        if (!(fabsf(got[i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])))) {
            fail_msg("%s %s k %lld ch %lld s %lld pad %lld,%lld in %lldx%lld n %lld: out[%zu] %g "
                     "vs ref %g",
                     what, ki_isa_name(d->isa), (long long)d->k, (long long)d->ch, (long long)d->s,
                     (long long)d->ph, (long long)d->pw, (long long)d->h, (long long)d->w,
                     (long long)d->n, i, got[i], want[i]);
        }
    }
}

/* Case d through the depthwise path (in place, no workspace) on 1 and 2 threads against the
 * reference, with activation act, bias when `bias`, a residual when `res`. */
static void planes_case(const dwcase *d, uint64_t *s, int act, bool bias, bool res)
{
    const size_t nw = (size_t)(d->ch * d->k * d->k), nx = (size_t)(d->n * d->ch * d->h * d->w);
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
        ki_exec ex = { th, NULL, 0, NULL };
        omp_set_num_threads(th);
        memset(out, 0xff, n * 4);
        ki_conv2d_run(c, &g, KI_CONV2D_DW, x, out, &ex);
        check(out, ref, n, th == 1 ? "planes, 1 thread" : "planes, 2 threads", d);
    }
    ops->destroy(c);
    free(w), free(b), free(x), free(ref), free(out), free(r);
}

/* Every width 1..40 and height 1..20 (and some wider rows), strides 1 and 2, padding k / 2 (0 for
 * every third width), at level isa with a k x k kernel. */
static void planes_sizes(ki_isa isa, int64_t k)
{
    if (!have(isa)) {
        skip();
    }
    uint64_t s = 11;
    for (int64_t w = 1; w <= 40; w++) {
        for (int64_t h = 1; h <= 20; h++) {
            for (int64_t st = 1; st <= 2; st++) {
                const int64_t p = w % 3 == 0 ? 0 : k / 2;
                const dwcase d = { 2, st, p, p, h, w, 1, k, isa };
                if (h + 2 * p >= k && w + 2 * p >= k) {
                    planes_case(&d, &s, (int)((w + h) % N_ACTS), h % 2 == 0, w % 5 == 0);
                }
            }
        }
    }
    /* the AVX2 3x3 row runs (rows4_full, rows4_full_s2: no residual, a clamp or none), every
     * height to 17 at widths where their blocks end at the row's end or overlap */
    static const int64_t runs[] = { 17, 24, 34, 40, 48, 56, 66, 112, 113 };
    for (size_t i = 0; k == 3 && i < sizeof runs / sizeof runs[0]; i++) {
        for (int64_t h = 3; h <= 17; h++) {
            for (int64_t st = 1; st <= 2; st++) {
                const dwcase d = { 2, st, 1, 1, h, runs[i], 2, k, isa };
                planes_case(&d, &s, h % 2 ? 0 : 2, h % 3 != 0, false);
            }
        }
    }
    /* wider rows: the AVX2 stride-1 3x3 runs of column blocks (rows4_full), at row ends that are
     * and are not a multiple of eight, and the blocks after them */
    static const int64_t wide[] = { 47, 48, 56, 57, 63, 64, 112, 113 };
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        for (int64_t h = 3; h <= 13; h++) {
            for (int64_t st = 1; st <= 2; st++) {
                const int64_t p = h % 5 == 0 ? 0 : k / 2;
                const dwcase d = { 2, st, p, p, h, wide[i], 1, k, isa };
                if (h + 2 * p >= k) {
                    planes_case(&d, &s, (int)((wide[i] + h) % N_ACTS), h % 2 == 0, h % 4 == 0);
                }
            }
        }
    }
}

/* The AVX2 kernel's small 3x3 planes eight channels at a time (ki_conv2d_dw3_ch8_on), from the
 * AVX2 kernel and from the AVX-512 one (there only for output rows of at most eight columns):
 * every height and width 3..20 (taken where both blocks fit half of L1: the 14x14 and 7x7 planes
 * on any CPU of 32 KiB of L1 or more), strides 1 and 2, padding 1, 9 and 17 channels in batches of
 * 1 and 2 (groups of eight, and planes left over at an image's end for the other blocks), a clamp
 * or none, bias on / off: against the reference on 1 and 2 threads, and channel 8's plane (the
 * other blocks) bit for bit equal to channel 0's (a group of eight) when every channel has the
 * same weights, bias and input. */
static void ch8_cases(ki_isa isa)
{
    if (!have(isa)) {
        skip();
    }
    static const int clamps[] = { 0, 1, 2, 3 }; /* none, ReLU, ReLU6, Hardtanh */
    uint64_t s = 5;
    int taken = 0;
    for (int64_t h = 3; h <= 20; h++) {
        for (int64_t w = 3; w <= 20; w++) {
            for (int64_t st = 1; st <= 2; st++) {
                const dwcase d = {
                    (h + w) % 2 ? 9 : 17, st, 1, 1, h, w, 1 + (h + w) % 3 / 2, 3, isa
                };
                const int act = clamps[(h * w + st) % 4];
                const bool bias = (h + st) % 2 == 0;
                planes_case(&d, &s, act, bias, false);
                /* the same bits: every channel alike */
                const int64_t ch = 9;
                float wt[9 * 9], b[9], *x = malloc((size_t)(ch * h * w) * 4);
                trng_fill(&s, wt, 9), trng_fill(&s, b, 1), trng_fill(&s, x, (size_t)(h * w));
                for (int64_t c = 1; c < ch; c++) {
                    memcpy(wt + 9 * c, wt, 9 * 4), b[c] = b[0];
                    memcpy(x + c * h * w, x, (size_t)(h * w) * 4);
                }
                const dwcase e = { ch, st, 1, 1, h, w, 1, 3, isa };
                const ki_layer_ops *ops;
                ki_conv2d_geom g;
                ki_conv2d *c = make(&e, wt, bias ? b : NULL, &ops, &g);
                c->ep.act = acts[act];
                const bool on = ki_conv2d_dw3_ch8_on(c, &g);
                if ((h == 14 || h == 7) && w == h && ki_cpu_get()->l1d >= 32768) {
                    /* at AVX-512 only the 7x7 outputs (mobilenet_v2's last layers) */
                    assert_true(on == (isa == KI_ISA_AVX2 || g.ow <= 8));
                }
                assert_true(!on || ki_conv2d_dw3_ch8_avx2(c, &g));
                assert_int_equal(ki_conv2d_dw_granule(c, &g), on ? 8 : 1);
                taken += on;
                const int64_t ohw = g.oh * g.ow;
                float *out = malloc((size_t)(ch * ohw) * 4);
                ki_exec ex = { 1, NULL, 0, NULL };
                omp_set_num_threads(1);
                ki_conv2d_run(c, &g, KI_CONV2D_DW, x, out, &ex);
                if (memcmp(out, out + 8 * ohw, (size_t)ohw * 4) != 0) {
                    fail_msg("%s %lldx%lld stride %lld: channel 8 differs from channel 0",
                             ki_isa_name(isa), (long long)h, (long long)w, (long long)st);
                }
                /* the weights gathered per block (weights given at run time) instead of the
                 * groups made at create: the same vectors */
                float *w8 = c->dw_w8, *out2 = malloc((size_t)(ch * ohw) * 4);
                assert_non_null(w8);
                c->dw_w8 = NULL;
                ki_conv2d_run(c, &g, KI_CONV2D_DW, x, out2, &ex);
                c->dw_w8 = w8;
                assert_memory_equal(out, out2, (size_t)(ch * ohw) * 4);
                free(out2);
                ops->destroy(c);
                free(x), free(out);
            }
        }
    }
    assert_true(taken > 0 || ki_cpu_get()->l1d < 32768);
}

/* Random cases at level isa: 3x3 and 5x5, paddings apart, every activation, bias, residual,
 * batch 2. */
static void planes_random(ki_isa isa)
{
    if (!have(isa)) {
        skip();
    }
    int runs = 0;
    for (int seed = 1; seed <= 600; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        const int64_t k = seed % 2 ? 3 : 5;
        dwcase d = { trng_int(&s, 1, 5),
                     trng_int(&s, 1, 2),
                     trng_int(&s, 0, k / 2),
                     trng_int(&s, 0, k / 2),
                     trng_int(&s, 1, 20),
                     trng_int(&s, 1, 72),
                     trng_int(&s, 1, 2),
                     k,
                     isa };
        if (d.h + 2 * d.ph < k || d.w + 2 * d.pw < k) {
            continue;
        }
        planes_case(&d, &s, seed / 2 % N_ACTS, seed % 3 != 0, seed % 5 < 2);
        runs++;
    }
    assert_true(runs >= 400);
}

/* Output rows [y0, y1) of channels [c0, c1) through the band entry of level isa, from a buffer
 * of exactly the input rows they read (channels cstride apart), against the reference; the other
 * outputs keep their fill. */
static void band_random(ki_isa isa)
{
    if (!have(isa)) {
        skip();
    }
    for (int seed = 1; seed <= 400; seed++) {
        uint64_t s = (uint64_t)seed * 0x2545F4914F6CDD1Dull;
        const int64_t k = seed % 2 ? 3 : 5;
        const dwcase d = { trng_int(&s, 1, 6),
                           trng_int(&s, 1, 2),
                           trng_int(&s, 0, k / 2),
                           trng_int(&s, 0, k / 2),
                           trng_int(&s, k, 20),
                           trng_int(&s, 1, 72),
                           1,
                           k,
                           isa };
        if (d.w + 2 * d.pw < k) {
            continue;
        }
        const size_t nw = (size_t)(d.ch * k * k), nx = (size_t)(d.ch * d.h * d.w);
        float *w = malloc(nw * 4), *b = malloc((size_t)d.ch * 4), *x = malloc(nx * 4);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)d.ch), trng_fill(&s, x, nx);
        const ki_layer_ops *ops;
        ki_conv2d_geom g;
        ki_conv2d *c = make(&d, w, seed % 3 ? b : NULL, &ops, &g);
        c->ep.act = acts[seed / 2 % N_ACTS];
        const int64_t ohw = g.oh * g.ow, n = d.ch * ohw;
        const int64_t y0 = trng_int(&s, 0, g.oh - 1), y1 = trng_int(&s, y0 + 1, g.oh);
        const int64_t c0 = trng_int(&s, 0, d.ch - 1), c1 = trng_int(&s, c0 + 1, d.ch);
        int64_t lo = y0 * d.s - d.ph, hi = (y1 - 1) * d.s - d.ph + k;
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
        c->dw3_band(c, &g, band, lo, cstride, c0, c1, y0, y1, out);
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

#define DW_TEST(name, call)                                                                        \
    static void name(void **unused)                                                                \
    {                                                                                              \
        (void)unused;                                                                              \
        call;                                                                                      \
    }
DW_TEST(test_dw3_planes_sizes_avx2, planes_sizes(KI_ISA_AVX2, 3))
DW_TEST(test_dw5_planes_sizes_avx2, planes_sizes(KI_ISA_AVX2, 5))
DW_TEST(test_dw3_planes_sizes_avx512, planes_sizes(KI_ISA_AVX512, 3))
DW_TEST(test_dw5_planes_sizes_avx512, planes_sizes(KI_ISA_AVX512, 5))
DW_TEST(test_dw_planes_random_avx2, planes_random(KI_ISA_AVX2))
DW_TEST(test_dw_planes_random_avx512, planes_random(KI_ISA_AVX512))
DW_TEST(test_dw_band_avx2, band_random(KI_ISA_AVX2))
DW_TEST(test_dw_band_avx512, band_random(KI_ISA_AVX512))
DW_TEST(test_dw_ch8_avx2, ch8_cases(KI_ISA_AVX2))
DW_TEST(test_dw_ch8_avx512, ch8_cases(KI_ISA_AVX512))

#else
/* The x86 kernels are not built for this target: each test is skipped. */
#define DW_TEST(name)                                                                              \
    static void name(void **unused)                                                                \
    {                                                                                              \
        (void)unused;                                                                              \
        skip();                                                                                    \
    }
DW_TEST(test_dw3_planes_sizes_avx2)
DW_TEST(test_dw5_planes_sizes_avx2)
DW_TEST(test_dw3_planes_sizes_avx512)
DW_TEST(test_dw5_planes_sizes_avx512)
DW_TEST(test_dw_planes_random_avx2)
DW_TEST(test_dw_planes_random_avx512)
DW_TEST(test_dw_band_avx2)
DW_TEST(test_dw_band_avx512)
DW_TEST(test_dw_ch8_avx2)
DW_TEST(test_dw_ch8_avx512)
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dw3_planes_sizes_avx2),
        cmocka_unit_test(test_dw_ch8_avx2),
        cmocka_unit_test(test_dw_ch8_avx512),
        cmocka_unit_test(test_dw5_planes_sizes_avx2),
        cmocka_unit_test(test_dw3_planes_sizes_avx512),
        cmocka_unit_test(test_dw5_planes_sizes_avx512),
        cmocka_unit_test(test_dw_planes_random_avx2),
        cmocka_unit_test(test_dw_planes_random_avx512),
        cmocka_unit_test(test_dw_band_avx2),
        cmocka_unit_test(test_dw_band_avx512),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
