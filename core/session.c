/* session.c - shape inference, memory planning and execution for one set of input shapes. */
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bigbuf.h"
#include "ckd.h"
#include "model_internal.h"
#include "plan.h"
#include "solo.h"
#include "team.h"

struct ki_session {
    const ki_model *m;
    int n_threads;
    ki_shape *shape; /* per operand */
    size_t *offset;  /* per operand, bytes into arena */
    bool *has_buf;   /* per operand: produced by an executed op or an input */
    char *arena;
    size_t arena_bytes;
    char *ws;
    size_t ws_per_thread;
    ki_tensor *tin, *tout; /* per step, packed; step k starts at tin_at[k] / tout_at[k] */
    int *tin_at, *tout_at;
    bool profiling;
    double *step_time; /* per step, seconds of the last profiled run */
    ki_solo solo;      /* runs on one thread while another process holds a core (core/solo.h) */
    long solo_runs;    /* runs made on one thread so far */
};

#define ALIGN              64
#define KI_MAX_STEP_INPUTS 16 /* inputs of a step whose kernel ki_session_step_kernel names */

/* n rounded up to ALIGN; sizes within ALIGN of SIZE_MAX (a layer's "cannot be planned") stay at
 * the largest multiple, which every later size check then refuses, instead of wrapping to 0. */
static size_t round_up(size_t n)
{
    return n > SIZE_MAX - (ALIGN - 1) ? SIZE_MAX & ~(size_t)(ALIGN - 1)
                                      : (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static ki_status check_input(const ki_model *m, int i, const ki_shape *in, ki_error *err)
{
    char got[128], want[128];
    ki_status st = ki_shape_check(in, err);
    if (st != KI_OK) {
        ki_error_prefix(err, "input %d ('%s')", i, ki_model_input_name(m, i));
        return st;
    }
    ki_shape decl = ki_model_input_decl(m, i);
    if (decl.ndim < 0) {
        return KI_OK;
    }
    bool ok = decl.ndim == in->ndim;
    /* dim 0 is the batch: a model exported with batch 1 runs with batch N */
    for (int k = 1; ok && k < in->ndim; k++) {
        ok = decl.d[k] < 0 || decl.d[k] == in->d[k];
    }
    if (!ok) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %d ('%s') has shape %s, the model expects %s", i,
                       ki_model_input_name(m, i), ki_shape_str(in, got, sizeof got),
                       ki_shape_str(&decl, want, sizeof want));
    }
    return KI_OK;
}

static ki_status infer_shapes(ki_session *s, ki_shape *tmp_in, ki_shape *tmp_out, size_t *ws,
                              ki_error *err)
{
    const ki_model *m = s->m;
    const ki_graph *g = m->g;
    *ws = 0;
    for (int k = 0; k < m->n_exec; k++) {
        int n = m->exec[k];
        const ki_node *nd = &g->nodes[n];
        const ki_layer_ops *l = m->layer[n];
        for (int i = 0; i < nd->desc.n_inputs; i++) {
            if (!s->has_buf[nd->in[i]]) {
                return KI_FAIL(err, KI_ERR_FORMAT,
                               "%s:%d: op '%s' (%s) reads operand '%s', which no operator "
                               "computes",
                               g->path, nd->desc.line, nd->desc.name, nd->desc.type,
                               g->operands[nd->in[i]].name);
            }
            tmp_in[i] = s->shape[nd->in[i]];
        }
        memset(tmp_out, 0, (size_t)(nd->desc.n_outputs + 1) * sizeof *tmp_out);
        ki_status st =
            l->shape(m->state[n], tmp_in, nd->desc.n_inputs, tmp_out, nd->desc.n_outputs, err);
        for (int i = 0; st == KI_OK && i < nd->desc.n_outputs; i++) {
            st = ki_shape_check(&tmp_out[i], err);
            s->shape[nd->out[i]] = tmp_out[i];
            s->has_buf[nd->out[i]] = true;
        }
        if (st != KI_OK) {
            ki_error_prefix(err, "%s:%d: op '%s' (%s)", g->path, nd->desc.line, nd->desc.name,
                            nd->desc.type);
            return st;
        }
        if (l->workspace) {
            size_t w = l->workspace(m->state[n], tmp_in, nd->desc.n_inputs, tmp_out,
                                    nd->desc.n_outputs, s->n_threads);
            *ws = w > *ws ? w : *ws;
        }
    }
    return KI_OK;
}

