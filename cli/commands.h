/* commands.h - the kinfer subcommands. Each takes argv with argv[0] = the command name and
 * returns the process exit code: 0 success, 1 failure, 2 usage error. */
#ifndef KI_COMMANDS_H
#define KI_COMMANDS_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/kinfer.h"

#define KI_EXIT_OK    0
#define KI_EXIT_FAIL  1
#define KI_EXIT_USAGE 2

int ki_cli_run(int argc, char **argv);
int ki_cli_dump_graph(int argc, char **argv);
int ki_cli_ops(int argc, char **argv);
int ki_cli_eval_expr(int argc, char **argv);
int ki_cli_bench(int argc, char **argv);
int ki_cli_info(int argc, char **argv);

/* Shared helpers (cli/util.c). */
void ki_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a whole decimal int in [lo, hi]; false otherwise. */
int ki_cli_parse_int(const char *s, long lo, long hi, long *out);
/* Sets the OpenMP team size and OpenBLAS's thread count for this process. */
void ki_cli_set_threads(int n);
int ki_cli_default_threads(void);
/* Caps the instruction-set level at the one named s ("generic", "avx2", "avx512"); what names
 * where s came from (--isa, KINFER_ISA). False, after a message, when s names no level or the CPU
 * lacks it. Call before loading a model. */
bool ki_cli_set_isa(const char *s, const char *what);
/* The KINFER_ISA environment variable, when set: ki_cli_set_isa. */
bool ki_cli_isa_from_env(void);
/* "avx2 (CPU: avx512); L1d 48 KiB, L2 2 MiB, L3 260 MiB; 2 cores" for --version and bench. */
void ki_cli_cpu_str(char *buf, size_t n);
/* "1,3,224,224" into out; false unless it is 1..KI_MAX_DIMS whole numbers in range. */
bool ki_cli_parse_shape(const char *s, ki_shape *out);
/* The name in names (NULL-terminated) closest to s by edit distance, or NULL when none is close
 * (for "did you mean" hints). */
const char *ki_cli_closest(const char *s, const char *const *names);
/* Reports an unknown option of command cmd, with the closest of names as a hint. */
void ki_cli_unknown_option(const char *cmd, const char *opt, const char *const *names);
/* "--opt=value": copies "--opt" into buf (n bytes) and returns value; NULL when a has no '='. */
const char *ki_cli_split_eq(const char *a, char *buf, size_t n);
/* Memory the system can still give us (MemAvailable), in bytes; 0 when unknown. */
size_t ki_cli_memory_available(void);
/* Peak resident memory of this process so far, in bytes. */
size_t ki_cli_peak_rss(void);

#endif
