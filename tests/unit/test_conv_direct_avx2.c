/* test_conv_direct_avx2.c - the direct path of nn.Conv2d (few input channels) with the AVX2 row
 * kernel, and with the max pool fused after it, against ki_conv2d_forward_ref (and the pool's
 * reference), at 1 and 2 threads: 1 to 4 input channels, kernels 1 to 8 (square and not),
 * strides 1 and 2, odd sizes narrower than a column block and wider than two chunks, padding,
 * partial channel blocks, in-register and after-store activations, a residual. Also the plain C row
 * kernel, the AVX2 stride-2 pool plane kernel against its reference (NaN reported), and the
 * vector im2col of 3-wide stride-2 kernels against the generic packing. Skipped without AVX2. */
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

#if KI_HAVE_X86
static bool have_avx2(void)
{
    return ki_cpu_get()->isa >= KI_ISA_AVX2 && ki_gemm_ukernel_for(KI_ISA_AVX2) != NULL;
}

/* One layer: in -> out channels, kh x kw, stride s, padding (pt, pl), input h x w. */
typedef struct dcase {
    int64_t in, out, kh, kw, s, pt, pl, h, w, n;
} dcase;

/* A random case from seed s: every tenth wide enough for unpadded column blocks. */
static void draw(uint64_t *s, dcase *d)
{
    d->in = trng_int(s, 1, 4);
    d->out = trng_int(s, 1, 40);
    d->kh = trng_int(s, 1, KI_DIRECT_MAX_K);
    d->kw = trng_int(s, 0, 2) == 0 ? trng_int(s, 1, KI_DIRECT_MAX_K) : d->kh;
    d->s = trng_int(s, 1, 2);
    d->pt = trng_int(s, 0, d->kh / 2 + 1);
    d->pl = trng_int(s, 0, d->kw / 2 + 1);
    d->h = trng_int(s, 1, 13);
    d->w = trng_int(s, 1, 3) == 1 ? trng_int(s, 20, 230) : trng_int(s, 1, 19); /* chunks: 96 */
    d->n = trng_int(s, 1, 2);
}

/* Clamps in the kernel's registers; SiLU, Hardswish and LeakyReLU after the clamp (the AVX2 and
 * AVX-512 kernels) or after the store (the plain C one, or a residual added after them). */
static const ki_act acts[6] = { { KI_ACT_NONE, 0, 0 },      { KI_ACT_RELU, 0, 0 },
                                { KI_ACT_RELU6, 0, 0 },     { KI_ACT_SILU, 0, 0 },
                                { KI_ACT_HARDSWISH, 0, 0 }, { KI_ACT_LEAKY_RELU, 0.1f, 0 } };

/* The layer of case d with weights w and bias b (or NULL); NULL when its kernel does not fit. */
static ki_conv2d *make(const dcase *d, const float *w, const float *b, const ki_layer_ops **ops,
                       top *t)
{
    void *st;
    ki_error err = { 0 };
    top_conv_like(t, "nn.Conv2d", d->in, d->out, d->kh, d->kw, 1, w, b);
    top_ints2(t, "stride", d->s, d->s);
    top_ints2(t, "padding", d->pt, d->pl);
    assert_int_equal(top_create(t, ops, &st, &err), KI_OK);
    return st;
}

static void check(const float *got, const float *want, size_t n, const char *what, int seed)
{
    for (size_t i = 0; i < n; i++) {
        if (!(fabsf(got[i] - want[i]) <= 1e-4f * (1.0f + fabsf(want[i])))) {
            fail_msg("%s seed %d: out[%zu] %g vs ref %g", what, seed, i, got[i], want[i]);
        }
    }
}

/* Runs the direct path with the row kernel of isa on th threads into out; regs false: every
 * non-clamp activation after the store, as the plain C kernel has it. */
static void run_direct(const ki_conv2d *c, const ki_conv2d_geom *g, ki_isa isa, int th, bool regs,
                       const float *x, float *out)
{
    ki_conv2d cc = *c;
    ki_conv2d_set_isa(&cc, isa);
    cc.direct_act = cc.direct_act && regs;
    size_t ws = ki_conv2d_workspace_for(&cc, g, KI_CONV2D_DIRECT, th);
    ki_exec ex = { th, ws ? aligned_alloc(64, (ws * (size_t)th + 63) / 64 * 64) : NULL, ws, NULL };
    omp_set_num_threads(th);
    ki_conv2d_run(&cc, g, KI_CONV2D_DIRECT, x, out, &ex);
    free(ex.workspace);
}

