/* model.c - loading: param text -> graph -> weights -> one layer per operator. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

static bool is_tuple_to_output(const ki_graph *g, const ki_node *nd)
{
    if (nd->desc.n_outputs != 1 || (strcmp(nd->desc.type, "prim::TupleConstruct") != 0 &&
                                    strcmp(nd->desc.type, "prim::ListConstruct") != 0)) {
        return false;
    }
    /* only when every consumer is a pnnx.Output: the tuple then just groups model outputs */
    int o = nd->out[0];
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_node *c = &g->nodes[n];
        for (int i = 0; i < c->desc.n_inputs; i++) {
            if (c->in[i] == o && strcmp(c->desc.type, "pnnx.Output") != 0) {
                return false;
            }
        }
    }
    return nd->desc.n_outputs == 1;
}

/* One message listing every unsupported type with its count, in order of first use. */
static ki_status check_supported(ki_model *m, ki_error *err)
{
    const ki_graph *g = m->g;
    char list[768] = "";
    size_t len = 0;
    int n_types = 0, n_ops = 0;
    for (int k = 0; k < g->n_nodes; k++) {
        const ki_node *nd = &g->nodes[g->order[k]];
        if (m->layer[g->order[k]] || is_tuple_to_output(g, nd)) {
            continue;
        }
        n_ops++;
        bool seen = false;
        for (int j = 0; j < k && !seen; j++) {
            const ki_node *p = &g->nodes[g->order[j]];
            seen = !m->layer[g->order[j]] && strcmp(p->desc.type, nd->desc.type) == 0;
        }
        if (seen) {
            continue;
        }
        int count = 0;
        for (int j = k; j < g->n_nodes; j++) {
            count += strcmp(g->nodes[g->order[j]].desc.type, nd->desc.type) == 0;
        }
        n_types++;
        if (len < sizeof list - 1) {
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s x%d",
                                    n_types > 1 ? ", " : "", nd->desc.type, count);
        }
    }
    if (n_types > 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "%s: %d operator%s of %d unsupported type%s: %s",
                       g->path, n_ops, n_ops == 1 ? "" : "s", n_types, n_types == 1 ? "" : "s",
                       list);
    }
    return KI_OK;
}

static ki_status create_layers(ki_model *m, ki_error *err)
{
    ki_graph *g = m->g;
    m->layer = calloc((size_t)g->n_nodes + 1, sizeof *m->layer);
    m->state = calloc((size_t)g->n_nodes + 1, sizeof *m->state);
    m->exec = calloc((size_t)g->n_nodes + 1, sizeof *m->exec);
    if (!m->layer || !m->state || !m->exec) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    for (int n = 0; n < g->n_nodes; n++) {
        m->layer[n] = ki_registry_find(g->nodes[n].desc.type);
    }
    ki_status st = check_supported(m, err);
    if (st != KI_OK) {
        return st;
    }
    for (int k = 0; k < g->n_nodes; k++) {
        int n = g->order[k];
        const ki_layer_ops *l = m->layer[n];
        const ki_op_desc *d = &g->nodes[n].desc;
        if (!l || (l->flags & KI_LAYER_GRAPH)) {
            continue; /* pnnx.Input/Output and tuples feeding outputs are wiring */
        }
        if (l->create && (st = l->create(d, &m->state[n], err)) != KI_OK) {
            ki_error_prefix(err, "%s:%d: op '%s' (%s)", g->path, d->line, d->name, d->type);
            return st;
        }
        m->exec[m->n_exec++] = n;
    }
    return KI_OK;
}

static bool is_graph_output(const ki_graph *g, int o)
{
    for (int i = 0; i < g->n_outputs; i++) {
        if (g->outputs[i] == o) {
            return true;
        }
    }
    return false;
}

