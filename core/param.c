/* param.c - reads a .pnnx.param file into a ki_graph in file order (pnnx-format.md §1).
 * Every count and length is checked against what the file actually holds before anything is
 * allocated for it, so a header claiming a billion operators costs nothing. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckd.h"
#include "graph.h"
#include "io.h"

typedef struct tok {
    const char *s;
    size_t n;
} tok;

typedef struct line_ctx {
    ki_graph *g;
    const char *path;
    int line;
    tok *toks;
    size_t n_toks, cap;
} line_ctx;

static ki_status line_fail(const line_ctx *c, ki_error *err, ki_status code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static ki_status line_fail(const line_ctx *c, ki_error *err, ki_status code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return KI_FAIL(err, code, "%s:%d: %s", c->path, c->line, msg);
}

/* Splits a line on spaces and tabs, dropping empty tokens and a trailing CR. */
static ki_status tokenize(line_ctx *c, const char *s, size_t n, ki_error *err)
{
    c->n_toks = 0;
    if (n > 0 && s[n - 1] == '\r') {
        n--;
    }
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '\t')) {
            i++;
        }
        size_t start = i;
        while (i < n && s[i] != ' ' && s[i] != '\t') {
            i++;
        }
        if (i == start) {
            break;
        }
        if (c->n_toks == c->cap) {
            size_t cap = c->cap ? c->cap * 2 : 64;
            tok *t = realloc(c->toks, cap * sizeof *t);
            if (!t) {
                return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
            }
            c->toks = t;
            c->cap = cap;
        }
        c->toks[c->n_toks].s = s + start;
        c->toks[c->n_toks].n = i - start;
        c->n_toks++;
    }
    return KI_OK;
}

static bool tok_is_count(const tok *t, int max, int *out)
{
    if (t->n == 0 || t->n > 9) {
        return false;
    }
    int v = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (!isdigit((unsigned char)t->s[i])) {
            return false;
        }
        v = v * 10 + (t->s[i] - '0');
    }
    if (v > max) {
        return false;
    }
    *out = v;
    return true;
}

static char *tok_dup(ki_graph *g, const tok *t)
{
    return ki_arena_strndup(g->arena, t->s, t->n);
}

/* Allocates the per-operator arrays of node n for nin inputs and nout outputs. */
static ki_status node_alloc(ki_graph *g, ki_node *nd, int nin, int nout, ki_error *err)
{
    ki_op_desc *d = &nd->desc;
    ki_arena *a = g->arena;
    size_t ni = (size_t)nin + 1, no = (size_t)nout + 1;
    d->n_inputs = nin;
    d->n_outputs = nout;
    d->input_names = ki_arena_calloc(a, ni, sizeof(char *));
    d->output_names = ki_arena_calloc(a, no, sizeof(char *));
    d->input_keys = ki_arena_calloc(a, ni, sizeof(char *));
    ki_shape *idecl = ki_arena_calloc(a, ni, sizeof(ki_shape));
    ki_shape *odecl = ki_arena_calloc(a, no, sizeof(ki_shape));
    d->input_dtype = ki_arena_calloc(a, ni, sizeof(ki_dtype));
    d->output_dtype = ki_arena_calloc(a, no, sizeof(ki_dtype));
    nd->in = ki_arena_calloc(a, ni, sizeof(int));
    nd->out = ki_arena_calloc(a, no, sizeof(int));
    if (!d->input_names || !d->output_names || !d->input_keys || !idecl || !odecl ||
        !d->input_dtype || !d->output_dtype || !nd->in || !nd->out) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < nin; i++) {
        idecl[i].ndim = -1;
    }
    for (int i = 0; i < nout; i++) {
        odecl[i].ndim = -1;
    }
    d->input_decl = idecl;
    d->output_decl = odecl;
    return KI_OK;
}

