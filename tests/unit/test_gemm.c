/* test_gemm.c - the SGEMM driver and micro-kernels against a double-precision product on random
 * shapes (edge tiles, several k blocks), independence of the thread split, the AVX2 epilogue
 * against the scalar one, and the conv and linear fuse() hooks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cblas.h>
#include <cmocka.h>
#include <math.h>
// clang-format on

#include "../../layers/conv2d.h"
#include "../../layers/transpose.h"
#include "test_conv_util.h"

/* C = A*B through packing and ki_gemm_compute, the tiles split over nt simulated threads. */
static void gemm_run(ki_gemm_ukernel uk, int64_t m, int64_t n, int64_t k, const float *a,
                     int64_t lda, const float *b, float *c, int nt)
{
    int64_t packed;
    assert_true(ki_gemm_packed_floats(k, n, &packed));
    float *bp = malloc((size_t)packed * sizeof *bp + 4);
    for (int64_t r = 0; r < k; r++) {
        ki_gemm_pack_row(b + r * n, r, k, n, bp);
    }
    ki_cv_epilogue ep = { NULL, { KI_ACT_NONE, 0, 0 }, false };
    ki_gemm_args g = { .m = m,
                       .n = n,
                       .k = k,
                       .a = a,
                       .lda = lda,
                       .bp = bp,
                       .c = c,
                       .ldc = n,
                       .ep = &ep,
                       .epf = ki_cv_epilogue_ref,
                       .uk = uk };
    for (int t = 0; t < nt; t++) {
        ki_gemm_compute(&g, t, nt);
    }
    free(bp);
}

static void test_gemm_random(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        int64_t m = trng_int(&s, 1, 40), n = trng_int(&s, 1, 100), k = trng_int(&s, 1, 300);
        int64_t lda = k + trng_int(&s, 0, 3);
        float *a = malloc((size_t)(m * lda) * sizeof *a), *b = malloc((size_t)(k * n) * sizeof *b);
        float *c = malloc((size_t)(m * n) * sizeof *c), *want = malloc((size_t)(m * n) * sizeof *c);
        float *first = malloc((size_t)(m * n) * sizeof *c);
        trng_fill(&s, a, (size_t)(m * lda)), trng_fill(&s, b, (size_t)(k * n));
        for (int64_t i = 0; i < m * n; i++) {
            double acc = 0;
            for (int64_t q = 0; q < k; q++) {
                acc += (double)a[i / n * lda + q] * b[q * n + i % n];
            }
            want[i] = (float)acc;
        }
        for (int isa = KI_ISA_GENERIC; isa <= KI_ISA_AVX512; isa++) {
            ki_gemm_ukernel uk = ki_gemm_ukernel_for((ki_isa)isa);
            for (int nt = 1; uk && nt <= 3; nt += 2) {
                gemm_run(uk, m, n, k, a, lda, b, c, nt);
                long bad = tclose(c, want, (size_t)(m * n), 1e-4f, 1e-4f);
                if (bad >= 0) {
                    fail_msg("seed %llu isa %d m %lld n %lld k %lld: c[%ld] %g want %g",
                             (unsigned long long)seed, isa, (long long)m, (long long)n,
                             (long long)k, bad, c[bad], want[bad]);
                }
                if (nt == 1) {
                    memcpy(first, c, (size_t)(m * n) * sizeof *c);
                } else if (memcmp(first, c, (size_t)(m * n) * sizeof *c) != 0) {
                    fail_msg("seed %llu isa %d: 1 and 3 threads differ", (unsigned long long)seed,
                             isa);
                }
            }
        }
        free(a), free(b), free(c), free(want), free(first);
    }
}

/* C rows with room for the last, partial panel's whole width (c_room: Winograd's products) give
 * the same first n columns, bit for bit, as the local-tile path, at every level, with several k
 * blocks, a bias and clamp applied in registers, a residual or none, on 1 and 3 threads; nothing
 * at or past column c_room is written. */
static void test_gemm_c_room(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        const int64_t m = trng_int(&s, 1, 30), n = trng_int(&s, 1, 90), k = trng_int(&s, 1, 300);
        const int64_t room = (n + KI_GEMM_NR - 1) / KI_GEMM_NR * KI_GEMM_NR, ldc = room + 8;
        int64_t packed;
        assert_true(ki_gemm_packed_floats(k, n, &packed));
        float *a = malloc((size_t)(m * k) * 4), *b = malloc((size_t)(k * n) * 4);
        float *bp = malloc((size_t)packed * 4 + 4), *bias = malloc((size_t)m * 4);
        float *res = malloc((size_t)(m * ldc) * 4), *c0 = malloc((size_t)(m * ldc) * 4);
        float *c1 = malloc((size_t)(m * ldc) * 4);
        trng_fill(&s, a, (size_t)(m * k)), trng_fill(&s, b, (size_t)(k * n));
        trng_fill(&s, bias, (size_t)m), trng_fill(&s, res, (size_t)(m * ldc));
        for (int64_t r = 0; r < k; r++) {
            ki_gemm_pack_row(b + r * n, r, k, n, bp);
        }
        const ki_cv_epilogue ep = { bias, { KI_ACT_RELU6, 0, 0 }, false };
        for (int isa = KI_ISA_GENERIC; isa <= KI_ISA_AVX512; isa++) {
            ki_gemm_ukernel uk = ki_gemm_ukernel_for((ki_isa)isa);
            for (int nt = 1; uk && nt <= 3; nt += 2) {
                ki_gemm_args g = { .m = m,
                                   .n = n,
                                   .k = k,
                                   .a = a,
                                   .lda = k,
                                   .bp = bp,
                                   .c = c0,
                                   .ldc = ldc,
                                   .ep = &ep,
                                   .epf = ki_cv_epilogue_ref,
                                   .uk = uk,
                                   .res = seed % 2 ? res : NULL };
                trng_fill(&s, c0, (size_t)(m * ldc));
                memcpy(c1, c0, (size_t)(m * ldc) * 4);
                for (int t = 0; t < nt; t++) {
                    ki_gemm_compute(&g, t, nt);
                }
                g.c = c1, g.c_room = room;
                float guard[8 * 30];
                for (int64_t r = 0; r < m; r++) {
                    memcpy(guard + r * 8, c1 + r * ldc + room, 8 * 4);
                }
                for (int t = 0; t < nt; t++) {
                    ki_gemm_compute(&g, t, nt);
                }
                for (int64_t r = 0; r < m; r++) {
                    if (memcmp(c0 + r * ldc, c1 + r * ldc, (size_t)n * 4) != 0 ||
                        memcmp(guard + r * 8, c1 + r * ldc + room, 8 * 4) != 0) {
                        fail_msg("seed %llu isa %d nt %d m %lld n %lld k %lld: row %lld differs",
                                 (unsigned long long)seed, isa, nt, (long long)m, (long long)n,
                                 (long long)k, (long long)r);
                    }
                }
            }
        }
        free(a), free(b), free(bp), free(bias), free(res), free(c0), free(c1);
    }
}

/* ki_gemm_panels' bare products (no epilogue, one k block, A's rows one after another: Winograd's
 * products) against the same products through the general tiles (A's rows a float apart, which
 * takes them off the bare path), bit for bit at every level: row counts off the 8-row blocks,
 * partial last panels with and without room in C's rows (nothing at or past the room written),
 * all the panels at once and one panel at a time. */
static void test_gemm_bare(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 0xD1B54A32D192ED03ull;
        const int64_t m = trng_int(&s, 1, 40), n = trng_int(&s, 1, 90), k = trng_int(&s, 1, 128);
        const int64_t np = (n + KI_GEMM_NR - 1) / KI_GEMM_NR, room = seed % 2 ? np * KI_GEMM_NR : 0;
        const int64_t ldc = np * KI_GEMM_NR + 8;
        int64_t packed;
        assert_true(ki_gemm_packed_floats(k, n, &packed));
        float *a = malloc((size_t)(m * k) * 4), *a1 = malloc((size_t)(m * (k + 1)) * 4);
        float *b = malloc((size_t)(k * n) * 4), *bp = malloc((size_t)packed * 4 + 4);
        float *c0 = malloc((size_t)(m * ldc) * 4), *c1 = malloc((size_t)(m * ldc) * 4);
        trng_fill(&s, a, (size_t)(m * k)), trng_fill(&s, b, (size_t)(k * n));
        for (int64_t r = 0; r < m; r++) {
            memcpy(a1 + r * (k + 1), a + r * k, (size_t)k * 4);
        }
        for (int64_t r = 0; r < k; r++) {
            ki_gemm_pack_row(b + r * n, r, k, n, bp);
        }
        for (int isa = KI_ISA_GENERIC; isa <= KI_ISA_AVX512; isa++) {
            ki_gemm_ukernel uk = ki_gemm_ukernel_for((ki_isa)isa);
            for (int one = 0; uk && one < 2; one++) {
                ki_gemm_args g = { .m = m,
                                   .n = n,
                                   .k = k,
                                   .a = a1,
                                   .lda = k + 1,
                                   .bp = bp,
                                   .c = c0,
                                   .ldc = ldc,
                                   .c_room = room,
                                   .uk = uk };
                trng_fill(&s, c0, (size_t)(m * ldc));
                memcpy(c1, c0, (size_t)(m * ldc) * 4);
                for (int64_t p = 0; p < np; p += one ? 1 : np) {
                    const int64_t cnt = one ? 1 : np;
                    ki_gemm_panels(&g, p, cnt, bp + p * KI_GEMM_NR * k);
                }
                g.a = a, g.lda = k, g.c = c1;
                for (int64_t p = 0; p < np; p += one ? 1 : np) {
                    const int64_t cnt = one ? 1 : np;
                    ki_gemm_panels(&g, p, cnt, bp + p * KI_GEMM_NR * k);
                }
                for (int64_t r = 0; r < m; r++) {
                    /* the first n columns the same; past them, C as it was up to the room (the
                     * general tiles write only n columns, the bare ones up to the room) and
                     * untouched from it on */
                    const int64_t from = room > n ? room : n;
                    if (memcmp(c0 + r * ldc, c1 + r * ldc, (size_t)n * 4) != 0 ||
                        memcmp(c0 + r * ldc + from, c1 + r * ldc + from,
                               (size_t)(ldc - from) * 4) != 0) {
                        fail_msg("seed %llu isa %d one %d m %lld n %lld k %lld: row %lld differs",
                                 (unsigned long long)seed, isa, one, (long long)m, (long long)n,
                                 (long long)k, (long long)r);
                    }
                }
            }
        }
        free(a), free(a1), free(b), free(bp), free(c0), free(c1);
    }
}

