/* cmd_info.c - `kinfer info MODEL.param [MODEL.bin]`: what a model is before running it: inputs
 * and outputs with shapes and types, operators by type, parameters and weight bytes, the GFLOPs
 * at the declared (or --input-shape) size, and the operators kinfer does not run (exit 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../layers/registry.h"
#include "bench.h"
#include "commands.h"

#define INFO_MAX_TYPES 512

typedef struct info_opts {
    const char *param, *bin;
    bool json;
    int n_shapes;
    ki_shape shapes[BENCH_MAX_INPUTS];
} info_opts;

typedef struct type_count {
    const char *type;
    int n;
    bool supported;
} type_count;

typedef struct info {
    type_count types[INFO_MAX_TYPES];
    int n_types, n_ops, n_unsupported;
    int64_t params;
    size_t weight_bytes;
    double flops;         /* -1 when unknown */
    const char *flops_at; /* "declared shapes" or "--input-shape" */
} info;

static void info_usage(FILE *f)
{
    fprintf(
        f,
        "usage: kinfer info MODEL.pnnx.param [MODEL.pnnx.bin] [options]\n"
        "\n"
        "Describes a model without running it: inputs and outputs (shapes, types), operators\n"
        "by type, parameters and weight bytes, GFLOPs (multiply-adds x 2 of convolutions,\n"
        "linear layers, matmuls, attention, recurrent layers and YOLOv5's Detect head) at the\n"
        "declared input size, and the operators kinfer cannot run; exit status 1 when there\n"
        "are any.\n"
        "\n"
        "options:\n"
        "  --input-shape S    e.g. 1,3,320,320, once per input: count GFLOPs at this size\n"
        "                     (the model is then loaded; without a .bin, with generated weights)\n"
        "  --json             machine-readable output\n");
}

/* Whether kinfer runs type (the graph's own markers included). */
static bool runs(const char *type)
{
    return ki_registry_find(type) || strcmp(type, "pnnx.Input") == 0 ||
           strcmp(type, "pnnx.Output") == 0 || strcmp(type, "prim::TupleConstruct") == 0 ||
           strcmp(type, "prim::ListUnpack") == 0;
}

static void count_type(info *in, const char *type)
{
    for (int i = 0; i < in->n_types; i++) {
        if (strcmp(in->types[i].type, type) == 0) {
            in->types[i].n++;
            return;
        }
    }
    if (in->n_types < INFO_MAX_TYPES) {
        in->types[in->n_types++] = (type_count){ type, 1, runs(type) };
        in->n_unsupported += !runs(type);
    }
}

/* Operator d's FLOPs from its `#` annotations; -1 when a shape it needs is not declared. */
static double decl_flops(const ki_op_desc *d)
{
    ki_tensor in[BENCH_MAX_INPUTS], out[1];
    const int n_in = d->n_inputs < BENCH_MAX_INPUTS ? d->n_inputs : BENCH_MAX_INPUTS;
    memset(in, 0, sizeof in);
    memset(out, 0, sizeof out);
    for (int i = 0; i < n_in; i++) {
        in[i].shape = d->input_decl ? d->input_decl[i] : ki_shape_make(-1, NULL);
    }
    out[0].shape = d->n_outputs > 0 && d->output_decl ? d->output_decl[0] : ki_shape_make(-1, NULL);
    return ki_bench_step_flops(d, in, n_in, out);
}

/* FLOPs of one run at the given input shapes: the model loaded, a session planned, each step's
 * shapes. */
static ki_status session_flops(const info_opts *o, double *flops, ki_error *err)
{
    ki_model *m = NULL;
    ki_session *s = NULL;
    ki_shape shapes[BENCH_MAX_INPUTS];
    ki_status st = ki_bench_load(o->param, o->bin, &m, err);
    if (st == KI_OK) {
        st = ki_bench_input_shapes(m, o->shapes, o->n_shapes, 0, shapes, err);
    }
    ki_session_options so = { 1, 0 };
    if (st == KI_OK) {
        st = ki_session_create(m, shapes, ki_model_n_inputs(m), &so, &s, err);
    }
    *flops = 0;
    for (int k = 0; st == KI_OK && k < ki_session_n_steps(s); k++) {
        *flops += ki_bench_session_step_flops(s, k);
    }
    ki_session_destroy(s);
    ki_model_destroy(m);
    return st;
}

