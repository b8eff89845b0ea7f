/* fold.c - rewrites of TorchScript leftovers that carry lists and strings between operators,
 * which kinfer's operands (one tensor or small value each) cannot hold. They run after names
 * are resolved and before the graph is sorted (pnnx-format.md §3.6):
 *
 *  - a pnnx.Expression whose expr is a list of bare inputs, `[@0,@1]`, feeding a tensor-list
 *    consumer (aten::meshgrid, torch.stack, torch.cat): the consumer takes the tensors directly;
 *  - a pnnx.Expression whose expr is a bare word (`ij`): each consumer gets it as a string
 *    parameter (meshgrid's `indexing`) instead of an input;
 *  - prim::ListUnpack as the only consumer of a list output: the producer gets the unpacked
 *    outputs directly.
 * Operators left without consumers by a rewrite are removed. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

static const char *expr_of(const ki_node *nd)
{
    if (strcmp(nd->desc.type, "pnnx.Expression") != 0) {
        return NULL;
    }
    const ki_param *p = ki_op_param(&nd->desc, "expr");
    return p ? p->raw : NULL;
}

/* `[@i,@j,...]` with every element a bare input reference: fills idx, returns the count. */
static int bare_input_list(const char *e, int n_inputs, int *idx, int max)
{
    size_t len = strlen(e);
    if (len < 3 || e[0] != '[' || e[len - 1] != ']') {
        return -1;
    }
    int n = 0;
    const char *p = e + 1;
    while (*p != ']') {
        if (*p != '@' || !isdigit((unsigned char)p[1]) || n == max) {
            return -1;
        }
        char *end;
        long v = strtol(p + 1, &end, 10);
        if (v >= n_inputs || (*end != ',' && *end != ']')) {
            return -1;
        }
        idx[n++] = (int)v;
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

static bool bare_word(const char *e)
{
    if (!isalpha((unsigned char)e[0]) && e[0] != '_') {
        return false;
    }
    for (const char *p = e; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '_') {
            return false;
        }
    }
    return strcmp(e, "True") != 0 && strcmp(e, "False") != 0 && strcmp(e, "None") != 0 &&
           strcmp(e, "inf") != 0 && strcmp(e, "nan") != 0;
}

static bool takes_tensor_list(const char *type)
{
    return strcmp(type, "aten::meshgrid") == 0 || strcmp(type, "torch.meshgrid") == 0 ||
           strcmp(type, "torch.stack") == 0 || strcmp(type, "torch.cat") == 0;
}

/* Replaces input slot j of nd by the k operands in ops (k may be 0: the slot is dropped). */
static ki_status splice_inputs(ki_graph *g, ki_node *nd, int j, const int *ops, int k,
                               ki_error *err)
{
    ki_op_desc *d = &nd->desc;
    int n = d->n_inputs - 1 + k;
    size_t cap = (size_t)n + 1;
    int *in = ki_arena_calloc(g->arena, cap, sizeof *in);
    const char **names = ki_arena_calloc(g->arena, cap, sizeof *names);
    const char **keys = ki_arena_calloc(g->arena, cap, sizeof *keys);
    ki_shape *decl = ki_arena_calloc(g->arena, cap, sizeof *decl);
    ki_dtype *dt = ki_arena_calloc(g->arena, cap, sizeof *dt);
    if (!in || !names || !keys || !decl || !dt) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    int w = 0;
    for (int i = 0; i < d->n_inputs; i++) {
        if (i != j) {
            in[w] = nd->in[i], names[w] = d->input_names[i], keys[w] = d->input_keys[i];
            decl[w] = d->input_decl[i], dt[w] = d->input_dtype[i];
            w++;
            continue;
        }
        g->operands[nd->in[i]].n_consumers--;
        for (int t = 0; t < k; t++, w++) {
            const ki_operand *o = &g->operands[ops[t]];
            in[w] = ops[t], names[w] = o->name, keys[w] = NULL, decl[w] = o->decl, dt[w] = o->dtype;
            g->operands[ops[t]].n_consumers++;
        }
    }
    nd->in = in;
    d->input_names = names;
    d->input_keys = keys;
    d->input_decl = decl;
    d->input_dtype = dt;
    d->n_inputs = n;
    return KI_OK;
}

static ki_status add_string_param(ki_graph *g, ki_node *nd, const char *key, const char *value,
                                  ki_error *err)
{
    ki_op_desc *d = &nd->desc;
    ki_param *p = ki_arena_calloc(g->arena, (size_t)d->n_params + 1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    memcpy(p, d->params, (size_t)d->n_params * sizeof *p);
    ki_param *np = &p[d->n_params];
    ki_status st = ki_param_value_parse(g->arena, value, strlen(value), np, err);
    if (st != KI_OK) {
        return st;
    }
    np->key = key;
    d->params = p;
    d->n_params++;
    return KI_OK;
}

/* Rewrites every consumer slot that reads operand o, produced by expression node p. */
static ki_status fold_expr_output(ki_graph *g, int p, ki_error *err)
{
    ki_node *pn = &g->nodes[p];
    const char *e = expr_of(pn);
    int idx[KI_MAX_VALUES * 8];
    int k = bare_input_list(e, pn->desc.n_inputs, idx, (int)(sizeof idx / sizeof idx[0]));
    bool word = k < 0 && pn->desc.n_inputs == 0 && bare_word(e);
    int o = pn->out[0], ops[KI_MAX_VALUES * 8];
    for (int t = 0; t < k; t++) {
        ops[t] = pn->in[idx[t]];
    }
    for (int n = 0; n < g->n_nodes && (k >= 0 || word); n++) {
        ki_node *c = &g->nodes[n];
        for (int j = 0; j < c->desc.n_inputs; j++) {
            if (c->in[j] != o || (k >= 0 && !takes_tensor_list(c->desc.type))) {
                continue;
            }
            const char *key = c->desc.input_keys[j];
            if (word) {
                key = key ? key : (strstr(c->desc.type, "meshgrid") ? "indexing" : "arg");
                ki_status st = add_string_param(g, c, key, e, err);
                if (st == KI_OK) {
                    st = splice_inputs(g, c, j, NULL, 0, err);
                }
                if (st != KI_OK) {
                    return st;
                }
            } else if (splice_inputs(g, c, j, ops, k, err) != KI_OK) {
                return KI_ERR_NOMEM;
            }
            j = -1; /* the slots moved: scan this node again */
        }
    }
    return KI_OK;
}

/* prim::ListUnpack u as the only consumer of its producer's output: the producer takes u's
 * outputs in place of the list. */
static ki_status fold_unpack(ki_graph *g, int u, ki_error *err)
{
    ki_node *un = &g->nodes[u];
    int lst = un->in[0];
    ki_operand *lo = &g->operands[lst];
    if (un->desc.n_inputs != 1 || lo->producer < 0 || lo->n_consumers != 1) {
        return KI_OK;
    }
    ki_node *pn = &g->nodes[lo->producer];
    ki_op_desc *d = &pn->desc;
    int slot = lo->producer_slot, k = un->desc.n_outputs, n = d->n_outputs - 1 + k;
    size_t cap = (size_t)n + 1;
    int *out = ki_arena_calloc(g->arena, cap, sizeof *out);
    const char **names = ki_arena_calloc(g->arena, cap, sizeof *names);
    ki_shape *decl = ki_arena_calloc(g->arena, cap, sizeof *decl);
    ki_dtype *dt = ki_arena_calloc(g->arena, cap, sizeof *dt);
    if (!out || !names || !decl || !dt) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    int w = 0;
    for (int i = 0; i < d->n_outputs; i++) {
        int cnt = i == slot ? k : 1;
        for (int t = 0; t < cnt; t++, w++) {
            out[w] = i == slot ? un->out[t] : pn->out[i];
            names[w] = i == slot ? un->desc.output_names[t] : d->output_names[i];
            decl[w] = i == slot ? un->desc.output_decl[t] : d->output_decl[i];
            dt[w] = i == slot ? un->desc.output_dtype[t] : d->output_dtype[i];
            g->operands[out[w]].producer = lo->producer;
            g->operands[out[w]].producer_slot = w;
        }
    }
    pn->out = out;
    d->output_names = names;
    d->output_decl = decl;
    d->output_dtype = dt;
    d->n_outputs = n;
    lo->n_consumers = 0;
    lo->producer = -1;
    un->desc.n_inputs = un->desc.n_outputs = 0; /* now dead */
    return KI_OK;
}

/* Removes nodes that produce nothing anyone reads, when they are folded leftovers. */
static void drop_dead(ki_graph *g)
{
    int w = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        ki_node *nd = &g->nodes[n];
        bool unpacked = strcmp(nd->desc.type, "prim::ListUnpack") == 0 && nd->desc.n_outputs == 0;
        bool unused_expr =
            expr_of(nd) && nd->desc.n_outputs == 1 && g->operands[nd->out[0]].n_consumers == 0;
        if (unpacked || unused_expr) {
            for (int i = 0; i < nd->desc.n_inputs; i++) {
                g->operands[nd->in[i]].n_consumers--;
            }
            if (unused_expr) {
                g->operands[nd->out[0]].producer = -1;
            }
            continue;
        }
        g->nodes[w] = *nd;
        for (int i = 0; i < nd->desc.n_outputs; i++) {
            g->operands[nd->out[i]].producer = w;
        }
        w++;
    }
    g->n_nodes = w;
}

ki_status ki_graph_fold(ki_graph *g, ki_error *err)
{
    bool changed = false;
    for (int n = 0; n < g->n_nodes; n++) {
        ki_node *nd = &g->nodes[n];
        ki_status st = KI_OK;
        if (expr_of(nd) && nd->desc.n_outputs == 1) {
            int before = g->operands[nd->out[0]].n_consumers;
            st = fold_expr_output(g, n, err);
            changed = changed || g->operands[nd->out[0]].n_consumers != before;
        } else if (strcmp(nd->desc.type, "prim::ListUnpack") == 0) {
            st = fold_unpack(g, n, err);
            changed = true;
        }
        if (st != KI_OK) {
            return st;
        }
    }
    if (changed) {
        drop_dead(g);
    }
    return KI_OK;
}