/* ki_sgemm (the products of torch.matmul, the RNNs and ConvTranspose3d) in each transpose mode,
 * with leading dimensions past the sizes, at every level the CPU has, on 1, 2 and 3 threads: within
 * 1e-4 of a double-precision sum and of OpenBLAS's sgemm, and bit for bit the same whatever the
 * thread count; k = 0 gives zeros. */
static void test_sgemm_modes(void **unused)
{
    (void)unused;
    static const int64_t dims[][3] = { { 1, 1, 1 },    { 7, 33, 5 }, { 37, 65, 130 },
                                       { 9, 96, 257 }, { 3, 40, 0 }, { 50, 2, 64 } };
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int64_t m = dims[di][0], n = dims[di][1], k = dims[di][2];
        for (int mode = 0; mode < 4; mode++) {
            const bool ta = mode & 1, tb = mode & 2;
            uint64_t seed = 0x5DEECE66Dull * (di * 4 + (uint64_t)mode + 1);
            const int64_t lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 1;
            const int64_t na = (ta ? k : m) * lda + 1, nb = (tb ? n : k) * ldb + 1;
            float *a = malloc((size_t)na * sizeof *a), *b = malloc((size_t)nb * sizeof *b);
            float *c = malloc((size_t)(m * ldc) * sizeof *c), *want = malloc((size_t)(m * n) * 4);
            float *blas = malloc((size_t)(m * ldc) * sizeof *c);
            float *first = malloc((size_t)(m * ldc) * sizeof *c);
            trng_fill(&seed, a, (size_t)na), trng_fill(&seed, b, (size_t)nb);
            for (int64_t i = 0; i < m; i++) {
                for (int64_t j = 0; j < n; j++) {
                    double acc = 0;
                    for (int64_t q = 0; q < k; q++) {
                        acc += (double)(ta ? a[q * lda + i] : a[i * lda + q]) *
                               (tb ? b[j * ldb + q] : b[q * ldb + j]);
                    }
                    want[i * n + j] = (float)acc;
                }
            }
            for (int64_t i = 0; i < m * ldc; i++) {
                blas[i] = 0.0f;
            }
            if (k > 0) {
                cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                            (int)lda, b, (int)ldb, 0.0f, blas, (int)ldc);
            }
            int64_t wsf;
            assert_true(ki_sgemm_ws_floats(m, n, k, ta, &wsf));
            float *ws = malloc((size_t)(wsf + 1) * sizeof *ws);
            const ki_sgemm_args sa = { .m = m,
                                       .n = n,
                                       .k = k,
                                       .a = a,
                                       .lda = lda,
                                       .ta = ta,
                                       .b = b,
                                       .ldb = ldb,
                                       .tb = tb,
                                       .c = c,
                                       .ldc = ldc };
            for (int isa = KI_ISA_GENERIC; isa <= (int)ki_cpu_get()->isa; isa++) {
                ki_gemm_ukernel uk = ki_gemm_ukernel_for((ki_isa)isa);
                for (int nt = 1; nt <= 3; nt++) {
                    for (int64_t i = 0; i < m * ldc; i++) {
                        c[i] = 777.0f; /* every output must be written */
                    }
                    ki_sgemm(&sa, uk, ws, nt);
                    for (int64_t i = 0; i < m; i++) {
                        for (int64_t j = 0; j < n; j++) {
                            const float g = c[i * ldc + j], w = want[i * n + j],
                                        o = blas[i * ldc + j];
                            if (fabsf(g - w) > 1e-4f * (1.0f + fabsf(w)) ||
                                fabsf(g - o) > 1e-4f * (1.0f + fabsf(o))) {
                                fail_msg(
                                    "m %lld n %lld k %lld ta %d tb %d isa %d nt %d: c[%lld][%lld] "
                                    "%g, want %g, OpenBLAS %g",
                                    (long long)m, (long long)n, (long long)k, ta, tb, isa, nt,
                                    (long long)i, (long long)j, g, w, o);
                            }
                        }
                    }
                    if (nt == 1) {
                        memcpy(first, c, (size_t)(m * ldc) * sizeof *c);
                    } else {
                        assert_memory_equal(first, c, (size_t)(m * ldc) * sizeof *c);
                    }
                }
            }
            free(a), free(b), free(c), free(want), free(blas), free(first), free(ws);
        }
    }
}

/* The AVX2 packing of panels in the even / odd order equals the plain C one (ki_conv2d_pack_eo_ref,
 * itself checked here against ki_conv2d_eo_src's definition) float for float: random even widths
 * (halves a multiple of eight or not), starts, column counts up to KI_PACK_EO_PANELS whole
 * panels or a part of the last, 1..40 planes a little more than a plane apart; the packed
 * buffer's last float past the panels untouched. */
static void test_pack_eo(void **unused)
{
    (void)unused;
    enum { MAXN = KI_PACK_EO_PANELS * KI_GEMM_NR };
    for (uint64_t seed = 1; seed <= 300; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        const int64_t w = 2 * trng_int(&s, 1, 60), rows = trng_int(&s, 1, 6);
        const int64_t k = trng_int(&s, 1, 40), ldb = rows * w + trng_int(&s, 0, 5);
        const int64_t nr = trng_int(&s, 1, MAXN), j0 = trng_int(&s, 0, rows * w - 1);
        if (j0 + nr > rows * w) {
            continue; /* the columns must lie in the rows */
        }
        const int64_t np = (nr + KI_GEMM_NR - 1) / KI_GEMM_NR, n = np * k * KI_GEMM_NR;
        float *x = malloc((size_t)(k * ldb) * sizeof *x), *ref = malloc((size_t)(n + 1) * 4);
        float *got = malloc((size_t)(n + 1) * sizeof *got);
        trng_fill(&s, x, (size_t)(k * ldb));
        ref[n] = got[n] = 7.0f;
        ki_conv2d_pack_eo_ref(x, ldb, w, j0, nr, k, ref);
        for (int64_t q = 0; q < np; q++) { /* the definition */
            for (int64_t r = 0; r < k; r++) {
                for (int64_t i = 0; i < KI_GEMM_NR; i++) {
                    const int64_t j = j0 + q * KI_GEMM_NR + i, col = j % w, half = w / 2;
                    const float want = q * KI_GEMM_NR + i >= nr ? 0.0f
                                       : col < half ? x[r * ldb + j - col + 2 * col]
                                                    : x[r * ldb + j - col + 2 * (col - half) + 1];
                    assert_true(ref[(q * k + r) * KI_GEMM_NR + i] == want);
                }
            }
        }
#if KI_HAVE_X86
        if (ki_cpu_get()->isa >= KI_ISA_AVX2) {
            ki_conv2d_pack_eo_avx2(x, ldb, w, j0, nr, k, got);
            if (memcmp(got, ref, (size_t)(n + 1) * sizeof *got) != 0) {
                fail_msg("seed %llu: w %lld j0 %lld nr %lld k %lld differs", (unsigned long long)seed,
                         (long long)w, (long long)j0, (long long)nr, (long long)k);
            }
        }
#endif
        free(x), free(ref), free(got);
    }
}

/* The 16-column kernels (partial tiles) give their full kernel's low 16 columns bit for bit,
 * accumulating or not, at each level the CPU has; so does the AVX2 8-column one its low 8. */
