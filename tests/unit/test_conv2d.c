/* test_conv2d.c - nn.Conv2d: hand-computed cases, parameter errors, and every fast path against
 * the scalar reference on random shapes at 1 and 2 threads. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <sys/mman.h>

#include "../../core/bigbuf.h"
#include "../../core/half.h"
#include "../../layers/conv2d.h"
#include "test_conv_util.h"

static void conv_op(top *t, int64_t in, int64_t out, int64_t kh, int64_t kw, int64_t groups,
                    const float *w, const float *b)
{
    top_conv_like(t, "nn.Conv2d", in, out, kh, kw, groups, w, b);
}

/* Runs op t on one input of shape d (ndim dims) and checks the output against want. */
static void run_expect(const top *t, int ndim, const int64_t *d, const float *x, const float *want,
                       size_t n_want)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_tensor in = { ki_shape_make(ndim, d), (float *)x }, out;
    assert_int_equal(top_create(t, &ops, &st, &err), KI_OK);
    for (int threads = 1; threads <= 2; threads++) {
        ki_status s = top_run(ops, st, &in, 1, &out, 1, threads, &err);
        if (s != KI_OK) {
            fail_msg("%s", err.msg);
        }
        assert_int_equal(ki_shape_count(&out.shape), (int64_t)n_want);
        for (size_t i = 0; i < n_want; i++) {
            assert_float_equal(out.data[i], want[i], 1e-5);
        }
        free(out.data);
    }
    ops->destroy(st);
}

static void test_basic_3x3(void **unused)
{
    (void)unused;
    static const float x[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
    static const float w[4] = { 1, 1, 1, 1 }, b[1] = { 1 };
    static const float want[4] = { 13, 17, 25, 29 };
    static const float w9[9] = { 1, 1, 1, 1, 1, 1, 1, 1, 1 };
    static const float want_pad[9] = { 12, 21, 16, 27, 45, 33, 24, 39, 28 };
    int64_t d[4] = { 1, 1, 3, 3 };
    top t;
    conv_op(&t, 1, 1, 2, 2, 1, w, b);
    run_expect(&t, 4, d, x, want, 4);
    conv_op(&t, 1, 1, 3, 3, 1, w9, NULL);
    top_ints2(&t, "padding", 1, 1);
    run_expect(&t, 4, d, x, want_pad, 9);
    /* unbatched (C,H,W) */
    run_expect(&t, 3, d + 1, x, want_pad, 9);
    /* stride 2 over the padded input picks the corners */
    static const float want_s2[4] = { 12, 16, 24, 28 };
    top_ints2(&t, "stride", 2, 2);
    run_expect(&t, 4, d, x, want_s2, 4);
}

static void test_pad_modes(void **unused)
{
    (void)unused;
    static const float x[3] = { 1, 2, 3 }, w[3] = { 1, 1, 1 };
    static const char *const modes[4] = { "zeros", "reflect", "replicate", "circular" };
    static const float want[4][3] = { { 3, 6, 5 }, { 5, 6, 7 }, { 4, 6, 8 }, { 6, 6, 6 } };
    int64_t d[4] = { 1, 1, 1, 3 };
    for (int m = 0; m < 4; m++) {
        top t;
        conv_op(&t, 1, 1, 1, 3, 1, w, NULL);
        top_ints2(&t, "padding", 0, 1);
        top_str(&t, "padding_mode", modes[m]);
        run_expect(&t, 4, d, x, want[m], 3);
    }
}

static void test_same_valid_groups(void **unused)
{
    (void)unused;
    static const float x[4] = { 1, 2, 3, 4 }, w[2] = { 1, 10 };
    static const float want_same[4] = { 21, 32, 43, 4 }, want_valid[3] = { 21, 32, 43 };
    int64_t d[4] = { 1, 1, 1, 4 };
    top t;
    conv_op(&t, 1, 1, 1, 2, 1, w, NULL);
    top_str(&t, "padding", "same");
    run_expect(&t, 4, d, x, want_same, 4);
    conv_op(&t, 1, 1, 1, 2, 1, w, NULL);
    top_str(&t, "padding", "valid");
    run_expect(&t, 4, d, x, want_valid, 3);
    /* groups=2, 1x1: each output channel scales its own input channel */
    static const float wg[2] = { 2, 3 }, bg[2] = { 0.5f, -1 };
    int64_t dg[4] = { 1, 2, 2, 1 };
    conv_op(&t, 2, 2, 1, 1, 2, wg, bg);
    static const float xg[4] = { 1, 2, 1, 2 };
    static const float want_g2[4] = { 2.5f, 4.5f, 2, 5 };
    run_expect(&t, 4, dg, xg, want_g2, 4);
    /* dilation 2 along w: taps 0 and 2 */
    static const float xd[5] = { 1, 2, 3, 4, 5 }, wd[2] = { 1, 100 };
    static const float want_d[3] = { 301, 402, 503 };
    int64_t dd[4] = { 1, 1, 1, 5 };
    conv_op(&t, 1, 1, 1, 2, 1, wd, NULL);
    top_ints2(&t, "dilation", 1, 2);
    run_expect(&t, 4, dd, xd, want_d, 3);
}

static void expect_create_fail(const top *t, ki_status code, const char *needle)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    assert_int_equal(top_create(t, &ops, &st, &err), code);
    if (!strstr(err.msg, needle)) {
        fail_msg("message '%s' lacks '%s'", err.msg, needle);
    }
}

static void test_errors(void **unused)
{
    (void)unused;
    static const float w[8] = { 0 };
    top t;
    conv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    t.params[2].ints = (const int64_t[]){ 3, 3 }; /* kernel_size disagrees with @weight */
    expect_create_fail(&t, KI_ERR_SHAPE, "kernel_size");
    conv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    t.params[0].i = 4;
    expect_create_fail(&t, KI_ERR_SHAPE, "in_channels");
    conv_op(&t, 2, 2, 1, 1, 1, w, NULL);
    t.params[3].i = 3;
    expect_create_fail(&t, KI_ERR_SHAPE, "groups");
    conv_op(&t, 2, 2, 1, 1, 1, w, NULL);
    top_str(&t, "padding", "same");
    top_ints2(&t, "stride", 2, 2);
    expect_create_fail(&t, KI_ERR_UNSUPPORTED, "stride");
    conv_op(&t, 2, 2, 1, 1, 1, w, NULL);
    top_str(&t, "padding_mode", "mirror");
    expect_create_fail(&t, KI_ERR_UNSUPPORTED, "mirror");
    conv_op(&t, 2, 2, 1, 1, 1, w, NULL);
    t.d.n_attrs = 0;
    expect_create_fail(&t, KI_ERR_FORMAT, "@weight");
    conv_op(&t, 2, 2, 1, 1, 1, w, NULL);
    t.params[4].i = 1;
    expect_create_fail(&t, KI_ERR_FORMAT, "@bias");

    /* shape errors: channel count, reflect padding too large, kernel larger than input */
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    ki_shape out;
    conv_op(&t, 2, 2, 2, 2, 1, w, NULL);
    top_ints2(&t, "padding", 2, 2);
    top_str(&t, "padding_mode", "reflect");
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    ki_shape in = ki_shape_make(4, (const int64_t[]){ 1, 3, 5, 5 });
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    in = ki_shape_make(4, (const int64_t[]){ 1, 2, 2, 5 });
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    in = ki_shape_make(2, (const int64_t[]){ 2, 5 });
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    in = ki_shape_make(4, (const int64_t[]){ 3, 2, 3, 4 });
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_OK);
    assert_int_equal(out.d[0], 3);
    assert_int_equal(out.d[2], 6);
    assert_int_equal(out.d[3], 7);
    ops->destroy(st);
}

/* A random conv configuration, created through the registry so parsing is exercised too. */
typedef struct rconf {
    int64_t n, in, out, groups, h, w, kh, kw, sh, sw, dh, dw, p[4];
    int mode;
    bool bias, dw_shape;
} rconf;