/* Appends operand `o` to node nd's inputs (a fused residual's other operand). */
static ki_status append_input(ki_graph *g, ki_node *nd, int o, ki_error *err)
{
    ki_op_desc *d = &nd->desc;
    size_t n = (size_t)d->n_inputs + 1;
    int *in = ki_arena_calloc(g->arena, n + 1, sizeof *in);
    const char **names = ki_arena_calloc(g->arena, n + 1, sizeof *names);
    const char **keys = ki_arena_calloc(g->arena, n + 1, sizeof *keys);
    ki_shape *decl = ki_arena_calloc(g->arena, n + 1, sizeof *decl);
    ki_dtype *dt = ki_arena_calloc(g->arena, n + 1, sizeof *dt);
    if (!in || !names || !keys || !decl || !dt) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    memcpy(in, nd->in, (n - 1) * sizeof *in);
    memcpy(names, d->input_names, (n - 1) * sizeof *names);
    memcpy(keys, d->input_keys, (n - 1) * sizeof *keys);
    memcpy(decl, d->input_decl, (n - 1) * sizeof *decl);
    memcpy(dt, d->input_dtype, (n - 1) * sizeof *dt);
    in[n - 1] = o;
    names[n - 1] = g->operands[o].name;
    decl[n - 1] = g->operands[o].decl;
    dt[n - 1] = g->operands[o].dtype;
    nd->in = in;
    d->input_names = names;
    d->input_keys = keys;
    d->input_decl = decl;
    d->input_dtype = dt;
    d->n_inputs = (int)n;
    return KI_OK;
}

/* Whether node c can be offered to node n's fuse hook: one output, one or two inputs, and for
 * two inputs the other one computed before step k (pos[] is each node's exec step, -1 for
 * wiring such as pnnx.Input, whose outputs exist before any step). */
static bool fusable(const ki_model *m, int n, int c, int k, const int *pos, int *slot)
{
    const ki_graph *g = m->g;
    const ki_node *cn = &g->nodes[c];
    int o = g->nodes[n].out[0];
    if (!m->layer[c] || (m->layer[c]->flags & KI_LAYER_GRAPH) || cn->desc.n_outputs != 1 ||
        cn->desc.n_inputs < 1 || cn->desc.n_inputs > 2) {
        return false;
    }
    *slot = cn->in[0] == o ? 0 : 1;
    if (cn->desc.n_inputs == 1) {
        return true;
    }
    int other = cn->in[1 - *slot], p = g->operands[other].producer;
    return other != o && (p < 0 || pos[p] < k);
}

/* Lets a layer absorb its only consumer (an activation, a residual add after a convolution):
 * the consumer is dropped from the run and the producer writes the consumer's output operand
 * directly. */
static ki_status fuse_layers(ki_model *m, ki_error *err)
{
    ki_graph *g = m->g;
    int *consumer = malloc(((size_t)g->n_operands + 1) * sizeof *consumer);
    int *pos = malloc(((size_t)g->n_nodes + 1) * sizeof *pos);
    bool *dropped = calloc((size_t)g->n_nodes + 1, sizeof *dropped);
    ki_status st = KI_OK;
    if (!consumer || !dropped || !pos) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int o = 0; o < g->n_operands; o++) {
        consumer[o] = -1;
    }
    for (int n = 0; n < g->n_nodes; n++) {
        pos[n] = -1;
        for (int i = 0; i < g->nodes[n].desc.n_inputs; i++) {
            consumer[g->nodes[n].in[i]] = n;
        }
    }
    for (int k = 0; k < m->n_exec; k++) {
        pos[m->exec[k]] = k;
    }
    for (int k = 0; k < m->n_exec && st == KI_OK; k++) {
        int n = m->exec[k], slot;
        ki_node *nd = &g->nodes[n];
        if (dropped[n] || !m->layer[n]->fuse || nd->desc.n_outputs != 1) {
            continue;
        }
        int o = nd->out[0], c = consumer[o];
        bool taken = false;
        if (c < 0 || g->operands[o].n_consumers != 1 || is_graph_output(g, o) ||
            !fusable(m, n, c, k, pos, &slot) ||
            !((m->layer[n]->fuse_state &&
               m->layer[n]->fuse_state(m->state[n], &g->nodes[c].desc, m->layer[c], m->state[c],
                                       slot, &taken)) ||
              m->layer[n]->fuse(m->state[n], &g->nodes[c].desc, slot))) {
            continue;
        }
        if (taken) {
            m->state[c] = NULL; /* the producer owns it now */
        }
        if (g->nodes[c].desc.n_inputs == 2) {
            st = append_input(g, nd, g->nodes[c].in[1 - slot], err);
        }
        int out = g->nodes[c].out[0];
        nd->out[0] = out;
        g->operands[out].producer = n;
        dropped[c] = true;
        k--; /* the same op may absorb the next one too */
    }
    int w = 0;
    for (int k = 0; k < m->n_exec; k++) {
        if (!dropped[m->exec[k]]) {
            m->exec[w++] = m->exec[k];
        }
    }
    m->n_exec = w;
