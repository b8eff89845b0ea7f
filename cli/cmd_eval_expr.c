/* cmd_eval_expr.c - `kinfer eval-expr EXPR [VALUES...] [--json]`: shows how a pnnx.Expression
 * string is tokenized, parsed and converted to RPN, and evaluates it when values for @0..@N
 * are given. A debugging aid for the expression module, so it uses parser/expr.h directly. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parser/expr.h"
#include "commands.h"

#define MAX_VALUES 64 /* numbers on the command line (also the most list values printed) */

typedef struct eval_args {
    const char *expr;
    double values[MAX_VALUES];
    int n_values;
    int json;
} eval_args;

static void usage(FILE *f)
{
    fputs("usage: kinfer eval-expr EXPR [VALUES...] [--json]\n"
          "\n"
          "Tokenizes, parses and converts a pnnx.Expression `expr` string (for example\n"
          "'add(@0,mul(@1,@2))') and prints the tokens with their byte offsets, the tree, and\n"
          "the RPN code. With VALUES, @0, @1, ... take those numbers and the value is printed\n"
          "(doubles with Python scalar rules, and float32 as tensors compute it).\n"
          "\n"
          "  --json   print all of it as one JSON object\n"
          "  --help   this text\n"
          "\n"
          "Exit status: 0 ok, 1 evaluation error, 2 usage or parse error (the message and a caret\n"
          "under the column go to stderr).\n",
          f);
}

static int parse_args(int argc, char **argv, eval_args *a)
{
    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (!a->expr) {
            a->expr = argv[i];
            continue;
        }
        errno = 0;
        double v = strtod(argv[i], &end);
        if (end == argv[i] || *end != '\0') {
            ki_cli_error("eval-expr: '%s' is not a number or option", argv[i]);
            return 0;
        }
        if (a->n_values == MAX_VALUES) {
            ki_cli_error("eval-expr: at most %d values", MAX_VALUES);
            return 0;
        }
        a->values[a->n_values++] = v;
    }
    if (!a->expr) {
        usage(stderr);
        return 0;
    }
    return 1;
}

/* The message, then the expression (a window of it when long) with a caret under the column. */
static void show_error(const ki_expr *e, size_t pos, const ki_error *err)
{
    size_t from = pos > 60 ? pos - 60 : 0;
    size_t to = e->len - from > 120 ? from + 120 : e->len;
    ki_cli_error("eval-expr: %s", err->msg);
    fprintf(stderr, "  %s%.*s\n  %*s^\n", from ? "..." : "", (int)(to - from), e->text + from,
            (int)(pos - from + (from ? 3 : 0)), "");
}

