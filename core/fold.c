/* fold.c - rewrites of TorchScript leftovers that carry lists and strings between operators,
 * which kinfer's operands (one tensor or small value each) cannot hold. They run after names
 * are resolved and before the graph is sorted (pnnx-format.md §3.6):
 *
 *  - a pnnx.Expression whose expr is a list of bare inputs, `[@0,@1]`, feeding a tensor-list
 *    consumer (aten::meshgrid, torch.stack, torch.cat): the consumer takes the tensors directly;
 *  - a pnnx.Expression whose expr is a list of None and bare inputs, `[None,@0]`, feeding the
 *    indices of Tensor.index / Tensor.index_put: the consumer takes the tensors directly, in
 *    order, and a string parameter `indices_pattern` with one letter per element (N for None,
 *    T for the next tensor);
 *  - a pnnx.Expression whose expr is a bare word (`ij`): each consumer gets it as a string
 *    parameter (meshgrid's `indexing`) instead of an input;
 *  - prim::ListUnpack as the only consumer of a list output: the producer gets the unpacked
 *    outputs directly.
 * Operators left without consumers by a rewrite are removed. */
#include <ctype.h>
#include <stdio.h>
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

/* `[x,y,...]` with every element None or a bare input reference: fills idx with the references
 * in order and pat with N / T per element (NUL-terminated); returns the count of references. */
static int index_list(const char *e, int n_inputs, int *idx, int max, char *pat)
{
    size_t len = strlen(e);
    if (len < 3 || e[0] != '[' || e[len - 1] != ']') {
        return -1;
    }
    int n = 0, np = 0;
    const char *p = e + 1;
    while (*p != ']') {
        char *end = (char *)p + 4;
        if (strncmp(p, "None", 4) == 0) {
            pat[np++] = 'N';
        } else if (*p == '@' && isdigit((unsigned char)p[1]) && n < max) {
            long v = strtol(p + 1, &end, 10);
            if (v >= n_inputs) {
                return -1;
            }
            idx[n++] = (int)v;
            pat[np++] = 'T';
        } else {
            return -1;
        }
        if ((*end != ',' && *end != ']') || np == KI_MAX_DIMS) {
            return -1;
        }
        p = *end == ',' ? end + 1 : end;
    }
    pat[np] = '\0';
    return n;
}

