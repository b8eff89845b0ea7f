/* test_linear.c - nn.Linear, torch.matmul and torch.bmm: hand-computed cases, PyTorch's 1-D and
 * broadcasting rules, errors, and random shapes against naive loops at 1 and 2 threads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include "test_conv_util.h"

static void linear_op(top *t, int64_t in, int64_t out, const float *w, const float *b)
{
    int64_t wd[2] = { out, in };
    top_init(t, "nn.Linear", 1, 1);
    top_int(t, "in_features", in);
    top_int(t, "out_features", out);
    top_bool(t, "bias", b != NULL);
    top_attr(t, "weight", 2, wd, w);
    if (b) {
        top_attr(t, "bias", 1, &out, b);
    }
}

/* Runs a created op on inputs and compares with want (n_want values) at 1 and 2 threads. */
static void run_expect(const top *t, const ki_tensor *in, int n_in, int out_ndim, const int64_t *od,
                       const float *want)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_tensor out;
    if (top_create(t, &ops, &st, &err) != KI_OK) {
        fail_msg("create: %s", err.msg);
    }
    for (int th = 1; th <= 2; th++) {
        if (top_run(ops, st, in, n_in, &out, 1, th, &err) != KI_OK) {
            fail_msg("%s", err.msg);
        }
        assert_int_equal(out.shape.ndim, out_ndim);
        if (out_ndim > 0) {
            assert_memory_equal(out.shape.d, od, (size_t)out_ndim * sizeof *od);
        }
        for (int64_t i = 0; i < ki_shape_count(&out.shape); i++) {
            assert_float_equal(out.data[i], want[i], 1e-4);
        }
        free(out.data);
    }
    ops->destroy(st);
}

static void test_linear_hand(void **unused)
{
    (void)unused;
    static const float w[6] = { 1, 2, 3, -1, 0, 1 }, b[2] = { 10, 20 };
    static const float x[6] = { 1, 1, 1, 1, 2, 3 };
    top t;
    linear_op(&t, 3, 2, w, b);
    ki_tensor in = { ki_shape_make(2, (const int64_t[]){ 2, 3 }), (float *)x };
    run_expect(&t, &in, 1, 2, (const int64_t[]){ 2, 2 }, (const float[]){ 16, 20, 24, 22 });
    /* N-D: leading dims are rows; 1-D: a single row */
    in.shape = ki_shape_make(4, (const int64_t[]){ 1, 2, 1, 3 });
    run_expect(&t, &in, 1, 4, (const int64_t[]){ 1, 2, 1, 2 }, (const float[]){ 16, 20, 24, 22 });
    in.shape = ki_shape_make(1, (const int64_t[]){ 3 });
    linear_op(&t, 3, 2, w, NULL);
    run_expect(&t, &in, 1, 1, (const int64_t[]){ 2 }, (const float[]){ 6, 0 });
}

static void test_linear_errors(void **unused)
{
    (void)unused;
    static const float w[6] = { 0 };
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    top t;
    linear_op(&t, 3, 2, w, NULL);
    t.params[0].i = 4;
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "in_features"));
    linear_op(&t, 3, 2, w, NULL);
    t.params[2].i = 1; /* bias=True without @bias */
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_ERR_FORMAT);
    linear_op(&t, 3, 2, w, NULL);
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    ki_shape in = ki_shape_make(2, (const int64_t[]){ 4, 2 }), out;
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "in_features"));
    ops->destroy(st);
}

static void test_linear_random(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        int64_t in_f = trng_int(&s, 1, 40), out_f = trng_int(&s, 1, 30);
        int64_t d[3] = { trng_int(&s, 1, 3), trng_int(&s, 1, 9), in_f };
        size_t rows = (size_t)(d[0] * d[1]);
        float *w = malloc((size_t)(in_f * out_f) * 4), *b = malloc((size_t)out_f * 4);
        float *x = malloc(rows * (size_t)in_f * 4), *want = malloc(rows * (size_t)out_f * 4);
        trng_fill(&s, w, (size_t)(in_f * out_f)), trng_fill(&s, b, (size_t)out_f);
        trng_fill(&s, x, rows * (size_t)in_f);
        for (size_t r = 0; r < rows; r++) {
            for (int64_t o = 0; o < out_f; o++) {
                double acc = b[o];
                for (int64_t i = 0; i < in_f; i++) {
                    acc += (double)x[r * (size_t)in_f + (size_t)i] * w[o * in_f + i];
                }
                want[r * (size_t)out_f + (size_t)o] = (float)acc;
            }
        }
        top t;
        linear_op(&t, in_f, out_f, w, b);
        ki_tensor tin = { ki_shape_make(3, d), x };
        run_expect(&t, &tin, 1, 3, (const int64_t[]){ d[0], d[1], out_f }, want);
        free(w), free(b), free(x), free(want);
    }
}