static void test_direct_vs_ref(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    int runs = 0;
    for (int seed = 1; seed <= 250; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        dcase d;
        draw(&s, &d);
        const size_t nw = (size_t)(d.out * d.in * d.kh * d.kw),
                     nx = (size_t)(d.n * d.in * d.h * d.w);
        float *w = malloc(nw * 4), *b = malloc((size_t)d.out * 4), *x = malloc(nx * 4);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)d.out), trng_fill(&s, x, nx);
        const ki_layer_ops *ops;
        top t;
        ki_conv2d *c = make(&d, w, seed % 4 == 3 ? NULL : b, &ops, &t);
        ki_conv2d_set_isa(c, KI_ISA_AVX2);
        c->ep.act = acts[seed % 6];
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ d.n, d.in, d.h, d.w });
        ki_error err = { 0 };
        if (ki_conv2d_geom_make(c, &in, &g, &err) == KI_OK) {
            assert_true(ki_conv2d_path_ok(c, &g, KI_CONV2D_DIRECT));
            const size_t n = (size_t)(d.n * d.out * g.oh * g.ow);
            float *ref = malloc(n * 4 + 4), *out = malloc(n * 4 + 4), *res = malloc(n * 4 + 4);
            trng_fill(&s, res, n);
            c->residual = seed % 3 == 0, c->res = c->residual ? res : NULL;
            c->ep.res_after = c->residual && seed % 2 == 1 && c->ep.act.kind != KI_ACT_NONE;
            ki_conv2d_forward_ref(c, &g, x, ref);
            for (int v = 0; v < 3; v++) { /* AVX2 on 1 and 2 threads, plain C on 2 */
                run_direct(c, &g, v == 2 ? KI_ISA_GENERIC : KI_ISA_AVX2, v == 0 ? 1 : 2, true, x,
                           out);
                check(out, ref, n, v == 2 ? "ref row" : "avx2 row", seed);
            }
            /* the activation in the vector kernels' registers: the bits of the epilogue after
             * the store, at AVX2 and, where the CPU has it, AVX-512 */
            for (int lv = 0; lv < 2 && (lv == 0 || ki_cpu_get()->isa >= KI_ISA_AVX512); lv++) {
                run_direct(c, &g, lv ? KI_ISA_AVX512 : KI_ISA_AVX2, 2, true, x, out);
                run_direct(c, &g, lv ? KI_ISA_AVX512 : KI_ISA_AVX2, 2, false, x, ref);
                assert_memory_equal(out, ref, n * sizeof *out);
            }
            free(ref), free(out), free(res);
            runs++;
        }
        ops->destroy(c);
        free(w), free(b), free(x);
    }
    assert_true(runs >= 150);
}

/* A 6x6 stride-2 layer with padding 2 (YOLOv5's stem) created at each vector level the CPU has
 * (ki_cpu_set_isa before create) runs as space-to-depth and Winograd F(4x4) from 8 output
 * channels, and on the direct rows below that: against ki_conv2d_forward_ref within 1e-4, and
 * with the same bits on 1, 2 and 3 threads: 1 to 4 input channels, odd and even sizes from a
 * single output row to several runs of rows, batch 2, the activation after the
 * products (none, ReLU, SiLU), with and without a bias. */