static void rconf_draw(uint64_t *s, rconf *r)
{
    r->groups = trng_int(s, 1, 3);
    r->dw_shape = trng_int(s, 0, 3) == 0;
    r->in = r->groups * trng_int(s, 1, 3);
    r->out = r->dw_shape ? r->in : r->groups * trng_int(s, 1, 3);
    if (!r->dw_shape && trng_int(s, 0, 3) == 0) { /* full GEMM tiles and several k blocks */
        r->in = r->groups * trng_int(s, 8, 24);
        r->out = r->groups * trng_int(s, 8, 40);
    }
    r->groups = r->dw_shape ? r->in : r->groups;
    r->n = trng_int(s, 1, 2);
    r->kh = trng_int(s, 1, 4), r->kw = trng_int(s, 1, 4);
    r->sh = trng_int(s, 1, 3), r->sw = trng_int(s, 1, 3);
    r->dh = trng_int(s, 1, 2), r->dw = trng_int(s, 1, 2);
    r->h = trng_int(s, 3, 13),
    r->w = trng_int(s, 3, 50);            /* runs that start and end inside padding */
    r->mode = (int)trng_int(s, 0, 5) % 4; /* zeros twice as often */
    for (int i = 0; i < 4; i++) {
        r->p[i] = trng_int(s, 0, 2);
    }
    r->bias = trng_int(s, 0, 1);
    if (r->dw_shape && trng_int(s, 0, 1) == 0) { /* the 3x3 depthwise kernels */
        r->kh = r->kw = 3, r->dh = r->dw = 1, r->mode = 0;
        r->sh = r->sw = trng_int(s, 1, 2);
        r->h += 4;
    }
    if (trng_int(s, 0, 4) == 0) { /* 1x1 stride 1 unpadded: the no-im2col path */
        r->kh = r->kw = r->sh = r->sw = 1;
        r->p[0] = r->p[1] = r->p[2] = r->p[3] = 0;
    }
}

static int path_runs[KI_CONV2D_DOT + 1];

/* Runs path p with micro-kernel isa on th threads into out. */
static void run_variant(const ki_conv2d *c, const ki_conv2d_geom *g, int p, ki_isa isa, int th,
                        const float *x, float *out)
{
    ki_conv2d cc = *c;
    ki_conv2d_set_isa(&cc, isa);
    size_t ws = ki_conv2d_workspace_for(&cc, g, p, th);
    /* 64-byte aligned, as the session's workspace */
    ki_exec ex = { th, ws ? aligned_alloc(64, (ws * (size_t)th + 63) / 64 * 64) : NULL, ws, NULL };
    omp_set_num_threads(th);
    ki_conv2d_run(&cc, g, p, x, out, &ex);
    free(ex.workspace);
}

/* Runs path p with each micro-kernel this CPU has (the best on 1 and 2 threads, which must agree
 * bitwise, then the plain C and AVX2 ones) and checks every result against ref within tol.
 * Returns how many variants ran. */
static int check_variants(const ki_conv2d *c, const ki_conv2d_geom *g, int p, const float *x,
                          const float *ref, size_t n, float tol, uint64_t seed)
{
    static const int th_of[4] = { 1, 2, 2, 2 };
    const ki_isa isa_of[4] = { ki_cpu_isa(), ki_cpu_isa(), KI_ISA_GENERIC, KI_ISA_AVX2 };
    float *out = malloc(n * sizeof *out + 4), *first = malloc(n * sizeof *out + 4);
    int runs = 0;
    for (int v = 0; v < 4; v++) {
        if (!ki_gemm_ukernel_for(isa_of[v])) {
            continue;
        }
        run_variant(c, g, p, isa_of[v], th_of[v], x, out);
        runs++;
        long bad = tclose(out, ref, n, tol, tol);
        if (bad >= 0) {
            fail_msg("seed %llu path %d variant %d: out[%ld] %g vs ref %g",
                     (unsigned long long)seed, p, v, bad, out[bad], ref[bad]);
        }
        if (v == 0) {
            memcpy(first, out, n * sizeof *out);
        } else if (v == 1 && memcmp(first, out, n * sizeof *out) != 0) {
            fail_msg("seed %llu path %d: 1 and 2 threads differ", (unsigned long long)seed, p);
        }
    }
    free(out), free(first);
    return runs;
}

/* Every fast path against the reference (see check_variants). */
static void check_paths(const rconf *r, uint64_t seed, const ki_conv2d *c0, const float *x)
{
    ki_conv2d_geom g;
    ki_error err = { 0 };
    ki_shape in = ki_shape_make(4, (const int64_t[]){ r->n, r->in, r->h, r->w });
    if (ki_conv2d_geom_make(c0, &in, &g, &err) != KI_OK) {
        return; /* kernel larger than the padded input: a valid rejection */
    }
    size_t n_out = (size_t)(r->n * r->out * g.oh * g.ow);
    float *ref = malloc(n_out * sizeof *ref + 4), *res = malloc(n_out * sizeof *ref + 4);
    ki_conv2d cc = *c0, *c = &cc; /* every third seed with a fused residual add */
    uint64_t s = seed;
    trng_fill(&s, res, n_out);
    cc.residual = seed % 3 == 0;
    cc.res = cc.residual ? res : NULL;
    /* every other one of those adds it after the activation (conv, act, add) */
    cc.ep.res_after = cc.residual && seed % 2 == 1 && cc.ep.act.kind != KI_ACT_NONE;
    ki_conv2d_forward_ref(c, &g, x, ref);
    static const int plain[5] = { KI_CONV2D_GEMM, KI_CONV2D_GEMM1, KI_CONV2D_DW, KI_CONV2D_DIRECT,
                                  KI_CONV2D_DOT };
    for (int i = 0; i < 5; i++) {
        int p = plain[i];
        if (ki_conv2d_path_ok(c, &g, p)) {
            path_runs[p] += check_variants(c, &g, p, x, ref, n_out, 1e-4f, seed);
        }
    }
    if (ki_conv2d_ov_shape_ok(c)) { /* the OV path on its repacked weights */
        assert_int_equal(ki_conv2d_ov_prepare(c, false, &err), KI_OK);
        assert_true(ki_conv2d_path_ok(c, &g, KI_CONV2D_OV));
        path_runs[KI_CONV2D_OV] += check_variants(c, &g, KI_CONV2D_OV, x, ref, n_out, 1e-4f, seed);
        free(cc.ov_a);
        free(cc.ov_h);
    }
    free(ref), free(res);
}

static void test_random_vs_ref(void **unused)
{
    (void)unused;
    static const char *const modes[4] = { "zeros", "reflect", "replicate", "circular" };
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        rconf r;
        rconf_draw(&s, &r);
        size_t nw = (size_t)(r.out * (r.in / r.groups) * r.kh * r.kw);
        size_t nx = (size_t)(r.n * r.in * r.h * r.w);
        float *w = malloc(nw * sizeof *w), *b = malloc((size_t)r.out * sizeof *b);
        float *x = malloc(nx * sizeof *x);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)r.out), trng_fill(&s, x, nx);
        top t;
        conv_op(&t, r.in, r.out, r.kh, r.kw, r.groups, w, r.bias ? b : NULL);
        top_ints2(&t, "stride", r.sh, r.sw);
        top_ints2(&t, "dilation", r.dh, r.dw);
        top_ints(&t, "padding", 4, r.p);
        top_str(&t, "padding_mode", modes[r.mode]);
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        if (top_create(&t, &ops, &st, &err) != KI_OK) {
            fail_msg("seed %llu: %s", (unsigned long long)seed, err.msg);
        }
        ki_conv2d *c = st;
        static const ki_act acts[5] = { { KI_ACT_NONE, 0, 0 },
                                        { KI_ACT_RELU, 0, 0 },
                                        { KI_ACT_RELU6, 0, 0 },
                                        { KI_ACT_HARDSWISH, 0, 0 },
                                        { KI_ACT_SILU, 0, 0 } };
        c->ep.act = acts[seed % 5]; /* as fuse() would: in-register and after-store epilogues */
        int64_t m[4] = { r.p[2], r.p[3], r.p[0], r.p[1] };
        assert_memory_equal(&c->pt, m, sizeof m); /* (l,r,t,b) read as documented */
        check_paths(&r, seed, c, x);
        ops->destroy(st);
        free(w), free(b), free(x);
    }
    const bool direct = ki_cpu_isa() >= KI_ISA_AVX2; /* the direct path needs a vector level */
    for (int p = KI_CONV2D_GEMM; p <= KI_CONV2D_DIRECT; p++) {
        if (p != KI_CONV2D_WINO && (p != KI_CONV2D_DIRECT || direct) && path_runs[p] < 20) {
            fail_msg("path %d ran only %d times", p, path_runs[p]);
        }
    }
}