static void test_ukernel16(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    for (int isa = KI_ISA_AVX2; isa <= (int)ki_cpu_get()->isa; isa++) {
        ki_gemm_ukernel full_uk =
            isa == KI_ISA_AVX2 ? ki_gemm_ukernel_avx2 : ki_gemm_ukernel_avx512;
        void (*half_uk)(int64_t, const float *const *, const float *, int64_t, float *, int64_t,
                        bool) =
            isa == KI_ISA_AVX2 ? ki_gemm_ukernel16_avx2 : ki_gemm_ukernel16_avx512;
        for (uint64_t seed = 1; seed <= 40; seed++) {
            uint64_t s = seed * 0x9E3779B97F4A7C15ull;
            const int64_t kc = trng_int(&s, 1, 200), ldb = 32 + trng_int(&s, 0, 8);
            float *a = malloc((size_t)(8 * kc) * sizeof *a), *b = malloc((size_t)(kc * ldb) * 4);
            float full[8 * 40], half[8 * 40], orig[8 * 40];
            trng_fill(&s, a, (size_t)(8 * kc)), trng_fill(&s, b, (size_t)(kc * ldb));
            trng_fill(&s, full, 8 * 40);
            memcpy(half, full, sizeof full), memcpy(orig, full, sizeof full);
            const float *rows[8];
            for (int r = 0; r < 8; r++) {
                rows[r] = a + r * kc;
            }
            const bool acc = seed % 2 == 0;
            full_uk(kc, rows, b, ldb, full, 40, acc, NULL);
            half_uk(kc, rows, b, ldb, half, 40, acc);
            for (int r = 0; r < 8; r++) {
                assert_memory_equal(full + r * 40, half + r * 40, 16 * sizeof(float));
                /* columns 16.. untouched */
                assert_memory_equal(orig + r * 40 + 16, half + r * 40 + 16, 24 * sizeof(float));
            }
            if (isa == KI_ISA_AVX2) {
                float quarter[8 * 40];
                memcpy(quarter, orig, sizeof orig);
                ki_gemm_ukernel8_avx2(kc, rows, b, ldb, quarter, 40, acc);
                for (int r = 0; r < 8; r++) {
                    assert_memory_equal(full + r * 40, quarter + r * 40, 8 * sizeof(float));
                    assert_memory_equal(orig + r * 40 + 8, quarter + r * 40 + 8,
                                        32 * sizeof(float));
                }
            }
            free(a), free(b);
        }
    }
#else
    (void)unused;
    skip();
#endif
}

/* a and b agree: equal (both NaN counts), or for the exp-based kinds within 4e-7 relative plus
 * 1e-30 absolute (the vector exp is not libm's). */
static bool epi_close(ki_act_kind k, float a, float b)
{
    if (a == b || (isnan(a) && isnan(b))) {
        return true;
    }
    if (k != KI_ACT_SILU && k != KI_ACT_SIGMOID) {
        return false;
    }
    return fabs((double)a - b) <= 4e-7 * fabs((double)b) + 1e-30;
}

/* The vector epilogue computes the scalar formulas exactly (the exp-based ones closely), NaN and
 * tails included. */
static void test_epilogue_avx2(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    static const ki_act acts[] = { { KI_ACT_NONE, 0, 0 },          { KI_ACT_RELU, 0, 0 },
                                   { KI_ACT_RELU6, 0, 0 },         { KI_ACT_HARDTANH, -0.5f, 2 },
                                   { KI_ACT_LEAKY_RELU, 0.1f, 0 }, { KI_ACT_HARDSWISH, 0, 0 },
                                   { KI_ACT_HARDSIGMOID, 0, 0 },   { KI_ACT_SILU, 0, 0 },
                                   { KI_ACT_SIGMOID, 0, 0 } };
    if (!ki_gemm_ukernel_for(KI_ISA_AVX2)) {
        skip();
    }
    uint64_t s = 7;
    float x[37], a[37], b[37], r[37], bias[2] = { 0.25f, -3.0f };
    trng_fill(&s, x, 37), trng_fill(&s, r, 37);
    for (int i = 0; i < 37; i++) {
        x[i] *= 10.0f;
    }
    x[5] = NAN, x[6] = -0.0f, x[7] = -3.0f;
    for (size_t q = 0; q < sizeof acts / sizeof acts[0]; q++) {
        for (int nb = 0; nb < 4; nb++) { /* bit 0: bias, bit 1: residual */
            ki_cv_epilogue ep = { nb & 1 ? bias : NULL, acts[q], false };
            const float *res = nb & 2 ? r : NULL;
            memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
            ki_cv_epilogue_avx2(&ep, res, 1, a, 37);
            ki_cv_epilogue_ref(&ep, res, 1, b, 37);
            for (int i = 0; i < 37; i++) {
                if (!epi_close(acts[q].kind, a[i], b[i])) {
                    fail_msg("act %zu variant %d: [%d] %g vs %g", q, nb, i, a[i], b[i]);
                }
            }
        }
    }
#else
    (void)unused;
    skip();
#endif
}

/* n inputs for the SiLU/Sigmoid sweep: the special values, then magnitudes from the subnormal
 * range to 1e4 (densest where sigmoid bends, |x| < 20), both signs. */
static void silu_inputs(float *x, int n)
{
    static const float special[] = {
        0.0f, -0.0f, 100.0f, -100.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 1e-39f, -1e-39f,
        88.7f, -88.7f, 87.4f, -87.4f, 103.9f, -103.9f, 89.0f, -89.0f, 1e4f, -1e4f,
        /* the clamp's ends and where e^(-x) becomes +inf (n = 1024, vexp_avx2.h) */
        -88.72283935546875f, -88.7228317f, -88.68f, -88.65f, 87.0f, -87.0f, 86.99f
    };
    int ns = (int)(sizeof special / sizeof special[0]);
    uint64_t s = 11;
    for (int i = 0; i < n; i++) {
        if (i < ns) {
            x[i] = special[i];
            continue;
        }
        float u;
        trng_fill(&s, &u, 1);
        double mag = i % 3 ? 20.0 * fabs((double)u) : pow(10.0, 49.0 * fabs((double)u) - 45.0);
        x[i] = (float)(i & 1 ? -mag : mag);
    }
}

/* SiLU and Sigmoid through the vector exp against the scalar expf ones over a wide range, every
 * length up to 40 (tails of 0..7) and with bias/residual. */
static void test_epilogue_avx2_silu(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    enum { N = 4096 };
    static const ki_act acts[] = { { KI_ACT_SILU, 0, 0 }, { KI_ACT_SIGMOID, 0, 0 } };
    if (!ki_gemm_ukernel_for(KI_ISA_AVX2)) {
        skip();
    }
    float *x = malloc(N * sizeof *x), *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    assert_non_null(x), assert_non_null(a), assert_non_null(b);
    silu_inputs(x, N);
    float bias[2] = { 0.0f, -0.75f };
    for (int q = 0; q < 2; q++) {
        for (int t = 0; t <= 41; t++) {
            int len = t <= 40 ? t : N;
            /* the long run with a residual: Sigmoid adds it after the activation */
            ki_cv_epilogue ep = { len & 1 ? bias : NULL, acts[q], len == N && q == 1 };
            const float *res = len == N ? x + 1 : NULL;
            int64_t m = len == N ? N - 1 : len;
            memcpy(a, x, N * sizeof *x), memcpy(b, x, N * sizeof *x);
            ki_cv_epilogue_avx2(&ep, res, 1, a, (size_t)m);
            ki_cv_epilogue_ref(&ep, res, 1, b, (size_t)m);
            for (int64_t i = 0; i < m; i++) {
                if (!epi_close(acts[q].kind, a[i], b[i])) {
                    fail_msg("act %d len %d: x=%g [%d] %.9g vs %.9g", q, len, (double)x[i], (int)i,
                             (double)a[i], (double)b[i]);
                }
            }
        }
    }
    free(x), free(a), free(b);
#else
    (void)unused;
    skip();
#endif
}

/* GELU's vector erf against the scalar erff formula: within 5e-7 absolute (plus 1e-6 relative)
 * over [-12, 12] and the special values; NaN stays NaN, +inf stays +inf, -inf gives 0 or NaN as
 * the scalar does (0 * inf). */
static void test_epilogue_avx2_gelu(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    enum { N = 4096 };
    if (!ki_gemm_ukernel_for(KI_ISA_AVX2)) {
        skip();
    }
    static float x[N], a[N], b[N];
    static const float special[] = { 0.0f, -0.0f, 1e-30f, -1e-30f, 3.0f, -3.0f,
                                     5.0f, -5.0f, 30.0f,  -30.0f,  NAN };
    const int ns = (int)(sizeof special / sizeof special[0]);
    for (int i = 0; i < N; i++) {
        x[i] = i < ns ? special[i] : -12.0f + 24.0f * (float)(i - ns) / (float)(N - ns);
    }
    const ki_cv_epilogue ep = { NULL, { KI_ACT_GELU, 0, 0 }, false };
    memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
    ki_cv_epilogue_avx2(&ep, NULL, 0, a, N);
    ki_cv_epilogue_ref(&ep, NULL, 0, b, N);
    for (int i = 0; i < N; i++) {
        if (isnan(b[i]) ? !isnan(a[i]) : fabs((double)a[i] - b[i]) > 5e-7 + 1e-6 * fabs(b[i])) {
            fail_msg("x=%.9g: %.9g vs %.9g", (double)x[i], (double)a[i], (double)b[i]);
        }
    }
#else
    (void)unused;
    skip();
#endif
}

/* A value does not depend on the span it is finished in: the drivers split rows by threads, so
 * SiLU over [0, 301) in one call (sixteen values a step) and in pieces cut at odd places (eight a
 * step, and tails) must agree bitwise, with the residual added before or after the activation. */
