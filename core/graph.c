/* graph.c - name resolution, checks and topological order of a parsed graph. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

#include "ckd.h"
#include "hash.h"

/* ---- a string -> index hash map (open addressing, FNV-1a) ---- */
typedef struct name_map {
    const char **keys;
    int *vals;
    size_t cap;
} name_map;

static bool map_init(name_map *m, size_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 1) {
        m->cap *= 2;
    }
    m->keys = calloc(m->cap, sizeof *m->keys);
    m->vals = calloc(m->cap, sizeof *m->vals);
    return m->keys && m->vals;
}

static void map_free(name_map *m)
{
    free(m->keys);
    free(m->vals);
}

/* Returns the slot for key: keys[slot] is NULL when absent. */
static size_t map_slot(const name_map *m, const char *key)
{
    size_t i = (size_t)ki_hash_str(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) {
        i = (i + 1) & (m->cap - 1);
    }
    return i;
}

/* ---- operands ---- */
static ki_status resolve_operands(ki_graph *g, ki_error *err)
{
    size_t total = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        total += (size_t)g->nodes[n].desc.n_inputs + (size_t)g->nodes[n].desc.n_outputs;
    }
    name_map m;
    ki_operand *ops = ki_arena_calloc(g->arena, total + 1, sizeof *ops);
    if (!map_init(&m, total) || !ops) {
        map_free(&m);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    int count = 0;
    ki_status st = KI_OK;
    for (int n = 0; n < g->n_nodes && st == KI_OK; n++) {
        ki_node *nd = &g->nodes[n];
        const ki_op_desc *d = &nd->desc;
        for (int k = 0; k < d->n_inputs + d->n_outputs; k++) {
            bool is_out = k >= d->n_inputs;
            int slot_i = is_out ? k - d->n_inputs : k;
            const char *name = is_out ? d->output_names[slot_i] : d->input_names[slot_i];
            size_t s = map_slot(&m, name);
            if (!m.keys[s]) {
                m.keys[s] = name;
                m.vals[s] = count;
                ops[count].name = name;
                ops[count].producer = -1;
                ops[count].decl.ndim = -1;
                count++;
            }
            ki_operand *o = &ops[m.vals[s]];
            const ki_shape *decl = is_out ? &d->output_decl[slot_i] : &d->input_decl[slot_i];
            if (o->decl.ndim < 0 && decl->ndim >= 0) {
                o->decl = *decl;
                o->dtype = is_out ? d->output_dtype[slot_i] : d->input_dtype[slot_i];
            }
            if (!is_out) {
                nd->in[slot_i] = m.vals[s];
                o->n_consumers++;
            } else if (o->producer >= 0) {
                st = KI_FAIL(err, KI_ERR_FORMAT,
                             "%s:%d: operand '%s' is produced twice (also by op '%s' on line %d)",
                             g->path, d->line, name, g->nodes[o->producer].desc.name,
                             g->nodes[o->producer].desc.line);
                break;
            } else {
                nd->out[slot_i] = m.vals[s];
                o->producer = n;
                o->producer_slot = slot_i;
            }
        }
    }
    map_free(&m);
    g->operands = ops;
    g->n_operands = count;
    return st;
}