/* 1x1 layers on one pixel per image (squeeze-and-excitation blocks): the dot path against the
 * reference at every level, 1 and 2 threads bitwise, with and without a fused residual, with
 * enough products for the team to split them (DOT_PAR_MIN) and chunk counts that do not divide
 * between the threads; the policy picks it. */
static void test_dot_vs_ref(void **unused)
{
    (void)unused;
    static const ki_act acts[4] = { { KI_ACT_NONE, 0, 0 },
                                    { KI_ACT_RELU, 0, 0 },
                                    { KI_ACT_HARDSIGMOID, 0, 0 },
                                    { KI_ACT_SILU, 0, 0 } };
    const int before = path_runs[KI_CONV2D_DOT];
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t s = seed * 0x2545F4914F6CDD1Dull;
        rconf r = { .n = trng_int(&s, 1, 3), .bias = seed % 4 != 0 };
        r.groups = r.h = r.w = r.kh = r.kw = r.sh = r.sw = r.dh = r.dw = 1;
        r.in = seed % 2 ? trng_int(&s, 1, 40) : trng_int(&s, 100, 600);
        r.out = seed % 3 ? trng_int(&s, 1, 70) : trng_int(&s, 100, 600);
        size_t nw = (size_t)(r.out * r.in), nx = (size_t)(r.n * r.in);
        float *w = malloc(nw * sizeof *w), *b = malloc((size_t)r.out * sizeof *b);
        float *x = malloc(nx * sizeof *x);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)r.out), trng_fill(&s, x, nx);
        top t;
        conv_op(&t, r.in, r.out, 1, 1, 1, w, r.bias ? b : NULL);
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        c->ep.act = acts[seed % 4];
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ r.n, r.in, 1, 1 });
        assert_int_equal(ki_conv2d_geom_make(c, &in, &g, &err), KI_OK);
        assert_int_equal(ki_conv2d_pick(c, &g), KI_CONV2D_DOT);
        check_paths(&r, seed, c, x);
        ops->destroy(st);
        free(w), free(b), free(x);
    }
    assert_true(path_runs[KI_CONV2D_DOT] - before >= 40);
}

/* Column blocks of the OV path: at most KI_OV_PW_MAX pixels, as equal as can be. */
static void test_ov_blocks(void **unused)
{
    (void)unused;
    static const int64_t n[8] = { 1, 7, 12, 13, 32, 49, 196, 1000 };
    static const int64_t want[8] = { 1, 7, 12, 7, 11, 10, 12, 12 };
    for (int i = 0; i < 8; i++) {
        int64_t pw = ki_conv2d_ov_pw_equal(n[i]), blocks = (n[i] + pw - 1) / pw;
        assert_int_equal(pw, want[i]);
        assert_true(blocks * pw - n[i] < blocks); /* less than one pixel of padding per block */
        assert_int_equal(blocks, ki_conv2d_ov_blocks(n[i]));
    }
#if KI_HAVE_X86
    /* AVX2: blocks of 12 where their tiles run fewer k loops (49: 4 x 12 + 1, 17 loops, not
     * 4 x 10 + 9, 19; 14: 12 + 2, 5, not 7 + 7, 6; 32: 12 + 12 + 8, 11, not 11 + 11 + 10, 12),
     * else equal blocks (16: 8 + 8 and 12 + 4 both 6; 13: 7 + 6 and 12 + 1 both 5) */
    static const int64_t m[7] = { 7, 13, 14, 16, 32, 49, 196 };
    static const int64_t mwant[7] = { 7, 7, 12, 8, 12, 12, 12 };
    for (int i = 0; i < 7; i++) {
        int64_t pw = ki_ov_pw_avx2(m[i]);
        assert_int_equal(pw, mwant[i]);
        assert_int_equal((m[i] + pw - 1) / pw, ki_conv2d_ov_blocks(m[i]));
    }
#endif
}

/* The OV path shared by pixels (more pixels than output channels: 196 > 32; 17 blocks of 12
 * narrowed to 18 of 11 for two threads, 18 of 11 for three), by channels (oc 96 > 49 pixels) and
 * split over k (1x1 from KI_OV_SPLITK_MIN input channels with more pixels than output channels, an
 * odd count among them: 201 -> 40 at 13x13, 384 -> 64 at 14x14; 576 -> 96 at 7x7, fewer pixels
 * than channels, goes by channels), with a residual and an activation applied after the store
 * (SiLU), a clamp in the tile (ReLU6) or nothing, on float32 and on binary16 weights (kept as
 * such), with the best kernels this CPU has (on 1 to 3 threads), the AVX2 and the plain ones:
 * every run matches the reference, and the best kernels' runs bitwise their one-thread result. */
static void test_ov_parts(void **unused)
{
    (void)unused;
    const ki_isa best = ki_cpu_isa(); /* runs 1-3 at the best level this CPU (or KINFER_ISA) has */
    static const int64_t ics[9] = { 80, 80, 80, 80, 201, 384, 201, 384, 576 };
    static const int64_t ocs[9] = { 32, 96, 32, 96, 40, 64, 40, 64, 96 };
    static const int64_t hs[9] = { 14, 7, 14, 7, 13, 14, 13, 14, 7 };
    static const ki_act_kind acts[9] = { KI_ACT_SILU,  KI_ACT_SILU,  KI_ACT_SILU,
                                         KI_ACT_SILU,  KI_ACT_RELU6, KI_ACT_SILU,
                                         KI_ACT_RELU6, KI_ACT_NONE,  KI_ACT_RELU6 };
    for (int v = 0; v < 9; v++) {
        const int64_t ic = ics[v], oc = ocs[v], h = hs[v], n_out = oc * h * h;
        const bool half = v == 2 || v == 3 || v == 6 || v == 7;
        const bool with_res = v < 4 || v == 5 || v == 6 || v == 8;
        uint64_t s = 77 + (uint64_t)v;
        float *w = malloc((size_t)(oc * ic) * sizeof *w), *b = malloc((size_t)oc * sizeof *b);
        float *x = malloc((size_t)(ic * h * h) * sizeof *x), *res = malloc((size_t)n_out * 4);
        float *ref = malloc((size_t)n_out * 4), *one = malloc((size_t)n_out * 4);
        float *out = malloc((size_t)n_out * 4);
        trng_fill(&s, w, (size_t)(oc * ic)), trng_fill(&s, b, (size_t)oc);
        trng_fill(&s, x, (size_t)(ic * h * h)), trng_fill(&s, res, (size_t)n_out);
        for (int64_t i = 0; half && i < oc * ic; i++) { /* binary16 values */
            w[i] = (float)((int)(w[i] * 1024.0f)) / 1024.0f;
        }
        top t;
        conv_op(&t, ic, oc, 1, 1, 1, w, b);
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        c->ep.act = (ki_act){ acts[v], 0, 0 };
        c->residual = with_res, c->res = with_res ? res : NULL;
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ 1, ic, h, h });
        assert_int_equal(ki_conv2d_geom_make(c, &in, &g, &err), KI_OK);
        if (!c->ov_a && !c->ov_h) {
            assert_int_equal(ki_conv2d_ov_prepare(c, true, &err), KI_OK);
        }
        assert_true(half ? c->ov_h && !c->ov_a : c->ov_a && !c->ov_h);
        ki_conv2d_forward_ref(c, &g, x, ref);
        for (int th = 1; th <= 5; th++) { /* 4: the plain kernels, 5: AVX2, on two threads */
            const ki_isa isa = th == 4 ? KI_ISA_GENERIC : th == 5 ? KI_ISA_AVX2 : best;
            if (isa > best) {
                continue;
            }
            run_variant(c, &g, KI_CONV2D_OV, isa, th >= 4 ? 2 : th, x, out);
            for (int64_t i = 0; i < n_out; i++) {
                assert_true(fabsf(out[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i])));
            }
            if (th == 1) {
                memcpy(one, out, (size_t)n_out * 4);
            }
            if (th < 4) { /* the plain kernel sums in the same order but not always fused */
                assert_memory_equal(one, out, (size_t)n_out * 4);
            }
        }
        ops->destroy(st);
        free(w), free(b), free(x), free(res), free(ref), free(one), free(out);
    }
}

