/* test_cpu.c - the CPU module: every level up to the CPU's can be set and is what the kernels
 * then get, a level above it is refused with a message naming what the CPU runs, the names
 * parse, the caches and cores are plausible; and the CLI's KINFER_ISA / --isa / --version, and
 * its default thread count under an affinity mask and OpenMP's binding. */
#define _GNU_SOURCE /* sched_getaffinity and the CPU_SET macros */
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
// clang-format off
#include <cmocka.h>
// clang-format on

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../../core/cpu.h"
#include "../../layers/gemm.h"

static void test_levels(void **unused)
{
    (void)unused;
    const ki_cpu_info *ci = ki_cpu_get();
    ki_error err;
    for (int l = KI_ISA_GENERIC; l < KI_ISA_COUNT; l++) {
        ki_status st = ki_cpu_set_isa((ki_isa)l, &err);
        if (l <= (int)ci->isa) {
            assert_int_equal(st, KI_OK);
            assert_int_equal(ki_cpu_isa(), l);
            assert_non_null(ki_gemm_ukernel_for((ki_isa)l));
        } else {
            assert_int_equal(st, KI_ERR_UNSUPPORTED);
            assert_non_null(strstr(err.msg, ki_isa_name(ci->isa)));
            assert_null(ki_gemm_ukernel_for((ki_isa)l));
        }
    }
    assert_int_equal(ki_cpu_set_isa(ci->isa, &err), KI_OK);
    assert_int_equal(ki_cpu_isa(), ci->isa);
}

static void test_names(void **unused)
{
    (void)unused;
    ki_isa v;
    for (int l = KI_ISA_GENERIC; l < KI_ISA_COUNT; l++) {
        assert_true(ki_isa_parse(ki_isa_name((ki_isa)l), &v));
        assert_int_equal(v, l);
    }
    assert_true(ki_isa_parse("ref", &v));
    assert_int_equal(v, KI_ISA_GENERIC);
    assert_false(ki_isa_parse("sse9", &v));
    assert_false(ki_isa_parse("", &v));
    assert_false(ki_isa_parse(NULL, &v));
}

static void test_caches(void **unused)
{
    (void)unused;
    const ki_cpu_info *ci = ki_cpu_get();
    assert_true(ci->l1d >= 4096 && ci->l1d <= (16u << 20));
    assert_true(ci->l2 >= ci->l1d);
    assert_true(ci->l3 == 0 || ci->l3 >= ci->l1d);
    assert_true(ci->cores >= 1);
}

static char kinfer[600];

/* Runs a shell command line with "./kinfer" replaced by this build's binary. */
static int sh(const char *line, char *out, size_t n)
{
    char cmd[1400];
    const char *k = strstr(line, "./kinfer");
    assert_non_null(k);
    snprintf(cmd, sizeof cmd, "%.*s%s%s", (int)(k - line), line, kinfer, k + strlen("./kinfer"));
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The binary: --version names the level in use; KINFER_ISA and --isa cap it; a bad name or a
 * level the CPU lacks is a usage error (exit 2) that says what the CPU runs. */
static void test_cli(void **unused)
{
    (void)unused;
    char out[4096], cmd[512];
    const char *top = ki_isa_name(ki_cpu_get()->isa);
    assert_int_equal(sh("KINFER_ISA=generic ./kinfer --version", out, sizeof out), 0);
    assert_non_null(strstr(out, "isa: generic (CPU: "));
    assert_non_null(strstr(out, "L1d "));
    snprintf(cmd, sizeof cmd, "KINFER_ISA= ./kinfer --version");
    assert_int_equal(sh(cmd, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "isa: %s (CPU: %s)", top, top);
    assert_non_null(strstr(out, cmd));
    assert_int_equal(sh("KINFER_ISA=sse9 ./kinfer --version 2>&1", out, sizeof out), 2);
    assert_non_null(strstr(out, "KINFER_ISA 'sse9'"));
    assert_int_equal(
        sh("./kinfer bench samples/mnist_cnn/model.pnnx.param --isa nope 2>&1", out, sizeof out),
        2);
    assert_non_null(strstr(out, "--isa 'nope'"));
    assert_int_equal(sh("./kinfer bench samples/mnist_cnn/model.pnnx.param --isa generic --runs 1 "
                        "--warmup 0 2>&1",
                        out, sizeof out),
                     0);
    assert_non_null(strstr(out, "isa: generic"));
    if (ki_cpu_get()->isa < KI_ISA_AVX512) {
        assert_int_equal(sh("./kinfer run samples/mnist_cnn/model.pnnx.param "
                            "samples/mnist_cnn/model.pnnx.bin samples/digits --isa avx512 2>&1",
                            out, sizeof out),
                         2);
        snprintf(cmd, sizeof cmd, "it runs %s", top);
        assert_non_null(strstr(out, cmd));
    }
}

/* The "threads" of `kinfer bench --json` on mnist_cnn with the environment / wrapper pre. */
static int bench_threads(const char *pre)
{
    char out[4096], cmd[512];
    snprintf(cmd, sizeof cmd,
             "%s ./kinfer bench samples/mnist_cnn/model.pnnx.param --runs 1 --warmup 0 --json",
             pre);
    assert_int_equal(sh(cmd, out, sizeof out), 0);
    const char *t = strstr(out, "\"threads\":");
    assert_non_null(t);
    return atoi(t + strlen("\"threads\":"));
}

/* Threads by default are the CPUs the process may use: all of this test's, one under taskset;
 * with OMP_PROC_BIND the command's second image (it executes itself once to set libgomp's spin)
 * still sees all of them (libgomp had bound the first image's thread to one CPU, and an exec
 * keeps that mask: every thread ran on that CPU). */
static void test_default_threads(void **unused)
{
    (void)unused;
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof set, &set), 0);
    const int usable = CPU_COUNT(&set);
    char out[4096], pre[64];
    assert_int_equal(bench_threads(""), usable > 256 ? 256 : usable);
    assert_int_equal(bench_threads("OMP_PROC_BIND=true"), usable > 256 ? 256 : usable);
    if (usable < 2) {
        skip(); /* one CPU: nothing to narrow */
    }
    assert_int_equal(sh("OMP_PROC_BIND=true ./kinfer --version", out, sizeof out), 0);
    assert_null(strstr(out, "for this process"));
    int first = 0;
    while (!CPU_ISSET(first, &set)) {
        first++;
    }
    snprintf(pre, sizeof pre, "taskset -c %d", first);
    assert_int_equal(bench_threads(pre), 1);
    snprintf(pre, sizeof pre, "taskset -c %d ./kinfer --version", first);
    assert_int_equal(sh(pre, out, sizeof out), 0);
    assert_non_null(strstr(out, "(1 for this process)"));
}

int main(int argc, char **argv)
{
    (void)argc;
    /* the binary sits one level above this test: BUILD/tests/test_cpu -> BUILD/kinfer */
    char self[600];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(kinfer, sizeof kinfer, "%s/../kinfer", dirname(self));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_levels),          cmocka_unit_test(test_names),
        cmocka_unit_test(test_caches),          cmocka_unit_test(test_cli),
        cmocka_unit_test(test_default_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
