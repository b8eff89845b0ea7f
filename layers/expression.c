/* expression.c - the pnnx.Expression layer: arithmetic over the operator's inputs.
 *
 * create() compiles the `expr` text once (parser/expr.h). shape() decides what the result is:
 *   - a TENSOR when any input that takes part in elementwise math is a tensor: the inputs are
 *     broadcast the PyTorch way (right-aligned, each pair of dims equal or 1);
 *   - otherwise a SCALAR or LIST whose numbers are computed right there with the scalar
 *     evaluator (size(@i,d) reads the input's shape; Python int rules), and stored again as
 *     floats by forward();
 *   - for a bare word such as `ij` (meshgrid's indexing argument), an OPAQUE value.
 * forward() runs the chunk evaluator over runs of the output: dims are merged where every input
 * is either contiguous or broadcast across them, so the innermost run is long, and each input
 * is then a run of floats (step 1) or a single repeated float (step 0). The state is the
 * compiled expression, read-only after create. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/layer.h"
#include "../core/team.h"
#include "../parser/expr.h"
#include "binop.h"
#include "shape_common.h"

/* Floats per chunk: the evaluator's stack is max_stack chunks of this size per thread. */
#define EXPR_CHUNK 1024
/* Inputs per expression: per-chunk descriptors live on the C stack. */
#define EXPR_MAX_INPUTS 64
/* Output floats from which add / mul run on the team, each thread a run of rows: below that one
 * thread. Lower than the copies' KI_SHAPEOP_PAR_MIN: a channel scaling reads planes the team
 * wrote split the same way, which one thread would fetch half of from the other core
 * (mobilenet_v3_small's six excitation scalings of 14K-28K floats, avx2, 2 threads: 0.071 ->
 * 0.052 ms for all nine; docs/performance.md). */
#define EXPR_BINOP_PAR_MIN 4096

typedef struct expr_state {
    ki_expr *e;
    int n_inputs;
    bool arith[EXPR_MAX_INPUTS]; /* input i is read by @i in elementwise math */
    char binop;       /* '+' or '*' when expr is exactly add(@0,@1) or mul(@0,@1): a direct loop */
    ki_binop_fn binf; /* that loop, for the CPU's level (binop_rows) */
} expr_state;

static void expr_destroy(void *state)
{
    expr_state *s = state;
    if (s) {
        ki_expr_destroy(s->e);
        free(s);
    }
}

static ki_status expr_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const char *text;
    ki_status st = ki_op_get_string(op, "expr", NULL, &text, err);
    if (st != KI_OK) {
        return st;
    }
    if (!text) {
        return KI_FAIL(err, KI_ERR_FORMAT, "missing parameter expr");
    }
    if (op->n_inputs > EXPR_MAX_INPUTS || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "%d inputs and %d outputs (at most %d and 1)",
                       op->n_inputs, op->n_outputs, EXPR_MAX_INPUTS);
    }
    expr_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->n_inputs = op->n_inputs;
    if ((st = ki_expr_compile(text, &s->e, NULL, err)) != KI_OK) {
        ki_error_prefix(err, "bad expr");
        goto fail;
    }
    if (s->e->n_refs > op->n_inputs) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "expr uses @%d but the operator has %d input%s: %s",
                     s->e->n_refs - 1, op->n_inputs, op->n_inputs == 1 ? "" : "s", text);
        goto fail;
    }
    for (int k = 0; k < s->e->n_code; k++) {
        if (s->e->code[k].op == KI_EOP_REF) {
            s->arith[s->e->code[k].ref] = true;
        }
    }
    if (op->n_inputs == 2) {
        s->binop = strcmp(text, "add(@0,@1)") == 0   ? '+'
                   : strcmp(text, "mul(@0,@1)") == 0 ? '*'
                                                     : 0;
    }
    s->binf = ki_binop_for(ki_cpu_isa());
    *state = s;
    return KI_OK;
fail:
    expr_destroy(s);
    return st;
}

/* The parser's view of the inputs: shapes for size(), shape-time values for scalars. */
static void describe_inputs(const ki_shape *in, int n_in, ki_expr_input *x)
{
    for (int i = 0; i < n_in; i++) {
        memset(&x[i], 0, sizeof x[i]);
        x[i].ndim = in[i].kind == KI_KIND_OPAQUE ? -1 : in[i].ndim;
        x[i].dims = in[i].d;
        x[i].value = in[i].has_values ? in[i].values[0] : 0.0;
    }
}