/* A global average pool fused by fuse() (nn.AdaptiveAvgPool2d / F.adaptive_avg_pool2d to 1x1)
 * after a clamp-type activation: each channel's mean against the reference convolution's output
 * averaged in double, on 1 to 3 threads with the same bits, at the best level this CPU has and
 * with the plain kernels. The OV path summing its tiles (1x1 layers by channels, 576 -> 96 at 7x7
 * among them, a 3x3 one whose columns are packed, a 1x1 one split over k (576 -> 96 at 14x14); two
 * images; more pixels than output channels, whose blocks are then split by channels, as by pixels
 * they would depend on the thread count),
 * and, without its OV weights, another path (the 1x1 GEMM) through the whole output. Not fused:
 * a pool to 2x2, SiLU (applied after the store), a residual. */
static void test_global_mean(void **unused)
{
    (void)unused;
    static const struct {
        int64_t ic, oc, k, h, n;
        ki_act_kind act;
        bool f_op; /* F.adaptive_avg_pool2d */
    } cases[] = {
        { 80, 96, 1, 7, 2, KI_ACT_RELU, false },   { 32, 64, 3, 7, 1, KI_ACT_RELU6, true },
        { 576, 96, 1, 7, 1, KI_ACT_NONE, false },  { 80, 32, 1, 14, 1, KI_ACT_HARDTANH, false },
        { 64, 40, 1, 40, 1, KI_ACT_RELU, true },   { 512, 200, 1, 13, 1, KI_ACT_RELU, false },
        { 576, 96, 1, 14, 1, KI_ACT_NONE, false },
    };
    const ki_isa best = ki_cpu_isa();
    for (size_t v = 0; v < sizeof cases / sizeof cases[0]; v++) {
        const int64_t ic = cases[v].ic, oc = cases[v].oc, k = cases[v].k, h = cases[v].h;
        const int64_t nimg = cases[v].n, nw = oc * ic * k * k, nx = nimg * ic * h * h;
        uint64_t s = 501 + (uint64_t)v;
        float *w = malloc((size_t)nw * 4), *b = malloc((size_t)oc * 4), *x = malloc((size_t)nx * 4);
        float *full = malloc((size_t)(nimg * oc * h * h) * 4),
              *one = malloc((size_t)(nimg * oc) * 4);
        trng_fill(&s, w, (size_t)nw), trng_fill(&s, b, (size_t)oc), trng_fill(&s, x, (size_t)nx);
        top t, p;
        conv_op(&t, ic, oc, k, k, 1, w, b);
        top_ints(&t, "padding", 2, (const int64_t[]){ k / 2, k / 2 });
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        c->ep.act = (ki_act){ cases[v].act, -0.5f, 0.75f };
        if (!c->ov_a) {
            assert_int_equal(ki_conv2d_ov_prepare(c, false, &err), KI_OK);
        }
        top_init(&p, cases[v].f_op ? "F.adaptive_avg_pool2d" : "nn.AdaptiveAvgPool2d", 1, 1);
        top_ints2(&p, "output_size", 2, 2);
        assert_false(ops->fuse(c, &p.d, 0)); /* not a global mean */
        top_init(&p, cases[v].f_op ? "F.adaptive_avg_pool2d" : "nn.AdaptiveAvgPool2d", 1, 1);
        top_ints2(&p, "output_size", 1, 1);
        const ki_act kept = c->ep.act;
        c->ep.act = (ki_act){ KI_ACT_SILU, 0, 0 };
        assert_false(ops->fuse(c, &p.d, 0)); /* SiLU is applied after the store */
        c->ep.act = kept, c->residual = true;
        assert_false(ops->fuse(c, &p.d, 0));
        c->residual = false;
        assert_true(ops->fuse(c, &p.d, 0));
        assert_true(c->gap);
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ nimg, ic, h, h });
        assert_int_equal(ki_conv2d_geom_make(c, &in, &g, &err), KI_OK);
        ki_conv2d_forward_ref(c, &g, x, full);
        /* the OV path (its weights are there), summing its tiles; for case 3 also without them
         * (then the 1x1 GEMM, whose whole output is averaged) */
        assert_int_equal(ki_conv2d_pick(c, &g), KI_CONV2D_OV);
        float *ov_a = c->ov_a;
        const ki_isa levels[3] = { best, KI_ISA_GENERIC, best };
        for (int li = 0; li < (v == 3 ? 3 : 2); li++) {
            ki_conv2d_set_isa(c, levels[li]);
            c->ov_a = li == 2 ? NULL : ov_a;
            assert_int_equal(ki_conv2d_pick(c, &g) == KI_CONV2D_OV, li < 2);
            for (int th = 1; th <= 3; th++) {
                ki_tensor tin = { in, x }, tout;
                assert_int_equal(top_run(ops, c, &tin, 1, &tout, 1, th, &err), KI_OK);
                assert_int_equal(tout.shape.ndim, 4);
                assert_true(tout.shape.d[0] == nimg && tout.shape.d[1] == oc &&
                            tout.shape.d[2] == 1 && tout.shape.d[3] == 1);
                for (int64_t i = 0; i < nimg * oc; i++) {
                    double m = 0.0;
                    for (int64_t q = 0; q < h * h; q++) {
                        m += full[i * h * h + q];
                    }
                    m /= (double)(h * h);
                    if (fabs(tout.data[i] - m) > 2e-5 * (1.0 + fabs(m))) {
                        fail_msg("case %zu level %d threads %d: mean[%lld] %g want %g", v,
                                 (int)levels[li], th, (long long)i, tout.data[i], m);
                    }
                }
                if (th == 1) {
                    memcpy(one, tout.data, (size_t)(nimg * oc) * 4);
                } else {
                    assert_memory_equal(one, tout.data, (size_t)(nimg * oc) * 4);
                }
                free(tout.data);
            }
        }
        c->ov_a = ov_a;
        ops->destroy(st);
        free(w), free(b), free(x), free(full), free(one);
    }
}

/* The direct path on stems wide enough for its unmasked blocks (every column a block reads inside
 * the row: from about 2 x 16 + kw + 31 input columns at stride 2): 3x3, 6x6 and 7x7 at stride 2
 * and 5x5 at stride 1, 20 output channels (a partial block), against the reference at each level
 * this CPU has, on 1 and 2 threads. */