static ki_status check_dangling_and_names(ki_graph *g, ki_error *err)
{
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_node *nd = &g->nodes[n];
        bool is_in = strcmp(nd->desc.type, "pnnx.Input") == 0;
        int wrong = is_in                                       ? nd->desc.n_inputs
                    : strcmp(nd->desc.type, "pnnx.Output") == 0 ? nd->desc.n_outputs
                                                                : 0;
        if (wrong > 0) {
            return KI_FAIL(err, KI_ERR_FORMAT, "%s:%d: op '%s' (%s) has %d %s%s; it must have none",
                           g->path, nd->desc.line, nd->desc.name, nd->desc.type, wrong,
                           is_in ? "input" : "output", wrong == 1 ? "" : "s");
        }
        for (int i = 0; i < nd->desc.n_inputs; i++) {
            if (g->operands[nd->in[i]].producer < 0) {
                return KI_FAIL(err, KI_ERR_FORMAT,
                               "%s:%d: op '%s' reads operand '%s', which no operator produces",
                               g->path, nd->desc.line, nd->desc.name, g->operands[nd->in[i]].name);
            }
        }
    }
    name_map m;
    if (!map_init(&m, (size_t)g->n_nodes)) {
        map_free(&m);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = KI_OK;
    for (int n = 0; n < g->n_nodes; n++) {
        size_t s = map_slot(&m, g->nodes[n].desc.name);
        if (m.keys[s]) {
            st = KI_FAIL(err, KI_ERR_FORMAT,
                         "%s:%d: duplicate operator name '%s' (first on line %d)", g->path,
                         g->nodes[n].desc.line, g->nodes[n].desc.name,
                         g->nodes[m.vals[s]].desc.line);
            break;
        }
        m.keys[s] = g->nodes[n].desc.name;
        m.vals[s] = n;
    }
    map_free(&m);
    return st;
}

