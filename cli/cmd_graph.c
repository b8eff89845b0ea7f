/* cmd_graph.c - `kinfer dump-graph` and `kinfer ops`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/kinfer.h"
#include "../layers/registry.h"
#include "commands.h"
#include "npy.h"

static void print_operands(FILE *f, const ki_op_desc *d, bool outputs)
{
    int n = outputs ? d->n_outputs : d->n_inputs;
    char buf[128];
    for (int i = 0; i < n; i++) {
        const ki_shape *sh = outputs ? &d->output_decl[i] : &d->input_decl[i];
        fprintf(f, "%s%s%s", i ? " " : "", outputs ? d->output_names[i] : d->input_names[i],
                sh->ndim >= 0 ? ki_shape_str(sh, buf, sizeof buf) : "");
    }
}

/* Whether kinfer runs operators of this type (the graph's own input, output and tuple markers
 * count as supported: the loader handles them). */
static bool supported(const char *type)
{
    return ki_registry_find(type) || strcmp(type, "pnnx.Input") == 0 ||
           strcmp(type, "pnnx.Output") == 0 || strcmp(type, "prim::TupleConstruct") == 0 ||
           strcmp(type, "prim::ListUnpack") == 0;
}

static void print_op(FILE *f, int i, const ki_op_desc *d)
{
    char buf[128];
    fprintf(f, "%4d  %-24s %-24s ", i, d->type, d->name);
    if (!supported(d->type)) {
        fputs("[unsupported] ", f);
    }
    print_operands(f, d, false);
    fputs(" -> ", f);
    print_operands(f, d, true);
    for (int k = 0; k < d->n_params; k++) {
        fprintf(f, "  %s=%s", d->params[k].key, d->params[k].raw);
    }
    for (int k = 0; k < d->n_attrs; k++) {
        fprintf(f, "  @%s%s%s", d->attrs[k].key, ki_shape_str(&d->attrs[k].shape, buf, sizeof buf),
                d->attrs[k].dtype == KI_DT_F32 ? ""
                                               : (d->attrs[k].dtype == KI_DT_F16 ? "f16" : "*"));
    }
    fputc('\n', f);
}

/* Graphviz: one node per operator, one edge per operand use, labelled with the shape. */
static char *dot_text(const ki_model *m, size_t *len)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) {
        return NULL;
    }
    fprintf(f, "digraph kinfer {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n");
    int n = ki_model_n_ops(m);
    for (int i = 0; i < n; i++) {
        const ki_op_desc *d = ki_model_op(m, i);
        fprintf(f, "  op%d [label=\"%s\\n%s\"%s];\n", i, d->type, d->name,
                supported(d->type) ? "" : ", color=red, fontcolor=red");
    }
    char sh[128];
    for (int i = 0; i < n; i++) {
        const ki_op_desc *d = ki_model_op(m, i);
        for (int o = 0; o < d->n_outputs; o++) {
            for (int j = 0; j < n; j++) {
                const ki_op_desc *c = ki_model_op(m, j);
                for (int k = 0; k < c->n_inputs; k++) {
                    if (strcmp(c->input_names[k], d->output_names[o]) == 0) {
                        fprintf(f, "  op%d -> op%d [label=\"%s%s\"];\n", i, j, d->output_names[o],
                                d->output_decl[o].ndim >= 0
                                    ? ki_shape_str(&d->output_decl[o], sh, sizeof sh)
                                    : "");
                    }
                }
            }
        }
    }
    fprintf(f, "}\n");
    fclose(f);
    return buf;
}

static void dump_usage(FILE *f)
{
    fprintf(f,
            "usage: kinfer dump-graph MODEL.pnnx.param [MODEL.pnnx.bin] [--dot FILE]\n"
            "\n"
            "Prints the operators in execution order: index, type, name, input operands ->\n"
            "output operands with their annotated shapes, parameters and attribute shapes\n"
            "(f16 marks half-precision weights), [unsupported] before operators kinfer does not\n"
            "run. With a .bin, every weight entry is checked.\n"
            "  --dot FILE   also write the graph in Graphviz format to FILE; with '-' only the\n"
            "               Graphviz text goes to stdout (unsupported operators in red)\n");
}

int ki_cli_dump_graph(int argc, char **argv)
{
    const char *files[2] = { NULL, NULL }, *dot = NULL;
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            dump_usage(stdout);
            return KI_EXIT_OK;
        } else if (strcmp(argv[i], "--dot") == 0 && i + 1 < argc) {
            dot = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            ki_cli_error("dump-graph: unknown option '%s'", argv[i]);
            return KI_EXIT_USAGE;
        } else if (nf < 2) {
            files[nf++] = argv[i];
        } else {
            dump_usage(stderr);
            return KI_EXIT_USAGE;
        }
    }
    if (nf == 0) {
        dump_usage(stderr);
        return KI_EXIT_USAGE;
    }
    ki_error err;
    ki_model *m;
    ki_load_options opt = { .graph_only = true, .verify_crc = true };
    if (ki_model_load(files[0], files[1], &opt, &m, &err) != KI_OK) {
        ki_cli_error("%s", err.msg);
        return KI_EXIT_FAIL;
    }
    int n = ki_model_n_ops(m);
    if (!dot || strcmp(dot, "-") != 0) { /* with --dot - stdout holds only the DOT text */
        printf("# %s: %d operators, %d input%s, %d output%s", files[0], n, ki_model_n_inputs(m),
               ki_model_n_inputs(m) == 1 ? "" : "s", ki_model_n_outputs(m),
               ki_model_n_outputs(m) == 1 ? "" : "s");
        if (files[1]) {
            printf(", %.1f MiB of weights as float32",
                   (double)ki_model_weight_bytes(m) / (1 << 20));
        }
        printf("\n");
        for (int i = 0; i < n; i++) {
            print_op(stdout, i, ki_model_op(m, i));
        }
    }
    int rc = KI_EXIT_OK;
    if (dot) {
        size_t len;
        char *text = dot_text(m, &len);
        if (!text) {
            ki_cli_error("out of memory");
            rc = KI_EXIT_FAIL;
        } else if (strcmp(dot, "-") == 0) {
            fwrite(text, 1, len, stdout);
        } else if (ki_file_write_atomic(dot, text, len, &err) != KI_OK) {
            ki_cli_error("%s", err.msg);
            rc = KI_EXIT_FAIL;
        }
        free(text);
    }
    ki_model_destroy(m);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int ki_cli_ops(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: kinfer ops\n\nLists the PNNX operator types kinfer can run, one a line.\n");
        return KI_EXIT_OK;
    }
    if (argc > 1) {
        ki_cli_error("ops: takes no arguments");
        return KI_EXIT_USAGE;
    }
    int n = ki_registry_count();
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) {
        return KI_EXIT_FAIL;
    }
    for (int i = 0; i < n; i++) {
        names[i] = ki_registry_at(i)->type;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        puts(names[i]);
    }
    free(names);
    return KI_EXIT_OK;
}