static int cmp_count(const void *a, const void *b)
{
    const type_count *x = a, *y = b;
    return x->n != y->n ? y->n - x->n : strcmp(x->type, y->type);
}

static void gather(const ki_model *m, info *in)
{
    in->flops = 0;
    in->flops_at = "declared shapes";
    for (int i = 0; i < ki_model_n_ops(m); i++) {
        const ki_op_desc *d = ki_model_op(m, i);
        if (strcmp(d->type, "pnnx.Input") == 0 || strcmp(d->type, "pnnx.Output") == 0) {
            continue;
        }
        in->n_ops++;
        count_type(in, d->type);
        for (int a = 0; a < d->n_attrs; a++) {
            in->params += d->attrs[a].numel;
            in->weight_bytes += (size_t)d->attrs[a].numel * ki_dtype_size(d->attrs[a].dtype);
        }
        double f = decl_flops(d);
        in->flops = f < 0 || in->flops < 0 ? -1 : in->flops + f;
    }
    qsort(in->types, (size_t)in->n_types, sizeof in->types[0], cmp_count);
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') {
            putchar('\\');
        }
        if ((unsigned char)*s >= 0x20) {
            putchar(*s);
        }
    }
    putchar('"');
}

/* The declared element type of operand name (from the operator that writes it). */
static const char *operand_type(const ki_model *m, const char *name)
{
    for (int i = 0; i < ki_model_n_ops(m); i++) {
        const ki_op_desc *d = ki_model_op(m, i);
        for (int j = 0; d->output_dtype && j < d->n_outputs; j++) {
            if (strcmp(d->output_names[j], name) == 0 && d->output_dtype[j] != KI_DT_NULL) {
                return ki_dtype_name(d->output_dtype[j]);
            }
        }
    }
    return "?";
}

/* One input or output: name, shape, type. */
static void print_io(const ki_model *m, const char *name, ki_shape s, bool json, bool first)
{
    const char *type = operand_type(m, name);
    char buf[128] = "?";
    if (s.ndim >= 0) {
        ki_shape_str(&s, buf, sizeof buf);
    }
    if (json) {
        printf("%s{\"name\":", first ? "" : ",");
        json_str(name);
        printf(",\"shape\":\"%s\",\"type\":\"%s\"}", buf, type);
    } else {
        printf("  %-24s %s %s\n", name, buf, type);
    }
}

static void print_info(const info_opts *o, const ki_model *m, const info *in)
{
    int ni = ki_model_n_inputs(m), no = ki_model_n_outputs(m);
    if (o->json) {
        printf("{\"model\":");
        json_str(o->param);
        printf(",\"inputs\":[");
    } else {
        printf("%s\ninputs:\n", o->param);
    }
    for (int i = 0; i < ni; i++) {
        print_io(m, ki_model_input_name(m, i), ki_model_input_decl(m, i), o->json, i == 0);
    }
    printf(o->json ? "],\"outputs\":[" : "outputs:\n");
    for (int i = 0; i < no; i++) {
        print_io(m, ki_model_output_name(m, i), ki_model_output_decl(m, i), o->json, i == 0);
    }
    if (o->json) {
        printf("],\"operators\":%d,\"types\":{", in->n_ops);
    } else {
        printf("operators: %d of %d types\n", in->n_ops, in->n_types);
    }
    for (int i = 0; i < in->n_types; i++) {
        const type_count *t = &in->types[i];
        if (o->json) {
            printf("%s", i ? "," : "");
            json_str(t->type);
            printf(":%d", t->n);
        } else {
            printf("  %-28s x%-4d%s\n", t->type, t->n, t->supported ? "" : "  [unsupported]");
        }
    }
    if (o->json) {
        printf("},\"parameters\":%lld,\"weight_bytes\":%zu,\"gflops\":", (long long)in->params,
               in->weight_bytes);
        in->flops >= 0 ? printf("%.4f", in->flops * 1e-9) : printf("null");
        printf(",\"gflops_at\":\"%s\",\"unsupported\":[", in->flops_at);
        for (int i = 0, k = 0; i < in->n_types; i++) {
            if (!in->types[i].supported) {
                printf("%s", k++ ? "," : "");
                json_str(in->types[i].type);
            }
        }
        printf("]}\n");
        return;
    }
    printf("parameters: %lld (%.1f MiB of weights as stored)\n", (long long)in->params,
           (double)in->weight_bytes / (1 << 20));
    if (in->flops >= 0) {
        printf("GFLOPs: %.3f at the %s\n", in->flops * 1e-9, in->flops_at);
    } else {
        printf("GFLOPs: unknown (the annotations leave sizes open: give --input-shape)\n");
    }
    if (in->n_unsupported) {
        printf("unsupported: %d operator type%s kinfer cannot run (marked above)\n",
               in->n_unsupported, in->n_unsupported == 1 ? "" : "s");
    }
}