static void test_epilogue_avx2_spans(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    enum { N = 301 };
    static const ki_act acts[] = { { KI_ACT_SILU, 0, 0 }, { KI_ACT_SIGMOID, 0, 0 } };
    static const size_t cut[] = { 0, 3, 12, 13, 150, N };
    if (!ki_gemm_ukernel_for(KI_ISA_AVX2)) {
        skip();
    }
    float x[N], whole[N], parts[N], res[N], bias[2] = { 0.0f, 0.25f };
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i * 7919) % 1601 - 800) / 97.0f; /* -8.2 .. 8.2 */
        res[i] = 0.5f - (float)i / N;
    }
    for (int q = 0; q < 4; q++) {
        ki_cv_epilogue ep = { bias, acts[q % 2], q >= 2 };
        memcpy(whole, x, sizeof x), memcpy(parts, x, sizeof x);
        ki_cv_epilogue_avx2(&ep, res, 1, whole, N);
        for (int c = 0; c + 1 < 6; c++) {
            ki_cv_epilogue_avx2(&ep, res + cut[c], 1, parts + cut[c], cut[c + 1] - cut[c]);
        }
        assert_memory_equal(whole, parts, sizeof whole);
    }
#else
    (void)unused;
    skip();
#endif
}

/* The AVX-512 SiLU, Sigmoid and GELU give the AVX2 version's bits, over the range where exp
 * overflows, goes subnormal or is exact, NaN and infinities included, at every tail length, with
 * and without a residual; other activations pass through to the AVX2 version. */
static void test_epilogue_avx512_same(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    enum { N = 64 };
    static const ki_act acts[] = { { KI_ACT_SILU, 0, 0 },
                                   { KI_ACT_SIGMOID, 0, 0 },
                                   { KI_ACT_GELU, 0, 0 },
                                   { KI_ACT_HARDSWISH, 0, 0 } };
    if (!ki_gemm_ukernel_for(KI_ISA_AVX512)) {
        skip();
    }
    static const float special[] = { 0.0f,     -0.0f,    1.0f,      -1.0f,   88.7f,
                                     -88.7f,   89.5f,    -89.5f,    -87.5f,  103.0f,
                                     -103.0f,  -110.0f,  200.0f,    -200.0f, 1e-30f,
                                     -1e-30f,  INFINITY, -INFINITY, NAN,     3.0e38f,
                                     -3.0e38f, 0.5f,     -15.0f,    15.0f,   -88.72283935546875f,
                                     -88.68f,  87.0f,    -87.0f };
    float x[N], a[N], b[N], res[N], bias[1] = { 0.125f };
    for (int i = 0; i < N; i++) {
        x[i] = i < (int)(sizeof special / sizeof *special) ? special[i]
                                                           : (float)((i * 7919) % 997 - 498) / 5.0f;
        res[i] = (float)(i % 5) - 2.0f;
    }
    for (int q = 0; q < 4; q++) {
        for (int r = 0; r < 3; r++) { /* r = 2: the residual after the activation */
            ki_cv_epilogue ep = { r ? bias : NULL, acts[q], r == 2 };
            for (size_t len = 0; len <= N; len++) {
                memcpy(a, x, sizeof x), memcpy(b, x, sizeof x);
                ki_cv_epilogue_avx512(&ep, r ? res : NULL, 0, a, len);
                ki_cv_epilogue_avx2(&ep, r ? res : NULL, 0, b, len);
                assert_memory_equal(a, b, sizeof a); /* lanes past len untouched by both */
            }
        }
    }
#else
    (void)unused;
    skip();
#endif
}

/* The AVX-512 transpose copies what the reference copies, at every edge size (rows and columns
 * 1..40, strides past them) and leaves the rest of the destination alone. */
static void test_transpose_simd(void **unused)
{
#if KI_HAVE_X86
    (void)unused;
    if (!ki_gemm_ukernel_for(KI_ISA_AVX2)) {
        skip();
    }
    /* every vector version this CPU runs against the reference */
    const ki_transpose_fn fns[2] = { ki_transpose_avx2, ki_gemm_ukernel_for(KI_ISA_AVX512)
                                                            ? ki_transpose_avx512
                                                            : ki_transpose_avx2 };
    enum { R = 40, C = 40, LDS = 45, LDD = 43 };
    static float src[R * LDS], a[C * LDD], b[C * LDD];
    for (int i = 0; i < R * LDS; i++) {
        src[i] = (float)i * 0.5f - 100.0f;
    }
    for (int64_t rows = 1; rows <= R; rows += 3) {
        for (int64_t cols = 1; cols <= C; cols += (cols < 18 ? 1 : 5)) {
            for (int f = 0; f < 2; f++) {
                for (int i = 0; i < C * LDD; i++) {
                    a[i] = b[i] = -1.0f;
                }
                fns[f](src, LDS, rows, cols, a, LDD);
                ki_transpose_ref(src, LDS, rows, cols, b, LDD);
                assert_memory_equal(a, b, sizeof a);
            }
        }
    }
#else
    (void)unused;
    skip();
#endif
}

/* fuse() takes one cheap activation into the epilogue, and nothing else. */
static void test_fuse_hook(void **unused)
{
    (void)unused;
    static const float w[2] = { 1.0f, -2.0f }, bias[1] = { 0.5f }, x[4] = { 1, 2, -3, 4 };
    int64_t wd[4] = { 1, 1, 1, 2 }, one = 1, d[4] = { 1, 1, 1, 4 };
    top conv, relu6, soft, silu;
    top_init(&conv, "nn.Conv2d", 1, 1);
    top_attr(&conv, "weight", 4, wd, w);
    top_attr(&conv, "bias", 1, &one, bias);
    top_init(&relu6, "nn.ReLU6", 1, 1);
    top_init(&soft, "nn.Softmax", 1, 1);
    top_init(&silu, "F.silu", 1, 1);
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    assert_int_equal(top_create(&conv, &ops, &st, &err), KI_OK);
    assert_non_null(ops->fuse);
    assert_false(ops->fuse(st, &soft.d, 0));
    assert_true(ops->fuse(st, &relu6.d, 0));
    assert_false(ops->fuse(st, &silu.d, 0)); /* one activation only */
    ki_tensor in = { ki_shape_make(4, d), (float *)x }, out;
    for (int th = 1; th <= 2; th++) {
        assert_int_equal(top_run(ops, st, &in, 1, &out, 1, th, &err), KI_OK);
        /* 1*1-2*2+0.5 = -2.5 -> 0;  2+6+0.5 = 8.5 -> 6;  -3-8+0.5 -> 0 */
        assert_float_equal(out.data[0], 0.0f, 0);
        assert_float_equal(out.data[1], 6.0f, 0);
        assert_float_equal(out.data[2], 0.0f, 0);
        free(out.data);
    }
    ops->destroy(st);
}

/* A 3x3 convolution (bias, padding 1) of x (1 x 5 x 9 x 11) into 12 channels; fuse() is offered
 * the add (slot `slot`) and then ReLU. */
static void res_conv(top *t, const float *w, const float *b)
{
    int64_t wd[4] = { 12, 5, 3, 3 }, nb = 12;
    top_init(t, "nn.Conv2d", 1, 1);
    top_attr(t, "weight", 4, wd, w);
    top_attr(t, "bias", 1, &nb, b);
    top_ints2(t, "padding", 1, 1);
}

/* fuse() takes a residual add(@0,@1) (either slot) before an activation, then the activation;
 * the fused conv equals conv, add, relu run one after the other, bit for bit. */
static void test_residual_fuse(void **unused)
{
    (void)unused;
    static float w[12 * 5 * 9], b[12], x[5 * 99], r[12 * 99];
    uint64_t s = 5;
    trng_fill(&s, w, sizeof w / 4), trng_fill(&s, b, 12), trng_fill(&s, x, sizeof x / 4);
    trng_fill(&s, r, sizeof r / 4);
    top conv, add, mul, relu;
    res_conv(&conv, w, b);
    top_init(&add, "pnnx.Expression", 2, 1);
    top_str(&add, "expr", "add(@0,@1)");
    top_init(&mul, "pnnx.Expression", 2, 1);
    top_str(&mul, "expr", "mul(@0,@1)");
    top_init(&relu, "nn.ReLU", 1, 1);
    const ki_layer_ops *ops;
    void *plain, *st;
    ki_error err = { 0 };
    assert_int_equal(top_create(&conv, &ops, &plain, &err), KI_OK);
    assert_int_equal(top_create(&conv, &ops, &st, &err), KI_OK);
    assert_false(ops->fuse(st, &mul.d, 1));
    assert_true(ops->fuse(st, &add.d, 1));
    assert_false(ops->fuse(st, &add.d, 0)); /* one residual only */
    assert_true(ops->fuse(st, &relu.d, 0));
    int64_t di[4] = { 1, 5, 9, 11 }, dr[4] = { 1, 12, 9, 11 };
    ki_tensor in[2] = { { ki_shape_make(4, di), x }, { ki_shape_make(4, dr), r } }, want, out;
    for (int th = 1; th <= 2; th++) {
        assert_int_equal(top_run(ops, plain, in, 1, &want, 1, th, &err), KI_OK);
        assert_int_equal(top_run(ops, st, in, 2, &out, 1, th, &err), KI_OK);
        for (int i = 0; i < 12 * 99; i++) {
            float v = want.data[i] + r[i];
            assert_true(out.data[i] == (v < 0.0f ? 0.0f : v));
        }
        free(want.data), free(out.data);
    }
    in[1].shape.d[1] = 11; /* a broadcast or mismatched operand is refused */
    ki_shape shp[2] = { in[0].shape, in[1].shape }, o;
    assert_int_equal(ops->shape(st, shp, 2, &o, 1, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "residual"));
    ops->destroy(st);
    /* after an activation the residual is added to the activated value (conv, act, add) */
    in[1].shape.d[1] = 12;
    assert_int_equal(top_create(&conv, &ops, &st, &err), KI_OK);
    assert_true(ops->fuse(st, &relu.d, 0));
    assert_true(ops->fuse(st, &add.d, 0));
    assert_false(ops->fuse(st, &add.d, 1)); /* one residual only */
    for (int th = 1; th <= 2; th++) {
        assert_int_equal(top_run(ops, plain, in, 1, &want, 1, th, &err), KI_OK);
        assert_int_equal(top_run(ops, st, in, 2, &out, 1, th, &err), KI_OK);
        for (int i = 0; i < 12 * 99; i++) {
            assert_true(out.data[i] == (want.data[i] < 0.0f ? 0.0f : want.data[i]) + r[i]);
        }
        free(want.data), free(out.data);
    }
    ops->destroy(st);
    ops->destroy(plain);
}

