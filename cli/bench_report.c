/* bench_report.c - what `kinfer bench` prints: the timing summary and, with --profile, time per
 * operator type and the slowest operators with their shapes and achieved GFLOP/s. */
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "commands.h"

#define TOP_N     10
#define MAX_TYPES 128

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            fprintf(f, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else {
            fputc(c, f);
        }
    }
    fputc('"', f);
}

void ki_bench_print(const ki_bench_result *r, bool json, FILE *f)
{
    double mib = 1024.0 * 1024.0;
    if (json) {
        fputs("{\"model\":", f);
        json_str(f, r->param);
        fprintf(f,
                ",\"input_shape\":\"%s\",\"threads\":%d,\"runs\":%d,\"warmup\":%d,"
                "\"min_ms\":%.4f,\"median_ms\":%.4f,\"max_ms\":%.4f,\"planned_bytes\":%zu,"
                "\"weight_bytes\":%zu,\"peak_rss_kb\":%ld,\"isa\":\"%s\",\"cpu_isa\":\"%s\","
                "\"l1d_bytes\":%zu,\"l2_bytes\":%zu,\"l3_bytes\":%zu,\"solo_runs\":%ld",
                r->shape, r->threads, r->runs, r->warmup, r->min_ms, r->median_ms, r->max_ms,
                r->planned_bytes, r->weight_bytes, r->peak_rss_kb, ki_isa_name(ki_cpu_isa()),
                ki_isa_name(ki_cpu_get()->isa), ki_cpu_get()->l1d, ki_cpu_get()->l2,
                ki_cpu_get()->l3, r->solo_runs);
        return;
    }
    fprintf(f, "%s %s, %d thread%s: min %.3f  median %.3f  max %.3f ms (%d runs, %d warm-up)\n",
            r->param, r->shape, r->threads, r->threads == 1 ? "" : "s", r->min_ms, r->median_ms,
            r->max_ms, r->runs, r->warmup);
    char cpu[160];
    ki_cli_cpu_str(cpu, sizeof cpu);
    fprintf(f, "isa: %s\n", cpu);
    fprintf(f, "memory: planned %.1f MiB, weights %.1f MiB, peak RSS %.1f MiB\n",
            (double)r->planned_bytes / mib, (double)r->weight_bytes / mib,
            (double)r->peak_rss_kb / 1024.0);
    if (r->solo_runs > 0) {
        fprintf(f,
                "threads: %ld of the %d runs on one thread (tries of one thread, kept while it was "
                "faster than the team: another process held a core)\n",
                r->solo_runs, r->runs);
    }
}

/* A row of the per-type or per-kernel table: its key (a type, or a kernel as
 * ki_session_step_kernel names it), the steps, their seconds and FLOPs per run. */
typedef struct type_row {
    char key[96];
    int count;
    double sec, flops;
} type_row;

static int cmp_type(const void *a, const void *b)
{
    double x = ((const type_row *)a)->sec, y = ((const type_row *)b)->sec;
    return (x < y) - (x > y);
}

/* Adds a step (sec seconds, flops FLOPs, 0 or less when uncounted) to the row of key, a new
 * one while there is room. */
static void tally(type_row *rows, int *nt, const char *key, double sec, double flops)
{
    int t = 0;
    while (t < *nt && strcmp(rows[t].key, key) != 0) {
        t++;
    }
    if (t == *nt && *nt < MAX_TYPES) {
        rows[*nt] = (type_row){ "", 0, 0.0, 0.0 };
        snprintf(rows[*nt].key, sizeof rows[*nt].key, "%s", key);
        (*nt)++;
    }
    if (t < *nt) {
        rows[t].count++, rows[t].sec += sec, rows[t].flops += flops > 0 ? flops : 0.0;
    }
}

/* One table: text rows of key, count, ms, share of total and, where the steps count their
 * FLOPs, GFLOP/s; or the JSON member `name`, an array of objects with `field` as the key. */
static void print_rows(type_row *rows, int nt, double total, const char *title, const char *name,
                       const char *field, bool json, FILE *f)
{
    qsort(rows, (size_t)nt, sizeof *rows, cmp_type);
    if (json) {
        fprintf(f, "\"%s\":[", name);
    } else {
        fprintf(f, "%s\n", title);
    }
    for (int t = 0; t < nt; t++) {
        const double gf = rows[t].sec > 0 ? rows[t].flops / rows[t].sec * 1e-9 : 0.0;
        if (json) {
            fprintf(f, "%s{\"%s\":", t ? "," : "", field);
            json_str(f, rows[t].key);
            fprintf(f, ",\"count\":%d,\"ms\":%.4f,\"gflops\":%.2f}", rows[t].count,
                    rows[t].sec * 1e3, gf);
        } else {
            fprintf(f, "  %-42s x%-4d %9.3f ms  %5.1f%%", rows[t].key, rows[t].count,
                    rows[t].sec * 1e3, total > 0 ? 100.0 * rows[t].sec / total : 0.0);
            if (rows[t].flops > 0) {
                fprintf(f, "  %7.1f GFLOP/s", gf);
            }
            fputc('\n', f);
        }
    }
    if (json) {
        fputc(']', f);
    }
}