static const char *tok_kind_name(ki_expr_tok_kind k)
{
    static const char *const names[] = { "end",    "name",    "word",     "ref",     "int",
                                         "float",  "complex", "bool",     "none",    "lparen",
                                         "rparen", "comma",   "lbracket", "rbracket" };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static const char *node_kind_name(ki_expr_node_kind k)
{
    static const char *const names[] = {
        "call", "ref", "num", "complex", "none", "list", "string"
    };
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

/* JSON string with everything outside printable ASCII escaped. */
static void json_str(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            printf("\\%c", c);
        } else if (c < 0x20 || c >= 0x7f) {
            printf("\\u%04x", c);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

/* A number as JSON (non-finite values as strings) or as text. */
static void print_num(double v, int json)
{
    char buf[40];
    if (!isfinite(v)) {
        printf(json ? "\"%s\"" : "%s", isnan(v) ? "nan" : v > 0 ? "inf" : "-inf");
        return;
    }
    snprintf(buf, sizeof buf, "%.15g", v);
    if (strtod(buf, NULL) != v) {
        snprintf(buf, sizeof buf, "%.17g", v);
    }
    fputs(buf, stdout);
}

static const char *node_label(const ki_expr *e, const ki_expr_node *n, char *buf, size_t size)
{
    const ki_expr_token *t = &e->tokens[n->tok];
    if (n->kind == KI_NODE_LIST) {
        return "[list]";
    }
    snprintf(buf, size, "%.*s%s", (int)(t->end - t->start), e->text + t->start,
             n->kind == KI_NODE_STRING ? " (string)" : "");
    return buf;
}

/* Pre-order walk without recursion: children, then siblings, then back up through parents. */
static int next_preorder(const ki_expr *e, int node, int *depth)
{
    if (e->nodes[node].first_child >= 0) {
        (*depth)++;
        return e->nodes[node].first_child;
    }
    while (node >= 0 && e->nodes[node].next_sibling < 0) {
        node = e->nodes[node].parent;
        (*depth)--;
    }
    return node >= 0 ? e->nodes[node].next_sibling : -1;
}

static void print_text(const ki_expr *e)
{
    char buf[128];
    int depth = 0;
    printf("expr: %s\ntokens:\n", e->text);
    for (int i = 0; i < e->n_tokens; i++) {
        const ki_expr_token *t = &e->tokens[i];
        printf("  %-3d %-8s [%zu,%zu) %.*s\n", i, tok_kind_name(t->kind), t->start, t->end,
               (int)(t->end - t->start), e->text + t->start);
    }
    printf("tree:\n");
    for (int n = e->root; n >= 0; n = next_preorder(e, n, &depth)) {
        printf("  %*s%s\n", 2 * depth, "", node_label(e, &e->nodes[n], buf, sizeof buf));
    }
    printf("rpn:");
    for (int k = 0; k < e->n_code; k++) {
        const ki_expr_ins *c = &e->code[k];
        if (c->op == KI_EOP_REF) {
            printf(" @%d", c->ref);
        } else if (c->op == KI_EOP_CONST) {
            putchar(' ');
            print_num(c->value, 0);
        } else if (c->op == KI_EOP_SIZE) {
            printf(" size(@%d,%lld)", c->ref, (long long)c->dim);
        } else if (c->op == KI_EOP_SHAPE) {
            printf(" size(@%d)", c->ref);
        } else if (c->op == KI_EOP_LIST) {
            printf(" list/%d", c->n);
        } else {
            printf(" %s", ki_expr_op_name(c->op));
        }
    }
    printf("\nmax stack: %d\n", e->max_stack);
}

static void print_json_structure(const ki_expr *e)
{
    char buf[128];
    int depth = 0;
    printf("{\"expr\":");
    json_str(e->text, e->len);
    printf(",\"tokens\":[");
    for (int i = 0; i < e->n_tokens; i++) {
        const ki_expr_token *t = &e->tokens[i];
        printf("%s{\"kind\":\"%s\",\"text\":", i ? "," : "", tok_kind_name(t->kind));
        json_str(e->text + t->start, t->end - t->start);
        printf(",\"start\":%zu,\"end\":%zu}", t->start, t->end);
    }
    printf("],\"tree\":[");
    for (int n = e->root; n >= 0;) {
        const ki_expr_node *nd = &e->nodes[n];
        const char *label = node_label(e, nd, buf, sizeof buf);
        printf("%s{\"id\":%d,\"kind\":\"%s\",\"label\":", n == e->root ? "" : ",", n,
               node_kind_name(nd->kind));
        json_str(label, strlen(label));
        printf(",\"depth\":%d,\"parent\":%d,\"children\":[", depth, nd->parent);
        for (int c = nd->first_child; c >= 0; c = e->nodes[c].next_sibling) {
            printf("%s%d", c == nd->first_child ? "" : ",", c);
        }
        printf("]}");
        n = next_preorder(e, n, &depth);
    }
    printf("],\"rpn\":[");
    for (int k = 0; k < e->n_code; k++) {
        const ki_expr_ins *c = &e->code[k];
        printf("%s{\"op\":\"%s\"", k ? "," : "", ki_expr_op_name(c->op));
        if (c->op == KI_EOP_REF || c->op == KI_EOP_SIZE || c->op == KI_EOP_SHAPE) {
            printf(",\"ref\":%d", c->ref);
        }
        if (c->op == KI_EOP_SIZE) {
            printf(",\"dim\":%lld", (long long)c->dim);
        } else if (c->op == KI_EOP_LIST) {
            printf(",\"n\":%d", c->n);
        } else if (c->op == KI_EOP_CONST) {
            printf(",\"value\":");
            print_num(c->value, 1);
        }
        printf("}");
    }
    printf("],\"max_stack\":%d,\"is_list\":%s", e->max_stack, e->is_list ? "true" : "false");
}

static void print_values(const char *key, const double *v, int n, int is_list, int json)
{
    printf(json ? ",\"%s\":%s" : "%s: %s", key, is_list ? "[" : "");
    for (int i = 0; i < n && i < MAX_VALUES; i++) {
        printf("%s", i ? (json ? "," : ", ") : "");
        print_num(v[i], json);
    }
    printf("%s%s", is_list ? "]" : "", json ? "" : "\n");
}

/* Evaluates with doubles and, for plain arithmetic, with float32 like a tensor would. */
static int evaluate(const ki_expr *e, const eval_args *a)
{
    ki_expr_input in[MAX_VALUES];
    float f[MAX_VALUES], f_out = 0;
    double out[MAX_VALUES];
    int n = 0, has_size = 0;
    ki_error err = { 0 };
    for (int i = 0; i < a->n_values; i++) {
        f[i] = (float)a->values[i];
        in[i] = (ki_expr_input){ .data = &f[i], .step = 0, .value = a->values[i], .ndim = -1 };
    }
    ki_expr_scalar *stack = malloc((size_t)e->max_stack * sizeof *stack);
    float *fstack = malloc((size_t)e->max_stack * sizeof *fstack);
    ki_status st = (stack && fstack) ? KI_OK : KI_ERR_NOMEM;
    if (st == KI_OK) {
        st = ki_expr_eval_scalar(e, in, a->n_values, stack, out, MAX_VALUES, &n, &err);
    }
    for (int k = 0; k < e->n_code; k++) {
        has_size |= e->code[k].op == KI_EOP_SIZE;
    }
    if (st == KI_OK && !e->is_list && !has_size) {
        ki_expr_eval_chunk(e, in, 1, fstack, &f_out);
    }
    free(stack);
    free(fstack);
    if (st != KI_OK) {
        ki_cli_error("eval-expr: %s", st == KI_ERR_NOMEM ? "out of memory" : err.msg);
        return KI_EXIT_FAIL;
    }
    print_values("value", out, n, e->is_list, a->json);
    if (!e->is_list && !has_size) {
        double fv = f_out;
        print_values("value_f32", &fv, 1, 0, a->json);
    }
    return KI_EXIT_OK;
}

static int report(const ki_expr *e, const eval_args *a)
{
    int rc = KI_EXIT_OK;
    if (a->json) {
        print_json_structure(e);
    } else {
        print_text(e);
    }
    if (a->n_values > 0 && a->n_values < e->n_refs) {
        ki_cli_error("eval-expr: the expression uses @%d, so give %d values", e->n_refs - 1,
                     e->n_refs);
        rc = KI_EXIT_USAGE;
    } else if (a->n_values > 0 || (e->n_refs == 0 && !e->is_string)) {
        rc = evaluate(e, a);
    } else if (e->is_string && !a->json) {
        printf("value: the string '%s'\n", e->text);
    }
    if (a->json) {
        printf("}\n");
    }
    return rc;
}

int ki_cli_eval_expr(int argc, char **argv)
{
    eval_args a = { 0 };
    size_t pos = 0;
    ki_error err = { 0 };
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return KI_EXIT_OK;
        }
    }
    if (!parse_args(argc, argv, &a)) {
        return KI_EXIT_USAGE;
    }
    ki_expr *e = calloc(1, sizeof *e);
    if (!e || !(e->text = strdup(a.expr))) {
        free(e);
        ki_cli_error("eval-expr: out of memory");
        return KI_EXIT_FAIL;
    }
    e->len = strlen(e->text);
    ki_status st = ki_expr_lex(e, &pos, &err);
    if (st == KI_OK && (st = ki_expr_parse(e, &pos, &err)) == KI_OK) {
        st = ki_expr_to_rpn(e, &pos, &err);
    }
    int rc = KI_EXIT_USAGE;
    if (st == KI_OK) {
        rc = report(e, &a);
    } else {
        show_error(e, pos, &err);
    }
    ki_expr_destroy(e);
    return rc;
}