/* nn.Linear's one-row path with a fused Hardswish equals the activation applied afterwards. */
static void test_linear_fuse(void **unused)
{
    (void)unused;
    enum { IN = 77, OUT = 19 };
    static float w[OUT * IN], b[OUT], x[IN];
    uint64_t s = 11;
    trng_fill(&s, w, OUT * IN), trng_fill(&s, b, OUT), trng_fill(&s, x, IN);
    int64_t wd[2] = { OUT, IN }, nb = OUT, d[2] = { 1, IN };
    top lin, hs;
    top_init(&lin, "nn.Linear", 1, 1);
    top_attr(&lin, "weight", 2, wd, w);
    top_attr(&lin, "bias", 1, &nb, b);
    top_init(&hs, "nn.Hardswish", 1, 1);
    const ki_layer_ops *ops;
    void *st;
    ki_error err = { 0 };
    assert_int_equal(top_create(&lin, &ops, &st, &err), KI_OK);
    assert_true(ops->fuse(st, &hs.d, 0));
    ki_tensor in = { ki_shape_make(2, d), x }, out;
    for (int th = 1; th <= 2; th++) {
        assert_int_equal(top_run(ops, st, &in, 1, &out, 1, th, &err), KI_OK);
        for (int o = 0; o < OUT; o++) {
            double acc = b[o];
            for (int i = 0; i < IN; i++) {
                acc += (double)w[o * IN + i] * x[i];
            }
            assert_float_equal(out.data[o], ki_act_hardswish((float)acc), 1e-5);
        }
        free(out.data);
    }
    ops->destroy(st);
}

/* A stem-like convolution (ic -> oc channels, kernel k, stride 2, padding k / 2, bias) into t. */
static void stem_conv(top *t, int64_t ic, int64_t oc, int64_t k, const float *w, const float *b)
{
    int64_t wd[4] = { oc, ic, k, k }, nb = oc;
    top_init(t, "nn.Conv2d", 1, 1);
    top_attr(t, "weight", 4, wd, w);
    top_attr(t, "bias", 1, &nb, b);
    top_ints2(t, "stride", 2, 2);
    top_ints2(t, "padding", k / 2, k / 2);
}

/* nn.MaxPool2d 3x3, stride s, padding pad, ceil_mode `ceil`. */
static void pool3(top *t, int64_t s, int64_t pad, int ceil)
{
    top_init(t, "nn.MaxPool2d", 1, 1);
    top_ints2(t, "kernel_size", 3, 3);
    top_ints2(t, "stride", s, s);
    top_ints2(t, "padding", pad, pad);
    top_bool(t, "ceil_mode", ceil);
}

/* On the direct path (AVX2 and AVX-512), fuse() takes a 3x3 stride-2 max pool after the
 * activation, padded by 1 in floor mode (resnet's stem), by 1 in ceil mode, or by 0 in ceil mode
 * (squeezenet's): the fused layer equals conv + ReLU, then the pool, bit for bit, whatever the
 * size (bands cut short at the bottom, odd widths, planes of one row, batch 2, a 2x2 output whose
 * ceil-mode pool has one partial window; where the pool fits no window both refuse the shape), the
 * layer (3 -> 20 channels 3x3 and 7x7; 1 -> 4 channels 1x1, whose packed weights are one cache
 * line), the thread count, and with a NaN in the input (the band's reference pool lets it win). A
 * stride-1 pool is refused, nothing is taken after the pool, and without the direct path (the
 * generic level) no pool is taken. At each level the CPU has (ki_cpu_set_isa before the layers are
 * made). */
static void pool_fuse_at_level(void)
{
    static float w[20 * 3 * 49], b[20], x[2 * 3 * 53 * 47];
    static const int64_t sizes[][4] = { { 1, 3, 53, 47 }, { 2, 3, 30, 34 }, { 1, 3, 2, 9 },
                                        { 1, 3, 17, 16 }, { 2, 3, 1, 5 },   { 1, 3, 4, 4 } };
    static const int64_t pads[3] = { 1, 1, 0 };
    static const int ceils[3] = { 0, 1, 1 };
    uint64_t s = 9;
    trng_fill(&s, w, sizeof w / 4), trng_fill(&s, b, 20);
    top conv, relu, pool, pool_s1;
    pool3(&pool_s1, 1, 1, 0);
    top_init(&relu, "nn.ReLU", 1, 1);
    static const int64_t shapes[][3] = { { 3, 20, 3 }, { 3, 20, 7 }, { 1, 4, 1 } }; /* ic, oc, k */
    for (size_t v = 0; v < 3 * sizeof shapes / sizeof shapes[0]; v++) {
        const size_t si = v / 3, pv = v % 3;
        const int64_t ic = shapes[si][0], k = shapes[si][2];
        stem_conv(&conv, ic, shapes[si][1], k, w, b);
        pool3(&pool, 2, pads[pv], ceils[pv]);
        const ki_layer_ops *ops, *pops;
        void *plain, *st, *pst;
        ki_error err = { 0 };
        assert_int_equal(top_create(&conv, &ops, &plain, &err), KI_OK);
        assert_int_equal(top_create(&conv, &ops, &st, &err), KI_OK);
        assert_int_equal(top_create(&pool, &pops, &pst, &err), KI_OK);
        assert_true(ops->fuse(plain, &relu.d, 0));
        assert_true(ops->fuse(st, &relu.d, 0));
        assert_false(ops->fuse(st, &pool_s1.d, 0));
        if (ki_cpu_isa() < KI_ISA_AVX2) {
            assert_false(ops->fuse(st, &pool.d, 0)); /* no direct path here */
            ops->destroy(st), ops->destroy(plain), pops->destroy(pst);
            continue;
        }
        assert_true(ops->fuse(st, &pool.d, 0));
        assert_false(ops->fuse(st, &relu.d, 0)); /* nothing after the pool */
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            const int64_t dims[4] = { sizes[z][0], ic, sizes[z][2], sizes[z][3] };
            ki_tensor in = { ki_shape_make(4, dims), x }, mid, want, out;
            int64_t count = ki_shape_count(&in.shape);
            trng_fill(&s, x, (size_t)count);
            if (z == 1) {
                x[count / 2] = __builtin_nanf("");
            }
            for (int th = 1; th <= 3; th++) {
                assert_int_equal(top_run(ops, plain, &in, 1, &mid, 1, th, &err), KI_OK);
                ki_shape ps;
                if (pops->shape(pst, &mid.shape, 1, &ps, 1, &err) != KI_OK) {
                    /* the pool fits no window of this output: the fused layer refuses it too */
                    assert_int_not_equal(ops->shape(st, &in.shape, 1, &ps, 1, &err), KI_OK);
                    free(mid.data);
                    continue;
                }
                assert_int_equal(top_run(pops, pst, &mid, 1, &want, 1, th, &err), KI_OK);
                assert_int_equal(top_run(ops, st, &in, 1, &out, 1, th, &err), KI_OK);
                assert_true(ki_shape_equal(&out.shape, &want.shape));
                int64_t n = ki_shape_count(&want.shape), nans = 0;
                for (int64_t i = 0; i < n; i++) {
                    nans += want.data[i] != want.data[i];
                    assert_true(memcmp(&out.data[i], &want.data[i], sizeof(float)) == 0);
                }
                assert_true(z == 1 ? nans > 0 : nans == 0);
                free(mid.data), free(want.data), free(out.data);
            }
        }
        ops->destroy(st), ops->destroy(plain), pops->destroy(pst);
    }
}

/* fn at each level the CPU has (ki_cpu_set_isa before its layers are made), then the CPU's own. */
static void at_each_level(void (*fn)(void))
{
    const ki_isa have = ki_cpu_get()->isa;
    ki_error err = { 0 };
    for (int isa = KI_ISA_GENERIC; isa <= (int)have; isa++) {
        assert_int_equal(ki_cpu_set_isa((ki_isa)isa, &err), KI_OK);
        fn();
    }
    assert_int_equal(ki_cpu_set_isa(have, &err), KI_OK);
}

static void test_pool_fuse(void **unused)
{
    (void)unused;
    at_each_level(pool_fuse_at_level);
}

/* A 3x3 depthwise layer over ch channels, stride st, padding 1, its input declared as decl. */
static void dw_conv(top *t, int64_t ch, int64_t st, int64_t k, const float *w, const float *b,
                    const ki_shape *decl)
{
    top_conv_like(t, "nn.Conv2d", ch, ch, k, k, ch, w, b);
    top_ints2(t, "stride", st, st);
    top_ints2(t, "padding", k / 2, k / 2);
    t->d.input_decl = decl;
}

