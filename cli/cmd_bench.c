/* cmd_bench.c - `kinfer bench` (being written; issue #6). */
#include "commands.h"

int ki_cli_bench(int argc, char **argv)
{
    (void)argc, (void)argv;
    ki_cli_error("bench: not implemented yet");
    return KI_EXIT_FAIL;
}