static int parse_info_args(int argc, char **argv, info_opts *o)
{
    static const char *const names[] = { "--input-shape", "--json", "--help", NULL };
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        char name[64];
        const char *a = argv[i], *eq = ki_cli_split_eq(a, name, sizeof name), *opt = eq ? name : a;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            info_usage(stdout);
            return -1;
        } else if (!eq && strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(opt, "--input-shape") == 0) {
            const char *v = eq ? eq : i + 1 < argc ? argv[++i] : NULL;
            if (!v || o->n_shapes >= BENCH_MAX_INPUTS ||
                !ki_cli_parse_shape(v, &o->shapes[o->n_shapes])) {
                ki_cli_error("info: --input-shape '%s': expected dimensions like 1,3,224,224",
                             v ? v : "");
                return KI_EXIT_USAGE;
            }
            o->n_shapes++;
        } else if (a[0] == '-' && a[1] != '\0') {
            ki_cli_unknown_option("info", opt, names);
            return KI_EXIT_USAGE;
        } else if (npos < 2) {
            *(npos++ == 0 ? &o->param : &o->bin) = a;
        } else {
            ki_cli_error("info: extra argument '%s'", a);
            return KI_EXIT_USAGE;
        }
    }
    if (!o->param) {
        info_usage(stderr);
        return KI_EXIT_USAGE;
    }
    return KI_EXIT_OK;
}

int ki_cli_info(int argc, char **argv)
{
    info_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse_info_args(argc, argv, &o);
    if (rc != KI_EXIT_OK) {
        return rc < 0 ? KI_EXIT_OK : rc;
    }
    ki_error err = { KI_OK, "" };
    ki_model *m = NULL;
    ki_load_options go = { .graph_only = true, .verify_crc = o.bin != NULL };
    if (ki_model_load(o.param, o.bin, &go, &m, &err) != KI_OK) {
        ki_cli_error("%s", err.msg);
        return KI_EXIT_FAIL;
    }
    info *in = calloc(1, sizeof *in);
    if (!in) {
        ki_model_destroy(m);
        return KI_EXIT_FAIL;
    }
    gather(m, in);
    rc = KI_EXIT_OK;
    if (o.n_shapes > 0 && in->n_unsupported == 0) {
        in->flops_at = "given --input-shape";
        if (session_flops(&o, &in->flops, &err) != KI_OK) {
            ki_cli_error("info: %s", err.msg);
            rc = KI_EXIT_FAIL;
        }
    } else if (o.n_shapes > 0) {
        in->flops = -1; /* no session without every operator */
    }
    if (rc == KI_EXIT_OK) {
        print_info(&o, m, in);
        rc = in->n_unsupported ? KI_EXIT_FAIL : KI_EXIT_OK;
    }
    free(in);
    ki_model_destroy(m);
    return rc;
}