static size_t operand_bytes(const ki_shape *sh)
{
    return (size_t)ki_shape_count(sh) * sizeof(float); /* checked by ki_shape_check */
}

/* The root of operand o's class and o's byte offset inside the root's buffer (views and in-place
 * outputs sit at 0, the inputs of a joining layer inside its output), with path compression. */
static int find_root(int *root, size_t *delta, int o, size_t *at)
{
    int r = o;
    size_t d = 0;
    while (root[r] != r) {
        d += delta[r];
        r = root[r];
    }
    for (size_t rem = d; root[o] != o;) {
        int next = root[o];
        size_t step = delta[o];
        root[o] = r, delta[o] = rem;
        rem -= step;
        o = next;
    }
    if (at) {
        *at = d;
    }
    return r;
}

/* Inputs of one joining layer the planner places inside its output (more are copied). */
#define MAX_JOIN 64

/* A joining layer's (ki_layer_ops.joins) inputs moved into its output's buffer, each its class
 * whole: when the output is its own class (it may be a model output) and every input's class is
 * its own, holds no model input or output, is produced by a step, is distinct from the others and
 * lands 64-byte aligned. The output class then lives from the first input's step. */
static void plan_joins(ki_session *s, int *root, size_t *delta, int *first, int *last,
                       const bool *pinned)
{
    const ki_model *m = s->m;
    const ki_graph *g = m->g;
    for (int k = 0; k < m->n_exec; k++) {
        int n = m->exec[k];
        const ki_node *nd = &g->nodes[n];
        int ni = nd->desc.n_inputs, o = nd->desc.n_outputs > 0 ? nd->out[0] : -1;
        ki_shape ins[MAX_JOIN];
        size_t off[MAX_JOIN];
        int r[MAX_JOIN];
        if (!m->layer[n]->joins || ni < 1 || ni > MAX_JOIN || o < 0 || !s->has_buf[o] ||
            find_root(root, delta, o, NULL) != o) {
            continue;
        }
        for (int i = 0; i < ni; i++) {
            ins[i] = s->shape[nd->in[i]];
        }
        bool ok = m->layer[n]->joins(m->state[n], ins, ni, &s->shape[o], off);
        for (int i = 0; ok && i < ni; i++) {
            size_t at;
            int x = nd->in[i];
            r[i] = find_root(root, delta, x, &at);
            ok = s->has_buf[x] && at == 0 && r[i] != o && !pinned[r[i]] && first[r[i]] >= 0 &&
                 off[i] % ALIGN == 0 && operand_bytes(&s->shape[r[i]]) == operand_bytes(&ins[i]);
            for (int j = 0; ok && j < i; j++) {
                ok = r[j] != r[i];
            }
        }
        for (int i = 0; ok && i < ni; i++) {
            root[r[i]] = o, delta[r[i]] = off[i];
            first[o] = first[r[i]] < first[o] ? first[r[i]] : first[o];
            last[o] = last[r[i]] > last[o] ? last[r[i]] : last[o];
        }
    }
}

/* Lifetimes and aliasing: views share their source's buffer; a joining layer's inputs are placed
 * inside its output (plan_joins); an in-place op reuses its input's buffer when that input dies
 * at this step. Inputs and outputs of the model are pinned. */
