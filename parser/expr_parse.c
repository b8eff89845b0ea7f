/* expr_parse.c - recursive-descent parser from tokens to an n-ary tree, plus compile/destroy.
 *
 * Grammar (pnnx-format.md 4.1): expr = list | term | word; list = "[" [term {"," term}] "]";
 * term = func "(" term {"," term} ")" | @N | literal. pnnx drops empty arguments (`add(@0,,@1)`),
 * so repeated commas between arguments are skipped; a comma before ')' or ']' is an error.
 * Recursion is bounded by KI_EXPR_MAX_DEPTH, the only recursion allowed in kinfer. Nodes live
 * in one growing array and refer to each other by index, so they survive reallocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

typedef struct parser {
    ki_expr *e;
    int pos; /* current token */
    int cap; /* capacity of e->nodes */
    size_t *err_pos;
    ki_error *err;
} parser;

/* Up to this many bytes of a long expression are quoted around the error column. */
#define QUOTE_WINDOW 60

ki_status ki_expr_fail_at(ki_error *err, ki_status code, const ki_expr *e, size_t pos,
                          const char *what)
{
    size_t len = e ? e->len : 0;
    const char *text = e ? e->text : "";
    if (len <= 2 * QUOTE_WINDOW) {
        return KI_FAIL(err, code, "%s at column %zu: %s", what, pos + 1, text);
    }
    size_t from = pos > QUOTE_WINDOW ? pos - QUOTE_WINDOW : 0;
    size_t to = pos + QUOTE_WINDOW < len ? pos + QUOTE_WINDOW : len;
    return KI_FAIL(err, code, "%s at column %zu: %s%.*s%s", what, pos + 1, from ? "..." : "",
                   (int)(to - from), text + from, to < len ? "..." : "");
}

static const ki_expr_token *tok(const parser *ps)
{
    return &ps->e->tokens[ps->pos];
}

static ki_status fail(parser *ps, ki_status code, size_t pos, const char *what)
{
    if (ps->err_pos) {
        *ps->err_pos = pos;
    }
    return ki_expr_fail_at(ps->err, code, ps->e, pos, what);
}

/* Describes the current token for "expected X, got Y" messages. */
static void describe(const parser *ps, char *buf, size_t size)
{
    const ki_expr_token *t = tok(ps);
    if (t->kind == KI_TOK_END) {
        snprintf(buf, size, "the end");
        return;
    }
    int n = (int)(t->end - t->start);
    snprintf(buf, size, "'%.*s%s'", n > 24 ? 24 : n, ps->e->text + t->start, n > 24 ? "..." : "");
}

static ki_status fail_expected(parser *ps, const char *expected, bool at_prev_end)
{
    char got[48], what[128];
    describe(ps, got, sizeof got);
    snprintf(what, sizeof what, "expected %s, got %s", expected, got);
    /* A missing separator belongs right after the previous token. */
    size_t pos = tok(ps)->start;
    if (at_prev_end && ps->pos > 0) {
        pos = ps->e->tokens[ps->pos - 1].end;
    }
    return fail(ps, KI_ERR_FORMAT, pos, what);
}

static ki_status new_node(parser *ps, ki_expr_node_kind kind, int *out)
{
    ki_expr *e = ps->e;
    if (e->n_nodes == ps->cap) {
        int cap = ps->cap ? ps->cap * 2 : 16;
        ki_expr_node *p = realloc(e->nodes, (size_t)cap * sizeof *p);
        if (!p) {
            return KI_FAIL(ps->err, KI_ERR_NOMEM, "out of memory parsing an expression");
        }
        e->nodes = p;
        ps->cap = cap;
    }
    ki_expr_node *n = &e->nodes[e->n_nodes];
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->tok = ps->pos;
    n->parent = n->first_child = n->next_sibling = -1;
    *out = e->n_nodes++;
    return KI_OK;
}

static void add_child(ki_expr *e, int parent, int *last, int child)
{
    e->nodes[child].parent = parent;
    if (*last < 0) {
        e->nodes[parent].first_child = child;
    } else {
        e->nodes[*last].next_sibling = child;
    }
    *last = child;
    e->nodes[parent].n_children++;
}