static void test_s2d_vs_ref(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    const ki_isa have = ki_cpu_get()->isa;
    ki_error err = { 0 };
    for (int seed = 1; seed <= 60; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        const ki_isa lvl = seed % 2 == 1 || have < KI_ISA_AVX512 ? KI_ISA_AVX2 : KI_ISA_AVX512;
        assert_int_equal(ki_cpu_set_isa(lvl, &err), KI_OK);
        const dcase d = { trng_int(&s, 1, 4),
                          seed % 10 == 0 ? trng_int(&s, 1, 7) : trng_int(&s, 8, 40),
                          6,
                          6,
                          2,
                          2,
                          2,
                          trng_int(&s, 2, 40),
                          seed % 5 == 0 ? trng_int(&s, 120, 260) : trng_int(&s, 2, 40),
                          trng_int(&s, 1, 2) };
        const size_t nw = (size_t)(d.out * d.in * 36), nx = (size_t)(d.n * d.in * d.h * d.w);
        float *w = malloc(nw * 4), *b = malloc((size_t)d.out * 4), *x = malloc(nx * 4);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)d.out), trng_fill(&s, x, nx);
        const ki_layer_ops *ops;
        top t;
        ki_conv2d *c = make(&d, w, seed % 4 == 3 ? NULL : b, &ops, &t);
        c->ep.act = acts[seed % 4 == 1 ? 3 : seed % 3];
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ d.n, d.in, d.h, d.w });
        assert_int_equal(ki_conv2d_geom_make(c, &in, &g, &err), KI_OK);
        assert_int_equal(ki_conv2d_s2d_on(c, g.ow), d.out >= 8);
        char name[96];
        ki_conv2d_describe(c, &in, name, sizeof name);
        assert_int_equal(strstr(name, "space-to-depth") != NULL, d.out >= 8);
        const size_t n = (size_t)(d.n * d.out * g.oh * g.ow);
        float *ref = malloc(n * 4 + 4), *out = malloc(n * 4 + 4), *first = malloc(n * 4 + 4);
        ki_conv2d_forward_ref(c, &g, x, ref);
        for (int th = 1; th <= 3; th++) {
            size_t ws = ki_conv2d_workspace_for(c, &g, KI_CONV2D_DIRECT, th);
            ki_exec ex = { .n_threads = th,
                           .workspace = aligned_alloc(64, (ws * (size_t)th + 63) / 64 * 64),
                           .ws_per_thread = ws };
            omp_set_num_threads(th);
            ki_conv2d_run(c, &g, KI_CONV2D_DIRECT, x, out, &ex);
            free(ex.workspace);
            check(out, ref, n, "space-to-depth", seed);
            if (th == 1) {
                memcpy(first, out, n * sizeof *out);
            } else {
                assert_memory_equal(out, first, n * sizeof *out);
            }
        }
        free(ref), free(out), free(first);
        ops->destroy(c);
        free(w), free(b), free(x);
    }
    assert_int_equal(ki_cpu_set_isa(have, &err), KI_OK);
}

/* nn.MaxPool2d's output size for a 3-wide window at stride 2 with padding pad (PyTorch's rule:
 * floor or ceil of (n + 2 pad - 3) / 2, plus 1; in ceil mode the last window must start inside
 * the input or the left padding); below 1 when no window fits. */
static int64_t pool3s2_dim(int64_t n, int64_t pad, bool ceil_mode)
{
    const int64_t span = n + 2 * pad - 3 + (ceil_mode ? 1 : 0);
    const int64_t out = (span >= 0 ? span / 2 : -((1 - span) / 2)) + 1; /* floor of span / 2 */
    return ceil_mode && (out - 1) * 2 >= n + pad ? out - 1 : out;
}

/* The max pool (3x3, stride 2, padding pad) of every plane of the n x ch planes h x w at src. */
static void pool_ref(const float *src, int64_t planes, int64_t h, int64_t w, int64_t pad,
                     bool ceil_mode, float *dst)
{
    const int64_t ph = pool3s2_dim(h, pad, ceil_mode), pw = pool3s2_dim(w, pad, ceil_mode);
    for (int64_t p = 0; p < planes; p++) {
        ki_pool_max_s2_ref(src + p * h * w, h, w, dst + p * ph * pw, ph, pw, 3, 3, 2, pad, pad);
    }
}

/* The direct path with the max pool fused by fuse() (as resnet's stem: padding 1; squeezenet's:
 * padding 0 in ceil mode; and padding 0 in floor mode), at the AVX2 level, through the layer's
 * workspace and forward hooks, against the reference convolution and pool. */