static void mm_op(top *t, const char *type, const char *k0, const char *k1)
{
    top_init(t, type, 2, 1);
    t->in_keys[0] = k0;
    t->in_keys[1] = k1;
}

/* A classifier declared one row with 2 MiB or more of weights that are all exactly binary16
 * values keeps them as binary16 (with AVX-512): the same outputs, bit for bit, as the float32
 * layer (the same products in the same order), for one row and, row by row, for three (against
 * the float32 layer's sgemm within rounding), at 1 and 2 threads. Weights with one value that is
 * not binary16 stay float32 (the same outputs too). */
static void test_linear_half(void **unused)
{
    (void)unused;
    enum { IN = 603, OUT = 1001 }; /* 2.4 MB; odd sizes reach every tail of the dot product */
    float *w = malloc(sizeof(float) * IN * OUT), *b = malloc(sizeof(float) * OUT);
    float *x = malloc(sizeof(float) * 3 * IN);
    uint64_t s = 5;
    trng_fill(&s, x, 3 * IN), trng_fill(&s, b, OUT);
    for (int i = 0; i < IN * OUT; i++) { /* multiples of 2^-10 in [-2, 2): binary16 values */
        w[i] = (float)(trng_int(&s, -2048, 2047)) / 1024.0f;
    }
    const int64_t one[2] = { 1, IN };
    const ki_shape decl = ki_shape_make(2, one);
    for (int exact = 1; exact >= 0; exact--) {
        if (!exact) {
            w[IN * OUT / 2] = 1.0f / 3.0f;
        }
        top plain, half;
        linear_op(&plain, IN, OUT, w, b);
        linear_op(&half, IN, OUT, w, b);
        half.d.input_decl = &decl;
        const ki_layer_ops *ops;
        void *ps, *hs;
        ki_error err = { 0 };
        assert_int_equal(top_create(&plain, &ops, &ps, &err), KI_OK);
        assert_int_equal(top_create(&half, &ops, &hs, &err), KI_OK);
        for (int64_t rows = 1; rows <= 3; rows += 2) {
            const int64_t d[2] = { rows, IN };
            ki_tensor in = { ki_shape_make(2, d), x }, want, out;
            for (int th = 1; th <= 2; th++) {
                assert_int_equal(top_run(ops, ps, &in, 1, &want, 1, th, &err), KI_OK);
                assert_int_equal(top_run(ops, hs, &in, 1, &out, 1, th, &err), KI_OK);
                if (rows == 1) {
                    assert_memory_equal(out.data, want.data, sizeof(float) * OUT);
                } else {
                    assert_true(tclose(out.data, want.data, (size_t)(rows * OUT), 1e-4f, 1e-4f) <
                                0);
                }
                free(want.data), free(out.data);
            }
        }
        ops->destroy(ps), ops->destroy(hs);
    }
    free(w), free(b), free(x);
}

static void test_matmul_hand(void **unused)
{
    (void)unused;
    static const float a[6] = { 1, 2, 3, 4, 5, 6 }, v[3] = { 1, 0, -1 }, v2[2] = { 1, 1 };
    top t;
    mm_op(&t, "torch.matmul", "input", "other");
    /* 1-D . 1-D: a 0-d scalar */
    ki_tensor in[2] = { { ki_shape_make(1, (const int64_t[]){ 3 }), (float *)a },
                        { ki_shape_make(1, (const int64_t[]){ 3 }), (float *)v } };
    run_expect(&t, in, 2, 0, NULL, (const float[]){ -2 });
    /* (2,3) . (3): matrix-vector, (2) */
    in[0].shape = ki_shape_make(2, (const int64_t[]){ 2, 3 });
    run_expect(&t, in, 2, 1, (const int64_t[]){ 2 }, (const float[]){ -2, -2 });
    /* (2) . (2,3): vector-matrix, (3) */
    in[0] = (ki_tensor){ ki_shape_make(1, (const int64_t[]){ 2 }), (float *)v2 };
    in[1] = (ki_tensor){ ki_shape_make(2, (const int64_t[]){ 2, 3 }), (float *)a };
    run_expect(&t, in, 2, 1, (const int64_t[]){ 3 }, (const float[]){ 5, 7, 9 });
    /* inputs named in the other order: other is input 0 */
    mm_op(&t, "torch.matmul", "other", "input");
    ki_tensor sw[2] = { in[1], in[0] };
    run_expect(&t, sw, 2, 1, (const int64_t[]){ 3 }, (const float[]){ 5, 7, 9 });
    /* (2) . (2,2,3) with a batched right side: (2,3) */
    in[1].shape = ki_shape_make(3, (const int64_t[]){ 2, 1, 3 });
    mm_op(&t, "torch.matmul", NULL, NULL);
    in[0].shape = ki_shape_make(1, (const int64_t[]){ 1 });
    run_expect(&t, in, 2, 2, (const int64_t[]){ 2, 3 }, (const float[]){ 1, 2, 3, 4, 5, 6 });
}

