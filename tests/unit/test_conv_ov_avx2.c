/* test_conv_ov_avx2.c - the AVX2+FMA OV micro-kernel and transposing tile store of nn.Conv2d
 * against the plain-C ones: every pixel count, several k (one row, odd, one k block, more),
 * accumulating or not, with and without bias and clamp, a NaN kept; the store bit for bit. */
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
#define MAX_K 300

typedef struct uk_case {
    int64_t k, ldb;
    int pw;
    bool acc;
    const float *bias;
    float lo, hi;
} uk_case;

/* Runs both kernels on case u (a, b, t0 the inputs) and compares the tiles. */
static void uk_check(const uk_case *u, const float *a, const float *b, const float *t0)
{
    float want[KI_OV_PW_MAX * KI_OV_MV], got[KI_OV_PW_MAX * KI_OV_MV];
    size_t n = (size_t)u->pw * KI_OV_MV;
    memcpy(want, t0, n * sizeof *want);
    memcpy(got, t0, n * sizeof *got);
    ki_ov_ukernel_ref(u->k, a, b, u->pw, u->ldb, u->acc, u->bias, u->lo, u->hi, want, KI_OV_NO_PF);
    /* asking the cache for lines (here the weights themselves) changes nothing computed */
    const ki_ov_pf pf = { (const char *)(const void *)a, u->k };
    ki_ov_ukernel_avx2(u->k, a, b, u->pw, u->ldb, u->acc, u->bias, u->lo, u->hi, got, pf);
    long bad = tclose(got, want, n, 1e-5f, 1e-5f); /* FMA against separate mul and add */
    if (bad >= 0) {
        fail_msg("pw %d k %ld acc %d bias %d clamp [%g, %g]: t[%ld] = %.9g, want %.9g", u->pw,
                 (long)u->k, u->acc, u->bias != NULL, u->lo, u->hi, bad, got[bad], want[bad]);
    }
}

static void test_ov_ukernel_avx2(void **unused)
{
    (void)unused;
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    static const int64_t ks[4] = { 1, 7, 128, MAX_K };
    const int64_t ldb_max = KI_OV_PW_MAX + 4;
    float *a = aligned_alloc(64, MAX_K * KI_OV_MV * sizeof *a);
    float *b = malloc((size_t)(MAX_K * ldb_max) * sizeof *b);
    float bias[KI_OV_MV], t0[KI_OV_PW_MAX * KI_OV_MV];
    uint64_t s = 0x5EED0A5ull;
    for (int pw = 1; pw <= KI_OV_PW_MAX; pw++) {
        for (int c = 0; c < 4 * 8; c++) {
            /* every k with every acc, bias and clamp choice; rows of b padded or not */
            bool clamp = (c / 16) & 1;
            uk_case u = { .k = ks[c % 4], .ldb = pw + (c % 3 == 0 ? 0 : (c % 4) + 1), .pw = pw };
            u.acc = (c / 4) & 1, u.bias = (c / 8) & 1 ? bias : NULL;
            u.lo = clamp ? -0.3f : -INFINITY, u.hi = clamp ? 0.4f : INFINITY;
            trng_fill(&s, a, (size_t)(u.k * KI_OV_MV));
            trng_fill(&s, b, (size_t)(u.k * u.ldb));
            trng_fill(&s, bias, KI_OV_MV);
            trng_fill(&s, t0, (size_t)pw * KI_OV_MV);
            uk_check(&u, a, b, t0);
        }
    }
    /* a NaN pixel stays NaN through the bias and the clamp; its neighbours are unaffected */
    uk_case u = { 7, 5, 5, true, bias, -0.3f, 0.4f };
    b[3 * u.ldb + 2] = NAN;
    uk_check(&u, a, b, t0);
    free(a);
    free(b);
}

/* The eight-channel-group kernel (ki_ov_ukernel8_avx2) against its plain form, and bit for bit
 * against ki_ov_ukernel_avx2 on the same values laid out as planes: every pixel count, k of one
 * group, one k block and more, groups ldb apart with and without a gap, acc, bias, clamp. */