static ki_status parse_term(parser *ps, int depth, int *out);

/* Parses `term {"," term} close` after the opening token; empty arguments are skipped. */
static ki_status parse_args(parser *ps, int parent, int depth, ki_expr_tok_kind close)
{
    int last = -1, child;
    const char *sep = close == KI_TOK_RPAREN ? "',' or ')'" : "',' or ']'";
    if (tok(ps)->kind == close && close == KI_TOK_RBRACKET) {
        ps->pos++;
        return KI_OK; /* [] is an empty list; f() has the wrong arity, reported by the caller */
    }
    for (;;) {
        ki_status st = parse_term(ps, depth, &child);
        if (st != KI_OK) {
            return st;
        }
        add_child(ps->e, parent, &last, child);
        if (tok(ps)->kind == close) {
            ps->pos++;
            return KI_OK;
        }
        if (tok(ps)->kind != KI_TOK_COMMA) {
            return fail_expected(ps, sep, true);
        }
        while (tok(ps)->kind == KI_TOK_COMMA) {
            ps->pos++;
        }
    }
}

/* depth counts the calls (and the list) enclosing this one, plus one. */
static ki_status parse_call(parser *ps, int depth, int *out)
{
    const ki_expr_token *t = tok(ps);
    if (depth > KI_EXPR_MAX_DEPTH) {
        char what[96];
        snprintf(what, sizeof what, "expression nested deeper than %d levels", KI_EXPR_MAX_DEPTH);
        return fail(ps, KI_ERR_LIMIT, t->start, what);
    }
    const ki_expr_func *f = ki_expr_func_find(ps->e->text + t->start, t->end - t->start);
    size_t name_pos = t->start;
    int node;
    ki_status st = new_node(ps, KI_NODE_CALL, &node);
    if (st != KI_OK) {
        return st;
    }
    ps->e->nodes[node].op = f->op;
    ps->pos++;
    if (tok(ps)->kind != KI_TOK_LPAREN) {
        char what[64];
        snprintf(what, sizeof what, "'%s'", f->name);
        char exp[96];
        snprintf(exp, sizeof exp, "'(' after %s", what);
        return fail_expected(ps, exp, false);
    }
    ps->pos++;
    if (tok(ps)->kind == KI_TOK_RPAREN) {
        ps->pos++;
    } else if ((st = parse_args(ps, node, depth + 1, KI_TOK_RPAREN)) != KI_OK) {
        return st;
    }
    int n = ps->e->nodes[node].n_children;
    if (n < f->min_args || n > f->max_args) {
        char what[128];
        snprintf(what, sizeof what, "'%s' takes %d%s argument%s, got %d", f->name, f->min_args,
                 f->max_args > f->min_args ? " or 2" : "", f->max_args > 1 ? "s" : "", n);
        return fail(ps, KI_ERR_FORMAT, name_pos, what);
    }
    *out = node;
    return KI_OK;
}

/* A leaf: @N or a literal. */
static ki_status parse_leaf(parser *ps, ki_expr_node_kind kind, int *out)
{
    const ki_expr_token *t = tok(ps);
    int64_t ival = t->ival;
    double fval = t->fval, fimag = t->fimag;
    bool is_int = t->kind == KI_TOK_INT || t->kind == KI_TOK_BOOL;
    ki_status st = new_node(ps, kind, out);
    if (st != KI_OK) {
        return st;
    }
    ki_expr_node *n = &ps->e->nodes[*out];
    n->ival = ival;
    n->value = fval;
    n->imag = fimag;
    n->is_int = is_int;
    if (kind == KI_NODE_REF && ival + 1 > ps->e->n_refs) {
        ps->e->n_refs = (int)ival + 1;
    }
    ps->pos++;
    return KI_OK;
}