/* Right-aligned PyTorch broadcasting of the tensor inputs used in arithmetic. */
static ki_status broadcast(const expr_state *s, const ki_shape *in, ki_shape *out, ki_error *err)
{
    int nd = 0;
    int64_t d[KI_MAX_DIMS];
    for (int i = 0; i < s->n_inputs; i++) {
        if (!s->arith[i] || in[i].kind != KI_KIND_TENSOR) {
            continue;
        }
        const int k = ki_shapeop_broadcast(d, &nd, &in[i]);
        if (k >= 0 && in[i].d[k] < 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input @%d has an unknown dimension", i);
        }
        if (k >= 0) {
            return KI_FAIL(err, KI_ERR_SHAPE,
                           "input @%d: dimension %d is %lld, which does not broadcast with "
                           "%lld: %s",
                           i, k, (long long)in[i].d[k], (long long)d[nd - in[i].ndim + k],
                           s->e->text);
        }
    }
    *out = ki_shape_make(nd, d);
    return ki_shape_check(out, err);
}

/* SCALAR or LIST result computed now (values kept when they fit in ki_shape). */
static ki_status shape_values(const expr_state *s, const ki_shape *in, ki_shape *out, ki_error *err)
{
    ki_expr_input x[EXPR_MAX_INPUTS];
    double v[KI_MAX_VALUES];
    int n = 0;
    bool known = true;
    describe_inputs(in, s->n_inputs, x);
    for (int i = 0; i < s->n_inputs; i++) {
        known = known && (!s->arith[i] || in[i].has_values);
    }
    memset(out, 0, sizeof *out);
    ki_expr_scalar *stack = malloc((size_t)s->e->max_stack * sizeof *stack);
    if (!stack) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_expr_check_sizes(s->e, x, s->n_inputs, err);
    if (st == KI_OK && known) {
        st = ki_expr_eval_scalar(s->e, x, s->n_inputs, stack, v, KI_MAX_VALUES, &n, err);
    } else if (st == KI_OK) {
        /* values arrive only at run time; the length is still known */
        const ki_expr_ins *last = &s->e->code[s->e->n_code - 1];
        n = !s->e->is_list ? 1 : last->op == KI_EOP_SHAPE ? x[last->ref].ndim : last->n;
    }
    free(stack);
    if (st != KI_OK) {
        return st;
    }
    out->kind = s->e->is_list ? KI_KIND_LIST : KI_KIND_SCALAR;
    out->ndim = s->e->is_list ? 1 : 0;
    out->d[0] = s->e->is_list ? n : 0;
    out->has_values = known && n <= KI_MAX_VALUES;
    for (int i = 0; out->has_values && i < n; i++) {
        out->values[i] = v[i];
    }
    return KI_OK;
}

static ki_status expr_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const expr_state *s = state;
    bool tensor = false;
    if (n_in != s->n_inputs || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "%d inputs and %d outputs, expected %d and 1", n_in,
                       n_out, s->n_inputs);
    }
    if (s->e->is_string) {
        memset(out, 0, sizeof *out);
        out->kind = KI_KIND_OPAQUE;
        return KI_OK;
    }
    for (int i = 0; i < n_in; i++) {
        if (s->arith[i] && (in[i].kind == KI_KIND_LIST || in[i].kind == KI_KIND_OPAQUE)) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "input @%d is a %s, not a number: %s", i,
                           in[i].kind == KI_KIND_LIST ? "list" : "non-numeric value", s->e->text);
        }
        tensor = tensor || (s->arith[i] && in[i].kind == KI_KIND_TENSOR);
    }
    if (!tensor) {
        return shape_values(s, in, out, err);
    }
    if (s->e->is_list) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "a list of tensors is not supported: %s",
                       s->e->text);
    }
    ki_expr_input x[EXPR_MAX_INPUTS];
    describe_inputs(in, n_in, x);
    ki_status st = ki_expr_check_sizes(s->e, x, n_in, err);
    return st != KI_OK ? st : broadcast(s, in, out, err);
}

/* Per-thread bytes: the chunk stack for tensors; scalar stack plus list values otherwise. */
static size_t expr_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                             int n_out, int n_threads)
{
    const expr_state *s = state;
    size_t a = 0, b = 0, r = 0;
    (void)in;
    (void)n_in;
    (void)n_out;
    (void)n_threads;
    if (s->e->is_string) {
        return 0;
    }
    if (out[0].kind == KI_KIND_TENSOR) {
        return ki_ckd_mul(&r, ki_expr_chunk_stack_floats(s->e, EXPR_CHUNK), sizeof(float)) ? r : 0;
    }
    size_t n_vals = out[0].kind == KI_KIND_LIST ? (size_t)out[0].d[0] : 1;
    if (!ki_ckd_mul(&a, (size_t)s->e->max_stack, sizeof(ki_expr_scalar)) ||
        !ki_ckd_mul(&b, n_vals, sizeof(double)) || !ki_ckd_add(&r, a, b)) {
        return 0;
    }
    return r;
}