static void test_matmul_errors(void **unused)
{
    (void)unused;
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    top t;
    ki_shape in[2], out;
    mm_op(&t, "torch.matmul", "input", "other");
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    in[0] = ki_shape_make(2, (const int64_t[]){ 2, 3 });
    in[1] = ki_shape_make(2, (const int64_t[]){ 2, 3 });
    assert_int_equal(ops->shape(st, in, 2, &out, 1, &err), KI_ERR_SHAPE);
    in[0] = ki_shape_make(3, (const int64_t[]){ 2, 2, 3 });
    in[1] = ki_shape_make(3, (const int64_t[]){ 3, 3, 2 });
    assert_int_equal(ops->shape(st, in, 2, &out, 1, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "broadcast"));
    in[0] = ki_shape_make(0, NULL);
    assert_int_equal(ops->shape(st, in, 2, &out, 1, &err), KI_ERR_SHAPE);
    ops->destroy(st);
    mm_op(&t, "torch.bmm", "input", "mat2");
    assert_int_equal(top_create(&t, &ops, &st, &err), KI_OK);
    in[0] = ki_shape_make(2, (const int64_t[]){ 2, 3 });
    in[1] = ki_shape_make(2, (const int64_t[]){ 3, 2 });
    assert_int_equal(ops->shape(st, in, 2, &out, 1, &err), KI_ERR_SHAPE);
    ops->destroy(st);
}

/* Naive batched product over the broadcast of (ba..., m, k) and (bb..., k, n), both 4-D. */
static void naive_bmm4(const int64_t *da, const int64_t *db, const float *a, const float *b,
                       float *c)
{
    int64_t m = da[2], k = da[3], n = db[3], b0 = da[0] > db[0] ? da[0] : db[0];
    int64_t b1 = da[1] > db[1] ? da[1] : db[1];
    for (int64_t i = 0; i < b0 * b1; i++) {
        int64_t i0 = i / b1, i1 = i % b1;
        const float *pa = a + ((i0 % da[0]) * da[1] + i1 % da[1]) * m * k;
        const float *pb = b + ((i0 % db[0]) * db[1] + i1 % db[1]) * k * n;
        for (int64_t r = 0; r < m * n; r++) {
            double acc = 0;
            for (int64_t j = 0; j < k; j++) {
                acc += (double)pa[r / n * k + j] * pb[j * n + r % n];
            }
            c[i * m * n + r] = (float)acc;
        }
    }
}

static void test_matmul_random(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint64_t s = seed * 0x9E3779B97F4A7C15ull;
        int64_t m = trng_int(&s, 1, 7), k = trng_int(&s, 0, 9), n = trng_int(&s, 1, 8);
        int64_t B0 = trng_int(&s, 1, 3), B1 = trng_int(&s, 1, 3);
        int64_t da[4] = { trng_int(&s, 0, 1) ? B0 : 1, trng_int(&s, 0, 1) ? B1 : 1, m, k };
        int64_t db[4] = { trng_int(&s, 0, 1) ? B0 : 1, trng_int(&s, 0, 1) ? B1 : 1, k, n };
        int64_t o0 = da[0] > db[0] ? da[0] : db[0], o1 = da[1] > db[1] ? da[1] : db[1];
        size_t na = (size_t)(da[0] * da[1] * m * k), nb = (size_t)(db[0] * db[1] * k * n);
        float *a = malloc(na * 4 + 4), *b = malloc(nb * 4 + 4);
        float *want = malloc((size_t)(o0 * o1 * m * n) * 4);
        trng_fill(&s, a, na), trng_fill(&s, b, nb);
        naive_bmm4(da, db, a, b, want);
        top t;
        mm_op(&t, "torch.matmul", "input", "other");
        ki_tensor in[2] = { { ki_shape_make(4, da), a }, { ki_shape_make(4, db), b } };
        run_expect(&t, in, 2, 4, (const int64_t[]){ o0, o1, m, n }, want);
        if (da[0] == db[0] && da[1] == 1 && db[1] == 1) { /* same data as bmm on 3-D */
            mm_op(&t, "torch.bmm", "input", "mat2");
            in[0].shape = ki_shape_make(3, (const int64_t[]){ da[0], m, k });
            in[1].shape = ki_shape_make(3, (const int64_t[]){ db[0], k, n });
            run_expect(&t, in, 2, 3, (const int64_t[]){ o0, m, n }, want);
        }
        free(a), free(b), free(want);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_hand),   cmocka_unit_test(test_linear_errors),
        cmocka_unit_test(test_linear_random), cmocka_unit_test(test_matmul_hand),
        cmocka_unit_test(test_matmul_errors), cmocka_unit_test(test_matmul_random),
        cmocka_unit_test(test_linear_half),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
