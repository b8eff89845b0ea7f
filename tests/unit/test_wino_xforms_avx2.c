/* test_wino_xforms_avx2.c - the AVX2 Winograd transforms (conv2d_wino_avx2.c: by tile rows, in
 * registers, wino_rows.h) against the plain ones, bit for bit: F(4x4) and F(2x2), odd planes
 * (tiles past the right and bottom edges, planes narrower than a tile, tile rows of 1-40 tiles so
 * runs start anywhere in a panel and straddle panels), paddings 0..2, tile ranges from a later
 * panel, one panel at a time (panel stride 0, the blocked runs' calls), panels apart with other
 * channels' floats between them (which stay untouched), a residual or none, clamps, and NaN /
 * infinite products. Skipped without AVX2. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "../../core/cpu.h"
#include "../../layers/conv2d.h"
#include "test_conv_util.h"

#if KI_HAVE_X86
/* The input transform of tiles [tb, te) into buffers of nv floats filled with 0xA5 bytes, panels
 * pan floats apart, positions ps apart: both versions leave the same bytes everywhere. */
static void check_input(const float *x, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                        int64_t te, int64_t pan, int64_t ps, int64_t nv)
{
    float *va = malloc((size_t)nv * 4), *vr = malloc((size_t)nv * 4);
    memset(va, 0xA5, (size_t)nv * 4), memset(vr, 0xA5, (size_t)nv * 4);
    ki_wino_input_avx2(x, h, w, tg, tb, te, va, pan, ps);
    ki_wino_input_ref(x, h, w, tg, tb, te, vr, pan, ps);
    assert_memory_equal(va, vr, (size_t)nv * 4);
    free(va), free(vr);
}

static void test_wino_xforms_avx2(void **unused)
{
    (void)unused;
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    for (uint64_t seed = 1; seed <= 600; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        wino_case c;
        if (!wino_random_case(seed, &s, 80 * (seed % 2 ? 4 : 2) / 2, &c)) {
            continue;
        }
        const int64_t npos = c.npos, h = c.h, w = c.w, oh = c.oh, ow = c.ow;
        const int64_t tb = c.tb, te = c.te, n = c.n, np = n / KI_GEMM_NR;
        const ki_wino_tiles tg = c.tg;
        float *x = malloc((size_t)(h * w) * sizeof *x), *mm = malloc((size_t)(npos * (n + 16)) * 4);
        float *res = malloc((size_t)(oh * ow) * 4), *qa = malloc((size_t)(oh * ow) * 4);
        float *qr = malloc((size_t)(oh * ow) * 4);
        trng_fill(&s, x, (size_t)(h * w)), trng_fill(&s, mm, (size_t)(npos * (n + 16)));
        trng_fill(&s, res, (size_t)(oh * ow));
        /* panels adjacent; a channel's rows among 1-3 channels' (the shared runs); one panel */
        const int64_t pan = KI_GEMM_NR * trng_int(&s, 1, 3), ps = np * pan + 16;
        check_input(x, h, w, &tg, tb, te, KI_GEMM_NR, n, npos * n + 64);
        check_input(x, h, w, &tg, tb, te, pan, ps, npos * ps + 64);
        if (np == 1) {
            check_input(x, h, w, &tg, tb, te, 0, KI_GEMM_NR + 16, npos * (KI_GEMM_NR + 16));
        }
        if (seed % 5 == 0) {
            mm[seed % (uint64_t)(npos * n)] = __builtin_nanf("");
            mm[(seed * 7) % (uint64_t)(npos * n)] = -__builtin_inff();
        }
        const float lo = seed % 4 == 1 ? 0.0f : -__builtin_inff();
        const float hi = seed % 4 == 1 ? 0.5f : __builtin_inff();
        const int64_t mps = n + (seed % 2) * 16; /* positions n or n + 16 floats apart */
        memset(qa, 0x5A, (size_t)(oh * ow) * 4), memset(qr, 0x5A, (size_t)(oh * ow) * 4);
        const float *r = seed % 3 == 1 ? res : NULL;
        ki_wino_output_avx2(mm, mps, qa, r, &tg, tb, te, 0.25f, lo, hi);
        ki_wino_output_ref(mm, mps, qr, r, &tg, tb, te, 0.25f, lo, hi);
        assert_memory_equal(qa, qr, (size_t)(oh * ow) * 4);
        free(x), free(mm), free(res), free(qa), free(qr);
    }
}
#else
static void test_wino_xforms_avx2(void **unused)
{
    (void)unused;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wino_xforms_avx2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