static void test_direct_pool_vs_ref(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    static const dcase fixed[3] = { { 3, 64, 7, 7, 2, 3, 3, 224, 224, 1 },
                                    { 3, 32, 3, 3, 2, 1, 1, 37, 45, 2 },
                                    { 1, 8, 5, 5, 1, 2, 2, 29, 17, 1 } };
    for (int seed = 1; seed <= 60; seed++) {
        uint64_t s = (uint64_t)seed * 0x2545F4914F6CDD1Dull;
        dcase d;
        draw(&s, &d);
        if (seed <= 3) {
            d = fixed[seed - 1];
        }
        d.h += 2, d.w += 2; /* a pool needs at least one row and column */
        const size_t nw = (size_t)(d.out * d.in * d.kh * d.kw),
                     nx = (size_t)(d.n * d.in * d.h * d.w);
        float *w = malloc(nw * 4), *b = malloc((size_t)d.out * 4), *x = malloc(nx * 4);
        trng_fill(&s, w, nw), trng_fill(&s, b, (size_t)d.out), trng_fill(&s, x, nx);
        const ki_layer_ops *ops;
        top t, p;
        ki_conv2d *c = make(&d, w, b, &ops, &t);
        ki_conv2d_set_isa(c, KI_ISA_AVX2);
        c->ep.act = acts[seed % 6];
        const int64_t pad = seed % 3 == 0 ? 1 : 0;
        const bool ceil_mode = seed % 3 == 1;
        top_init(&p, "nn.MaxPool2d", 1, 1);
        top_ints2(&p, "kernel_size", 3, 3);
        top_ints2(&p, "stride", 2, 2);
        top_ints2(&p, "padding", pad, pad);
        top_bool(&p, "ceil_mode", ceil_mode);
        ki_conv2d_geom g;
        ki_shape in = ki_shape_make(4, (const int64_t[]){ d.n, d.in, d.h, d.w });
        ki_error err = { 0 };
        if (ki_conv2d_geom_make(c, &in, &g, &err) != KI_OK ||
            pool3s2_dim(g.oh, pad, ceil_mode) < 1 || pool3s2_dim(g.ow, pad, ceil_mode) < 1) {
            ops->destroy(c);
            free(w), free(b), free(x);
            continue;
        }
        assert_true(ops->fuse(c, &p.d, 0));
        assert_true(c->pool);
        const size_t nc = (size_t)(d.n * d.out * g.oh * g.ow);
        assert_int_equal(c->pool_pad, pad);
        assert_int_equal(c->pool_ceil, ceil_mode);
        const size_t np = (size_t)(d.n * d.out * pool3s2_dim(g.oh, pad, ceil_mode) *
                                   pool3s2_dim(g.ow, pad, ceil_mode));
        float *conv = malloc(nc * 4), *ref = malloc(np * 4);
        ki_conv2d_forward_ref(c, &g, x, conv);
        pool_ref(conv, d.n * d.out, g.oh, g.ow, pad, ceil_mode, ref);
        for (int th = 1; th <= 2; th++) {
            ki_tensor tin = { in, x }, tout;
            assert_int_equal(top_run(ops, c, &tin, 1, &tout, 1, th, &err), KI_OK);
            assert_int_equal(ki_shape_count(&tout.shape), (int64_t)np);
            check(tout.data, ref, np, "direct + pool", seed);
            free(tout.data);
        }
        ops->destroy(c);
        free(w), free(b), free(x), free(conv), free(ref);
    }
}

/* Ties for the max pools: every fifth value 0.5, and with pm0 every value -1, -0 or +0 (told
 * apart only by the sign of zero). */
static void fill_ties(uint64_t *s, float *x, int64_t n, bool pm0)
{
    static const float v[3] = { -1.0f, -0.0f, 0.0f };
    for (int64_t i = 0; i < n; i += 5) {
        x[i] = 0.5f;
    }
    for (int64_t i = 0; i < n && pm0; i++) {
        x[i] = v[trng_int(s, 0, 2)];
    }
}

/* ki_pool_max_s2_avx2 and (on a CPU with AVX-512) ki_pool_max_s2_avx512 against the reference,
 * bit for bit: 2- and 3-wide windows, 1 to 9 rows, row strides 1 and 2, paddings, ceil_mode's
 * sizes, narrow planes and planes wider than a column chunk (256 columns), planes of -1, -0 and
 * +0 full of ties; a NaN is reported. */