static void test_direct_wide(void **unused)
{
    (void)unused;
    if (ki_cpu_isa() < KI_ISA_AVX2) {
        skip(); /* layers get the direct path from AVX2 on (the plain row kernel runs below) */
    }
    static const ki_isa levels[3] = { KI_ISA_AVX512, KI_ISA_AVX2, KI_ISA_GENERIC };
    static const int64_t ks[4] = { 3, 6, 7, 5 }, ss[4] = { 2, 2, 2, 1 }, ps[4] = { 1, 2, 3, 2 };
    for (int v = 0; v < 4; v++) {
        const int64_t ic = 3, oc = 20, h = 9, w = 150, k = ks[v];
        uint64_t s = 91 + (uint64_t)v;
        float *wt = malloc((size_t)(oc * ic * k * k) * sizeof *wt), *b = malloc((size_t)oc * 4);
        float *x = malloc((size_t)(ic * h * w) * sizeof *x);
        trng_fill(&s, wt, (size_t)(oc * ic * k * k)), trng_fill(&s, b, (size_t)oc);
        trng_fill(&s, x, (size_t)(ic * h * w));
        top t;
        conv_op(&t, ic, oc, k, k, 1, wt, b);
        top_ints2(&t, "stride", ss[v], ss[v]);
        top_ints(&t, "padding", 2, (const int64_t[]){ ps[v], ps[v] });
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ 1, ic, h, w });
        assert_int_equal(ki_conv2d_geom_make(c, &in, &g, &err), KI_OK);
        assert_true(ki_conv2d_path_ok(c, &g, KI_CONV2D_DIRECT));
        size_t n = (size_t)(oc * g.oh * g.ow);
        float *ref = malloc(n * 4), *out = malloc(n * 4);
        ki_conv2d_forward_ref(c, &g, x, ref);
        for (int r = 0; r < 6; r++) { /* each level this CPU has, on 1 and 2 threads */
            const int th = 1 + r % 2;
            if (levels[r / 2] > ki_cpu_isa()) {
                continue;
            }
            run_variant(c, &g, KI_CONV2D_DIRECT, levels[r / 2], th, x, out);
            for (size_t i = 0; i < n; i++) {
                assert_true(fabsf(out[i] - ref[i]) <= 1e-4f * (1.0f + fabsf(ref[i])));
            }
        }
        ops->destroy(st);
        free(wt), free(b), free(x), free(ref), free(out);
    }
}

/* ki_half_exact: the binary16 bits exactly when the float is one (normal, subnormal, zero,
 * infinity), and false for anything that would round (or a NaN). */
static void test_half_exact(void **unused)
{
    (void)unused;
    static const float yes[] = { 0.0f,
                                 -0.0f,
                                 1.0f,
                                 -2.5f,
                                 65504.0f,
                                 6.103515625e-05f,
                                 5.9604644775390625e-08f,
                                 -3.0517578125e-05f,
                                 INFINITY };
    static const uint16_t bits[] = { 0x0000, 0x8000, 0x3c00, 0xc100, 0x7bff,
                                     0x0400, 0x0001, 0x8200, 0x7c00 };
    static const float no[] = { 0.1f, 65520.0f, 1e-8f, 1.0f + 1.0f / 2048, 2.9802322e-08f, NAN };
    uint16_t h;
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        assert_true(ki_half_exact(yes[i], &h));
        assert_int_equal(h, bits[i]);
    }
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        assert_false(ki_half_exact(no[i], &h));
    }
    for (uint32_t v = 0; v < 0x7c00; v++) { /* every finite binary16 round-trips */
        float f = ki_half_to_float((uint16_t)v);
        assert_true(ki_half_exact(f, &h));
        assert_int_equal(h, v);
        assert_true(ki_half_exact(-f, &h));
        assert_int_equal(h, v | 0x8000);
    }
}

/* ki_bigbuf_discard drops exactly the whole pages inside the range: they read as zeros, the
 * partial pages at both ends keep their data. */
static void test_discard_pages(void **unused)
{
    (void)unused;
    const size_t page = 4096, n = 4 * page;
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    memset(p, 7, n);
    ki_bigbuf_discard(p + 100, 3 * page); /* pages 1 and 2 whole, 0 and 3 in part */
    assert_int_equal(p[page - 1], 7);
    assert_int_equal(p[page], 0);
    assert_int_equal(p[3 * page - 1], 0);
    assert_int_equal(p[3 * page], 7);
    assert_int_equal(p[3 * page + 99], 7);
    munmap(p, n);
}

/* A layer with its own form of the weights (Winograd or OV) gives the originals back when the
 * loader says it may (attrs_releasable), then still computes what the reference does from a
 * copy, at the declared size and at others (Winograd then for every size: the GEMM paths would
 * need the released weights); descriptions built elsewhere keep their data. */
static void test_release_weights(void **unused)
{
    (void)unused;
    const bool ov = ki_cpu_isa() >= KI_ISA_AVX2; /* the OV micro-kernels' levels */
    static const int64_t ks[2] = { 3, 1 }, ss[2] = { 1, 2 }, ps[2] = { 1, 0 };
    for (int v = 0; v < 2; v++) {
        const int64_t ic = 48, oc = 40, nw = oc * ic * ks[v] * ks[v];
        uint64_t rs = 77 + (uint64_t)v;
        float *w = ki_bigbuf_alloc((size_t)nw * sizeof *w), *copy = malloc((size_t)nw * sizeof *w);
        float *b = malloc((size_t)oc * sizeof *b);
        trng_fill(&rs, w, (size_t)nw), trng_fill(&rs, b, (size_t)oc);
        memcpy(copy, w, (size_t)nw * sizeof *w);
        ki_shape decl = ki_shape_make(4, (const int64_t[]){ 1, ic, 7, 7 });
        top t, tr;
        conv_op(&t, ic, oc, ks[v], ks[v], 1, w, b);
        conv_op(&tr, ic, oc, ks[v], ks[v], 1, copy, b);
        top_ints2(&t, "padding", ps[v], ps[v]), top_ints2(&tr, "padding", ps[v], ps[v]);
        top_ints2(&t, "stride", ss[v], ss[v]), top_ints2(&tr, "stride", ss[v], ss[v]);
        t.d.input_decl = &decl;
        t.d.attrs_releasable = true;
        const ki_layer_ops *ops;
        void *st, *st_ref;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        assert_int_equal(top_create(&tr, &ops, &st_ref, &err), KI_OK);
        const ki_conv2d *c = st;
        assert_int_equal(c->weight == NULL, ov); /* v 0: F(2x2) Winograd, v 1: OV */
        assert_non_null(((const ki_conv2d *)st_ref)->weight);
        for (int64_t hw = 1; hw <= 20; hw += 6) {
            int64_t d[4] = { 1, ic, hw, hw };
            size_t nx = (size_t)(ic * hw * hw);
            float *x = malloc(nx * sizeof *x);
            trng_fill(&rs, x, nx);
            ki_tensor in = { ki_shape_make(4, d), x }, out, ref;
            assert_int_equal(top_run(ops, st_ref, &in, 1, &ref, 1, 1, &err), KI_OK);
            for (int th = 1; th <= 2; th++) {
                assert_int_equal(top_run(ops, st, &in, 1, &out, 1, th, &err), KI_OK);
                size_t n = (size_t)ki_shape_count(&out.shape);
                long bad = tclose(out.data, ref.data, n, 2e-4f, 2e-4f);
                if (bad >= 0) {
                    fail_msg("v %d size %lld: out[%ld] %g vs ref %g", v, (long long)hw, bad,
                             out.data[bad], ref.data[bad]);
                }
                free(out.data);
            }
            free(ref.data), free(x);
        }
        ops->destroy(st), ops->destroy(st_ref);
        free(w), free(copy), free(b);
    }
}

/* Winograd F(4x4,3x3) and F(2x2,3x3) against the direct reference: odd sizes (partial tiles at the
 * right and bottom, planes smaller than a tile), paddings 0..2 on each side, batches, channel
 * counts off the micro-kernel's 8-row tiles, bias, fused residual and the activations in and after
 * the output transform; with every transform/micro-kernel pair this CPU runs, 1 and 2 threads
 * bitwise equal. Every fifth seed F(2x2) with U formed per block of input channels
 * (ki_conv2d_wino_prepare_h), from binary16 weights or (every tenth seed) from float32 ones, up
 * to 150 input channels (several blocks, the last one partial) and one to several panels
 * (blocked runs by panels and by KI_WINO_SUB tiles, and shared runs). Its error is that of
 * 36-term sums in float: within 2e-4 here. */