/* ---- Kahn's algorithm with a min-heap on file position ---- */
static void heap_push(int *h, int *n, int v)
{
    int i = (*n)++;
    h[i] = v;
    while (i > 0 && h[(i - 1) / 2] > h[i]) {
        int p = (i - 1) / 2, t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static int heap_pop(int *h, int *n)
{
    int top = h[0], i = 0;
    h[0] = h[--(*n)];
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < *n && h[l] < h[m]) {
            m = l;
        }
        if (r < *n && h[r] < h[m]) {
            m = r;
        }
        if (m == i) {
            return top;
        }
        int t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
}

/* A node on a cycle among the unsorted ones: walk back through unsorted producers. */
static int find_cycle_node(const ki_graph *g, const int *indeg)
{
    int cur = -1;
    for (int n = 0; n < g->n_nodes && cur < 0; n++) {
        cur = indeg[n] > 0 ? n : -1;
    }
    for (int steps = 0; steps < g->n_nodes && cur >= 0; steps++) {
        const ki_node *nd = &g->nodes[cur];
        int next = -1;
        for (int i = 0; i < nd->desc.n_inputs && next < 0; i++) {
            int p = g->operands[nd->in[i]].producer;
            next = (p >= 0 && indeg[p] > 0) ? p : -1;
        }
        cur = next;
    }
    return cur;
}

static ki_status topo_sort(ki_graph *g, ki_error *err)
{
    int nn = g->n_nodes;
    int *indeg = calloc((size_t)nn + 1, sizeof *indeg);
    int *heap = calloc((size_t)nn + 1, sizeof *heap);
    /* consumers in CSR form: for each operand, the nodes reading it (one entry per input) */
    int *start = calloc((size_t)g->n_operands + 2, sizeof *start);
    size_t n_edges = 0;
    for (int n = 0; n < nn; n++) {
        n_edges += (size_t)g->nodes[n].desc.n_inputs;
    }
    int *cons = calloc(n_edges + 1, sizeof *cons);
    g->order = ki_arena_calloc(g->arena, (size_t)nn + 1, sizeof *g->order);
    if (!indeg || !heap || !start || !cons || !g->order) {
        free(indeg), free(heap), free(start), free(cons);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int n = 0; n < nn; n++) {
        for (int i = 0; i < g->nodes[n].desc.n_inputs; i++) {
            start[g->nodes[n].in[i] + 1]++;
        }
        indeg[n] = g->nodes[n].desc.n_inputs;
    }
    for (int o = 0; o < g->n_operands; o++) {
        start[o + 1] += start[o];
    }
    int *fill = calloc((size_t)g->n_operands + 1, sizeof *fill);
    if (!fill) {
        free(indeg), free(heap), free(start), free(cons);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int n = 0; n < nn; n++) {
        for (int i = 0; i < g->nodes[n].desc.n_inputs; i++) {
            int o = g->nodes[n].in[i];
            cons[start[o] + fill[o]++] = n;
        }
    }
    int hn = 0, done = 0;
    for (int n = 0; n < nn; n++) {
        if (indeg[n] == 0) {
            heap_push(heap, &hn, n);
        }
    }
    while (hn > 0) {
        int n = heap_pop(heap, &hn);
        g->order[done++] = n;
        for (int k = 0; k < g->nodes[n].desc.n_outputs; k++) {
            int o = g->nodes[n].out[k];
            for (int e = start[o]; e < start[o + 1]; e++) {
                if (--indeg[cons[e]] == 0) {
                    heap_push(heap, &hn, cons[e]);
                }
            }
        }
    }
    ki_status st = KI_OK;
    if (done < nn) {
        int c = find_cycle_node(g, indeg);
        const ki_op_desc *d = &g->nodes[c < 0 ? 0 : c].desc;
        st = KI_FAIL(err, KI_ERR_FORMAT, "%s:%d: the graph has a cycle through op '%s' (%s)",
                     g->path, d->line, d->name, d->type);
    }
    free(indeg), free(heap), free(start), free(cons), free(fill);
    return st;
}

static bool is_tuple(const char *type)
{
    return strcmp(type, "prim::TupleConstruct") == 0 || strcmp(type, "prim::ListConstruct") == 0;
}

/* Model inputs (pnnx.Input, file order) and outputs (pnnx.Output, tuples expanded). */
static ki_status collect_io(ki_graph *g, ki_error *err)
{
    int n_in = 0, n_out = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_node *nd = &g->nodes[n];
        if (strcmp(nd->desc.type, "pnnx.Input") == 0) {
            n_in += nd->desc.n_outputs;
        } else if (strcmp(nd->desc.type, "pnnx.Output") == 0) {
            for (int i = 0; i < nd->desc.n_inputs; i++) {
                const ki_node *p = &g->nodes[g->operands[nd->in[i]].producer];
                n_out += is_tuple(p->desc.type) ? p->desc.n_inputs : 1;
            }
        }
    }
    g->inputs = ki_arena_calloc(g->arena, (size_t)n_in + 1, sizeof(int));
    g->outputs = ki_arena_calloc(g->arena, (size_t)n_out + 1, sizeof(int));
    if (!g->inputs || !g->outputs) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    g->n_inputs = g->n_outputs = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_node *nd = &g->nodes[n];
        if (strcmp(nd->desc.type, "pnnx.Input") == 0) {
            for (int i = 0; i < nd->desc.n_outputs; i++) {
                g->inputs[g->n_inputs++] = nd->out[i];
            }
        } else if (strcmp(nd->desc.type, "pnnx.Output") == 0) {
            for (int i = 0; i < nd->desc.n_inputs; i++) {
                const ki_node *p = &g->nodes[g->operands[nd->in[i]].producer];
                if (is_tuple(p->desc.type)) {
                    for (int k = 0; k < p->desc.n_inputs; k++) {
                        g->outputs[g->n_outputs++] = p->in[k];
                    }
                } else {
                    g->outputs[g->n_outputs++] = nd->in[i];
                }
            }
        }
    }
    if (g->n_outputs == 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: the graph has no pnnx.Output", g->path);
    }
    return KI_OK;
}

ki_status ki_graph_build(ki_graph *g, ki_error *err)
{
    if (g->state == KI_GRAPH_COMPLETE) {
        return KI_OK;
    }
    if (g->state != KI_GRAPH_NEED_BUILD) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "graph built before it was parsed");
    }
    int declared = g->n_operands;
    ki_status st = resolve_operands(g, err);
    if (st == KI_OK) {
        st = check_dangling_and_names(g, err);
    }
    if (st == KI_OK && declared != g->n_operands) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "%s:2: header declares %d operands, the graph has %d",
                     g->path, declared, g->n_operands);
    }
    if (st == KI_OK) {
        st = ki_graph_fold(g, err);
    }
    if (st == KI_OK) {
        st = topo_sort(g, err);
    }
    if (st == KI_OK) {
        st = collect_io(g, err);
    }
    if (st == KI_OK) {
        g->state = KI_GRAPH_COMPLETE;
    }
    return st;
}
