/* cpu_level.c - linked into every unit test program: with KINFER_TEST_CPU=generic or avx2 in
 * the environment the program runs as on a CPU whose best level is that one (ki_cpu_pretend,
 * before main), so expectations that depend on the CPU are checked for CPUs this machine is
 * not; tests/run_tests.sh runs the programs that way too. Unset or empty: the CPU as it is. */
#include <stdio.h>
#include <stdlib.h>

#include "../../core/cpu.h"

__attribute__((constructor)) static void ki_test_cpu_level(void)
{
    const char *s = getenv("KINFER_TEST_CPU");
    ki_isa isa;
    if (!s || !*s) {
        return;
    }
    if (!ki_isa_parse(s, &isa)) {
        fprintf(stderr, "KINFER_TEST_CPU '%s' is not generic, avx2 or avx512\n", s);
        exit(2);
    }
    ki_cpu_pretend(isa);
}