static ki_status parse_term(parser *ps, int depth, int *out)
{
    const ki_expr_token *t = tok(ps);
    char what[96];
    switch (t->kind) {
    case KI_TOK_NAME:
        return parse_call(ps, depth, out);
    case KI_TOK_REF:
        return parse_leaf(ps, KI_NODE_REF, out);
    case KI_TOK_INT:
    case KI_TOK_FLOAT:
    case KI_TOK_BOOL:
        return parse_leaf(ps, KI_NODE_NUM, out);
    case KI_TOK_COMPLEX:
        return parse_leaf(ps, KI_NODE_COMPLEX, out);
    case KI_TOK_NONE:
        return parse_leaf(ps, KI_NODE_NONE, out);
    case KI_TOK_WORD: {
        int n = (int)(t->end - t->start);
        snprintf(what, sizeof what, "unknown function '%.*s%s'", n > 32 ? 32 : n,
                 ps->e->text + t->start, n > 32 ? "..." : "");
        return fail(ps, KI_ERR_FORMAT, t->start, what);
    }
    case KI_TOK_LBRACKET:
        return fail(ps, KI_ERR_FORMAT, t->start, "a list '[...]' may only be the whole expression");
    default:
        return fail_expected(ps, "a function, @N or a number", false);
    }
}

/* ---- pnnx's own reading: a prefix stream of tokens ----
 * pnnx drops brackets and commas and takes each function's fixed number of operands from the
 * tokens that follow it, so `expm1,sub(@0,0.5)` is expm1(sub(@0,0.5)) and
 * `add(add(@0,expm1),@0),log1p,abs(@1)` is add(add(@0,expm1(@0)),log1p(abs(@1))). Used when
 * the grammar above does not take a text; when this fails too, the grammar's error stands. */

/* The token after p that carries meaning (not a bracket or comma). */
static int next_meaningful(const ki_expr *e, int p)
{
    while (e->tokens[p].kind == KI_TOK_LPAREN || e->tokens[p].kind == KI_TOK_RPAREN ||
           e->tokens[p].kind == KI_TOK_COMMA || e->tokens[p].kind == KI_TOK_RBRACKET) {
        p++;
    }
    return p;
}

/* One prefix term from ps->pos (at a meaningful token), leaving ps->pos after its last token;
 * false when the stream does not parse (the end reached early, a bracket or word in the way). */
static bool prefix_term(parser *ps, int depth, int *out)
{
    ki_expr *e = ps->e;
    const ki_expr_token *t = tok(ps);
    ki_expr_node_kind kind;
    switch (t->kind) {
    case KI_TOK_NAME: {
        const ki_expr_func *f = ki_expr_func_find(e->text + t->start, t->end - t->start);
        int node, last = -1, child;
        if (depth > KI_EXPR_MAX_DEPTH || new_node(ps, KI_NODE_CALL, &node) != KI_OK) {
            return false;
        }
        e->nodes[node].op = f->op;
        ps->pos++;
        for (int i = 0; i < f->max_args; i++) { /* size: its two-operand form */
            ps->pos = next_meaningful(e, ps->pos);
            if (!prefix_term(ps, depth + 1, &child)) {
                return false;
            }
            add_child(e, node, &last, child);
        }
        *out = node;
        return true;
    }
    case KI_TOK_REF:
        kind = KI_NODE_REF;
        break;
    case KI_TOK_INT:
    case KI_TOK_FLOAT:
    case KI_TOK_BOOL:
        kind = KI_NODE_NUM;
        break;
    case KI_TOK_COMPLEX:
        kind = KI_NODE_COMPLEX;
        break;
    case KI_TOK_NONE:
        kind = KI_NODE_NONE;
        break;
    default:
        return false;
    }
    return parse_leaf(ps, kind, out) == KI_OK;
}

/* The whole text as a prefix stream (a list only as the outermost form); false if it does not
 * parse that way either, or its brackets do not pair up (a cut-off text stays an error). */