static ki_status plan_memory(ki_session *s, ki_error *err)
{
    const ki_model *m = s->m;
    const ki_graph *g = m->g;
    int no = g->n_operands, steps = m->n_exec;
    int *root = malloc(((size_t)no + 1) * sizeof *root);
    size_t *delta = calloc((size_t)no + 1, sizeof *delta);
    int *first = malloc(((size_t)no + 1) * sizeof *first);
    int *last = malloc(((size_t)no + 1) * sizeof *last);
    bool *pinned = calloc((size_t)no + 1, sizeof *pinned);
    ki_plan_buf *bufs = calloc((size_t)no + 1, sizeof *bufs);
    int *buf_of = malloc(((size_t)no + 1) * sizeof *buf_of);
    ki_status st = KI_OK;
    if (!root || !delta || !first || !last || !pinned || !bufs || !buf_of) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int o = 0; o < no; o++) {
        root[o] = o;
        first[o] = -1;
        last[o] = -1;
    }
    for (int k = 0; k < steps; k++) {
        const ki_node *nd = &g->nodes[m->exec[k]];
        for (int i = 0; i < nd->desc.n_inputs; i++) {
            last[nd->in[i]] = k;
        }
        for (int i = 0; i < nd->desc.n_outputs; i++) {
            first[nd->out[i]] = k;
            last[nd->out[i]] = last[nd->out[i]] > k ? last[nd->out[i]] : k;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) {
        last[g->outputs[i]] = steps;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        first[g->inputs[i]] = -1;
        last[g->inputs[i]] = steps; /* pinned: the caller's input stays intact */
    }
    /* views first: a view's class lives as long as any member */
    for (int k = 0; k < steps; k++) {
        int n = m->exec[k];
        const ki_node *nd = &g->nodes[n];
        if ((m->layer[n]->flags & KI_LAYER_VIEW) && nd->desc.n_inputs > 0 &&
            nd->desc.n_outputs > 0 &&
            operand_bytes(&s->shape[nd->in[0]]) == operand_bytes(&s->shape[nd->out[0]])) {
            int r = find_root(root, delta, nd->in[0], NULL), o = nd->out[0];
            root[o] = r;
            last[r] = last[r] > last[o] ? last[r] : last[o];
        }
    }
    /* a class holding a graph input or output stays where it is */
    for (int i = 0; i < g->n_outputs; i++) {
        pinned[find_root(root, delta, g->outputs[i], NULL)] = true;
    }
    for (int i = 0; i < g->n_inputs; i++) {
        pinned[find_root(root, delta, g->inputs[i], NULL)] = true;
    }
    plan_joins(s, root, delta, first, last, pinned);
    for (int o = 0; o < no; o++) {
        int r = find_root(root, delta, o, NULL);
        last[r] = last[r] > last[o] ? last[r] : last[o];
    }
    for (int k = 0; k < steps; k++) {
        int n = m->exec[k];
        const ki_node *nd = &g->nodes[n];
        if (!(m->layer[n]->flags & KI_LAYER_INPLACE) || nd->desc.n_inputs == 0 ||
            nd->desc.n_outputs == 0) {
            continue;
        }
        size_t at;
        int r = find_root(root, delta, nd->in[0], &at), o = nd->out[0];
        if (last[r] == k && first[r] >= 0 && root[o] == o && at == 0 &&
            operand_bytes(&s->shape[r]) == operand_bytes(&s->shape[o])) {
            root[o] = r;
            last[r] = last[o];
        }
    }
    int nb = 0;
    for (int o = 0; o < no; o++) {
        if (s->has_buf[o] && find_root(root, delta, o, NULL) == o) {
            bufs[nb] = (ki_plan_buf){ operand_bytes(&s->shape[o]), first[o],
                                      last[o] < first[o] ? first[o] : last[o], 0 };
            buf_of[o] = nb++;
        }
    }
    st = ki_plan_offsets(bufs, nb, ALIGN, &s->arena_bytes, err);
    for (int o = 0; st == KI_OK && o < no; o++) {
        if (s->has_buf[o]) {
            size_t at;
            int r = find_root(root, delta, o, &at);
            s->offset[o] = bufs[buf_of[r]].offset + at;
        }
    }
done:
    free(root), free(delta), free(first), free(last), free(pinned), free(bufs), free(buf_of);
    return st;
}

static ki_status bind_tensors(ki_session *s, ki_error *err)
{
    const ki_model *m = s->m;
    const ki_graph *g = m->g;
    size_t n_in = 0, n_out = 0;
    for (int k = 0; k < m->n_exec; k++) {
        n_in += (size_t)g->nodes[m->exec[k]].desc.n_inputs;
        n_out += (size_t)g->nodes[m->exec[k]].desc.n_outputs;
    }
    s->tin = calloc(n_in + 1, sizeof *s->tin);
    s->tout = calloc(n_out + 1, sizeof *s->tout);
    s->tin_at = calloc((size_t)m->n_exec + 1, sizeof *s->tin_at);
    s->tout_at = calloc((size_t)m->n_exec + 1, sizeof *s->tout_at);
    s->step_time = calloc((size_t)m->n_exec + 1, sizeof *s->step_time);
    if (!s->tin || !s->tout || !s->tin_at || !s->tout_at || !s->step_time) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    int pi = 0, po = 0;
    for (int k = 0; k < m->n_exec; k++) {
        const ki_node *nd = &g->nodes[m->exec[k]];
        s->tin_at[k] = pi;
        s->tout_at[k] = po;
        for (int i = 0; i < nd->desc.n_inputs; i++, pi++) {
            s->tin[pi] =
                (ki_tensor){ s->shape[nd->in[i]], (float *)(s->arena + s->offset[nd->in[i]]) };
        }
        for (int i = 0; i < nd->desc.n_outputs; i++, po++) {
            s->tout[po] =
                (ki_tensor){ s->shape[nd->out[i]], (float *)(s->arena + s->offset[nd->out[i]]) };
        }
    }
    return KI_OK;
}

