/* bench.h - pieces of `kinfer bench` (cmd_bench.c): generated weights (bench_weights.c) and the
 * report (bench_report.c). CLI-only; nothing here is thread-safe or meant for the library. */
#ifndef KI_BENCH_H
#define KI_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../core/kinfer.h"

/* Writes a stored zip holding an entry "op.attr" for every attribute of the graph-only model m,
 * in the attribute's declared element type, with deterministic pseudo-random values scaled so
 * activations stay finite through deep networks. path must hold a mkstemp template; on success
 * it names the new file, which the caller unlinks. */
ki_status ki_bench_write_weights(const ki_model *m, char *path, ki_error *err);

#define BENCH_MAX_INPUTS 16

/* Loads param with bin, or (bin NULL) with generated weights in a temporary file. */
ki_status ki_bench_load(const char *param, const char *bin, ki_model **m, ki_error *err);
/* A session's input shapes: given[0..n_given) (one per input) or, with none given, each input's
 * annotation with '?' read as 1 for the batch and 224 elsewhere; batch > 0 replaces dim 0. */
ki_status ki_bench_input_shapes(const ki_model *m, const ki_shape *given, int n_given, int batch,
                                ki_shape *shapes, ki_error *err);
/* Floating-point operations (2 x multiply-adds) of a step with these tensors' shapes (in: its
 * n_in inputs, out: its outputs) for the operators whose time is arithmetic (bench_flops.c); 0
 * for the others, -1 when a shape it needs is not known (an undeclared or '?' dim). */
double ki_bench_step_flops(const ki_op_desc *d, const ki_tensor *in, int n_in,
                           const ki_tensor *out);
/* The same for step k of session s as it runs: its layer's own count when it has one (a fused
 * step's with every layer in it, ki_session_step_macs), else ki_bench_step_flops. */
double ki_bench_session_step_flops(const ki_session *s, int k);

/* Uniform floats in [lo, hi) from a 64-bit state (xorshift64*), deterministic for a seed. */
float ki_bench_rand(unsigned long long *state, float lo, float hi);

typedef struct ki_bench_result {
    const char *param;
    int threads, runs, warmup;
    double min_ms, median_ms, max_ms;
    size_t planned_bytes, weight_bytes;
    long peak_rss_kb;
    long solo_runs;  /* timed runs the session made on one thread (ki_session_solo_runs) */
    char shape[128]; /* input 0's shape as "(1,3,224,224)" */
} ki_bench_result;

/* Runs the session `runs` times with profiling on and prints per-type times and the ten slowest
 * steps (with shapes and GFLOP/s), as text or as a JSON object member "profile". */
int ki_bench_profile(ki_session *s, int runs, bool json, FILE *f);
void ki_bench_print(const ki_bench_result *r, bool json, FILE *f);

#endif