static void test_winograd_vs_ref(void **unused)
{
    (void)unused;
    static const ki_act acts[4] = { { KI_ACT_NONE, 0, 0 },
                                    { KI_ACT_RELU, 0, 0 },
                                    { KI_ACT_HARDTANH, -0.5f, 0.5f },
                                    { KI_ACT_SILU, 0, 0 } };
    int runs = 0;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 0xD1B54A32D192ED03ull;
        const bool wh = seed % 5 == 4, b16 = wh && seed % 10 == 4;
        int64_t n = trng_int(&s, 1, 2), ic = trng_int(&s, 1, wh ? 150 : 40);
        int64_t oc = trng_int(&s, 1, 40), h = trng_int(&s, 1, wh ? 14 : 30);
        int64_t w = trng_int(&s, 1, wh ? 40 : 70), p[4];
        for (int i = 0; i < 4; i++) {
            p[i] = trng_int(&s, 0, 2);
        }
        size_t nw = (size_t)(oc * ic * 9), nx = (size_t)(n * ic * h * w);
        float *wt = malloc(nw * sizeof *wt), *b = malloc((size_t)oc * sizeof *b);
        float *x = malloc(nx * sizeof *x);
        trng_fill(&s, wt, nw), trng_fill(&s, b, (size_t)oc), trng_fill(&s, x, nx);
        for (size_t i = 0; i < nw && b16; i++) {
            wt[i] = roundf(wt[i] * 256.0f) / 256.0f; /* binary16 values */
        }
        top t;
        conv_op(&t, ic, oc, 3, 3, 1, wt, seed % 2 ? b : NULL);
        top_ints(&t, "padding", 4, p);
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        const int wm = seed % 5 < 3 ? 4 : 2;
        if (wh) {
            assert_int_equal(ki_conv2d_wino_prepare_h(c, b16, &err), KI_OK);
            assert_int_equal(c->wino_h != NULL, b16);
            assert_int_equal(c->wino_f != NULL, !b16);
            assert_null(c->wino_u);
        } else {
            assert_int_equal(ki_conv2d_wino_prepare(c, wm, seed % 2 == 0, &err), KI_OK);
        }
        assert_int_equal(c->wino_m, wm);
        c->ep.act = acts[seed % 4];
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ n, ic, h, w });
        if (ki_conv2d_geom_make(c, &in, &g, &err) != KI_OK) {
            ops->destroy(st), free(wt), free(b), free(x);
            continue; /* padded input smaller than the kernel */
        }
        assert_true(ki_conv2d_path_ok(c, &g, KI_CONV2D_WINO));
        size_t no = (size_t)(n * oc * g.oh * g.ow);
        float *ref = malloc(no * sizeof *ref), *res = malloc(no * sizeof *res);
        trng_fill(&s, res, no);
        c->residual = seed % 3 == 0;
        c->res = c->residual ? res : NULL;
        c->ep.res_after = c->residual && seed % 2 == 1 && c->ep.act.kind != KI_ACT_NONE;
        ki_conv2d_forward_ref(c, &g, x, ref);
        runs += check_variants(c, &g, KI_CONV2D_WINO, x, ref, no, 2e-4f, seed);
        ops->destroy(st);
        free(wt), free(b), free(x), free(ref), free(res);
    }
    assert_true(runs >= 100);
}

/* The AVX-512 Winograd transforms (by tile rows, in registers) against the plain ones, bit for
 * bit: F(4x4) and F(2x2), odd planes (tiles past the right and bottom edges, planes narrower than
 * a tile, tile rows of 1-23 tiles so a group of 16 lanes holds up to 16 runs), paddings 0..2,
 * tile ranges from a later panel, a residual or none, clamps, and NaN / infinite products; and
 * the forming of F(2x2) U from binary16 weights. */
static void test_wino_xforms_avx512(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    if (ki_cpu_get()->isa < KI_ISA_AVX512) {
        skip();
    }
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        wino_case c;
        if (!wino_random_case(seed, &s, 90, &c)) {
            continue;
        }
        const int64_t npos = c.npos, h = c.h, w = c.w, oh = c.oh, ow = c.ow;
        const int64_t tb = c.tb, te = c.te, n = c.n;
        const ki_wino_tiles tg = c.tg;
        float *x = malloc((size_t)(h * w) * sizeof *x), *va = malloc((size_t)(npos * n + 64) * 4);
        float *vr = malloc((size_t)(npos * n + 64) * 4), *mm = malloc((size_t)(npos * n) * 4);
        float *res = malloc((size_t)(oh * ow) * 4), *qa = malloc((size_t)(oh * ow) * 4);
        float *qr = malloc((size_t)(oh * ow) * 4);
        trng_fill(&s, x, (size_t)(h * w)), trng_fill(&s, mm, (size_t)(npos * n));
        trng_fill(&s, res, (size_t)(oh * ow));
        memset(va, 0xA5, (size_t)(npos * n + 64) * 4),
            memset(vr, 0xA5, (size_t)(npos * n + 64) * 4);
        ki_wino_input_avx512(x, h, w, &tg, tb, te, va, KI_GEMM_NR, n);
        ki_wino_input_ref(x, h, w, &tg, tb, te, vr, KI_GEMM_NR, n);
        assert_memory_equal(va, vr, (size_t)(npos * n + 64) * 4);
        if (seed % 5 == 0) {
            mm[seed % (uint64_t)(npos * n)] = __builtin_nanf("");
            mm[(seed * 7) % (uint64_t)(npos * n)] = -__builtin_inff();
        }
        const float lo = seed % 4 == 1 ? 0.0f : -__builtin_inff();
        const float hi = seed % 4 == 1 ? 0.5f : __builtin_inff();
        memset(qa, 0x5A, (size_t)(oh * ow) * 4), memset(qr, 0x5A, (size_t)(oh * ow) * 4);
        const float *r = seed % 3 == 1 ? res : NULL;
        ki_wino_output_avx512(mm, n, qa, r, &tg, tb, te, 0.25f, lo, hi);
        ki_wino_output_ref(mm, n, qr, r, &tg, tb, te, 0.25f, lo, hi);
        assert_memory_equal(qa, qr, (size_t)(oh * ow) * 4);
        free(x), free(va), free(vr), free(mm), free(res), free(qa), free(qr);
        /* U of F(2x2) from binary16 weights: kc input channels, positions 16 * kc + 3 apart
         * (unaligned), binary16 values including subnormals and infinities (not NaN, which the
         * weights never are: ki_half_exact) */
        const int64_t kc = trng_int(&s, 1, 70), ps = kc * KI_OV_MV + 3, nu = 16 * ps;
        uint16_t *gh = malloc((size_t)(kc * 9 * KI_OV_MV) * sizeof *gh);
        for (int64_t i = 0; i < kc * 9 * KI_OV_MV; i++) {
            gh[i] = (uint16_t)(trng_next(&s) >> 48);
            if ((gh[i] & 0x7C00) == 0x7C00 && (gh[i] & 0x3FF)) {
                gh[i] &= 0xFC00; /* a NaN made an infinity */
            }
        }
        float *ua = malloc((size_t)nu * 4), *ur = malloc((size_t)nu * 4);
        memset(ua, 0x5A, (size_t)nu * 4), memset(ur, 0x5A, (size_t)nu * 4);
        ki_wino_hu_avx512(gh, kc, ua, ps);
        ki_wino_hu_ref(gh, kc, ur, ps);
        assert_memory_equal(ua, ur, (size_t)nu * 4);
        free(gh), free(ua), free(ur);
    }
#else
    (void)unused;
    skip();
#endif
}

/* The forming of F(2x2) U from float32 weights with AVX2 and AVX-512 against the plain version,
 * bit for bit: kc input channels, positions 16 * kc + 3 apart (unaligned), values of every
 * magnitude with infinities. */