/* The fused layer's output equals the first layer's (plain) then the second's (second), bit for
 * bit, for each of the nsz input sizes (n, -, h, w; ic channels; x, filled from *s, holds the
 * largest) on 1-3 threads; case q names the failure. */
static void fused_equals_pair(const ki_layer_ops *ops, void *plain, void *second, void *fused,
                              const int64_t (*sizes)[4], size_t nsz, int64_t ic, float *x,
                              uint64_t *s, int q)
{
    ki_error err = { 0 };
    for (size_t z = 0; z < nsz; z++) {
        const int64_t dims[4] = { sizes[z][0], ic, sizes[z][2], sizes[z][3] };
        ki_tensor in = { ki_shape_make(4, dims), x }, mid, want, out;
        trng_fill(s, x, (size_t)ki_shape_count(&in.shape));
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(top_run(ops, plain, &in, 1, &mid, 1, th, &err), KI_OK);
            assert_int_equal(top_run(ops, second, &mid, 1, &want, 1, th, &err), KI_OK);
            assert_int_equal(top_run(ops, fused, &in, 1, &out, 1, th, &err), KI_OK);
            assert_true(ki_shape_equal(&out.shape, &want.shape));
            int64_t n = ki_shape_count(&want.shape);
            if (memcmp(out.data, want.data, (size_t)n * sizeof(float)) != 0) {
                fail_msg("case %d size %zu threads %d: fused differs", q, z, th);
            }
            free(mid.data), free(want.data), free(out.data);
        }
    }
}

/* plain: first + act1; pdw: dw + act2; fused: first + act1 + dw + act2 when fuses, else dw refused
 * (then all three destroyed and false); ops: nn.Conv2d's. */
static bool fused_trio(const top *first, const top *act1, const top *dw, const top *act2,
                       bool fuses, const ki_layer_ops **ops, void **plain, void **pdw,
                       void **fused)
{
    ki_error err = { 0 };
    assert_int_equal(top_create(first, ops, plain, &err), KI_OK);
    assert_int_equal(top_create(dw, ops, pdw, &err), KI_OK);
    assert_int_equal(top_create(first, ops, fused, &err), KI_OK);
    assert_true((*ops)->fuse(*plain, &act1->d, 0));
    assert_true((*ops)->fuse(*pdw, &act2->d, 0));
    assert_true((*ops)->fuse(*fused, &act1->d, 0));
    if (!fuses) {
        assert_false((*ops)->fuse(*fused, &dw->d, 0));
        (*ops)->destroy(*plain), (*ops)->destroy(*pdw), (*ops)->destroy(*fused);
        return false;
    }
    assert_true((*ops)->fuse(*fused, &dw->d, 0));
    assert_true((*ops)->fuse(*fused, &act2->d, 0));
    return true;
}

/* With AVX2 or AVX-512 (each level the CPU has, ki_cpu_set_isa), a 1x1 layer or a stem on the
 * direct path takes the 3x3 or 5x5 depthwise layer after it (and that layer's activation: ReLU6
 * after a 3x3 one, SiLU after a 5x5 one) when the param file declares the data between them at
 * KI_PWDW_MIN_BYTES or more: the fused layer equals the first + ReLU6, then depthwise + its
 * activation, bit for bit, whatever the size (several bands per thread whose rows carry over, a
 * thread's last band shorter than four rows, planes of fewer than four rows, odd widths, batch
 * 2), at strides 1 and 2, on 1-3 threads. Refused: data declared smaller (taken by channel
 * blocks instead after a 1x1 layer at AVX2, 20x20: test_ovdw_fuse) or not at all, a
 * depthwise layer over other channels, a GELU after it (its kernels do not apply it), a residual
 * add. */
static void pwdw_fuse_at_level(void)
{
    enum { IC = 24, CH = 40 };
    static float w1[CH * IC], b1[CH], w2[CH * 25], b2[CH], ws[CH * 3 * 9], x[IC * 80 * 400];
    static const int64_t sizes[][4] = { { 1, IC, 40, 200 }, { 2, IC, 30, 34 }, { 1, IC, 3, 9 },
                                        { 1, IC, 17, 16 },  { 2, IC, 1, 5 },   { 1, IC, 61, 37 },
                                        { 1, IC, 14, 14 },  { 1, IC, 80, 400 } };
    uint64_t s = 17;
    trng_fill(&s, w1, sizeof w1 / 4), trng_fill(&s, b1, CH);
    trng_fill(&s, w2, sizeof w2 / 4), trng_fill(&s, b2, CH), trng_fill(&s, ws, sizeof ws / 4);
    const int64_t big[4] = { 1, CH, 200, 200 }, small[4] = { 1, CH, 20, 20 };
    const ki_shape decl = ki_shape_make(4, big), decl_small = ki_shape_make(4, small);
    top pw, stem, r1, r2, silu, gelu, dw, other;
    top_conv_like(&pw, "nn.Conv2d", IC, CH, 1, 1, 1, w1, b1);
    stem_conv(&stem, 3, CH, 3, ws, b1); /* 3 -> 40 channels, 3x3 stride 2: the direct path */
    top_init(&r1, "nn.ReLU6", 1, 1);
    top_init(&r2, "nn.ReLU6", 1, 1);
    top_init(&silu, "nn.SiLU", 1, 1);
    top_init(&gelu, "nn.GELU", 1, 1);
    const bool fuses = ki_cpu_isa() >= KI_ISA_AVX2; /* a depthwise band kernel */
    for (int64_t q = 0; q < 8; q++) {
        const int64_t st = q % 2 + 1, ic = q % 4 < 2 ? IC : 3, k = q < 4 ? 3 : 5;
        const top *first = q % 4 < 2 ? &pw : &stem, *act2 = q < 4 ? &r2 : &silu;
        const ki_layer_ops *ops;
        void *plain, *pdw, *fused, *t;
        ki_error err = { 0 };
        /* the refusals; small planes after a 1x1 layer go channel block by channel block at
         * avx2 instead (test_ovdw_fuse; at avx512 only planes of up to 16 columns) */
        const bool by_blocks = ki_cpu_isa() == KI_ISA_AVX2 && first == &pw && k == 3;
        assert_int_equal(top_create(first, &ops, &t, &err), KI_OK);
        dw_conv(&dw, CH, st, k, w2, b2, &decl_small);
        assert_int_equal(ops->fuse(t, &dw.d, 0), by_blocks);
        if (by_blocks) {
            ops->destroy(t);
            assert_int_equal(top_create(first, &ops, &t, &err), KI_OK);
        }
        dw_conv(&dw, CH, st, k, w2, b2, NULL);
        assert_false(ops->fuse(t, &dw.d, 0));
        top_conv_like(&other, "nn.Conv2d", CH / 2, CH / 2, 3, 3, CH / 2, w2, b2);
        other.d.input_decl = &decl;
        assert_false(ops->fuse(t, &other.d, 0));
        dw_conv(&dw, CH, st, k, w2, b2, &decl);
        assert_true(ops->fuse(t, &r1.d, 0));
        assert_int_equal(ops->fuse(t, &dw.d, 0), fuses);
        if (fuses) {
            assert_false(ops->fuse(t, &gelu.d, 0));
        }
        ops->destroy(t);
        /* the fused layer against the two */
        if (!fused_trio(first, &r1, &dw, act2, fuses, &ops, &plain, &pdw, &fused)) {
            continue;
        }
        assert_false(ops->fuse(fused, &r2.d, 0)); /* one activation */
        fused_equals_pair(ops, plain, pdw, fused, sizes, sizeof sizes / sizeof sizes[0], ic, x, &s,
                          (int)q);
        ops->destroy(plain), ops->destroy(pdw), ops->destroy(fused);
    }
}

static void test_pwdw_fuse(void **unused)
{
    (void)unused;
    at_each_level(pwdw_fuse_at_level);
}

/* The two layers' weights and biases for ovdw_takes. */
typedef struct ovdw_wts {
    const float *w1, *b1, *w2, *b2;
} ovdw_wts;

/* Whether a 1x1 layer ic -> ch (pw) with its ReLU6 (r1) takes the 3x3 depthwise layer (dw, stride
 * st) whose input the param file declares as decl; when it does, the activation after (NULL: none
 * asked) is refused. pw and dw are left describing the two layers. */
static bool ovdw_takes(top *pw, top *dw, const top *r1, const top *after, const ovdw_wts *wt,
                       int64_t ic, int64_t ch, int64_t st, const ki_shape *decl)
{
    const ki_layer_ops *ops;
    void *t;
    ki_error err = { 0 };
    top_conv_like(pw, "nn.Conv2d", ic, ch, 1, 1, 1, wt->w1, wt->b1);
    dw_conv(dw, ch, st, 3, wt->w2, wt->b2, decl);
    assert_int_equal(top_create(pw, &ops, &t, &err), KI_OK);
    assert_true(ops->fuse(t, &r1->d, 0));
    const bool took = ops->fuse(t, &dw->d, 0);
    if (took && after) {
        assert_false(ops->fuse(t, &after->d, 0));
    }
    ops->destroy(t);
    return took;
}

