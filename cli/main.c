/* main.c - the kinfer command: dispatches to the subcommands. */
#define _GNU_SOURCE /* sched_setaffinity and the CPU_SET macros */
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/cpu.h"
#include "../core/kinfer.h"
#include "commands.h"

/* OpenMP threads that wait at the end of a region spin for a while, then sleep. libgomp's
 * default is 300,000 rounds of its pause loop, which is 0.3 ms on one CPU and 15 ms on another
 * (a pause takes from a few to ~150 cycles); when another process holds a core, the spinning
 * thread waits for one that is not running, at every operator, and two threads run several
 * times slower than one. kinfer spins for about KI_SPIN_NS instead, as ONNX Runtime spins
 * briefly: the rounds come from this CPU's measured pause time (docs/performance.md has the
 * figures). libgomp reads GOMP_SPINCOUNT once, in its own constructor, before main and before
 * the executable's preinit functions could set it for good (libc's start-up resets the
 * environment after them), so the command sets it and executes itself again, once. A user's own
 * OMP_WAIT_POLICY or GOMP_SPINCOUNT wins; if the exec fails, libgomp's default stays. */
/* Rounds of libgomp's wait loop (one load and one pause) that take about KI_SPIN_NS here. */
static long spin_rounds(void)
{
    const double best = ki_cpu_pause_ns();
    long n = (long)((double)KI_SPIN_NS / (best > 0.5 ? best : 0.5));
    return n < 100 ? 100 : n > 1000000 ? 1000000 : n;
}

/* With OMP_PROC_BIND or OMP_PLACES set, libgomp's constructor has bound this (the initial)
 * thread to the first place, and an exec keeps that mask: the second image's OpenMP would see one
 * CPU and run every thread on it (resnet18 twice as slow with OMP_PROC_BIND=true). So the mask
 * goes back to the CPUs of all places, those libgomp found in the mask it started with. */
static void unbind_for_exec(void)
{
    static int ids[CPU_SETSIZE];
    const int np = omp_get_proc_bind() == omp_proc_bind_false ? 0 : omp_get_num_places();
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int p = 0; p < np; p++) {
        const int n = omp_get_place_num_procs(p);
        if (n < 1 || n > CPU_SETSIZE) {
            return;
        }
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < n; i++) {
            if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) {
                CPU_SET(ids[i], &set);
            }
        }
    }
    if (CPU_COUNT(&set) > 0) {
        sched_setaffinity(0, sizeof set, &set);
    }
}

static void set_spin_policy(char **argv)
{
    char buf[32];
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) {
        return;
    }
    snprintf(buf, sizeof buf, "%ld", spin_rounds());
    if (setenv("GOMP_SPINCOUNT", buf, 0) == 0) {
        unbind_for_exec();
        execv("/proc/self/exe", argv);
    }
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "kinfer %s - run PyTorch models exported by pnnx on the CPU\n"
        "\n"
        "usage: kinfer COMMAND [ARGS...]\n"
        "\n"
        "commands:\n"
        "  run MODEL.pnnx.param MODEL.pnnx.bin INPUT...   run a model on images or .npy tensors\n"
        "  dump-graph MODEL.pnnx.param [MODEL.pnnx.bin]   print the operators in execution order\n"
        "  eval-expr EXPR [VALUES...]                    tokenize, parse and evaluate a pnnx "
        "expression\n"
        "  bench MODEL.pnnx.param [MODEL.pnnx.bin]       time forward passes (generated weights "
        "without a .bin)\n"
        "  info MODEL.pnnx.param [MODEL.pnnx.bin]        describe a model: inputs, outputs, "
        "operators,\n"
        "                                                parameters, GFLOPs, unsupported "
        "operators\n"
        "  ops                                           list the supported operator types\n"
        "\n"
        "options:\n"
        "  -h, --help       this help; 'kinfer COMMAND --help' for a command's options\n"
        "  -V, --version    print the version, the instruction-set level in use and the caches\n"
        "\n"
        "environment:\n"
        "  KINFER_ISA=generic|avx2|avx512   cap the kernels' instruction set (--isa overrides)\n"
        "\n"
        "exit status: 0 success, 1 failure (bad model or input), 2 usage error\n",
        KI_VERSION);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return KI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    set_spin_policy(argv);
    if (!ki_cli_isa_from_env()) {
        return KI_EXIT_USAGE;
    }
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return KI_EXIT_OK;
    }
    if (strcmp(cmd, "-V") == 0 || strcmp(cmd, "--version") == 0) {
        char cpu[160];
        ki_cli_cpu_str(cpu, sizeof cpu);
        printf("kinfer %s\nisa: %s\n", KI_VERSION, cpu);
        return KI_EXIT_OK;
    }
    if (strcmp(cmd, "run") == 0) {
        return ki_cli_run(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "dump-graph") == 0) {
        return ki_cli_dump_graph(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "eval-expr") == 0) {
        return ki_cli_eval_expr(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "bench") == 0) {
        return ki_cli_bench(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "info") == 0) {
        return ki_cli_info(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "ops") == 0) {
        return ki_cli_ops(argc - 1, argv + 1);
    }
    ki_cli_error("unknown command '%s' (see 'kinfer --help')", cmd);
    return KI_EXIT_USAGE;
}