/* `$key=OPERAND`: the first still-unnamed input whose operand is OPERAND gets the key. */
static ki_status bind_input_key(line_ctx *c, ki_op_desc *d, const tok *key, const tok *val,
                                ki_error *err)
{
    const char **keys = (const char **)d->input_keys;
    for (int i = 0; i < d->n_inputs; i++) {
        if (!keys[i] && strlen(d->input_names[i]) == val->n &&
            memcmp(d->input_names[i], val->s, val->n) == 0) {
            keys[i] = tok_dup(c->g, key);
            return keys[i] ? KI_OK : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
    }
    return line_fail(c, err, KI_ERR_FORMAT, "$%.*s names operand '%.*s', which is not an input",
                     (int)key->n, key->s, (int)val->n, val->s);
}

/* `#OPERAND=(...)TYPE`: the annotation of every input/output slot holding OPERAND. */
static ki_status annotate(line_ctx *c, ki_op_desc *d, const tok *key, const tok *val, ki_error *err)
{
    ki_shape sh;
    ki_dtype dt;
    ki_status st = ki_param_shape_parse(val->s, val->n, true, &sh, &dt, err);
    if (st != KI_OK) {
        return line_fail(c, err, st, "#%.*s: %s", (int)key->n, key->s, err->msg);
    }
    bool found = false;
    for (int io = 0; io < 2; io++) {
        int n = io ? d->n_outputs : d->n_inputs;
        const char *const *names = io ? d->output_names : d->input_names;
        ki_shape *decl = (ki_shape *)(io ? d->output_decl : d->input_decl);
        ki_dtype *dts = (ki_dtype *)(io ? d->output_dtype : d->input_dtype);
        for (int i = 0; i < n; i++) {
            if (strlen(names[i]) == key->n && memcmp(names[i], key->s, key->n) == 0) {
                decl[i] = sh;
                dts[i] = dt;
                found = true;
            }
        }
    }
    if (!found) {
        return line_fail(c, err, KI_ERR_FORMAT,
                         "#%.*s annotates an operand this operator does not use", (int)key->n,
                         key->s);
    }
    return KI_OK;
}

static ki_status add_attr(line_ctx *c, ki_attr *a, const tok *key, const tok *val, ki_error *err)
{
    ki_status st = ki_param_shape_parse(val->s, val->n, false, &a->shape, &a->dtype, err);
    if (st != KI_OK) {
        return line_fail(c, err, st, "@%.*s: %s", (int)key->n, key->s, err->msg);
    }
    if (!ki_shape_numel(&a->shape, &a->numel)) {
        return line_fail(c, err, KI_ERR_LIMIT, "@%.*s: too many elements", (int)key->n, key->s);
    }
    a->key = tok_dup(c->g, key);
    return a->key ? KI_OK : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
}

static ki_status add_param(line_ctx *c, ki_param *p, const tok *key, const tok *val, ki_error *err)
{
    ki_status st = ki_param_value_parse(c->g->arena, val->s, val->n, p, err);
    if (st != KI_OK) {
        return line_fail(c, err, st, "%.*s: %s", (int)key->n, key->s, err->msg);
    }
    p->key = tok_dup(c->g, key);
    return p->key ? KI_OK : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
}

static bool key_seen(const char *const *keys, int n, const tok *key)
{
    for (int i = 0; i < n; i++) {
        if (strlen(keys[i]) == key->n && memcmp(keys[i], key->s, key->n) == 0) {
            return true;
        }
    }
    return false;
}

/* Items: params, @attrs, $keys, #annotations (§1.4). Two passes: count, then fill. */
static ki_status parse_items(line_ctx *c, ki_op_desc *d, size_t first, ki_error *err)
{
    int n_params = 0, n_attrs = 0;
    for (size_t t = first; t < c->n_toks; t++) {
        const tok *k = &c->toks[t];
        if (!memchr(k->s, '=', k->n)) {
            return line_fail(c, err, KI_ERR_FORMAT, "item '%.*s' has no '='",
                             (int)(k->n > 60 ? 60 : k->n), k->s);
        }
        n_params += k->s[0] != '@' && k->s[0] != '$' && k->s[0] != '#';
        n_attrs += k->s[0] == '@';
    }
    if (n_params > KI_MAX_ITEMS || n_attrs > KI_MAX_ITEMS) {
        return line_fail(c, err, KI_ERR_LIMIT, "too many items");
    }
    ki_param *params = ki_arena_calloc(c->g->arena, (size_t)n_params + 1, sizeof *params);
    ki_attr *attrs = ki_arena_calloc(c->g->arena, (size_t)n_attrs + 1, sizeof *attrs);
    const char **pkeys = calloc((size_t)n_params + (size_t)n_attrs + 2, sizeof *pkeys);
    const char **akeys = pkeys + n_params + 1;
    if (!params || !attrs || !pkeys) {
        free(pkeys);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    d->params = params;
    d->attrs = attrs;
    d->n_params = d->n_attrs = 0;
    ki_status st = KI_OK;
    for (size_t t = first; t < c->n_toks && st == KI_OK; t++) {
        const tok *it = &c->toks[t];
        const char *eq = memchr(it->s, '=', it->n);
        char kind = it->s[0];
        bool sigil = kind == '@' || kind == '$' || kind == '#';
        tok key = { it->s + sigil, (size_t)(eq - it->s) - sigil };
        tok val = { eq + 1, it->n - (size_t)(eq + 1 - it->s) };
        if (key.n == 0) {
            st = line_fail(c, err, KI_ERR_FORMAT, "item '%.*s' has an empty key",
                           (int)(it->n > 60 ? 60 : it->n), it->s);
        } else if (kind == '$') {
            st = bind_input_key(c, d, &key, &val, err);
        } else if (kind == '#') {
            st = annotate(c, d, &key, &val, err);
        } else if (kind == '@' ? key_seen(akeys, d->n_attrs, &key)
                               : key_seen(pkeys, d->n_params, &key)) {
            st = line_fail(c, err, KI_ERR_FORMAT, "duplicate %s '%.*s'",
                           kind == '@' ? "attribute" : "parameter", (int)key.n, key.s);
        } else if (kind == '@') {
            st = add_attr(c, &attrs[d->n_attrs], &key, &val, err);
            akeys[d->n_attrs] = attrs[d->n_attrs].key;
            d->n_attrs += st == KI_OK;
        } else {
            st = add_param(c, &params[d->n_params], &key, &val, err);
            pkeys[d->n_params] = params[d->n_params].key;
            d->n_params += st == KI_OK;
        }
    }
    free(pkeys);
    return st;
}

static ki_status parse_op_line(line_ctx *c, ki_node *nd, ki_error *err)
{
    int nin, nout;
    if (c->n_toks < 4) {
        return line_fail(c, err, KI_ERR_FORMAT, "expected 'TYPE NAME NIN NOUT ...', got %zu tokens",
                         c->n_toks);
    }
    if (!tok_is_count(&c->toks[2], KI_MAX_OP_ARGS, &nin) ||
        !tok_is_count(&c->toks[3], KI_MAX_OP_ARGS, &nout)) {
        return line_fail(c, err, KI_ERR_FORMAT, "bad input/output count '%.*s %.*s'",
                         (int)(c->toks[2].n > 20 ? 20 : c->toks[2].n), c->toks[2].s,
                         (int)(c->toks[3].n > 20 ? 20 : c->toks[3].n), c->toks[3].s);
    }
    if (c->n_toks < 4 + (size_t)nin + (size_t)nout) {
        return line_fail(c, err, KI_ERR_FORMAT,
                         "%d inputs and %d outputs declared, %zu names given", nin, nout,
                         c->n_toks - 4);
    }
    ki_status st = node_alloc(c->g, nd, nin, nout, err);
    if (st != KI_OK) {
        return st;
    }
    ki_op_desc *d = &nd->desc;
    d->type = tok_dup(c->g, &c->toks[0]);
    d->name = tok_dup(c->g, &c->toks[1]);
    d->file = c->path;
    d->line = c->line;
    for (int i = 0; i < nin + nout; i++) {
        const char **slot =
            (const char **)(i < nin ? &d->input_names[i] : &d->output_names[i - nin]);
        *slot = tok_dup(c->g, &c->toks[4 + i]);
        if (!*slot) {
            return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
    }
    if (!d->type || !d->name) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    return parse_items(c, d, 4 + (size_t)nin + (size_t)nout, err);
}

/* Next line [*pos, eol); advances *pos past the newline. */
static bool next_line(const char *text, size_t len, size_t *pos, const char **s, size_t *n)
{
    if (*pos >= len) {
        return false;
    }
    const char *start = text + *pos;
    const char *nl = memchr(start, '\n', len - *pos);
    *s = start;
    *n = nl ? (size_t)(nl - start) : len - *pos;
    *pos += *n + (nl ? 1 : 0);
    return true;
}

static ki_status parse_header(line_ctx *c, const char *text, size_t len, size_t *pos, int *n_ops,
                              int *n_operands, ki_error *err)
{
    const char *s;
    size_t n;
    c->line = 1;
    if (!next_line(text, len, pos, &s, &n) || tokenize(c, s, n, err) != KI_OK || c->n_toks != 1 ||
        c->toks[0].n != 7 || memcmp(c->toks[0].s, "7767517", 7) != 0) {
        return line_fail(c, err, KI_ERR_FORMAT,
                         "bad magic: expected 7767517 (not a .pnnx.param file)");
    }
    c->line = 2;
    if (!next_line(text, len, pos, &s, &n) || tokenize(c, s, n, err) != KI_OK || c->n_toks != 2 ||
        !tok_is_count(&c->toks[0], KI_MAX_OPS, n_ops) ||
        !tok_is_count(&c->toks[1], KI_MAX_OPS * 16, n_operands)) {
        return line_fail(c, err, KI_ERR_FORMAT,
                         "expected '<operator_count> <operand_count>' (at most %d operators)",
                         KI_MAX_OPS);
    }
    /* The count must fit the file: each operator takes a line. */
    size_t lines = 0;
    for (size_t i = *pos; i < len; i++) {
        lines += text[i] == '\n';
    }
    lines += len > *pos && text[len - 1] != '\n';
    if ((size_t)*n_ops > lines) {
        return line_fail(c, err, KI_ERR_FORMAT,
                         "header declares %d operators but only %zu lines follow", *n_ops, lines);
    }
    return KI_OK;
}

ki_status ki_param_parse(const char *path, const char *text, size_t len, ki_graph **out,
                         ki_error *err)
{
    ki_graph *g = calloc(1, sizeof *g);
    line_ctx c = { g, path, 0, NULL, 0, 0 };
    size_t pos = 0;
    int n_ops = 0, n_operands = 0;
    ki_status st = KI_ERR_NOMEM;
    if (!g || !(g->arena = ki_arena_create())) {
        KI_FAIL(err, st, "out of memory");
        goto fail;
    }
    g->path = c.path = ki_arena_strndup(g->arena, path, strlen(path));
    st = parse_header(&c, text, len, &pos, &n_ops, &n_operands, err);
    if (st != KI_OK) {
        goto fail;
    }
    g->nodes = ki_arena_calloc(g->arena, (size_t)n_ops + 1, sizeof *g->nodes);
    if (!g->nodes) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory for %d operators", n_ops);
        goto fail;
    }
    while (g->n_nodes < n_ops) {
        const char *s = "";
        size_t n = 0;
        c.line++;
        if (!next_line(text, len, &pos, &s, &n)) {
            st = line_fail(&c, err, KI_ERR_FORMAT, "file ends after %d of %d operators", g->n_nodes,
                           n_ops);
            goto fail;
        }
        if ((st = tokenize(&c, s, n, err)) != KI_OK) {
            goto fail;
        }
        if (c.n_toks == 0) {
            continue; /* tolerate blank lines */
        }
        if ((st = parse_op_line(&c, &g->nodes[g->n_nodes], err)) != KI_OK) {
            goto fail;
        }
        g->n_nodes++;
    }
    g->n_operands = n_operands; /* checked against the real count in ki_graph_build */
    g->state = KI_GRAPH_NEED_BUILD;
    free(c.toks);
    *out = g;
    return KI_OK;
fail:
    free(c.toks);
    ki_graph_destroy(g);
    return st;
}

ki_status ki_param_load(const char *path, ki_graph **out, ki_error *err)
{
    unsigned char *buf;
    size_t len;
    ki_status st = ki_file_read(path, KI_MAX_PARAM_FILE, &buf, &len, err);
    if (st == KI_OK) {
        st = ki_param_parse(path, (const char *)buf, len, out, err);
        free(buf);
    }
    return st;
}

void ki_graph_destroy(ki_graph *g)
{
    if (!g) {
        return;
    }
    ki_arena_destroy(g->arena);
    free(g);
}