/* Output dims with every input's element strides (0 where it is broadcast), merged wherever all
 * inputs stay contiguous (or stay broadcast) across two neighbouring dims. */
typedef struct geom {
    int nd;
    int64_t d[KI_MAX_DIMS];
    int64_t stride[EXPR_MAX_INPUTS][KI_MAX_DIMS];
} geom;

static void build_geom(const expr_state *s, const ki_tensor *in, const ki_shape *out, geom *g)
{
    int64_t st[EXPR_MAX_INPUTS][KI_MAX_DIMS];
    for (int i = 0; i < s->n_inputs; i++) {
        if (s->arith[i]) {
            ki_shapeop_broadcast_strides(&in[i].shape, out, st[i]);
        }
    }
    g->nd = 0;
    for (int k = 0; k < out->ndim; k++) {
        if (out->d[k] == 1) {
            continue; /* a size-1 dim moves no pointer */
        }
        bool merge = g->nd > 0;
        for (int i = 0; i < s->n_inputs && merge; i++) {
            merge = !s->arith[i] || g->stride[i][g->nd - 1] == st[i][k] * out->d[k];
        }
        int m = merge ? g->nd - 1 : g->nd++;
        g->d[m] = merge ? g->d[m] * out->d[k] : out->d[k];
        for (int i = 0; i < s->n_inputs; i++) {
            g->stride[i][m] = s->arith[i] ? st[i][k] : 0;
        }
    }
    if (g->nd == 0) { /* one element */
        g->nd = 1;
        g->d[0] = 1;
        for (int i = 0; i < s->n_inputs; i++) {
            g->stride[i][0] = 0;
        }
    }
}

/* Evaluates elements [c0, c0+len) of output row `row` (rows span the innermost merged dim). */
static void run_chunk(const expr_state *s, const geom *g, const ki_tensor *in, float *out,
                      int64_t row, int64_t c0, size_t len, float *stack)
{
    ki_expr_input x[EXPR_MAX_INPUTS];
    int64_t idx[KI_MAX_DIMS], r = row;
    for (int k = g->nd - 2; k >= 0; k--) {
        idx[k] = r % g->d[k];
        r /= g->d[k];
    }
    for (int i = 0; i < s->n_inputs; i++) {
        x[i] = (ki_expr_input){ .ndim = in[i].shape.ndim, .dims = in[i].shape.d };
        if (!s->arith[i]) {
            continue;
        }
        int64_t off = c0 * g->stride[i][g->nd - 1];
        for (int k = 0; k < g->nd - 1; k++) {
            off += idx[k] * g->stride[i][k];
        }
        x[i].data = in[i].data + off;
        x[i].step = g->stride[i][g->nd - 1] != 0;
    }
    ki_expr_eval_chunk(s->e, x, len, stack, out + row * g->d[g->nd - 1] + c0);
}

/* add(@0,@1) / mul(@0,@1) over output rows [r0, r1) (each of `inner` floats): the inputs'
 * offsets found once for r0 and then stepped row by row like an odometer, instead of a division
 * per row (mobilenet_v3's channel scalings have 96 to 576 rows of 49 to 3136 floats). */
static void binop_rows(const expr_state *s, const geom *g, const ki_tensor *in, float *out,
                       int64_t r0, int64_t r1)
{
    const int nd = g->nd, inner_k = nd - 1;
    const int64_t inner = g->d[inner_k];
    int64_t idx[KI_MAX_DIMS] = { 0 }, off[2] = { 0, 0 }, r = r0;
    for (int k = nd - 2; k >= 0; k--) {
        idx[k] = r % g->d[k];
        r /= g->d[k];
    }
    for (int i = 0; i < 2; i++) {
        for (int k = 0; k < nd - 1; k++) {
            off[i] += idx[k] * g->stride[i][k];
        }
    }
    const int sa = g->stride[0][inner_k] != 0, sb = g->stride[1][inner_k] != 0;
    for (int64_t row = r0; row < r1; row++) {
        s->binf(s->binop, in[0].data + off[0], sa, in[1].data + off[1], sb, (size_t)inner,
                out + row * inner);
        for (int k = nd - 2; k >= 0; k--) { /* the next row's indices and offsets */
            off[0] += g->stride[0][k], off[1] += g->stride[1][k];
            if (++idx[k] < g->d[k]) {
                break;
            }
            off[0] -= g->d[k] * g->stride[0][k], off[1] -= g->d[k] * g->stride[1][k];
            idx[k] = 0;
        }
    }
}