static void test_wino_fu_levels(void **unused)
{
    (void)unused;
#if KI_HAVE_X86
    const bool avx512 = ki_cpu_get()->isa >= KI_ISA_AVX512;
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    for (uint64_t seed = 1; seed <= 100; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        const int64_t kc = trng_int(&s, 1, 70), ps = kc * KI_OV_MV + 3, nu = 16 * ps;
        const int64_t ng = kc * 9 * KI_OV_MV;
        float *g = malloc((size_t)ng * sizeof *g);
        trng_fill(&s, g, (size_t)ng);
        for (int64_t i = 0; i < ng; i++) {
            g[i] = ldexpf(g[i], (int)trng_int(&s, -40, 40));
        }
        g[seed % (uint64_t)ng] = seed % 2 ? __builtin_inff() : -__builtin_inff();
        float *ua = malloc((size_t)nu * 4), *ur = malloc((size_t)nu * 4);
        memset(ur, 0x5A, (size_t)nu * 4);
        ki_wino_fu_ref(g, kc, ur, ps);
        memset(ua, 0x5A, (size_t)nu * 4);
        ki_wino_fu_avx2(g, kc, ua, ps);
        assert_memory_equal(ua, ur, (size_t)nu * 4);
        if (avx512) {
            memset(ua, 0x5A, (size_t)nu * 4);
            ki_wino_fu_avx512(g, kc, ua, ps);
            assert_memory_equal(ua, ur, (size_t)nu * 4);
        }
        free(g), free(ua), free(ur);
    }
#else
    skip();
#endif
}

/* Which 1x1 layers get the OV path (conv2d_policy.c): from a declared input, with a vector
 * micro-kernel; one pixel takes the dot products and keeps the original weights; output channels
 * that fill 32-channel blocks less than 7/8 stay on the GEMM where its 32-pixel panels fill 7/8
 * (14x14: 196 of 224), not at 7x7 (49 of 64); long k and full blocks take the OV path. */
static void test_pointwise_choice(void **unused)
{
    (void)unused;
    static const struct {
        int64_t in, out, hw;
        int path;
    } cases[] = {
        { 144, 48, 14, KI_CONV2D_GEMM1 }, { 144, 64, 14, KI_CONV2D_OV },
        { 288, 96, 14, KI_CONV2D_OV },    { 240, 40, 14, KI_CONV2D_GEMM1 },
        { 240, 40, 7, KI_CONV2D_OV },     { 576, 144, 1, KI_CONV2D_DOT },
        { 48, 288, 14, KI_CONV2D_GEMM1 },
    };
    const bool ov = ki_cpu_isa() >= KI_ISA_AVX2;
    float *w = calloc(576 * 144, sizeof *w);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        top t;
        const ki_layer_ops *ops;
        void *st;
        ki_error err = { 0 };
        ki_shape d =
            ki_shape_make(4, (const int64_t[]){ 1, cases[i].in, cases[i].hw, cases[i].hw });
        conv_op(&t, cases[i].in, cases[i].out, 1, 1, 1, w, NULL);
        t.d.input_decl = &d;
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        ki_conv2d_geom g;
        assert_int_equal(ki_conv2d_geom_make(c, &d, &g, &err), KI_OK);
        const int want = cases[i].path == KI_CONV2D_OV && !ov ? KI_CONV2D_GEMM1 : cases[i].path;
        if ((int)ki_conv2d_pick(c, &g) != want) {
            fail_msg("%lld -> %lld at %lldx%lld: path %d, want %d", (long long)cases[i].in,
                     (long long)cases[i].out, (long long)cases[i].hw, (long long)cases[i].hw,
                     ki_conv2d_pick(c, &g), want);
        }
        assert_int_equal(c->ov_a != NULL, want == KI_CONV2D_OV);
        ops->destroy(st);
    }
    free(w);
}

/* The loader's choice: Winograd weights only for 3x3 stride-1 layers with enough channels and,
 * when the input size is declared, enough output tiles: F(4x4) from 20 of its tiles, else
 * F(2x2) from 32 of its tiles (9 with the AVX-512 OV products), else none; pick() then takes
 * the path. */