done:
    free(consumer);
    free(pos);
    free(dropped);
    return st;
}

ki_status ki_model_load(const char *param_path, const char *bin_path, const ki_load_options *opt,
                        ki_model **out, ki_error *err)
{
    ki_load_options o = { false, false, false };
    if (opt) {
        o = *opt;
    }
    ki_model *m = calloc(1, sizeof *m);
    if (!m) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_param_load(param_path, &m->g, err);
    if (st == KI_OK) {
        st = ki_graph_build(m->g, err);
    }
    if (st == KI_OK && bin_path) {
        st = ki_zip_open(bin_path, &m->zip, err);
        if (st == KI_OK) {
            st = ki_weights_attach(m, o.verify_crc, err);
        }
        /* every attribute now lives in m->weights: unmap the file so it leaves resident memory */
        ki_zip_close(m->zip);
        m->zip = NULL;
    }
    if (st == KI_OK && !o.graph_only) {
        for (int n = 0; n < m->g->n_nodes && !bin_path && st == KI_OK; n++) {
            if (m->g->nodes[n].desc.n_attrs > 0) {
                st = KI_FAIL(err, KI_ERR_FORMAT,
                             "%s:%d: op '%s' has attributes: a .bin file is needed", param_path,
                             m->g->nodes[n].desc.line, m->g->nodes[n].desc.name);
            }
        }
        if (st == KI_OK) {
            st = create_layers(m, err);
        }
        if (st == KI_OK && !o.no_fusion) {
            st = fuse_layers(m, err);
        }
    }
    if (st != KI_OK) {
        ki_model_destroy(m);
        return st;
    }
    *out = m;
    return KI_OK;
}

void ki_model_destroy(ki_model *m)
{
    if (!m) {
        return;
    }
    if (m->layer && m->state) {
        for (int n = 0; n < m->g->n_nodes; n++) {
            if (m->layer[n] && m->layer[n]->destroy && m->state[n]) {
                m->layer[n]->destroy(m->state[n]);
            }
        }
    }
    free(m->layer);
    free(m->state);
    free(m->exec);
    free(m->weights);
    ki_zip_close(m->zip);
    ki_graph_destroy(m->g);
    free(m);
}

int ki_model_n_ops(const ki_model *m)
{
    return m->g->n_nodes;
}

const ki_op_desc *ki_model_op(const ki_model *m, int i)
{
    return (i >= 0 && i < m->g->n_nodes) ? &m->g->nodes[m->g->order[i]].desc : NULL;
}

int ki_model_n_inputs(const ki_model *m)
{
    return m->g->n_inputs;
}

const char *ki_model_input_name(const ki_model *m, int i)
{
    return m->g->operands[m->g->inputs[i]].name;
}

ki_shape ki_model_input_decl(const ki_model *m, int i)
{
    return m->g->operands[m->g->inputs[i]].decl;
}

bool ki_model_input_is_integer(const ki_model *m, int i)
{
    const ki_dtype t = m->g->operands[m->g->inputs[i]].dtype;
    return t == KI_DT_I8 || t == KI_DT_U8 || t == KI_DT_I16 || t == KI_DT_I32 || t == KI_DT_I64 ||
           t == KI_DT_BOOL;
}

int ki_model_n_outputs(const ki_model *m)
{
    return m->g->n_outputs;
}

const char *ki_model_output_name(const ki_model *m, int i)
{
    return m->g->operands[m->g->outputs[i]].name;
}

ki_shape ki_model_output_decl(const ki_model *m, int i)
{
    return m->g->operands[m->g->outputs[i]].decl;
}

size_t ki_model_weight_bytes(const ki_model *m)
{
    return m->weight_bytes;
}
