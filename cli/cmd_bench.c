/* cmd_bench.c - `kinfer bench`: time whole forward passes of a model (issue #6).
 *
 * Loads the model (with generated weights when no .bin is given), makes one session for the
 * input shapes, fills the inputs with random numbers, warms up, then times each ki_session_run
 * with a monotonic clock and prints min / median / max, planned memory and peak RSS. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "commands.h"

typedef struct bench_opts {
    const char *param, *bin;
    int runs, warmup, threads, batch;
    bool profile, json;
    int n_shapes;
    ki_shape shapes[BENCH_MAX_INPUTS]; /* from --input-shape, in input order */
} bench_opts;

static void bench_usage(FILE *f)
{
    fprintf(f,
            "usage: kinfer bench MODEL.pnnx.param [MODEL.pnnx.bin] [options]\n"
            "\n"
            "Times whole forward passes. Without a .bin, weights are generated (random values of\n"
            "the declared shapes), so any exported architecture can be timed from its param file.\n"
            "\n"
            "options:\n"
            "  --runs N           timed runs (default 20)\n"
            "  --warmup N         untimed runs first (default 3)\n"
            "  --threads N        threads (default: the CPUs kinfer may use, here %d)\n"
            "  --isa LEVEL        cap the kernels' instruction set: generic, avx2, avx512\n"
            "                     (default: the best this CPU runs, or KINFER_ISA)\n"
            "  --batch N          batch size for inputs whose first dim is unknown or given\n"
            "  --input-shape S    e.g. 1,3,224,224; repeat once per input (default: the input's\n"
            "                     annotation, '?' read as 1 for the batch and 224 elsewhere)\n"
            "  --profile          time per operator type, per kernel (the path each step runs)\n"
            "                     and the ten slowest operators, with their GFLOP/s\n"
            "  --json             machine-readable output (with --profile also every operator,\n"
            "                     in run order, under \"steps\")\n",
            ki_cli_default_threads());
}

static const char *const bench_opts_all[] = { "--runs",        "--warmup", "--threads", "--batch",
                                              "--input-shape", "--isa",    "--profile", "--json",
                                              "--help",        NULL };

/* Value option opt = val into o: KI_EXIT_OK, or a usage error naming the option, the value and
 * what it allows. */
static int bench_value(const char *opt, const char *val, bench_opts *o)
{
    long v;
    int *target = strcmp(opt, "--runs") == 0      ? &o->runs
                  : strcmp(opt, "--warmup") == 0  ? &o->warmup
                  : strcmp(opt, "--threads") == 0 ? &o->threads
                  : strcmp(opt, "--batch") == 0   ? &o->batch
                                                  : NULL;
    if (target) {
        long lo = target == &o->warmup ? 0 : 1, hi = target == &o->threads ? 1024 : 1000000;
        if (!ki_cli_parse_int(val, lo, hi, &v)) {
            ki_cli_error("bench: %s '%s': expected an integer from %ld to %ld", opt, val, lo, hi);
            return KI_EXIT_USAGE;
        }
        *target = (int)v;
    } else if (strcmp(opt, "--isa") == 0) {
        return ki_cli_set_isa(val, "bench: --isa") ? KI_EXIT_OK : KI_EXIT_USAGE;
    } else if (o->n_shapes >= BENCH_MAX_INPUTS ||
               !ki_cli_parse_shape(val, &o->shapes[o->n_shapes])) {
        ki_cli_error("bench: --input-shape '%s': expected dimensions like 1,3,224,224 (one "
                     "--input-shape per model input, at most %d)",
                     val, BENCH_MAX_INPUTS);
        return KI_EXIT_USAGE;
    } else {
        o->n_shapes++;
    }
    return KI_EXIT_OK;
}