/* Time per operator type, then per kernel (the steps whose layer names its kernel). */
static void by_types(ki_session *s, const double *sec, int n, bool json, FILE *f)
{
    type_row types[MAX_TYPES], kernels[MAX_TYPES]; /* 30 KB on the stack */
    int nt = 0, nk = 0;
    double total = 0.0;
    for (int k = 0; k < n; k++) {
        const ki_op_desc *d = ki_session_step(s, k, NULL, NULL, NULL);
        const double fl = ki_bench_session_step_flops(s, k);
        char kernel[96];
        ki_session_step_kernel(s, k, kernel, sizeof kernel);
        tally(types, &nt, d->type, sec[k], fl);
        if (kernel[0]) {
            tally(kernels, &nk, kernel, sec[k], fl);
        }
        total += sec[k];
    }
    if (json) {
        fputs(",\"profile\":{", f);
    }
    print_rows(types, nt, total, "time per operator type (mean per run):", "types", "type", json,
               f);
    if (json) {
        fprintf(f, ",\"total_ms\":%.4f,", total * 1e3);
    } else {
        fprintf(f, "  %-48s %9.3f ms\n", "total", total * 1e3);
    }
    print_rows(kernels, nk, total, "time per kernel (mean per run):", "kernels", "kernel", json, f);
}

static const double *sort_key;

static int cmp_step(const void *a, const void *b)
{
    double x = sort_key[*(const int *)a], y = sort_key[*(const int *)b];
    return (x < y) - (x > y);
}

static void one_step(ki_session *s, int k, double sec, bool json, FILE *f)
{
    const ki_tensor *in, *out;
    double dummy;
    const ki_op_desc *d = ki_session_step(s, k, &in, &out, &dummy);
    char si[96] = "()", so[96];
    if (d->n_inputs > 0) {
        ki_shape_str(&in[0].shape, si, sizeof si);
    }
    ki_shape_str(&out[0].shape, so, sizeof so);
    const double fl = ki_bench_session_step_flops(s, k);
    double gf = sec > 0 && fl > 0 ? fl / sec * 1e-9 : 0.0;
    char kernel[96];
    ki_session_step_kernel(s, k, kernel, sizeof kernel);
    if (json) {
        fputs("{\"name\":", f);
        json_str(f, d->name);
        fputs(",\"type\":", f);
        json_str(f, d->type);
        fprintf(f, ",\"in\":\"%s\",\"out\":\"%s\",\"ms\":%.4f,\"gflops\":%.2f,\"kernel\":", si, so,
                sec * 1e3, gf);
        json_str(f, kernel);
        fputc('}', f);
        return;
    }
    fprintf(f, "  %-24s %-18s %-18s -> %-18s %8.3f ms", d->name, d->type, si, so, sec * 1e3);
    if (fl > 0) {
        fprintf(f, "  %7.1f GFLOP/s", gf);
    }
    if (kernel[0]) {
        fprintf(f, "  %s", kernel);
    }
    fputc('\n', f);
}

static void slowest(ki_session *s, const double *sec, int n, bool json, FILE *f)
{
    int *idx = malloc((size_t)(n > 0 ? n : 1) * sizeof *idx);
    if (!idx) {
        return;
    }
    for (int k = 0; k < n; k++) {
        idx[k] = k;
    }
    sort_key = sec;
    qsort(idx, (size_t)n, sizeof *idx, cmp_step);
    fputs(json ? ",\"slowest\":[" : "slowest operators:\n", f);
    for (int k = 0; k < n && k < TOP_N; k++) {
        if (json && k) {
            fputc(',', f);
        }
        one_step(s, idx[k], sec[idx[k]], json, f);
    }
    if (json) { /* and every operator in run order, for tools that compare two profiles */
        fputs("],\"steps\":[", f);
        for (int k = 0; k < n; k++) {
            if (k) {
                fputc(',', f);
            }
            one_step(s, k, sec[k], json, f);
        }
        fputs("]}", f);
    }
    free(idx);
}

int ki_bench_profile(ki_session *s, int runs, bool json, FILE *f)
{
    ki_error err = { KI_OK, "" };
    int n = ki_session_n_steps(s);
    double *sec = calloc((size_t)(n > 0 ? n : 1), sizeof *sec);
    ki_status st = sec ? KI_OK : KI_FAIL(&err, KI_ERR_NOMEM, "out of memory");
    ki_session_set_profiling(s, true);
    for (int r = 0; st == KI_OK && r < runs; r++) {
        st = ki_session_run(s, &err);
        for (int k = 0; st == KI_OK && k < n; k++) {
            double t;
            ki_session_step(s, k, NULL, NULL, &t);
            sec[k] += t / runs;
        }
    }
    ki_session_set_profiling(s, false);
    if (st != KI_OK) {
        ki_cli_error("bench: %s", err.msg);
        free(sec);
        return KI_EXIT_FAIL;
    }
    by_types(s, sec, n, json, f);
    slowest(s, sec, n, json, f);
    free(sec);
    return KI_EXIT_OK;
}