static void test_winograd_choice(void **unused)
{
    (void)unused;
    float *wt = calloc(16 * 16 * 9, sizeof *wt);
    for (int i = 0; i < 16 * 16 * 9; i++) {
        wt[i] = 0.1f; /* not a binary16 value (see the end) */
    }
    top t;
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    ki_shape decl[3] = { ki_shape_make(4, (const int64_t[]){ 1, 16, 28, 28 }),
                         ki_shape_make(4, (const int64_t[]){ 1, 16, 14, 14 }),
                         ki_shape_make(4, (const int64_t[]){ 1, 16, 8, 8 }) };
    /* 49 F(4) tiles; 16 F(4) tiles (enough, as U is small: see below); 16 F(2) tiles (enough only
     * for the OV products); undeclared */
    const bool ov = ki_cpu_isa() >= KI_ISA_AVX2; /* the OV micro-kernels' levels */
    const int want_m[4] = { 4, 4, ov ? 2 : 0, 4 };
    for (int i = 0; i < 4; i++) {
        conv_op(&t, 16, 16, 3, 3, 1, wt, NULL);
        top_ints(&t, "padding", 2, (const int64_t[]){ 1, 1 });
        t.d.input_decl = i < 3 ? &decl[i] : NULL;
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        assert_int_equal(c->wino_u != NULL, want_m[i] != 0);
        assert_int_equal(c->wino_m, want_m[i]);
        assert_int_equal(c->wino_ov, ov && i == 2); /* 16 channels: OV products only for 8 x 8 */
        ki_conv2d_geom g;
        for (int j = 0; j < 3; j++) {
            assert_int_equal(ki_conv2d_geom_make(c, &decl[j], &g, &err), KI_OK);
            bool wino = (c->wino_m == 4 && j < 2) || (c->wino_m == 2 && (j < 2 || c->wino_ov));
            assert_int_equal(ki_conv2d_pick(c, &g), wino ? KI_CONV2D_WINO : KI_CONV2D_GEMM);
        }
        ops->destroy(st);
    }
    /* at 14 x 14 (16 F(4) tiles) F(4x4) only while its U (36 floats per channel pair) takes at
     * most half of L3 (three L2 sizes without one, or for weights stored as binary16; see
     * conv2d_policy.c): just inside that, F(4x4); just past it, F(2x2) (49 tiles). 0.1 is not a
     * binary16 value, 0.5 is. */
    const ki_cpu_info *cpu = ki_cpu_get();
    const double l2s = 3.0 * (double)cpu->l2, l3 = (double)(cpu->l3 / 2);
    const double b32 = cpu->l3 ? l3 : l2s, b16 = cpu->l3 && l2s < l3 ? l2s : b32;
    const int64_t nfit = (int64_t)sqrt(b32 / (36 * sizeof(float)));
    const int64_t n16 = 256; /* 2.25 MiB of weights: binary16 ones are kept small */
    const struct {
        int64_t n;
        float v;
        int want;
    } u4[4] = { { nfit - 2, 0.1f, 4 },
                { nfit + 2, 0.1f, 2 },
                { n16, 0.1f, (double)n16 * n16 * 144 <= b32 ? 4 : 2 },
                { n16, 0.5f, (double)n16 * n16 * 144 <= b16 ? 4 : 2 } };
    for (int i = 0; i < 4; i++) {
        const int64_t n = u4[i].n;
        float *wb = malloc((size_t)(n * n * 9) * sizeof *wb);
        for (int64_t q = 0; q < n * n * 9; q++) {
            wb[q] = u4[i].v;
        }
        ki_shape d14 = ki_shape_make(4, (const int64_t[]){ 1, n, 14, 14 });
        conv_op(&t, n, n, 3, 3, 1, wb, NULL);
        top_ints(&t, "padding", 2, (const int64_t[]){ 1, 1 });
        t.d.input_decl = &d14;
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        if (((ki_conv2d *)st)->wino_m != u4[i].want) {
            fail_msg("%lld channels of %g at 14 x 14: F(%dx%d), want F(%dx%d)", (long long)n,
                     (double)u4[i].v, ((ki_conv2d *)st)->wino_m, ((ki_conv2d *)st)->wino_m,
                     u4[i].want, u4[i].want);
        }
        ops->destroy(st);
        free(wb);
    }
    /* undeclared sizes: by channel count (F(4x4) to 128 x 128, F(2x2) to 256 x 256, then none) */
    const int64_t chans[3][2] = { { 128, 128 }, { 128, 256 }, { 256, 512 } };
    const int want_dyn[3] = { 4, 2, 0 };
    float *big = calloc(256 * 512 * 9, sizeof *big);
    for (int i = 0; i < 3; i++) {
        conv_op(&t, chans[i][0], chans[i][1], 3, 3, 1, big, NULL);
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        assert_int_equal(((ki_conv2d *)st)->wino_m, want_dyn[i]);
        ops->destroy(st);
    }
    free(big);
    conv_op(&t, 16, 16, 3, 3, 1, wt, NULL);
    top_ints2(&t, "stride", 2, 2);
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    assert_null(((ki_conv2d *)st)->wino_u);
    ops->destroy(st);
    /* binary16 weights, 2.25 MiB as float32: kept as such (with AVX-512, whose kernels widen
     * them), at 8 x 8 for F(2x2) with U formed from them, at 4 x 4 (4 tiles) for the OV path; the
     * same values in 16 channels (too few bytes) get Winograd on float32 U */
    const bool h16 = ki_cpu_isa() >= KI_ISA_AVX512;
    const int64_t nb16 = 256 * 256 * 9;
    float *w16 = malloc((size_t)nb16 * sizeof *w16);
    for (int64_t i = 0; i < nb16; i++) {
        w16[i] = (float)(i % 7) * 0.25f - 0.5f;
    }
    ki_shape d256[2] = { ki_shape_make(4, (const int64_t[]){ 1, 256, 8, 8 }),
                         ki_shape_make(4, (const int64_t[]){ 1, 256, 4, 4 }) };
    for (int v = 0; v < 3; v++) {
        const int64_t ch = v < 2 ? 256 : 16;
        conv_op(&t, ch, ch, 3, 3, 1, w16, NULL);
        top_ints(&t, "padding", 2, (const int64_t[]){ 1, 1 });
        t.d.input_decl = v < 2 ? &d256[v] : &decl[2];
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        if (h16 && v < 2) {
            assert_null(c->wino_u);
            assert_null(c->ov_a);
            assert_int_equal(c->wino_h != NULL, v == 0);
            assert_int_equal(c->ov_h != NULL, v == 1);
            ki_conv2d_geom g;
            assert_int_equal(ki_conv2d_geom_make(c, &d256[v], &g, &err), KI_OK);
            assert_int_equal(ki_conv2d_pick(c, &g), v == 0 ? KI_CONV2D_WINO : KI_CONV2D_OV);
        } else {
            /* (with AVX2 the 256-channel layers may run F(2x2) on float32 U: see below) */
            if (v == 2 || !ov) {
                assert_int_equal(c->wino_u != NULL, ov && v == 2);
            }
            assert_null(c->ov_h);
            assert_null(c->wino_h);
        }
        ops->destroy(st);
    }
    free(w16);
    /* float32 weights that are not binary16 values: with vector OV products (AVX2, AVX-512) and
     * at least four L2 sizes of them (512 x 512 x 9: 9 MiB), F(2x2) forming U from them (kept as
     * float32) at 8 x 8; 256 x 256 x 9 (2.25 MiB) keeps float32 U */
    for (int v = 0; v < 2; v++) {
        const int64_t ch = v ? 256 : 512, nf = ch * ch * 9;
        float *wf = malloc((size_t)nf * sizeof *wf);
        for (int64_t i = 0; i < nf; i++) {
            wf[i] = (float)(i % 7) * 0.1f - 0.3f;
        }
        ki_shape dch = ki_shape_make(4, (const int64_t[]){ 1, ch, 8, 8 });
        conv_op(&t, ch, ch, 3, 3, 1, wf, NULL);
        top_ints(&t, "padding", 2, (const int64_t[]){ 1, 1 });
        t.d.input_decl = &dch;
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *cf = st;
        const bool formed = ki_cpu_isa() >= KI_ISA_AVX2 && nf * 4 >= 4 * (int64_t)ki_cpu_get()->l2;
        assert_null(cf->wino_h);
        assert_int_equal(cf->wino_f != NULL, formed);
        assert_int_equal(cf->wino_u != NULL, !formed && cf->wino_m != 0);
        if (formed) {
            ki_conv2d_geom g;
            assert_int_equal(ki_conv2d_geom_make(cf, &dch, &g, &err), KI_OK);
            assert_int_equal(ki_conv2d_pick(cf, &g), KI_CONV2D_WINO);
        }
        ops->destroy(st);
        free(wf);
    }
    free(wt);
}

/* The GEMM's private panels or the team's shared ones (ki_conv2d_gemm_private): a 1x1 layer
 * whose only consumer is a depthwise layer over its channels (offered to fuse() and not
 * absorbed) keeps the shared panels below four per thread; others take private panels from one
 * per thread on two threads; one thread is unchanged. */
static void test_gemm_private_choice(void **unused)
{
    (void)unused;
    float *w = calloc(96 * 40, sizeof *w), *wd = calloc(40 * 9, sizeof *wd);
    for (int i = 0; i < 96 * 40; i++) {
        w[i] = (float)(i % 13) * 0.125f - 0.75f;
    }
    top t, n;
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    for (int next = 0; next < 3; next++) { /* none offered, a depthwise layer, a 3x3 layer */
        conv_op(&t, 96, 40, 1, 1, 1, w, NULL);
        assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
        ki_conv2d *c = st;
        if (next > 0) {
            conv_op(&n, 40, 40, 3, 3, next == 1 ? 40 : 1, wd, NULL);
            top_ints(&n, "padding", 2, (const int64_t[]){ 1, 1 });
            /* not absorbed: no declared size, so no band fusion */
            assert_false(ops->fuse(st, &n.d, 0));
        }
        assert_int_equal(c->next_dw, next == 1);
        assert_false(ki_conv2d_gemm_private(c, 3, 1)); /* one thread: from 4 panels, as before */
        assert_int_equal(ki_conv2d_gemm_private(c, 7, 2), next != 1); /* 14x14: 7 panels */
        assert_false(ki_conv2d_gemm_private(c, 1, 2));
        assert_true(ki_conv2d_gemm_private(c, 8, 2));
        ops->destroy(st);
    }
    free(w), free(wd);
}

/* The epilogue is shared: activation hooks apply after the bias on every path. */
static void test_epilogue_act(void **unused)
{
    (void)unused;
    ki_cv_epilogue ep = { (const float[]){ 1.0f }, { KI_ACT_RELU, 0, 0 }, false };
    float p[3] = { -3, 0, 2 };
    ki_cv_epilogue_plane(&ep, 0, p, 3);
    assert_float_equal(p[0], 0, 0);
    assert_float_equal(p[1], 1, 0);
    assert_float_equal(p[2], 3, 0);
    ep.act = (ki_act){ KI_ACT_HARDTANH, 0, 3.5f };
    ki_cv_epilogue_plane(&ep, 0, p, 3);
    assert_float_equal(p[2], 3.5f, 0);
    assert_float_equal(p[1], 2, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic_3x3),         cmocka_unit_test(test_pad_modes),
        cmocka_unit_test(test_same_valid_groups), cmocka_unit_test(test_errors),
        cmocka_unit_test(test_random_vs_ref),     cmocka_unit_test(test_epilogue_act),
        cmocka_unit_test(test_winograd_vs_ref),   cmocka_unit_test(test_wino_xforms_avx512),
        cmocka_unit_test(test_wino_fu_levels),    cmocka_unit_test(test_winograd_choice),
        cmocka_unit_test(test_pointwise_choice),  cmocka_unit_test(test_gemm_private_choice),
        cmocka_unit_test(test_dot_vs_ref),        cmocka_unit_test(test_ov_blocks),
        cmocka_unit_test(test_ov_parts),          cmocka_unit_test(test_half_exact),
        cmocka_unit_test(test_direct_wide),       cmocka_unit_test(test_release_weights),
        cmocka_unit_test(test_discard_pages),     cmocka_unit_test(test_global_mean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
