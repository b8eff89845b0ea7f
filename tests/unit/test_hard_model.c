/* test_hard_model.c - regression tests for fuzz-model findings in model loading (core/weights.c).
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_declared_weights_not_allocated),
        cmocka_unit_test(test_fuzz_input_oom_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