static void test_pool_s2_avx2(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    for (int seed = 1; seed <= 400; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        const int64_t h = trng_int(&s, 1, 12), w = trng_int(&s, 1, seed % 8 == 0 ? 600 : 45);
        const int64_t kh = trng_int(&s, 1, seed % 5 == 0 ? 9 : 3), kw = trng_int(&s, 2, 3);
        const int64_t sh = trng_int(&s, 1, 2);
        const int64_t ph = trng_int(&s, 0, kh / 2), pw = trng_int(&s, 0, kw / 2);
        const bool ceil_mode = seed % 3 == 0;
        const int64_t oh = ki_cv_pool_out(h, kh, ph, sh, 1, ceil_mode);
        const int64_t ow = ki_cv_pool_out(w, kw, pw, 2, 1, ceil_mode);
        if (oh < 1 || ow < 1) {
            continue;
        }
        float *x = malloc((size_t)(h * w) * 4), *want = malloc((size_t)(oh * ow) * 4);
        float *got = malloc((size_t)(oh * ow) * 4);
        trng_fill(&s, x, (size_t)(h * w));
        fill_ties(&s, x, h * w, seed % 2 == 0);
        ki_pool_max_s2_ref(x, h, w, want, oh, ow, kh, kw, sh, ph, pw);
        const float x0 = x[0];
        for (int lvl = 0; lvl < 2; lvl++) {
            if (lvl == 1 && ki_cpu_get()->isa < KI_ISA_AVX512) {
                break;
            }
            const ki_pool_max_s2_fn f = lvl ? ki_pool_max_s2_avx512 : ki_pool_max_s2_avx2;
            memset(got, 0x7f, (size_t)(oh * ow) * 4);
            x[0] = x0;
            assert_int_equal(f(x, h, w, got, oh, ow, kh, kw, sh, ph, pw), 0);
            if (memcmp(got, want, (size_t)(oh * ow) * 4) != 0) {
                fail_msg("seed %d level %d: %lldx%lld k %lldx%lld sh %lld pad %lld,%lld", seed, lvl,
                         (long long)h, (long long)w, (long long)kh, (long long)kw, (long long)sh,
                         (long long)ph, (long long)pw);
            }
            x[0] = NAN; /* in the first window, as the paddings are at most half the window */
            assert_int_not_equal(f(x, h, w, got, oh, ow, kh, kw, sh, ph, pw), 0);
        }
        free(x), free(want), free(got);
    }
}

/* ki_pool_max_s1_avx2 against the reference, bit for bit: windows of 1 to 9 rows and columns,
 * paddings up to half the window, planes narrower and wider than a vector, ties of 0.5 and of
 * -1, -0 and +0; a NaN is reported. */
static void test_pool_s1_avx2(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    for (int seed = 1; seed <= 300; seed++) {
        uint64_t s = (uint64_t)seed * 0x2545F4914F6CDD1Dull;
        const int64_t h = trng_int(&s, 1, 25), w = trng_int(&s, 1, 45);
        const int64_t kh = trng_int(&s, 1, 9), kw = trng_int(&s, 1, 9);
        const int64_t ph = trng_int(&s, 0, kh / 2), pw = trng_int(&s, 0, kw / 2);
        const int64_t oh = h + 2 * ph - kh + 1, ow = w + 2 * pw - kw + 1;
        if (oh < 1 || ow < 1) {
            continue;
        }
        const size_t nws = ki_pool_max_s1_floats(h, ow, kw);
        assert_true(nws > 0);
        float *x = malloc((size_t)(h * w) * 4), *want = malloc((size_t)(oh * ow) * 4);
        float *got = malloc((size_t)(oh * ow) * 4), *ws = malloc(nws * 4);
        trng_fill(&s, x, (size_t)(h * w));
        fill_ties(&s, x, h * w, seed % 2 == 0);
        ki_pool_max_s1_ref(x, h, w, want, oh, ow, kh, kw, ph, pw);
        assert_int_equal(ki_pool_max_s1_avx2(x, h, w, got, oh, ow, kh, kw, ph, pw, ws), 0);
        assert_memory_equal(got, want, (size_t)(oh * ow) * 4);
        x[trng_int(&s, 0, (int)(h * w - 1))] = NAN; /* every value is in some window */
        assert_int_not_equal(ki_pool_max_s1_avx2(x, h, w, got, oh, ow, kh, kw, ph, pw, ws), 0);
        free(x), free(want), free(got), free(ws);
    }
}

/* ki_conv2d_pack3s2_avx2 (and the AVX-512 one where the CPU has it) against the generic packing
 * of the same column matrix, bit for bit: 3-wide stride-2 kernels of 1 to 3 rows, row strides
 * 1 and 2, paddings 0 to 2 (a row or column block in the padding is zeros), widths narrower than
 * a vector and wider than a panel, panels starting mid-row and partial last panels; from the
 * whole image, and from a band of its rows (ki_conv2d_rows, channels further apart than the band)
 * against the generic packing of the image with the rows outside the band zeroed. */