/* With AVX2 or AVX-512, a 1x1 layer takes the small 3x3 depthwise layer after it
 * (and its ReLU6) when the param file declares planes whose 32-channel block fits a
 * quarter of L2 (c->dwf_c8, ki_conv2d_ovdw_ok), at AVX-512 planes of at most 16 columns (20x20
 * refused there): the fused layer
 * equals the 1x1 layer + ReLU6, then the depthwise layer + ReLU6, bit for bit, at strides 1 and 2,
 * channels past the last whole 32-channel block, two k blocks (160 input channels), odd sizes,
 * batch 2, and run at sizes other than the declared one (96x96, whose block takes more than
 * a quarter of L2; 3x3 to 2x2 at stride 2, too few pixels), which go through the block's planes
 * instead, on 1-3 threads. Refused: channels not a multiple of 8, a Hardswish after the depthwise layer. */
static void ovdw_fuse_at_level(void)
{
    enum { CHMAX = 96, ICMAX = 160 };
    static float w1[CHMAX * ICMAX], b1[CHMAX], w2[CHMAX * 9], b2[CHMAX], x[ICMAX * 96 * 96];
    const ovdw_wts wt = { w1, b1, w2, b2 };
    static const int64_t cs[][5] = { /* in, out channels, declared h, w, stride */
                                     { 24, 40, 14, 14, 1 },
                                     { 24, 40, 14, 14, 2 },
                                     { 160, 96, 7, 7, 1 },
                                     { 16, 64, 9, 11, 2 },
                                     { 40, 32, 5, 5, 1 }
    };
    uint64_t s = 29;
    trng_fill(&s, w1, sizeof w1 / 4), trng_fill(&s, b1, CHMAX);
    trng_fill(&s, w2, sizeof w2 / 4), trng_fill(&s, b2, CHMAX);
    top pw, r1, r2, hsw, dw;
    top_init(&r1, "nn.ReLU6", 1, 1);
    top_init(&r2, "nn.ReLU6", 1, 1);
    top_init(&hsw, "nn.Hardswish", 1, 1);
    const bool fuses = ki_cpu_isa() >= KI_ISA_AVX2;
    for (int q = 0; q < 5; q++) {
        const int64_t ic = cs[q][0], ch = cs[q][1], st = cs[q][4];
        const int64_t dd[4] = { 1, ch, cs[q][2], cs[q][3] };
        const ki_shape decl = ki_shape_make(4, dd);
        const ki_layer_ops *ops;
        void *plain, *pdw, *fused;
        /* refused: 36 channels; a Hardswish after the depthwise layer; at avx512 20x20 */
        if (q == 0) {
            const int64_t d20[4] = { 1, ch, 20, 20 }, d36[4] = { 1, 36, 14, 14 };
            const ki_shape decl20 = ki_shape_make(4, d20), decl36 = ki_shape_make(4, d36);
            assert_int_equal(ovdw_takes(&pw, &dw, &r1, NULL, &wt, ic, ch, st, &decl20),
                             ki_cpu_isa() == KI_ISA_AVX2);
            assert_false(ovdw_takes(&pw, &dw, &r1, NULL, &wt, ic, 36, st, &decl36));
        }
        assert_int_equal(ovdw_takes(&pw, &dw, &r1, &hsw, &wt, ic, ch, st, &decl), fuses);
        if (!fused_trio(&pw, &r1, &dw, &r2, fuses, &ops, &plain, &pdw, &fused)) {
            continue;
        }
        const int64_t sizes[][4] = { { 1, ic, cs[q][2], cs[q][3] },
                                     { 2, ic, cs[q][2], cs[q][3] },
                                     { 1, ic, 96, 96 },
                                     { 1, ic, 3, 3 } };
        fused_equals_pair(ops, plain, pdw, fused, sizes, sizeof sizes / sizeof sizes[0], ic, x, &s,
                          100 + q);
        ops->destroy(plain), ops->destroy(pdw), ops->destroy(fused);
    }
}

static void test_ovdw_fuse(void **unused)
{
    (void)unused;
    at_each_level(ovdw_fuse_at_level);
}

/* A 1x1 layer ic -> ch and the 3x3 depthwise layer after it (their ReLU6s), fused (a channel-block
 * step when the depthwise input is declared h x h and small, bands when large), take the 1x1 layer
 * after them (pj, ch -> oc, created: fuse_state) as their own: after a channel-block step at AVX2
 * when the depthwise channels come in halves of whole eight-channel groups (ch % 16 == 0; pj's OV
 * weights made at create for its declared input), after bands at AVX2 and AVX-512 when pj runs
 * on the GEMM (nothing declared: no OV weights); then a residual add after it. The fused layer
 * equals the four layers run one after another (pj with its own residual), bit for bit: at the
 * declared size, batch 2, and sizes that take the planes (96x96, 3x3) or the projection on its
 * own after the bands (3x3: no GEMM), on 1-3 threads. Returns whether it took pj. */
static bool ovpj_case(int64_t ic, int64_t ch, int64_t oc, int64_t h, int64_t st, bool decl_pj,
                      const float *w1, const float *b1, const float *w2, const float *b2,
                      const float *w3, const float *b3, uint64_t *s)
{
    const int64_t dd[4] = { 1, ch, h, h };
    const ki_shape decl = ki_shape_make(4, dd);
    const bool res = st == 1 && ic == oc;
    top pw, r1, dw, r2, pj, add;
    top_conv_like(&pw, "nn.Conv2d", ic, ch, 1, 1, 1, w1, b1);
    top_init(&r1, "nn.ReLU6", 1, 1);
    dw_conv(&dw, ch, st, 3, w2, b2, &decl);
    top_init(&r2, "nn.ReLU6", 1, 1);
    const int64_t h2 = (h - 1) / st + 1, dp[4] = { 1, ch, h2, h2 };
    const ki_shape declp = ki_shape_make(4, dp);
    top_conv_like(&pj, "nn.Conv2d", ch, oc, 1, 1, 1, w3, b3);
    pj.d.input_decl = decl_pj ? &declp : NULL;
    top_init(&add, "pnnx.Expression", 2, 1);
    top_str(&add, "expr", "add(@0,@1)");
    const ki_layer_ops *ops;
    void *a, *d, *p, *f, *pf;
    bool taken = false;
    ki_error err = { 0 };
    assert_true(fused_trio(&pw, &r1, &dw, &r2, true, &ops, &a, &d, &f));
    assert_int_equal(top_create(&pj, &ops, &p, &err), KI_OK);
    assert_int_equal(top_create(&pj, &ops, &pf, &err), KI_OK);
    assert_true(!res || ops->fuse(p, &add.d, 1));
    const bool took = ops->fuse_state(f, &pj.d, ops, pf, 0, &taken);
    assert_int_equal(took, taken);
    if (!took) {
        assert_false(ops->fuse(f, &pj.d, 0));
        ops->destroy(a), ops->destroy(d), ops->destroy(p), ops->destroy(f), ops->destroy(pf);
        return false;
    }
    assert_false(ops->fuse_state(f, &pj.d, ops, p, 0, &taken)); /* one projection */
    assert_false(taken);
    assert_true(!res || ops->fuse(f, &add.d, 1));
    const int64_t sizes[][2] = { { 1, h }, { 2, h }, { 1, 96 }, { 1, 3 } };
    float *x = malloc((size_t)(2 * ic * (h > 96 ? h : 96) * (h > 96 ? h : 96)) * sizeof *x);
    assert_non_null(x);
    for (int z = 0; z < 4; z++) {
        const int64_t di[4] = { sizes[z][0], ic, sizes[z][1], sizes[z][1] };
        ki_tensor in[2] = { { ki_shape_make(4, di), x }, { ki_shape_make(4, di), x } };
        ki_tensor m1, m2[2], want, out;
        trng_fill(s, x, (size_t)ki_shape_count(&in[0].shape));
        for (int th = 1; th <= 3; th++) {
            assert_int_equal(top_run(ops, a, in, 1, &m1, 1, th, &err), KI_OK);
            assert_int_equal(top_run(ops, d, &m1, 1, &m2[0], 1, th, &err), KI_OK);
            m2[1] = in[0];
            assert_int_equal(top_run(ops, p, m2, res ? 2 : 1, &want, 1, th, &err), KI_OK);
            assert_int_equal(top_run(ops, f, in, res ? 2 : 1, &out, 1, th, &err), KI_OK);
            assert_true(ki_shape_equal(&out.shape, &want.shape));
            if (memcmp(out.data, want.data, (size_t)ki_shape_count(&want.shape) * sizeof(float)) !=
                0) {
                fail_msg("%ld -> %ld -> %ld, %ldx%ld stride %ld, size %d, %d threads: differs",
                         (long)ic, (long)ch, (long)oc, (long)h, (long)h, (long)st, z, th);
            }
            free(m1.data), free(m2[0].data), free(want.data), free(out.data);
        }
    }
    free(x);
    ops->destroy(a), ops->destroy(d), ops->destroy(p), ops->destroy(f); /* f owns pf */
    return true;
}

