/* test_conv_ws2.c - 3x3 stride-2 layers with padding 1 on the two-phase Winograd path
 * (conv2d_ws2.c) against ki_conv2d_forward_ref, at every level the CPU has (the plain transforms
 * and GEMM micro-kernel, AVX2, AVX-512): odd and even sizes from one output tile to several items
 * of tiles (a last partial item, items across tile rows), channel counts that leave partial
 * micro-kernel rows, batch 2, activations clamped and not, a residual before and after the
 * activation, with and without a bias; and the same bits on 1, 2 and 3 threads. Also that the
 * policy gives the path to a yolov5s-sized layer declared in the param file and not to a small
 * one. */
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
#include "../../layers/conv_common.h"
#include "test_conv_util.h"

static const ki_act acts[4] = { { KI_ACT_NONE, 0, 0 },
                                { KI_ACT_RELU, 0, 0 },
                                { KI_ACT_SILU, 0, 0 },
                                { KI_ACT_LEAKY_RELU, 0.1f, 0 } };

/* The layer (in -> out channels) with weights w and bias b (or NULL), its U made. */
static ki_conv2d *make(int64_t in, int64_t out, const float *w, const float *b,
                       const ki_layer_ops **ops, top *t)
{
    void *st;
    ki_error err = { 0 };
    top_conv_like(t, "nn.Conv2d", in, out, 3, 3, 1, w, b);
    top_ints2(t, "stride", 2, 2);
    top_ints2(t, "padding", 1, 1);
    assert_int_equal(top_create(t, ops, &st, &err), KI_OK);
    ki_conv2d *c = st;
    assert_true(ki_conv2d_ws2_shape_ok(c));
    assert_int_equal(ki_conv2d_ws2_prepare(c, &err), KI_OK);
    return c;
}

/* F(4,2)'s transforms carry the values through sums of up to 81 terms with weights up to 8: the
 * error bound grows with the input channels. */
static void check(const float *got, const float *want, size_t n, int64_t in, int seed, int lv)
{
    const float tol = 2.5e-6f * (float)(in + 4); /* 2.5x the largest error seen */
    for (size_t i = 0; i < n; i++) {
        if (!(fabsf(got[i] - want[i]) <= tol * (1.0f + fabsf(want[i])))) {
            fail_msg("level %d seed %d: out[%zu] %g vs ref %g", lv, seed, i, got[i], want[i]);
        }
    }
}

static void test_ws2_vs_ref(void **unused)
{
    (void)unused;
    const ki_isa have = ki_cpu_get()->isa;
    ki_error err = { 0 };
    for (int seed = 1; seed <= 48; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        const int64_t in = trng_int(&s, 1, seed % 6 == 0 ? 140 : 40);
        const int64_t out = trng_int(&s, 1, seed % 5 == 0 ? 70 : 20), n = trng_int(&s, 1, 2);
        const int64_t h = trng_int(&s, 1, seed % 4 == 0 ? 90 : 30);
        const int64_t w = seed % 7 == 0 ? trng_int(&s, 100, 200) : trng_int(&s, 1, 40);
        const size_t nw = (size_t)(out * in * 9), nx = (size_t)(n * in * h * w);
        float *wt = malloc(nw * 4), *b = malloc((size_t)out * 4), *x = malloc(nx * 4);
        trng_fill(&s, wt, nw), trng_fill(&s, b, (size_t)out), trng_fill(&s, x, nx);
        const ki_layer_ops *ops;
        top t;
        ki_conv2d *c = make(in, out, wt, seed % 4 == 3 ? NULL : b, &ops, &t);
        c->ep.act = acts[seed % 4];
        ki_conv2d_geom g;
        ki_shape shp = ki_shape_make(4, (const int64_t[]){ n, in, h, w });
        assert_int_equal(ki_conv2d_geom_make(c, &shp, &g, &err), KI_OK);
        const size_t no = (size_t)(n * out * g.oh * g.ow);
        float *ref = malloc(no * 4 + 4), *got = malloc(no * 4 + 4), *first = malloc(no * 4 + 4);
        float *res = malloc(no * 4 + 4);
        trng_fill(&s, res, no);
        c->residual = seed % 3 == 0, c->res = c->residual ? res : NULL;
        c->ep.res_after = c->residual && seed % 2 == 1 && c->ep.act.kind != KI_ACT_NONE;
        ki_conv2d_forward_ref(c, &g, x, ref);
        for (ki_isa lv = KI_ISA_GENERIC; lv <= have; lv++) {
            ki_conv2d cc = *c;
            ki_conv2d_set_isa(&cc, lv);
            if (cc.isa != lv) {
                continue; /* a level this build lacks */
            }
            assert_true(ki_conv2d_path_ok(&cc, &g, KI_CONV2D_WS2));
            for (int th = 1; th <= 3; th++) {
                size_t ws = ki_conv2d_workspace_for(&cc, &g, KI_CONV2D_WS2, th);
                assert_true(ws > 0);
                ki_exec ex = { .n_threads = th,
                               .workspace = aligned_alloc(64, (ws * (size_t)th + 63) / 64 * 64),
                               .ws_per_thread = ws };
                omp_set_num_threads(th);
                ki_conv2d_run(&cc, &g, KI_CONV2D_WS2, x, got, &ex);
                free(ex.workspace);
                check(got, ref, no, in, seed, (int)lv);
                if (th == 1) {
                    memcpy(first, got, no * sizeof *got);
                } else {
                    assert_memory_equal(got, first, no * sizeof *got);
                }
            }
        }
        free(ref), free(got), free(first), free(res);
        ops->destroy(c);
        free(wt), free(b), free(x);
    }
}

/* The policy: a layer the param file declares at yolov5s's 64 -> 128 from 160 x 160 takes the
 * path where the GEMM has a vector micro-kernel and an item's transformed input (81 x 64 x
 * KI_WS2_NT floats) fits 3/4 of L2; one of 40 x 40 outputs (100 tiles) does not. */
static void test_ws2_policy(void **unused)
{
    (void)unused;
    static const int64_t sizes[2][3] = { { 160, 80, 1 }, { 80, 40, 0 } };
    for (int i = 0; i < 2; i++) {
        const int64_t hin = sizes[i][0];
        float *wt = calloc((size_t)128 * 64 * 9, 4), *b = calloc(128, 4);
        top t;
        top_conv_like(&t, "nn.Conv2d", 64, 128, 3, 3, 1, wt, b);
        top_ints2(&t, "stride", 2, 2);
        top_ints2(&t, "padding", 1, 1);
        const ki_shape decl = ki_shape_make(4, (const int64_t[]){ 1, 64, hin, hin });
        t.d.input_decl = &decl;
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        const bool fits = 81 * 64 * KI_WS2_NT * sizeof(float) <= ki_cpu_get()->l2 / 4 * 3;
        assert_int_equal(c->ws2_u != NULL, sizes[i][2] && fits && c->uk != ki_gemm_ukernel_ref);
        char name[96];
        ki_shape shp = ki_shape_make(4, (const int64_t[]){ 1, 64, hin, hin });
        ki_conv2d_describe(c, &shp, name, sizeof name);
        assert_int_equal(strstr(name, "stride-2 winograd") != NULL, c->ws2_u != NULL);
        ops->destroy(c);
        free(wt), free(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ws2_vs_ref),
        cmocka_unit_test(test_ws2_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