typedef struct expr_job {
    const expr_state *s;
    const ki_tensor *in;
    ki_tensor *out;
    const ki_exec *ex;
    geom g;
    int64_t rows, per_row, n_items;
} expr_job;

/* A binary operator: each thread a run of whole rows. */
static void binop_body(void *arg, const ki_part *p)
{
    const expr_job *j = arg;
    binop_rows(j->s, &j->g, j->in, j->out->data, j->rows * p->tid / p->nt,
               j->rows * (p->tid + 1) / p->nt);
}

/* The stack machine: each thread its chunks (OpenMP's static split), its stack in its slice. */
static void chunks_body(void *arg, const ki_part *p)
{
    const expr_job *j = arg;
    const int64_t inner = j->g.d[j->g.nd - 1];
    float *stack = ki_exec_slice(j->ex, p->tid);
    int64_t t0, t1;
    ki_part_range(j->n_items, p, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        int64_t c0 = (t % j->per_row) * EXPR_CHUNK;
        size_t len = (size_t)(inner - c0 < EXPR_CHUNK ? inner - c0 : EXPR_CHUNK);
        run_chunk(j->s, &j->g, j->in, j->out->data, t / j->per_row, c0, len, stack);
    }
}

static void forward_tensor(const expr_state *s, const ki_tensor *in, ki_tensor *out,
                           const ki_exec *ex)
{
    expr_job j = { .s = s, .in = in, .out = out, .ex = ex };
    build_geom(s, in, &out->shape, &j.g);
    int64_t inner = j.g.d[j.g.nd - 1];
    j.per_row = (inner + EXPR_CHUNK - 1) / EXPR_CHUNK;
    j.rows = ki_shape_count(&out->shape) / (inner ? inner : 1);
    j.n_items = inner ? j.rows * j.per_row : 0;
    if (s->binop && j.n_items > 0) {
        /* rows * inner: the output's floats */
        ki_team_run_n(ex, j.rows * inner > EXPR_BINOP_PAR_MIN ? ex->n_threads : 1, binop_body, &j);
        return;
    }
    ki_team_run_n(ex, j.n_items > 1 ? ex->n_threads : 1, chunks_body, &j);
}

/* Scalar and list results: evaluated from the run-time values (a failure, which shape() has
 * already ruled out for known values, gives NaN rather than an error). */
static void values_body(void *arg, const ki_part *p)
{
    const expr_job *j = arg;
    const expr_state *s = j->s;
    const ki_tensor *in = j->in;
    ki_tensor *out = j->out;
    ki_expr_input x[EXPR_MAX_INPUTS];
    (void)p;
    int n = out->shape.kind == KI_KIND_LIST ? (int)out->shape.d[0] : 1, got = 0;
    ki_expr_scalar *stack = j->ex->workspace;
    double *vals = (double *)(stack + s->e->max_stack);
    for (int i = 0; i < s->n_inputs; i++) {
        x[i] = (ki_expr_input){ .ndim = in[i].shape.kind == KI_KIND_OPAQUE ? -1 : in[i].shape.ndim,
                                .dims = in[i].shape.d };
        if (s->arith[i]) {
            x[i].value = in[i].data ? in[i].data[0] : in[i].shape.values[0];
        }
    }
    if (ki_expr_eval_scalar(s->e, x, s->n_inputs, stack, vals, n, &got, NULL) != KI_OK) {
        got = 0;
    }
    for (int i = 0; i < n; i++) {
        out->data[i] = i < got ? (float)vals[i] : NAN;
    }
}

static ki_status expr_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const expr_state *s = state;
    (void)n_in;
    (void)n_out;
    if (s->e->is_string || !out[0].data) {
        return KI_OK;
    }
    if (out[0].shape.kind == KI_KIND_TENSOR) {
        forward_tensor(s, in, &out[0], ex);
    } else { /* on one thread (of a running team, the first) */
        expr_job j = { .s = s, .in = in, .out = &out[0], .ex = ex };
        ki_team_run_n(ex, 1, values_body, &j);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_expression = {
    .type = "pnnx.Expression",
    .flags = KI_LAYER_INPLACE | KI_LAYER_TEAM,
    .create = expr_create,
    .shape = expr_shape,
    .workspace = expr_workspace,
    .forward = expr_forward,
    .destroy = expr_destroy,
};