static void ovpj_fuse_at_level(void)
{
    enum { CHMAX = 192, ICMAX = 64, OCMAX = 64 };
    static float w1[CHMAX * ICMAX], b1[CHMAX], w2[CHMAX * 9], b2[CHMAX], w3[OCMAX * CHMAX],
        b3[OCMAX];
    /* planes that take bands: 48 channels of at least twice L2 */
    int64_t hb = 8;
    while (48 * hb * hb * (int64_t)sizeof(float) < 2 * (int64_t)ki_cpu_get()->l2) {
        hb += 8;
    }
    const int64_t cs[][6] = { /* in, expanded, out channels, declared size, stride, bands */
                              { 32, 192, 32, 14, 1, 0 }, /* projection split over k */
                              { 64, 192, 64, 7, 1, 0 },  /* by channel blocks */
                              { 24, 144, 40, 14, 2, 0 }, { 16, 40, 16, 14, 1, 0 }, /* 40: refused */
                              { 16, 48, 16, hb, 1, 1 },  { 16, 48, 24, hb, 2, 1 }
    };
    uint64_t s = 31;
    trng_fill(&s, w1, sizeof w1 / 4), trng_fill(&s, b1, CHMAX);
    trng_fill(&s, w2, sizeof w2 / 4), trng_fill(&s, b2, CHMAX);
    trng_fill(&s, w3, sizeof w3 / 4), trng_fill(&s, b3, OCMAX);
    if (ki_cpu_isa() < KI_ISA_AVX2) {
        return; /* no channel-block step or bands to take it */
    }
    for (int q = 0; q < 6; q++) {
        const bool bands = cs[q][5];
        const bool took = ovpj_case(cs[q][0], cs[q][1], cs[q][2], cs[q][3], cs[q][4], !bands, w1,
                                    b1, w2, b2, w3, b3, &s);
        assert_int_equal(took, bands || (ki_cpu_isa() == KI_ISA_AVX2 && cs[q][1] % 16 == 0));
    }
}

static void test_ovpj_fuse(void **unused)
{
    (void)unused;
    at_each_level(ovpj_fuse_at_level);
}

/* With AVX2 or AVX-512, a stem on the direct path or a 1x1 layer takes a dense 3x3 stride-2
 * layer after it (and its SiLU) when the data between them is declared large and the dense
 * layer's weights and packed panels fit half of L2 (yolov5s's stem and the 32 -> 64 layer after
 * it): the fused layer equals the two, bit for bit, whatever the size (several bands per thread,
 * bands cut at the bottom, odd widths, planes of one to three rows, batch 2), on 1-3 threads;
 * also with a 6x6 stride-2 stem on space-to-depth Winograd, whose runs of rows a band may start
 * inside.
 * Refused: a dense layer too large for that (256 -> 256), a stride-1 one (no 3-wide stride-2
 * packing), and no fusion at the generic level. */
static void pwdw_dense_at_level(void)
{
    enum { IC = 24, CH = 32, OC = 40, BIG = 256 };
    static float w1[CH * IC], b1[CH], ws[CH * 3 * 9], w2[OC * CH * 9], b2[OC], wb[BIG * BIG * 9];
    static float w6[CH * 3 * 36], x[2 * IC * 90 * 122];
    static const int64_t sizes[][4] = { { 1, IC, 90, 122 }, { 2, IC, 30, 34 }, { 1, IC, 3, 9 },
                                        { 1, IC, 17, 16 },  { 2, IC, 1, 5 },   { 1, IC, 61, 37 },
                                        { 1, IC, 2, 40 } };
    /* for the 6x6 stem (at least 2 rows and columns); 160 x 200: a thread's first band starting
     * inside a run of its rows on 3 threads */
    static const int64_t sizes6[][4] = { { 1, 3, 90, 122 }, { 2, 3, 30, 34 },  { 1, 3, 2, 9 },
                                         { 1, 3, 17, 16 },  { 2, 3, 2, 5 },    { 1, 3, 61, 37 },
                                         { 1, 3, 2, 40 },   { 1, 3, 160, 200 } };
    uint64_t s = 23;
    trng_fill(&s, w1, sizeof w1 / 4), trng_fill(&s, b1, CH), trng_fill(&s, ws, sizeof ws / 4);
    trng_fill(&s, w6, sizeof w6 / 4);
    trng_fill(&s, w2, sizeof w2 / 4), trng_fill(&s, b2, OC);
    const int64_t big[4] = { 1, CH, 320, 320 }, bigb[4] = { 1, BIG, 320, 320 };
    const ki_shape decl = ki_shape_make(4, big), declb = ki_shape_make(4, bigb);
    top pw, stem, stem6, silu1, silu2, dense, s1, huge, pwb;
    top_conv_like(&pw, "nn.Conv2d", IC, CH, 1, 1, 1, w1, b1);
    stem_conv(&stem, 3, CH, 3, ws, b1); /* 3 -> 32 channels, 3x3 stride 2: the direct path */
    /* 3 -> 32 channels, 6x6 stride 2, padding 2: space-to-depth Winograd */
    const int64_t wd6[4] = { CH, 3, 6, 6 }, nb6 = CH;
    top_init(&stem6, "nn.Conv2d", 1, 1);
    top_attr(&stem6, "weight", 4, wd6, w6);
    top_attr(&stem6, "bias", 1, &nb6, b1);
    top_ints2(&stem6, "stride", 2, 2);
    top_ints2(&stem6, "padding", 2, 2);
    top_init(&silu1, "nn.SiLU", 1, 1);
    top_init(&silu2, "nn.SiLU", 1, 1);
    stem_conv(&dense, CH, OC, 3, w2, b2); /* 32 -> 40, 3x3 stride 2, padding 1 */
    dense.d.input_decl = &decl;
    top_conv_like(&s1, "nn.Conv2d", CH, OC, 3, 3, 1, w2, b2); /* stride 1 */
    top_ints2(&s1, "padding", 1, 1);
    s1.d.input_decl = &decl;
    top_conv_like(&pwb, "nn.Conv2d", IC, BIG, 1, 1, 1, wb, NULL);
    stem_conv(&huge, BIG, BIG, 3, wb, NULL);
    huge.d.input_decl = &declb;
    const bool fuses = ki_cpu_isa() >= KI_ISA_AVX2;
    const ki_layer_ops *ops;
    void *t;
    ki_error err = { 0 };
    /* the refusals */
    assert_int_equal(top_create(&pwb, &ops, &t, &err), KI_OK);
    assert_true(ops->fuse(t, &silu1.d, 0));
    assert_false(ops->fuse(t, &huge.d, 0));
    ops->destroy(t);
    assert_int_equal(top_create(&pw, &ops, &t, &err), KI_OK);
    assert_false(ops->fuse(t, &s1.d, 0));
    ops->destroy(t);
    for (int q = 0; q < 3; q++) {
        const top *first = q == 0 ? &stem : q == 1 ? &pw : &stem6;
        const int64_t ic = q == 1 ? IC : 3;
        void *plain, *pd, *fused;
        assert_int_equal(top_create(first, &ops, &plain, &err), KI_OK);
        /* the pair's second layer without the declared input, which would give it the
         * two-phase stride-2 Winograd (conv2d_ws2.c, other products) instead of the rows the
         * bands compute */
        top dense_alone = dense; /* its params and attributes still those of dense */
        dense_alone.d.input_decl = NULL;
        assert_int_equal(top_create(&dense_alone, &ops, &pd, &err), KI_OK);
        assert_int_equal(top_create(first, &ops, &fused, &err), KI_OK);
        assert_true(ops->fuse(plain, &silu1.d, 0));
        assert_true(ops->fuse(pd, &silu2.d, 0));
        assert_true(ops->fuse(fused, &silu1.d, 0));
        assert_int_equal(ops->fuse(fused, &dense.d, 0), fuses);
        if (!fuses) {
            ops->destroy(plain), ops->destroy(pd), ops->destroy(fused);
            continue;
        }
        assert_true(ops->fuse(fused, &silu2.d, 0));
        assert_false(ops->fuse(fused, &silu1.d, 0)); /* one activation */
        if (q == 2) {
            char name[96];
            const ki_shape in6 = ki_shape_make(4, sizes6[0]);
            ops->describe(fused, &in6, 1, name, sizeof name);
            assert_non_null(strstr(name, "space-to-depth winograd+conv bands"));
            fused_equals_pair(ops, plain, pd, fused, sizes6, sizeof sizes6 / sizeof sizes6[0], ic,
                              x, &s, q);
        } else {
            fused_equals_pair(ops, plain, pd, fused, sizes, sizeof sizes / sizeof sizes[0], ic, x,
                              &s, q);
        }
        ops->destroy(plain), ops->destroy(pd), ops->destroy(fused);
    }
}

static void test_pwdw_dense(void **unused)
{
    (void)unused;
    at_each_level(pwdw_dense_at_level);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_random),
        cmocka_unit_test(test_gemm_c_room),
        cmocka_unit_test(test_gemm_bare),
        cmocka_unit_test(test_sgemm_modes),
        cmocka_unit_test(test_ukernel16),
        cmocka_unit_test(test_pack_eo),
        cmocka_unit_test(test_epilogue_avx2),
        cmocka_unit_test(test_epilogue_avx2_silu),
        cmocka_unit_test(test_epilogue_avx2_spans),
        cmocka_unit_test(test_epilogue_avx512_same),
        cmocka_unit_test(test_transpose_simd),
        cmocka_unit_test(test_epilogue_avx2_gelu),
        cmocka_unit_test(test_fuse_hook),
        cmocka_unit_test(test_residual_fuse),
        cmocka_unit_test(test_linear_fuse),
        cmocka_unit_test(test_pool_fuse),
        cmocka_unit_test(test_pwdw_fuse),
        cmocka_unit_test(test_ovdw_fuse),
        cmocka_unit_test(test_ovpj_fuse),
        cmocka_unit_test(test_pwdw_dense),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
