/* test_model.c - loading through the public API: unsupported operators, weights that do not
 * match their declaration, batch scaling, and session errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../cli/npy.h"
#include "../../core/kinfer.h"

#define MNIST "tests/data/nets/mnist_cnn/"

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/kinfer-test-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static ki_status load_text(const char *text, const char *bin, ki_error *err)
{
    char *p = write_temp(text);
    ki_model *m = NULL;
    ki_status st = ki_model_load(p, bin, NULL, &m, err);
    ki_model_destroy(m);
    unlink(p);
    free(p);
    return st;
}

static void test_unsupported_listed_once(void **state)
{
    (void)state;
    ki_error err;
    const char *t = "7767517\n6 5\npnnx.Input in 0 1 a\nfoo.Bar b1 1 1 a b\nfoo.Bar b2 1 1 b c\n"
                    "nn.ReLU r 1 1 c d\nzap.Zap z 1 1 d e\npnnx.Output out 1 0 e\n";
    assert_int_equal(load_text(t, NULL, &err), KI_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "3 operators of 2 unsupported types: foo.Bar x2, zap.Zap x1"));
}

static void test_weights_checked(void **state)
{
    (void)state;
    ki_error err;
    /* fc2.weight is (10,64) f32 in the bin; declaring it (10,65) must fail naming the entry */
    const char *bad =
        "7767517\n3 2\npnnx.Input in 0 1 a #a=(1,64)f32\n"
        "nn.Linear fc2 1 1 a b bias=True in_features=65 out_features=10 @bias=(10)f32 "
        "@weight=(10,65)f32\npnnx.Output out 1 0 b\n";
    assert_int_equal(load_text(bad, MNIST "model.pnnx.bin", &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "entry 'fc2.weight' has 2560 bytes"));
    assert_non_null(strstr(err.msg, ":4: op 'fc2'"));
    const char *missing = "7767517\n3 2\npnnx.Input in 0 1 a\n"
                          "nn.Linear fcX 1 1 a b bias=False in_features=64 out_features=10 "
                          "@weight=(10,64)f32\npnnx.Output out 1 0 b\n";
    assert_int_equal(load_text(missing, MNIST "model.pnnx.bin", &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "no entry 'fcX.weight'"));
    /* a layer-level mismatch: the weight does not fit in_features */
    const char *layer = "7767517\n3 2\npnnx.Input in 0 1 a\n"
                        "nn.Linear fc2 1 1 a b bias=True in_features=32 out_features=10 "
                        "@bias=(10)f32 @weight=(10,64)f32\npnnx.Output out 1 0 b\n";
    assert_int_not_equal(load_text(layer, MNIST "model.pnnx.bin", &err), KI_OK);
    assert_non_null(strstr(err.msg, "op 'fc2' (nn.Linear)"));
    assert_int_equal(load_text(layer, NULL, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "a .bin file is needed"));
}

static ki_session *mnist_session(const ki_model *m, int batch, const float *digits)
{
    int64_t d[4] = { batch, 1, 28, 28 };
    ki_shape s = ki_shape_make(4, d);
    ki_session_options so = { 2, 0 };
    ki_session *sess;
    ki_error err;
    if (ki_session_create(m, &s, 1, &so, &sess, &err) != KI_OK) {
        fail_msg("%s", err.msg);
    }
    memcpy(ki_session_input(sess, 0).data, digits, (size_t)batch * 784 * sizeof(float));
    assert_int_equal(ki_session_run(sess, &err), KI_OK);
    return sess;
}

/* A batch of N gives the same numbers as N single runs (static export, batch 1). */
static void test_batch_matches_single(void **state)
{
    (void)state;
    ki_model *m;
    ki_error err;
    ki_shape sh;
    float *x;
    assert_int_equal(
        ki_model_load(MNIST "model.pnnx.param", MNIST "model.pnnx.bin", NULL, &m, &err), KI_OK);
    assert_int_equal(ki_npy_read(MNIST "test1000_in0.npy", &sh, &x, &err), KI_OK);
    ki_session *big = mnist_session(m, 5, x);
    ki_tensor out = ki_session_output(big, 0);
    assert_int_equal(out.shape.d[0], 5);
    for (int i = 0; i < 5; i++) {
        ki_session *one = mnist_session(m, 1, x + (size_t)i * 784);
        ki_tensor o1 = ki_session_output(one, 0);
        for (int k = 0; k < 10; k++) {
            assert_float_equal(o1.data[k], out.data[i * 10 + k], 1e-5);
        }
        ki_session_destroy(one);
    }
    /* a second run of the same session gives the same numbers (nothing stale in the arena) */
    float first = out.data[7];
    assert_int_equal(ki_session_run(big, &err), KI_OK);
    assert_float_equal(ki_session_output(big, 0).data[7], first, 0);
    ki_session_destroy(big);
    free(x);
    ki_model_destroy(m);
}