static void test_ov_ukernel8_avx2(void **unused)
{
    (void)unused;
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    enum { K8 = 296 };
    static const int64_t ks[3] = { 8, 128, K8 };
    const int64_t g_max = (KI_OV_PW_MAX + 3) * 8;
    float *a = aligned_alloc(64, K8 * KI_OV_MV * sizeof *a);
    float *b8 = malloc((size_t)(K8 / 8 * g_max) * sizeof *b8);
    float *bp = malloc((size_t)(K8 * KI_OV_PW_MAX) * sizeof *bp);
    float bias[KI_OV_MV], t0[KI_OV_PW_MAX * KI_OV_MV];
    float want[KI_OV_PW_MAX * KI_OV_MV], got[KI_OV_PW_MAX * KI_OV_MV], pl[KI_OV_PW_MAX * KI_OV_MV];
    uint64_t s = 0x8C0A5ull;
    for (int pw = 1; pw <= KI_OV_PW_MAX; pw++) {
        for (int c = 0; c < 3 * 8; c++) {
            const int64_t k = ks[c % 3], ldb = pw * 8 + (c % 2 ? 24 : 0);
            const bool acc = (c / 3) & 1, clamp = (c / 12) & 1;
            const float *bi = (c / 6) & 1 ? bias : NULL;
            const float lo = clamp ? -0.3f : -INFINITY, hi = clamp ? 0.4f : INFINITY;
            trng_fill(&s, a, (size_t)(k * KI_OV_MV));
            trng_fill(&s, b8, (size_t)(k / 8 * ldb));
            trng_fill(&s, bias, KI_OV_MV);
            trng_fill(&s, t0, (size_t)pw * KI_OV_MV);
            if (pw == 4 && c == 5) {
                b8[ldb + 2 * 8 + 3] = NAN; /* channel 11 of pixel 2: NaN through bias and clamp */
            }
            for (int64_t q = 0; q < k; q++) { /* the same values as planes, rows pw apart */
                for (int j = 0; j < pw; j++) {
                    bp[q * pw + j] = b8[q / 8 * ldb + j * 8 + q % 8];
                }
            }
            const size_t n = (size_t)pw * KI_OV_MV;
            memcpy(want, t0, sizeof want);
            memcpy(got, t0, sizeof got);
            memcpy(pl, t0, sizeof pl);
            ki_ov_ukernel8_ref(k, a, b8, pw, ldb, acc, bi, lo, hi, want, KI_OV_NO_PF);
            const ki_ov_pf pf = { (const char *)(const void *)a, k };
            ki_ov_ukernel8_avx2(k, a, b8, pw, ldb, acc, bi, lo, hi, got, pf);
            ki_ov_ukernel_avx2(k, a, bp, pw, pw, acc, bi, lo, hi, pl, KI_OV_NO_PF);
            long bad = tclose(got, want, n, 1e-5f, 1e-5f);
            if (bad >= 0) {
                fail_msg("pw %d k %ld acc %d: t[%ld] = %.9g, want %.9g", pw, (long)k, acc, bad,
                         got[bad], want[bad]);
            }
            if (memcmp(got, pl, n * sizeof *got) != 0) {
                fail_msg("pw %d k %ld acc %d: not the bits of the planes' kernel", pw, (long)k,
                         acc);
            }
        }
    }
    free(a);
    free(b8);
    free(bp);
}

/* Both stores of tile t (rows x nr, row stride ld, res or NULL) into sentinel-filled outputs:
 * the same bits everywhere, including what neither may touch. */
static void st_check(const float *t, int64_t rows, int64_t nr, int64_t ld, const float *res,
                     float lo, float hi)
{
    enum { N = KI_OV_MV * (KI_OV_PW_MAX + 3) };
    float want[N], got[N];
    for (int i = 0; i < N; i++) {
        want[i] = got[i] = -12345.0f;
    }
    ki_ov_tile_store(t, rows, nr, want, ld, res, lo, hi);
    ki_ov_tile_store_avx2(t, rows, nr, got, ld, res, lo, hi);
    if (memcmp(want, got, sizeof want) != 0) {
        fail_msg("rows %ld nr %ld ld %ld res %d clamp [%g, %g]", (long)rows, (long)nr, (long)ld,
                 res != NULL, lo, hi);
    }
}

static void test_ov_tile_store_avx2(void **unused)
{
    (void)unused;
    if (ki_cpu_get()->isa < KI_ISA_AVX2) {
        skip();
    }
    static const int64_t rows_set[6] = { 1, 5, 8, 13, 31, 32 };
    float t[KI_OV_PW_MAX * KI_OV_MV], res[KI_OV_MV * (KI_OV_PW_MAX + 3)];
    uint64_t s = 0x5707Eull;
    trng_fill(&s, t, sizeof t / sizeof *t);
    trng_fill(&s, res, sizeof res / sizeof *res);
    t[2 * KI_OV_MV + 9] = NAN; /* pixel 2 of channel 9: kept, bit for bit */
    for (int64_t nr = 1; nr <= KI_OV_PW_MAX; nr++) {
        for (int r = 0; r < 6; r++) {
            for (int c = 0; c < 4; c++) {
                int64_t ld = nr + (c & 1 ? 3 : 0);
                float lo = c & 2 ? -0.25f : -INFINITY, hi = c & 2 ? 0.5f : INFINITY;
                st_check(t, rows_set[r], nr, ld, NULL, lo, hi);
                st_check(t, rows_set[r], nr, ld, res, lo, hi);
            }
        }
    }
}

#else
/* The x86 kernels are not built for this target: each test is skipped. */
static void test_ov_ukernel_avx2(void **unused)
{
    (void)unused;
    skip();
}

static void test_ov_ukernel8_avx2(void **unused)
{
    (void)unused;
    skip();
}

static void test_ov_tile_store_avx2(void **unused)
{
    (void)unused;
    skip();
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ov_ukernel_avx2),
        cmocka_unit_test(test_ov_ukernel8_avx2),
        cmocka_unit_test(test_ov_tile_store_avx2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
