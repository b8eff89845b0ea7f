/* test_cli.c - the kinfer binary end to end: the README's sample, --save-dir round trip
 * (image preprocessing written as in0.npy gives the same outputs when fed back), exit codes. */
/* clang-format off */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
/* clang-format on */

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char kinfer[600];

/* Runs a shell command line with kinfer substituted for %K; returns the exit status and the
 * captured stdout in out (if given). */
static int run(const char *fmt, const char *arg, char *out, size_t n)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, fmt, kinfer, arg ? arg : "");
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = 0;
    char sink[4096];
    char *dst = out ? out : sink;
    size_t cap = out ? n : sizeof sink;
    for (;;) {
        size_t r = fread(dst + (out ? got : 0), 1, cap - 1 - (out ? got : 0), p);
        if (r == 0) {
            break;
        }
        got += r;
        if (out && got >= n - 1) {
            break;
        }
    }
    if (out) {
        out[got] = '\0';
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#define SAMPLE "samples/mnist_cnn/model.pnnx.param samples/mnist_cnn/model.pnnx.bin "

/* The README's main command: every bundled digit is classified as itself. */
static void test_sample_digits(void **state)
{
    (void)state;
    char out[16384];
    assert_int_equal(
        run("%s run " SAMPLE "samples/digits --topk 1 --json%s", NULL, out, sizeof out), 0);
    for (int d = 0; d < 10; d++) {
        char want[128];
        snprintf(want, sizeof want, "digit_%d.png\", \"index\": %d, \"top\": [{\"class\": %d,", d,
                 d, d);
        if (!strstr(out, want)) {
            fail_msg("digit %d not recognised; output:\n%s", d, out);
        }
    }
}

static void test_save_dir_round_trip(void **state)
{
    (void)state;
    char dir[] = "/tmp/kinfer-cli-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "samples/digits/digit_3.png --save-dir %s/a%%s",
             dir);
    assert_int_equal(run(cmd, NULL, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "%%s run " SAMPLE "%s/a/in0.npy --save-dir %s/b%%s", dir, dir);
    assert_int_equal(run(cmd, NULL, NULL, 0), 0);
    snprintf(cmd, sizeof cmd, "cmp %s/a/out0.npy %s/b/out0.npy && cmp %s/a/in0.npy %s/b/in0.npy",
             dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

static void test_exit_codes(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(run("%s --help%s", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "usage: kinfer COMMAND"));
    assert_int_equal(run("%s --version%s", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "kinfer "));
    assert_int_equal(run("%s 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s frobnicate 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s run 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(
        run("%s run " SAMPLE "samples/digits --threads zero 2>/dev/null%s", NULL, NULL, 0), 2);
    assert_int_equal(run("%s run " SAMPLE "no-such.png 2>&1%s", NULL, out, sizeof out), 1);
    assert_non_null(strstr(out, "no-such.png"));
    assert_int_equal(run("%s ops%s", NULL, out, sizeof out), 0);
    assert_non_null(strstr(out, "nn.Conv2d\n"));
    assert_non_null(strstr(out, "pnnx.Expression\n"));
}

int main(int argc, char **argv)
{
    (void)argc;
    /* the binary sits one level above this test: BUILD/tests/test_cli -> BUILD/kinfer */
    char self[600];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(kinfer, sizeof kinfer, "%s/../kinfer", dirname(self));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sample_digits),
        cmocka_unit_test(test_save_dir_round_trip),
        cmocka_unit_test(test_exit_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