static void test_session_errors(void **state)
{
    (void)state;
    ki_model *m;
    ki_error err;
    ki_session *s = NULL;
    assert_int_equal(
        ki_model_load(MNIST "model.pnnx.param", MNIST "model.pnnx.bin", NULL, &m, &err), KI_OK);
    int64_t wrong[4] = { 1, 3, 28, 28 };
    ki_shape sh = ki_shape_make(4, wrong);
    assert_int_equal(ki_session_create(m, &sh, 1, NULL, &s, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "expects (1,1,28,28)"));
    assert_int_equal(ki_session_create(m, &sh, 2, NULL, &s, &err), KI_ERR_SHAPE);
    int64_t huge[4] = { 1000000, 1, 28, 28 };
    sh = ki_shape_make(4, huge);
    ki_session_options so = { 1, (size_t)256 << 20 };
    assert_int_equal(ki_session_create(m, &sh, 1, &so, &s, &err), KI_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "MiB"));
    assert_null(s);
    ki_model_destroy(m);
}

/* Runs the graph `text` (one input of shape d, weights none) on x; returns the session. */
static ki_session *text_session(const char *text, const int64_t *d, const float *x, ki_model **m)
{
    ki_error err;
    char *p = write_temp(text);
    assert_int_equal(ki_model_load(p, NULL, NULL, m, &err), KI_OK);
    unlink(p);
    free(p);
    ki_shape sh = ki_shape_make(4, d);
    ki_session *s = NULL;
    ki_session_options so = { 2, 0 };
    assert_int_equal(ki_session_create(*m, &sh, 1, &so, &s, &err), KI_OK);
    ki_tensor in = ki_session_input(s, 0);
    memcpy(in.data, x, (size_t)ki_shape_count(&in.shape) * sizeof *x);
    assert_int_equal(ki_session_run(s, &err), KI_OK);
    return s;
}

/* torch.cat along the channels of a batch of one: the planner places the inputs inside the
 * output, so their producers write there and the cat copies nothing; the values are those of the
 * plain concatenation. Not when the inputs' runs interleave (a batch of two), nor for an input
 * that is also a model output (it keeps its own buffer). */
static void test_cat_in_place(void **state)
{
    (void)state;
    const char *t = "7767517\n5 4\npnnx.Input in 0 1 a\nnn.ReLU r 1 1 a b\n"
                    "nn.Sigmoid g 1 1 a c\ntorch.cat cat 2 1 b c d dim=1\npnnx.Output out 1 0 d\n";
    const char *t2 = "7767517\n5 4\npnnx.Input in 0 1 a\nnn.ReLU r 1 1 a b\n"
                     "nn.Sigmoid g 1 1 a c\ntorch.cat cat 2 1 b c d dim=1\npnnx.Output out 2 0 d b\n";
    enum { C = 16, HW = 16 };
    static float x[2 * C * HW];
    for (int i = 0; i < 2 * C * HW; i++) {
        x[i] = (float)(i % 37) / 9.0f - 2.0f;
    }
    for (int batch = 1; batch <= 2; batch++) {
        for (int pinned = 0; pinned < 2; pinned++) {
            const int64_t d[4] = { batch, C, 4, 4 };
            ki_model *m;
            ki_session *s = text_session(pinned ? t2 : t, d, x, &m);
            ki_tensor out = ki_session_output(s, 0);
            assert_int_equal(out.shape.d[1], 2 * C);
            for (int n = 0; n < batch; n++) {
                for (int i = 0; i < C * HW; i++) {
                    float v = x[n * C * HW + i];
                    assert_true(out.data[(2 * n) * C * HW + i] == (v > 0.0f ? v : 0.0f));
                    assert_float_equal(out.data[(2 * n + 1) * C * HW + i], 1.0 / (1.0 + exp(-v)),
                                       1e-6);
                }
            }
            /* the input (1 KiB a batch), the output (2 KiB) and, unless joined, b and c */
            size_t joined = (size_t)batch * 3 * C * HW * sizeof(float);
            size_t want = batch == 1 && !pinned ? joined : joined + (size_t)batch * 2 * C * HW * 4;
            assert_int_equal(ki_session_planned_bytes(s), want);
            ki_session_destroy(s);
            ki_model_destroy(m);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unsupported_listed_once),
        cmocka_unit_test(test_weights_checked),
        cmocka_unit_test(test_batch_matches_single),
        cmocka_unit_test(test_session_errors),
        cmocka_unit_test(test_cat_in_place),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