static bool takes_index_list(const char *type)
{
    return strcmp(type, "Tensor.index") == 0 || strcmp(type, "Tensor.index_put") == 0;
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

/* ---- index lists with computed elements: `[remainder(@0,2),None,@1]` feeding Tensor.index
 * becomes a new pnnx.Expression per computed element and the list `[@0,None,@1]` over their
 * outputs, which the splice below then hands to the consumer. ---- */

/* Splits the top-level elements of list e (`[a,b(c,d),...]`) into start / length pairs. */
static int list_elements(const char *e, int *start, int *len, int max)
{
    size_t n = strlen(e);
    int count = 0, depth = 0, from = 1;
    if (n < 3 || e[0] != '[' || e[n - 1] != ']') {
        return -1;
    }
    for (int i = 1; i < (int)n; i++) {
        depth += (e[i] == '(' || e[i] == '[') - (e[i] == ')' || e[i] == ']');
        if ((depth == 0 && e[i] == ',') || depth < 0) {
            if (count == max || i == from) {
                return -1;
            }
            start[count] = from, len[count++] = i - from;
            from = i + 1;
        }
    }
    return depth == -1 ? count : -1;
}

static bool feeds_index(const ki_graph *g, int o)
{
    for (int n = 0; n < g->n_nodes; n++) {
        for (int j = 0; j < g->nodes[n].desc.n_inputs; j++) {
            if (g->nodes[n].in[j] == o && takes_index_list(g->nodes[n].desc.type)) {
                return true;
            }
        }
    }
    return false;
}

/* Copies text (len bytes) with each @N renumbered to its position in refs (appended when new);
 * fails when a reference is out of range. */
static char *renumber(ki_arena *a, const char *text, int len, int n_in, int *refs, int *n_refs)
{
    char *out = ki_arena_calloc(a, (size_t)len * 2 + 16, 1);
    int w = 0;
    for (int i = 0; out && i < len; i++) {
        if (text[i] != '@' || !isdigit((unsigned char)text[i + 1])) {
            out[w++] = text[i];
            continue;
        }
        int v = 0, t = 0;
        for (i++; i < len && isdigit((unsigned char)text[i]) && v <= n_in; i++) {
            v = v * 10 + (text[i] - '0');
        }
        i--;
        if (v >= n_in) {
            return NULL;
        }
        while (t < *n_refs && refs[t] != v) {
            t++;
        }
        refs[t] = v, *n_refs += t == *n_refs;
        w += snprintf(out + w, 16, "@%d", t);
    }
    return out;
}

/* Appends an expression node computing text over operands ops[0..n-1] of list node p; returns
 * the new operand's index or -1 when out of memory. */
static int add_expr_node(ki_graph *g, int p, const char *text, const int *ops, int n, int k)
{
    ki_node *nodes = ki_arena_calloc(g->arena, (size_t)g->n_nodes + 1, sizeof *nodes);
    ki_operand *opd = ki_arena_calloc(g->arena, (size_t)g->n_operands + 1, sizeof *opd);
    ki_param *prm = ki_arena_calloc(g->arena, 1, sizeof *prm);
    int *io = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *io);
    const char **names = ki_arena_calloc(g->arena, (size_t)n + 2, sizeof *names);
    const char **keys = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *keys);
    ki_shape *decl = ki_arena_calloc(g->arena, (size_t)n + 2, sizeof *decl);
    ki_dtype *dt = ki_arena_calloc(g->arena, (size_t)n + 2, sizeof *dt);
    char *name = ki_arena_calloc(g->arena, strlen(g->nodes[p].desc.name) + 16, 1);
    if (!nodes || !opd || !prm || !io || !names || !keys || !decl || !dt || !name) {
        return -1;
    }
    memcpy(nodes, g->nodes, (size_t)g->n_nodes * sizeof *nodes);
    memcpy(opd, g->operands, (size_t)g->n_operands * sizeof *opd);
    sprintf(name, "%s.%d", g->nodes[p].desc.name, k);
    const int no = g->n_operands, nn = g->n_nodes;
    opd[no] = (ki_operand){ .name = name, .producer = nn, .n_consumers = 0 };
    opd[no].decl.ndim = -1;
    for (int t = 0; t < n; t++) {
        io[t] = ops[t], names[t] = opd[ops[t]].name, decl[t] = opd[ops[t]].decl;
        dt[t] = opd[ops[t]].dtype;
        opd[ops[t]].n_consumers++;
    }
    io[n] = no, names[n] = name, decl[n].ndim = -1;
    *prm = (ki_param){ .key = "expr", .raw = text, .kind = KI_PARAM_STRING, .s = text };
    ki_node *nd = &nodes[nn];
    nd->desc = g->nodes[p].desc;
    nd->desc.name = name, nd->desc.n_inputs = n, nd->desc.n_outputs = 1;
    nd->desc.input_names = names, nd->desc.output_names = names + n;
    nd->desc.input_keys = keys, nd->desc.input_decl = decl, nd->desc.output_decl = decl + n;
    nd->desc.input_dtype = dt, nd->desc.output_dtype = dt + n;
    nd->desc.n_params = 1, nd->desc.params = prm, nd->desc.n_attrs = 0, nd->desc.attrs = NULL;
    nd->in = io, nd->out = io + n;
    g->nodes = nodes, g->operands = opd;
    g->n_nodes++, g->n_operands++;
    return no;
}

/* List node p now reads ops[0..n-1] and computes text. */
static ki_status rewrite_list_node(ki_graph *g, int p, const char *text, const int *ops, int n,
                                   ki_error *err)
{
    ki_node *nd = &g->nodes[p];
    ki_op_desc *d = &nd->desc;
    int *in = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *in);
    const char **names = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *names);
    const char **keys = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *keys);
    ki_shape *decl = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *decl);
    ki_dtype *dt = ki_arena_calloc(g->arena, (size_t)n + 1, sizeof *dt);
    ki_param *prm = ki_arena_calloc(g->arena, (size_t)d->n_params + 1, sizeof *prm);
    if (!in || !names || !keys || !decl || !dt || !prm) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < d->n_inputs; i++) {
        g->operands[nd->in[i]].n_consumers--;
    }
    for (int t = 0; t < n; t++) {
        const ki_operand *o = &g->operands[ops[t]];
        in[t] = ops[t], names[t] = o->name, decl[t] = o->decl, dt[t] = o->dtype;
        g->operands[ops[t]].n_consumers++;
    }
    memcpy(prm, d->params, (size_t)d->n_params * sizeof *prm);
    for (int i = 0; i < d->n_params; i++) {
        if (strcmp(prm[i].key, "expr") == 0) {
            prm[i].raw = prm[i].s = text;
            prm[i].kind = KI_PARAM_STRING;
        }
    }
    nd->in = in;
    d->params = prm;
    d->input_names = names, d->input_keys = keys, d->input_decl = decl, d->input_dtype = dt;
    d->n_inputs = n;
    return KI_OK;
}

