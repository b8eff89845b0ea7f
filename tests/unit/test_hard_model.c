/* test_hard_model.c - regression tests for fuzz-model findings in model loading (core/weights.c,
 * core/graph.c) and in planning and running a session (layers/shape_slice.c,
 * layers/shape_reduce.c).
 * Each test names the input that once misbehaved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../core/kinfer.h"

#define CONV_BIN "tests/data/ops/conv_basic/model.pnnx.bin"

/* Writes n bytes to a fresh temporary file whose name goes to path. */
static void temp_file(char *path, const void *p, size_t n)
{
    strcpy(path, "/tmp/ki_hard_model_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    close(fd);
}

static ki_status load_text(const char *param, const char *bin, ki_error *err)
{
    char path[64];
    temp_file(path, param, strlen(param));
    ki_model *m = NULL;
    ki_status st = ki_model_load(path, bin, NULL, &m, err);
    ki_model_destroy(m);
    remove(path);
    return st;
}

/* fuzz-model finding: the weight block was allocated from the declared attribute shapes before
 * any entry was checked, so `@weight=(16,1,77675173,3)f32` asked for 14.9 GB. Now every entry
 * is checked first; 128 GiB of declared attributes fail on the size of the first entry. */
static void test_declared_weights_not_allocated(void **state)
{
    (void)state;
    const char *param =
        "7767517\n3 2\n"
        "pnnx.Input in 0 1 0 #0=(1,3,20,24)f32\n"
        "nn.Conv2d conv2d_0 1 1 0 1 bias=True dilation=(1,1) groups=1 in_channels=3 "
        "kernel_size=(3,3) out_channels=16 padding=(1,1) padding_mode=zeros stride=(1,1) "
        "@bias=(8,2147483648)f32 @weight=(8,2147483648)f32\n"
        "pnnx.Output out 1 0 1\n";
    ki_error err;
    assert_int_equal(load_text(param, CONV_BIN, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "entry 'conv2d_0.bias' has 64 bytes, but @bias declares "
                                    "17179869184 f32 elements"));
}

/* The fuzzer's own input (param text, NUL, bin bytes): must fail without running out of memory. */
static void test_fuzz_input_oom_weights(void **state)
{
    (void)state;
    FILE *f = fopen("tests/malformed/crashes/model_oom_weights.fuzz", "rb");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    const char *nul = memchr(buf, 0, n);
    assert_non_null(nul);
    size_t plen = (size_t)(nul - buf);
    char ppath[64], bpath[64];
    temp_file(ppath, buf, plen);
    temp_file(bpath, nul + 1, n - plen - 1);
    ki_model *m = NULL;
    ki_error err;
    ki_status st = ki_model_load(ppath, bpath, NULL, &m, &err);
    ki_model_destroy(m);
    remove(ppath);
    remove(bpath);
    assert_int_not_equal(st, KI_OK);
    assert_int_not_equal(st, KI_ERR_NOMEM);
}

/* A finding's input: param text only (no NUL, no bin), loaded as the param file it is. */
static ki_status load_crash(const char *name, ki_model **m, ki_error *err)
{
    char path[128];
    snprintf(path, sizeof path, "tests/malformed/crashes/%s", name);
    *m = NULL;
    return ki_model_load(path, NULL, NULL, m, err);
}

/* fuzz-model finding: a pnnx.Output with an output, which an nn.Identity (a view) read; that
 * operand had no buffer, so the planner read an unset slot (SEGV in plan_memory). */
static void test_fuzz_input_output_with_output(void **state)
{
    (void)state;
    ki_model *m;
    ki_error err;
    assert_int_equal(load_crash("model_output_with_output.fuzz", &m, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, ":4: op 'out0' (pnnx.Output) has 1 output; it must have none"));
    ki_model_destroy(m);
}

/* fuzz-model finding: x[0:1:1333333333333333333] on (2,3,4); step x stride overflowed int64
 * (UBSan). The slice is x[0:1], the input's first 12 values. */
static void test_fuzz_input_slice_huge_step(void **state)
{
    (void)state;
    ki_model *m;
    ki_error err;
    assert_int_equal(load_crash("model_slice_huge_step.fuzz", &m, &err), KI_OK);
    ki_shape in = ki_shape_make(3, (int64_t[]){ 2, 3, 4 });
    ki_session_options so = { 1, 0 };
    ki_session *s = NULL;
    assert_int_equal(ki_session_create(m, &in, 1, &so, &s, &err), KI_OK);
    ki_tensor x = ki_session_input(s, 0);
    for (int i = 0; i < 24; i++) {
        x.data[i] = (float)i;
    }
    assert_int_equal(ki_session_run(s, &err), KI_OK);
    ki_tensor y = ki_session_output(s, 0);
    assert_int_equal(ki_shape_count(&y.shape), 12);
    for (int i = 0; i < 12; i++) {
        assert_true(y.data[i] == (float)i);
    }
    ki_session_destroy(s);
    ki_model_destroy(m);
}

/* fuzz-model finding: torch.sum over dims (0, 3) of a (0,5,6,7) input folds no elements, and
 * read the input's first element anyway, past the session's buffers (ASan). PyTorch's sum of
 * nothing is 0: output 3 is (5,6) of zeros. */
static void test_fuzz_input_sum_of_none(void **state)
{
    (void)state;
    ki_model *m;
    ki_error err;
    assert_int_equal(load_crash("model_sum_of_none.fuzz", &m, &err), KI_OK);
    ki_shape in = ki_shape_make(4, (int64_t[]){ 0, 5, 6, 7 });
    ki_session_options so = { 1, 0 };
    ki_session *s = NULL;
    assert_int_equal(ki_session_create(m, &in, 1, &so, &s, &err), KI_OK);
    assert_int_equal(ki_session_run(s, &err), KI_OK);
    ki_tensor y = ki_session_output(s, 3);
    assert_int_equal(y.shape.ndim, 2);
    assert_int_equal(ki_shape_count(&y.shape), 30);
    for (int i = 0; i < 30; i++) {
        assert_true(y.data[i] == 0.0f);
    }
    ki_session_destroy(s);
    ki_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declared_weights_not_allocated),
        cmocka_unit_test(test_fuzz_input_oom_weights),
        cmocka_unit_test(test_fuzz_input_output_with_output),
        cmocka_unit_test(test_fuzz_input_slice_huge_step),
        cmocka_unit_test(test_fuzz_input_sum_of_none),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
