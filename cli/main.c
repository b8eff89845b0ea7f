/* main.c - the kinfer command: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "../core/kinfer.h"
#include "commands.h"

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
    if (strcmp(cmd, "ops") == 0) {
        return ki_cli_ops(argc - 1, argv + 1);
    }
    ki_cli_error("unknown command '%s' (see 'kinfer --help')", cmd);
    return KI_EXIT_USAGE;
}