/* Rewrites list node p when it feeds an index and has computed elements. */
static ki_status split_index_list(ki_graph *g, int p, ki_error *err)
{
    const char *e = expr_of(&g->nodes[p]);
    int start[KI_MAX_DIMS], len[KI_MAX_DIMS], ops[KI_MAX_DIMS], n_ops = 0, idx[KI_MAX_DIMS];
    char pat[KI_MAX_DIMS + 1];
    const int n_in = g->nodes[p].desc.n_inputs, o = g->nodes[p].out[0];
    int n_el = list_elements(e, start, len, KI_MAX_DIMS);
    if (n_el < 1 || index_list(e, n_in, idx, KI_MAX_DIMS, pat) >= 0 || !feeds_index(g, o)) {
        return KI_OK;
    }
    char *list = ki_arena_calloc(g->arena, (size_t)n_el * 8 + 3, 1);
    int w = 0;
    for (int k = 0; list && k < n_el; k++) {
        const char *el = e + start[k];
        int refs[KI_MAX_DIMS * 4], n_refs = 0, sub[KI_MAX_DIMS * 4];
        w += sprintf(list + w, k ? "," : "[");
        if (len[k] == 4 && strncmp(el, "None", 4) == 0) {
            w += sprintf(list + w, "None");
            continue;
        }
        char *end;
        long v = el[0] == '@' && isdigit((unsigned char)el[1]) ? strtol(el + 1, &end, 10) : -1;
        if (v >= 0 && v < n_in && end == el + len[k]) { /* a bare input stays as it is */
            ops[n_ops] = g->nodes[p].in[v];
            w += sprintf(list + w, "@%d", n_ops++);
            continue;
        }
        char *text =
            renumber(g->arena, el, len[k], n_in < KI_MAX_DIMS * 4 ? n_in : 0, refs, &n_refs);
        if (!text) {
            return KI_OK; /* left for the expression layer to report */
        }
        for (int t = 0; t < n_refs; t++) {
            sub[t] = g->nodes[p].in[refs[t]];
        }
        int nop = add_expr_node(g, p, text, sub, n_refs, k);
        if (nop < 0) {
            return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
        ops[n_ops] = nop;
        w += sprintf(list + w, "@%d", n_ops++);
    }
    if (!list) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    sprintf(list + w, "]");
    return rewrite_list_node(g, p, list, ops, n_ops, err);
}

/* Rewrites every consumer slot that reads operand o, produced by expression node p. */
static ki_status fold_expr_output(ki_graph *g, int p, ki_error *err)
{
    ki_node *pn = &g->nodes[p];
    const char *e = expr_of(pn);
    int idx[KI_MAX_VALUES * 8];
    int k = bare_input_list(e, pn->desc.n_inputs, idx, (int)(sizeof idx / sizeof idx[0]));
    bool word = k < 0 && pn->desc.n_inputs == 0 && bare_word(e);
    int o = pn->out[0], ops[KI_MAX_VALUES * 8], iidx[KI_MAX_DIMS], iops[KI_MAX_DIMS];
    char pat[KI_MAX_DIMS + 1];
    int ki = index_list(e, pn->desc.n_inputs, iidx, KI_MAX_DIMS, pat);
    for (int t = 0; t < k; t++) {
        ops[t] = pn->in[idx[t]];
    }
    for (int t = 0; t < ki; t++) {
        iops[t] = pn->in[iidx[t]];
    }
    for (int n = 0; n < g->n_nodes && (k >= 0 || ki >= 0 || word); n++) {
        ki_node *c = &g->nodes[n];
        for (int j = 0; j < c->desc.n_inputs; j++) {
            const bool as_index = ki >= 0 && takes_index_list(c->desc.type);
            if (c->in[j] != o ||
                (!word && !as_index && (k < 0 || !takes_tensor_list(c->desc.type)))) {
                continue;
            }
            const char *key = c->desc.input_keys[j];
            if (as_index) {
                ki_status st = add_string_param(g, c, "indices_pattern", pat, err);
                if (st == KI_OK) {
                    st = splice_inputs(g, c, j, iops, ki, err);
                }
                if (st != KI_OK) {
                    return st;
                }
            } else if (word) {
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
    const int n0 = g->n_nodes;
    for (int n = 0; n < n0; n++) {
        if (expr_of(&g->nodes[n]) && g->nodes[n].desc.n_outputs == 1) {
            ki_status st = split_index_list(g, n, err);
            if (st != KI_OK) {
                return st;
            }
        }
    }
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
