/* kinfer_public.h - the public API, installed as <kinfer.h>: load a PNNX model, make a session
 * for concrete input shapes, run. ki_model and ki_session are opaque; core/kinfer.h adds the
 * introspection the kinfer command uses (operator descriptions, per-step tensors).
 *
 * A ki_model is immutable after ki_model_load and may be shared by sessions in several threads.
 * A ki_session owns one planned memory arena for its input shapes; ki_session_run allocates
 * nothing, does no I/O and prints nothing. Sessions are not thread-safe: one run at a time. */
#ifndef KINFER_PUBLIC_H
#define KINFER_PUBLIC_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu.h"
#include "status.h"
#include "tensor.h"

#define KI_VERSION "0.1.0"

typedef struct ki_model ki_model;
typedef struct ki_session ki_session;

typedef struct ki_load_options {
    bool graph_only; /* parse and sort only: no weights needed, no layers created */
    bool verify_crc; /* check each weight entry's CRC-32 */
    bool no_fusion;  /* run every operator on its own (for testing fused kernels) */
} ki_load_options;

/* bin_path may be NULL when the graph has no attributes or with graph_only. */
ki_status ki_model_load(const char *param_path, const char *bin_path, const ki_load_options *opt,
                        ki_model **out, ki_error *err);
void ki_model_destroy(ki_model *m);

int ki_model_n_inputs(const ki_model *m);
const char *ki_model_input_name(const ki_model *m, int i);
/* The input's `#` annotation; ndim -1 when the file has none. Unknown dims are -1. */
ki_shape ki_model_input_decl(const ki_model *m, int i);
/* Whether the input is annotated with an integer or bool element type (token ids, indices): its
 * values are then whole numbers, carried as float32. */
bool ki_model_input_is_integer(const ki_model *m, int i);
int ki_model_n_outputs(const ki_model *m);
const char *ki_model_output_name(const ki_model *m, int i);
ki_shape ki_model_output_decl(const ki_model *m, int i);
size_t ki_model_weight_bytes(const ki_model *m);

typedef struct ki_session_options {
    int n_threads;       /* OpenMP team size for each op; <= 0 means 1 */
    size_t memory_limit; /* fail before allocating more than this many bytes; 0 = no limit */
} ki_session_options;

ki_status ki_session_create(const ki_model *m, const ki_shape *input_shapes, int n_inputs,
                            const ki_session_options *opt, ki_session **out, ki_error *err);
void ki_session_destroy(ki_session *s);
/* Input i's buffer, to fill before ki_session_run. */
ki_tensor ki_session_input(const ki_session *s, int i);
ki_status ki_session_run(ki_session *s, ki_error *err);
ki_tensor ki_session_output(const ki_session *s, int i);
/* Bytes of the planned tensor arena plus workspace. */
size_t ki_session_planned_bytes(const ki_session *s);
/* Runs ki_session_run made on one thread although the session has more threads: it times its
 * runs, and when the team's become slow (another process holding a core) and one thread is
 * faster, it runs on one, trying the team again now and then. The results are the same bits. */
long ki_session_solo_runs(const ki_session *s);
/* Profiling: when on, ki_session_run records each step's wall time (omp_get_wtime). */
void ki_session_set_profiling(ki_session *s, bool on);
/* Steps are the executed operators in order (pnnx.Input/Output and output tuples excluded). */
int ki_session_n_steps(const ki_session *s);

/* The kernel step k runs for this session's shapes (e.g. "winograd F(4x4) avx2"), into buf;
 * empty when its layer does not say. */
void ki_session_step_kernel(const ki_session *s, int k, char *buf, size_t n);
/* The multiply-adds of step k for this session's shapes as its layer counts them, with any
 * operators fused into it; -1 when its layer does not count them. */
double ki_session_step_macs(const ki_session *s, int k);

/* Concrete shape of an operand by name for this session; false if there is no such operand. */
bool ki_session_operand_shape(const ki_session *s, const char *name, ki_shape *out);

#endif