static void test_pack3s2_vs_generic(void **unused)
{
    (void)unused;
    if (!have_avx2()) {
        skip();
    }
    for (int seed = 1; seed <= 300; seed++) {
        uint64_t s = (uint64_t)seed * 0x9E3779B97F4A7C15ull;
        ki_conv2d c;
        memset(&c, 0, sizeof c);
        c.kh = trng_int(&s, 1, 3), c.kw = 3, c.sh = trng_int(&s, 1, 2), c.sw = 2;
        c.pt = trng_int(&s, 0, 2), c.pl = trng_int(&s, 0, 2), c.dh = 1, c.dw = 1;
        c.pad_mode = KI_CONV_PAD_ZEROS;
        c.gather2 = ki_conv2d_gather2_ref;
        const int64_t ch = trng_int(&s, 1, 3), h = trng_int(&s, 1, 9);
        const int64_t w = trng_int(&s, 0, 1) ? trng_int(&s, 3, 20) : trng_int(&s, 21, 150);
        ki_conv2d_geom g = { { 1, ch, h, w, false }, 0, 0 };
        g.oh = (h + 2 * c.pt - c.kh) / c.sh + 1, g.ow = (w + 2 * c.pl - 3) / 2 + 1;
        if (g.oh < 1 || g.ow < 1) {
            continue;
        }
        const int64_t n = g.oh * g.ow, k = ch * c.kh * 3, pw = KI_GEMM_NR;
        const int64_t j0 = trng_int(&s, 0, n - 1), nr = trng_int(&s, 1, n - j0 < pw ? n - j0 : pw);
        float *x = malloc((size_t)(ch * h * w) * 4), *want = malloc((size_t)(k * pw) * 4);
        float *got = malloc((size_t)(k * pw) * 4);
        trng_fill(&s, x, (size_t)(ch * h * w));
        /* every other seed a band: rows [y0, y1) at cs floats per channel */
        const bool band = seed % 2 == 0;
        const int64_t y0 = band ? trng_int(&s, 0, h - 1) : 0;
        const int64_t y1 = band ? trng_int(&s, y0 + 1, h) : h, cs = (y1 - y0) * w + (band ? 5 : 0);
        float *held = malloc((size_t)(ch * cs) * 4);
        for (int64_t q = 0; q < ch; q++) {
            memcpy(held + q * cs, x + (q * h + y0) * w, (size_t)((y1 - y0) * w) * 4);
            for (int64_t y = 0; y < h; y++) {
                if (y < y0 || y >= y1) {
                    memset(x + (q * h + y) * w, 0, (size_t)w * 4);
                }
            }
        }
        const ki_conv2d_rows src = { held, cs, y0, y1 };
        ki_conv2d_pack_cols(&c, &g, true, x, j0, nr, k, pw, want);
        for (int lvl = 0; lvl < 2; lvl++) {
            if (lvl == 1 && ki_cpu_get()->isa < KI_ISA_AVX512) {
                break;
            }
            memset(got, 0x7f, (size_t)(k * pw) * 4); /* every float written, padding included */
            (lvl ? ki_conv2d_pack3s2_avx512 : ki_conv2d_pack3s2_avx2)(&c, &g, &src, j0, nr, k, pw,
                                                                      got);
            if (memcmp(got, want, (size_t)(k * pw) * 4) != 0) {
                fail_msg(
                    "seed %d level %d: kh %lld sh %lld pad %lld,%lld %lldx%lld j0 %lld nr %lld",
                    seed, lvl, (long long)c.kh, (long long)c.sh, (long long)c.pt, (long long)c.pl,
                    (long long)h, (long long)w, (long long)j0, (long long)nr);
            }
        }
        free(x), free(want), free(got), free(held);
    }
}

#else
/* The x86 kernels are not built for this target: each test is skipped. */
static void test_direct_vs_ref(void **unused)
{
    (void)unused;
    skip();
}

static void test_direct_pool_vs_ref(void **unused)
{
    (void)unused;
    skip();
}

static void test_pool_s2_avx2(void **unused)
{
    (void)unused;
    skip();
}

static void test_pool_s1_avx2(void **unused)
{
    (void)unused;
    skip();
}

static void test_pack3s2_vs_generic(void **unused)
{
    (void)unused;
    skip();
}

static void test_s2d_vs_ref(void **unused)
{
    (void)unused;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_direct_vs_ref),      cmocka_unit_test(test_direct_pool_vs_ref),
        cmocka_unit_test(test_pool_s2_avx2),       cmocka_unit_test(test_pool_s1_avx2),
        cmocka_unit_test(test_pack3s2_vs_generic), cmocka_unit_test(test_s2d_vs_ref),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