/* Returns -1 after --help, else an exit code (KI_EXIT_OK to go on). */
static int parse_args(int argc, char **argv, bench_opts *o)
{
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *eq = ki_cli_split_eq(a, name, sizeof name), *opt = eq ? name : a;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            bench_usage(stdout);
            return -1;
        } else if (!eq && strcmp(a, "--profile") == 0) {
            o->profile = true;
        } else if (!eq && strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(opt, "--runs") == 0 || strcmp(opt, "--warmup") == 0 ||
                   strcmp(opt, "--threads") == 0 || strcmp(opt, "--batch") == 0 ||
                   strcmp(opt, "--isa") == 0 || strcmp(opt, "--input-shape") == 0) {
            const char *val = eq ? eq : i + 1 < argc ? argv[++i] : NULL;
            int rc = val ? bench_value(opt, val, o) : KI_EXIT_USAGE;
            if (!val) {
                ki_cli_error("bench: %s needs a value", opt);
            }
            if (rc != KI_EXIT_OK) {
                return rc;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            if (eq && (strcmp(opt, "--profile") == 0 || strcmp(opt, "--json") == 0)) {
                ki_cli_error("bench: %s takes no value", opt);
            } else {
                ki_cli_unknown_option("bench", opt, bench_opts_all);
            }
            return KI_EXIT_USAGE;
        } else if (npos >= 2) {
            ki_cli_error("bench: extra argument '%s' (expected MODEL.pnnx.param [MODEL.pnnx.bin])",
                         a);
            return KI_EXIT_USAGE;
        } else {
            *(npos++ == 0 ? &o->param : &o->bin) = a;
        }
    }
    if (!o->param) {
        bench_usage(stderr);
        return KI_EXIT_USAGE;
    }
    return KI_EXIT_OK;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static ki_status time_runs(ki_session *s, const bench_opts *o, ki_bench_result *r, ki_error *err)
{
    double *t = malloc((size_t)o->runs * sizeof *t);
    ki_status st = t ? KI_OK : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    for (int i = 0; st == KI_OK && i < o->warmup; i++) {
        st = ki_session_run(s, err);
    }
    const long solo0 = ki_session_solo_runs(s);
    for (int i = 0; st == KI_OK && i < o->runs; i++) {
        double t0 = now_ms();
        st = ki_session_run(s, err);
        t[i] = now_ms() - t0;
    }
    r->solo_runs = ki_session_solo_runs(s) - solo0;
    if (st == KI_OK) {
        qsort(t, (size_t)o->runs, sizeof *t, cmp_double);
        r->min_ms = t[0];
        r->max_ms = t[o->runs - 1];
        r->median_ms = o->runs % 2 ? t[o->runs / 2] : 0.5 * (t[o->runs / 2 - 1] + t[o->runs / 2]);
    }
    free(t);
    return st;
}

/* Random values in [-1, 1), or for an integer input (token ids, indices) small whole numbers
 * 0..7, valid for any embedding table or index range of at least 8. */
static void fill_inputs(const ki_model *m, ki_session *s, int n)
{
    unsigned long long seed = 0x243F6A8885A308D3ULL;
    for (int i = 0; i < n; i++) {
        ki_tensor t = ki_session_input(s, i);
        const bool ids = ki_model_input_is_integer(m, i);
        int64_t count = ki_shape_count(&t.shape);
        for (int64_t k = 0; k < count; k++) {
            const float r = ki_bench_rand(&seed, -1.0f, 1.0f);
            t.data[k] = ids ? floorf((r + 1.0f) * 4.0f) : r;
        }
    }
}

static int bench(const bench_opts *o)
{
    ki_error err = { KI_OK, "" };
    ki_model *m = NULL;
    ki_session *s = NULL;
    ki_shape shapes[BENCH_MAX_INPUTS];
    ki_bench_result r = {
        .param = o->param, .threads = o->threads, .runs = o->runs, .warmup = o->warmup
    };
    ki_status st = ki_bench_load(o->param, o->bin, &m, &err);
    if (st == KI_OK) {
        st = ki_bench_input_shapes(m, o->shapes, o->n_shapes, o->batch, shapes, &err);
    }
    ki_session_options so = { o->threads, 0 };
    if (st == KI_OK) {
        st = ki_session_create(m, shapes, ki_model_n_inputs(m), &so, &s, &err);
    }
    if (st == KI_OK) {
        fill_inputs(m, s, ki_model_n_inputs(m));
        ki_shape_str(&shapes[0], r.shape, sizeof r.shape);
        st = time_runs(s, o, &r, &err);
    }
    if (st != KI_OK) {
        ki_cli_error("bench: %s", err.msg);
        ki_session_destroy(s);
        ki_model_destroy(m);
        return KI_EXIT_FAIL;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r.peak_rss_kb = ru.ru_maxrss;
    r.planned_bytes = ki_session_planned_bytes(s);
    r.weight_bytes = ki_model_weight_bytes(m);
    ki_bench_print(&r, o->json, stdout);
    int rc = o->profile ? ki_bench_profile(s, o->runs, o->json, stdout) : KI_EXIT_OK;
    if (o->json) {
        fputs("}\n", stdout);
    }
    ki_session_destroy(s);
    ki_model_destroy(m);
    return rc;
}

int ki_cli_bench(int argc, char **argv)
{
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.runs = 20;
    o.warmup = 3;
    o.threads = ki_cli_default_threads();
    int rc = parse_args(argc, argv, &o);
    if (rc != KI_EXIT_OK) {
        return rc < 0 ? KI_EXIT_OK : rc;
    }
    ki_cli_set_threads(o.threads);
    return bench(&o);
}