static ki_status session_alloc(ki_session *s, const ki_session_options *opt, ki_error *err)
{
    size_t ws_total, total;
    s->ws_per_thread = round_up(s->ws_per_thread);
    if (!ki_ckd_mul(&ws_total, s->ws_per_thread, (size_t)s->n_threads) ||
        !ki_ckd_add(&total, round_up(s->arena_bytes), ws_total)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "planned memory overflows");
    }
    if (opt && opt->memory_limit && total > opt->memory_limit) {
        return KI_FAIL(err, KI_ERR_LIMIT,
                       "the model needs %zu MiB of tensor memory for these input shapes, more than "
                       "the %zu MiB available",
                       total >> 20, opt->memory_limit >> 20);
    }
    s->arena = ki_bigbuf_alloc(round_up(s->arena_bytes) + ALIGN);
    s->ws = ws_total ? ki_bigbuf_alloc(ws_total) : NULL;
    if (!s->arena || (ws_total && !s->ws)) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for %zu bytes of tensors", total);
    }
    memset(s->arena, 0, round_up(s->arena_bytes));
    return KI_OK;
}

ki_status ki_session_create(const ki_model *m, const ki_shape *input_shapes, int n_inputs,
                            const ki_session_options *opt, ki_session **out, ki_error *err)
{
    const ki_graph *g = m->g;
    if (!m->layer) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "the model was loaded graph-only");
    }
    if (n_inputs != g->n_inputs) {
        return KI_FAIL(err, KI_ERR_SHAPE, "the model has %d input%s, %d given", g->n_inputs,
                       g->n_inputs == 1 ? "" : "s", n_inputs);
    }
    ki_session *s = calloc(1, sizeof *s);
    int max_args = 1;
    for (int n = 0; n < g->n_nodes; n++) {
        int a = g->nodes[n].desc.n_inputs > g->nodes[n].desc.n_outputs ? g->nodes[n].desc.n_inputs
                                                                       : g->nodes[n].desc.n_outputs;
        max_args = a > max_args ? a : max_args;
    }
    ki_shape *tmp_in = calloc((size_t)max_args + 1, sizeof *tmp_in);
    ki_shape *tmp_out = calloc((size_t)max_args + 1, sizeof *tmp_out);
    ki_status st = KI_OK;
    if (!s || !tmp_in || !tmp_out ||
        !(s->shape = calloc((size_t)g->n_operands + 1, sizeof *s->shape)) ||
        !(s->offset = calloc((size_t)g->n_operands + 1, sizeof *s->offset)) ||
        !(s->has_buf = calloc((size_t)g->n_operands + 1, sizeof *s->has_buf))) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        goto fail;
    }
    s->m = m;
    s->n_threads = opt && opt->n_threads > 0 ? opt->n_threads : 1;
    ki_solo_init(&s->solo);
    for (int i = 0; i < n_inputs && st == KI_OK; i++) {
        st = check_input(m, i, &input_shapes[i], err);
        s->shape[g->inputs[i]] = input_shapes[i];
        s->shape[g->inputs[i]].kind = KI_KIND_TENSOR;
        s->has_buf[g->inputs[i]] = true;
    }
    if (st == KI_OK) {
        st = infer_shapes(s, tmp_in, tmp_out, &s->ws_per_thread, err);
    }
    if (st == KI_OK) {
        st = plan_memory(s, err);
    }
    if (st == KI_OK) {
        st = session_alloc(s, opt, err);
    }
    if (st == KI_OK) {
        st = bind_tensors(s, err);
    }
    if (st != KI_OK) {
        goto fail;
    }
    free(tmp_in);
    free(tmp_out);
    *out = s;
    return KI_OK;
fail:
    free(tmp_in);
    free(tmp_out);
    ki_session_destroy(s);
    return st;
}