static bool parse_prefix_stream(parser *ps)
{
    ki_expr *e = ps->e;
    int open = 0, lists = 0;
    for (int i = 0; i < e->n_tokens && open >= 0 && lists >= 0; i++) {
        const ki_expr_tok_kind k = e->tokens[i].kind;
        open += k == KI_TOK_LPAREN ? 1 : k == KI_TOK_RPAREN ? -1 : 0;
        lists += k == KI_TOK_LBRACKET ? 1 : k == KI_TOK_RBRACKET ? -1 : 0;
    }
    if (open != 0 || lists != 0) {
        return false;
    }
    e->n_nodes = 0;
    e->n_refs = 0;
    ps->pos = next_meaningful(e, 0);
    if (tok(ps)->kind != KI_TOK_LBRACKET) {
        if (!prefix_term(ps, 1, &e->root)) {
            return false;
        }
        ps->pos = next_meaningful(e, ps->pos);
        return tok(ps)->kind == KI_TOK_END;
    }
    int last = -1, child;
    if (new_node(ps, KI_NODE_LIST, &e->root) != KI_OK) {
        return false;
    }
    for (ps->pos = next_meaningful(e, ps->pos + 1); tok(ps)->kind != KI_TOK_END;
         ps->pos = next_meaningful(e, ps->pos)) {
        if (!prefix_term(ps, 2, &child)) {
            return false;
        }
        add_child(e, e->root, &last, child);
    }
    return true;
}

ki_status ki_expr_parse(ki_expr *e, size_t *err_pos, ki_error *err)
{
    parser ps = { .e = e, .pos = 0, .cap = 0, .err_pos = err_pos, .err = err };
    const ki_expr_token *t = e->tokens;
    ki_status st;
    e->n_refs = 0;
    if (t[0].kind == KI_TOK_END) {
        return fail(&ps, KI_ERR_FORMAT, 0, "empty expression");
    }
    if (t[0].kind == KI_TOK_WORD && t[1].kind == KI_TOK_END) {
        e->is_string = true; /* a bare word such as meshgrid's indexing="ij" */
        return new_node(&ps, KI_NODE_STRING, &e->root);
    }
    if (t[0].kind == KI_TOK_LBRACKET) {
        if ((st = new_node(&ps, KI_NODE_LIST, &e->root)) != KI_OK) {
            return st;
        }
        ps.pos++;
        st = parse_args(&ps, e->root, 2, KI_TOK_RBRACKET);
    } else {
        st = parse_term(&ps, 1, &e->root);
    }
    if (st == KI_OK && tok(&ps)->kind != KI_TOK_END) {
        st = fail_expected(&ps, "the end of the expression", false);
    }
    /* not the grammar: pnnx's prefix reading (of a text without spaces, as pnnx writes them:
     * its reader would not split `add(@0 @1)`), else the grammar's error (message kept) */
    if (st == KI_ERR_FORMAT && err && !strpbrk(e->text, " \t\r\n\v\f")) {
        ki_error saved = *err;
        size_t saved_pos = err_pos ? *err_pos : 0;
        parser pp = { .e = e, .pos = 0, .cap = ps.cap, .err_pos = NULL, .err = NULL };
        if (parse_prefix_stream(&pp)) {
            return KI_OK;
        }
        *err = saved;
        if (err_pos) {
            *err_pos = saved_pos;
        }
    }
    return st;
}

ki_status ki_expr_compile(const char *text, ki_expr **out, size_t *err_pos, ki_error *err)
{
    size_t len = strlen(text);
    ki_expr *e = calloc(1, sizeof *e);
    ki_status st = KI_ERR_NOMEM;
    if (err_pos) {
        *err_pos = 0;
    }
    if (!e || !(e->text = malloc(len + 1))) {
        KI_FAIL(err, st, "out of memory compiling an expression");
        goto fail;
    }
    memcpy(e->text, text, len + 1);
    e->len = len;
    if ((st = ki_expr_lex(e, err_pos, err)) != KI_OK || (st = ki_expr_parse(e, err_pos, err)) ||
        (st = ki_expr_to_rpn(e, err_pos, err))) {
        goto fail;
    }
    *out = e;
    return KI_OK;
fail:
    ki_expr_destroy(e);
    return st;
}

void ki_expr_destroy(ki_expr *e)
{
    if (!e) {
        return;
    }
    free(e->text);
    free(e->tokens);
    free(e->nodes);
    free(e->code);
    free(e);
}