void ki_session_destroy(ki_session *s)
{
    if (!s) {
        return;
    }
    free(s->shape);
    free(s->offset);
    free(s->has_buf);
    free(s->arena);
    free(s->ws);
    free(s->tin);
    free(s->tout);
    free(s->tin_at);
    free(s->tout_at);
    free(s->step_time);
    free(s);
}

ki_tensor ki_session_input(const ki_session *s, int i)
{
    int o = s->m->g->inputs[i];
    return (ki_tensor){ s->shape[o], (float *)(s->arena + s->offset[o]) };
}

ki_tensor ki_session_output(const ki_session *s, int i)
{
    int o = s->m->g->outputs[i];
    return (ki_tensor){ s->shape[o], (float *)(s->arena + s->offset[o]) };
}

/* Step k's forward() on this thread. */
static ki_status step_forward(const ki_session *s, int k, const ki_exec *ex)
{
    const ki_model *m = s->m;
    const int n = m->exec[k];
    const ki_node *nd = &m->g->nodes[n];
    return m->layer[n]->forward(m->state[n], &s->tin[s->tin_at[k]], nd->desc.n_inputs,
                                &s->tout[s->tout_at[k]], nd->desc.n_outputs, ex);
}

/* Whether every thread of a running team may call step k's forward(): a KI_LAYER_TEAM layer, or
 * a view the planner aliased (its forward does nothing). */
static bool step_in_team(const ki_session *s, int k)
{
    const ki_model *m = s->m;
    const int n = m->exec[k];
    const unsigned f = m->layer[n]->flags;
    return (f & KI_LAYER_TEAM) || ((f & KI_LAYER_VIEW) && m->g->nodes[n].desc.n_inputs > 0 &&
                                   s->tout[s->tout_at[k]].data == s->tin[s->tin_at[k]].data);
}

/* The shared state of a stretch of steps in one team: the first step that failed (or -1) and
 * its status. */
typedef struct team_run {
    ki_crew crew;
    atomic_int failed;
    atomic_int status;
} team_run;

/* Steps k0..k1-1 on this thread of the team, the threads meeting after each step. */
static void team_steps(ki_session *s, int k0, int k1, team_run *t)
{
    const ki_exec ex = { s->n_threads, s->ws, s->ws_per_thread, &t->crew };
    const int tid = omp_get_thread_num();
    for (int k = k0; k < k1; k++) {
        const double t0 = s->profiling && tid == 0 ? omp_get_wtime() : 0.0;
        const ki_status st = step_forward(s, k, &ex);
        int none = -1;
        if (st != KI_OK && atomic_compare_exchange_strong(&t->failed, &none, k)) {
            atomic_store(&t->status, st);
        }
        ki_team_sync(&t->crew.step); /* step k's outputs written, by every thread */
        if (s->profiling && tid == 0) {
            s->step_time[k] = omp_get_wtime() - t0;
        }
        /* a failure at step k or before is seen by every thread after this barrier (a later one
         * only by some: they stop at its own) */
        const int f = atomic_load(&t->failed);
        if (f >= 0 && f <= k) {
            break;
        }
    }
}

/* Steps k0..k1-1 (all step_in_team) in one parallel region (at one thread without one). The
 * first step that fails, if any, goes to *fail_k (*fail_st); the team stops after it. */
static void run_team(ki_session *s, int k0, int k1, bool solo, int *fail_k, ki_status *fail_st)
{
    team_run t;
    ki_crew_init(&t.crew, s->n_threads);
    atomic_init(&t.failed, -1);
    atomic_init(&t.status, KI_OK);
    if (s->n_threads > 1 && !solo) {
#pragma omp parallel num_threads(s->n_threads)
        team_steps(s, k0, k1, &t);
    } else {
        team_steps(s, k0, k1, &t);
    }
    *fail_k = atomic_load(&t.failed);
    *fail_st = (ki_status)atomic_load(&t.status);
}

ki_status ki_session_run(ki_session *s, ki_error *err)
{
    const ki_model *m = s->m;
    const ki_exec ex = { s->n_threads, s->ws, s->ws_per_thread, NULL };
    const bool solo = s->n_threads > 1 && ki_solo_next(&s->solo);
    const double t0 = s->n_threads > 1 ? omp_get_wtime() : 0.0;
    s->solo_runs += solo;
    for (int k = 0; k < m->n_exec;) {
        int fail_k = -1, k1 = k;
        ki_status st = KI_OK;
        while (k1 < m->n_exec && step_in_team(s, k1)) {
            k1++;
        }
        if (k1 > k) { /* a stretch of steps in one team */
            run_team(s, k, k1, solo, &fail_k, &st);
            k = k1;
        } else { /* a step that opens its own parallel regions */
            const double ts = s->profiling ? omp_get_wtime() : 0.0;
            st = step_forward(s, k, &ex);
            if (s->profiling) {
                s->step_time[k] = omp_get_wtime() - ts;
            }
            fail_k = st != KI_OK ? k : -1;
            k++;
        }
        if (fail_k >= 0) { /* forward() has checked nothing the user gave: say which op */
            const ki_node *nd = &m->g->nodes[m->exec[fail_k]];
            char in0[96] = "()";
            if (nd->desc.n_inputs > 0) {
                ki_shape_str(&s->tin[s->tin_at[fail_k]].shape, in0, sizeof in0);
            }
            return KI_FAIL(err, st, "%s:%d: op '%s' (%s): failed at run time on input %s (%s)",
                           m->g->path, nd->desc.line, nd->desc.name, nd->desc.type, in0,
                           ki_status_name(st));
        }
    }
    if (s->n_threads > 1) {
        ki_solo_after(&s->solo, solo, omp_get_wtime() - t0);
    }
    return KI_OK;
}

long ki_session_solo_runs(const ki_session *s)
{
    return s->solo_runs;
}

size_t ki_session_planned_bytes(const ki_session *s)
{
    return round_up(s->arena_bytes) + s->ws_per_thread * (size_t)s->n_threads;
}

bool ki_session_operand_shape(const ki_session *s, const char *name, ki_shape *out)
{
    for (int o = 0; o < s->m->g->n_operands; o++) {
        if (strcmp(s->m->g->operands[o].name, name) == 0 && s->has_buf[o]) {
            *out = s->shape[o];
            return true;
        }
    }
    return false;
}

void ki_session_set_profiling(ki_session *s, bool on)
{
    s->profiling = on;
}

int ki_session_n_steps(const ki_session *s)
{
    return s->m->n_exec;
}

/* Step k's input shapes into in (KI_MAX_STEP_INPUTS); its input count, or -1 when k is not a
 * step or it has more. */
static int step_in_shapes(const ki_session *s, int k, ki_shape *in)
{
    if (k < 0 || k >= s->m->n_exec) {
        return -1;
    }
    const ki_node *nd = &s->m->g->nodes[s->m->exec[k]];
    if (nd->desc.n_inputs > KI_MAX_STEP_INPUTS) {
        return -1;
    }
    for (int i = 0; i < nd->desc.n_inputs; i++) {
        in[i] = s->tin[s->tin_at[k] + i].shape;
    }
    return nd->desc.n_inputs;
}

double ki_session_step_macs(const ki_session *s, int k)
{
    ki_shape in[KI_MAX_STEP_INPUTS];
    const int n_in = step_in_shapes(s, k, in);
    if (n_in < 0) {
        return -1;
    }
    const int node = s->m->exec[k];
    const ki_layer_ops *l = s->m->layer[node];
    return l->macs ? l->macs(s->m->state[node], in, n_in) : -1;
}

void ki_session_step_kernel(const ki_session *s, int k, char *buf, size_t n)
{
    if (n == 0) {
        return;
    }
    buf[0] = '\0';
    ki_shape in[KI_MAX_STEP_INPUTS];
    const int n_in = step_in_shapes(s, k, in);
    if (n_in < 0) {
        return;
    }
    const int node = s->m->exec[k];
    const ki_layer_ops *l = s->m->layer[node];
    if (l->describe) {
        l->describe(s->m->state[node], in, n_in, buf, n);
    }
}

const ki_op_desc *ki_session_step(const ki_session *s, int k, const ki_tensor **in,
                                  const ki_tensor **out, double *seconds)
{
    if (k < 0 || k >= s->m->n_exec) {
        return NULL;
    }
    if (in) {
        *in = &s->tin[s->tin_at[k]];
    }
    if (out) {
        *out = &s->tout[s->tout_at[k]];
    }
    if (seconds) {
        *seconds = s->step_time[k];
    }
    return &s->m->g->nodes[s->m->exec[k]].desc;
}
