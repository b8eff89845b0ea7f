/* misc_index.c - PyTorch advanced indexing: Tensor.index (x[i0, i1, ...]) and Tensor.index_put
 * (x[i0, i1, ...] = values, or += with accumulate=True, on a copy of x).
 *
 * The index list has one entry per leading dim of x: None (the whole dim) or an integer index
 * array. A static export writes it as the parameter expr=[None,[0,2,1]] (entries None, an int or
 * a flat int list; an int is a 0-d index array, as in aten::index, not a select); a dynamic one
 * passes index tensors, which core/fold.c splices in as inputs after $input with the string
 * parameter indices_pattern (N for None, T for the next tensor). As in PyTorch, the index arrays
 * broadcast to one shape B; the result has B in place of the indexed dims when those are adjacent,
 * else B first, then the remaining dims of x. Indices are float32 holding whole numbers, negative
 * from the end; one out of range fails the run (KI_ERR_LIMIT). Boolean masks (a data-dependent
 * shape) are rejected. Duplicate targets in index_put: the last write wins, or all add up in order
 * with accumulate. Reference kernels, sequential. State: the index list, immutable; thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape_common.h"

#define IX_MAX_CONST 1024

enum { IX_NONE, IX_TENSOR, IX_CONST };

typedef struct ix_entry {
    int kind;
    int slot;   /* IX_TENSOR: the input */
    int ndim;   /* IX_CONST: 0 (one int) or 1 (a list) */
    int off, n; /* IX_CONST: its values vals[off .. off+n-1] */
} ix_entry;

typedef struct ix_state {
    int in, values; /* input slots of x and (index_put) the values */
    bool put, accumulate;
    int n_e;
    ix_entry e[KI_MAX_DIMS];
    int n_vals;
    float vals[IX_MAX_CONST];
} ix_state;

/* The result's layout for given shapes. */
typedef struct ix_geom {
    ki_shape r;                            /* the indexed result */
    int src[KI_MAX_DIMS];                  /* per result dim: the x dim, or -1 - j for dim j of B */
    ki_shape b;                            /* the broadcast index shape */
    int64_t est[KI_MAX_DIMS][KI_MAX_DIMS]; /* per entry: its strides over B's dims */
} ix_geom;

/* Parses a static expr such as [None,[0,2,1]] or [[0,1],2] into s. */
static ki_status parse_static(const char *e, ix_state *s, ki_error *err)
{
    const char *p = e;
    if (*p++ != '[') {
        return KI_FAIL(err, KI_ERR_FORMAT, "expr '%s' is not an index list", e);
    }
    while (*p && *p != ']') {
        ix_entry *x = &s->e[s->n_e];
        if (s->n_e == KI_MAX_DIMS) {
            return KI_FAIL(err, KI_ERR_LIMIT, "expr '%s' indexes too many dims", e);
        }
        if (strncmp(p, "None", 4) == 0) {
            x->kind = IX_NONE, p += 4;
        } else {
            const bool list = *p == '[';
            x->kind = IX_CONST, x->ndim = list, x->off = s->n_vals, x->n = 0;
            p += list;
            while (*p && *p != ']' && (list || x->n == 0)) {
                char *end;
                long long v = strtoll(p, &end, 10);
                if (end == p || s->n_vals == IX_MAX_CONST || llabs(v) > KI_MAX_DIM) {
                    return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                                   "expr '%s': only None and integer indices are supported", e);
                }
                s->vals[s->n_vals++] = (float)v, x->n++;
                p = end + (*end == ',' && list);
            }
            if (list && *p++ != ']') {
                return KI_FAIL(err, KI_ERR_FORMAT, "expr '%s' is not an index list", e);
            }
        }
        s->n_e++;
        p += *p == ',';
    }
    if (*p != ']' || p[1] != '\0') {
        return KI_FAIL(err, KI_ERR_FORMAT, "expr '%s' is not an index list", e);
    }
    return KI_OK;
}

/* The dynamic form: pattern letters over the unnamed inputs, in order. */
static ki_status parse_pattern(const ki_op_desc *op, const char *pat, ix_state *s, ki_error *err)
{
    int next = 0;
    for (const char *p = pat; *p; p++) {
        ix_entry *x = &s->e[s->n_e];
        if (s->n_e == KI_MAX_DIMS || (*p != 'N' && *p != 'T')) {
            return KI_FAIL(err, KI_ERR_FORMAT, "bad indices_pattern '%s'", pat);
        }
        x->kind = *p == 'N' ? IX_NONE : IX_TENSOR;
        while (*p == 'T' && next < op->n_inputs && (next == s->in || next == s->values)) {
            next++;
        }
        if (*p == 'T' && next == op->n_inputs) {
            return KI_FAIL(err, KI_ERR_FORMAT, "indices_pattern '%s' names missing inputs", pat);
        }
        if (*p == 'T' && op->input_dtype && op->input_dtype[next] == KI_DT_BOOL) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                           "a boolean mask index gives a data-dependent shape; not supported");
        }
        x->slot = *p == 'T' ? next++ : -1;
        s->n_e++;
    }
    return KI_OK;
}

static ki_status ix_create_kind(const ki_op_desc *op, bool put, void **state, ki_error *err)
{
    ix_state *s = calloc(1, sizeof *s);
    const char *pat = NULL, *expr = NULL;
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->put = put;
    s->in = ki_op_input_index(op, "input");
    s->in = s->in >= 0 ? s->in : 0;
    s->values = put ? ki_op_input_index(op, "values") : -1;
    ki_status st = ki_shapeop_check_io(op, -1, 1, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "accumulate", false, &s->accumulate, err);
    st = st != KI_OK ? st : ki_op_get_string(op, "indices_pattern", NULL, &pat, err);
    if (st == KI_OK && put && s->values < 0) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "needs its $values input");
    }
    if (st == KI_OK && pat) {
        st = parse_pattern(op, pat, s, err);
    } else if (st == KI_OK) {
        const ki_param *p = ki_op_param(op, "expr");
        expr = p ? p->raw : NULL;
        st = expr ? parse_static(expr, s, err)
                  : KI_FAIL(err, KI_ERR_UNSUPPORTED, "indices must be a list of None and tensors");
    }
    int used = 1 + put;
    for (int i = 0; st == KI_OK && i < s->n_e; i++) {
        used += s->e[i].kind == IX_TENSOR;
    }
    if (st == KI_OK && used != op->n_inputs) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs, the index list uses %d", op->n_inputs,
                     used);
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status ix_geometry(const ix_state *s, const ki_shape *in, ix_geom *g, ki_error *err)
{
    const ki_shape *x = &in[s->in];
    int first = -1, last = -1, n_adv = 0, nd = 0;
    memset(g, 0, sizeof *g);
    if (x->kind != KI_KIND_TENSOR || x->ndim < s->n_e) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has fewer dims than the %d indices", s->n_e);
    }
    for (int i = 0; i < s->n_e; i++) {
        const ix_entry *e = &s->e[i];
        ki_shape es =
            e->kind == IX_TENSOR ? in[e->slot] : ki_shape_make(e->ndim, &(int64_t){ e->n });
        if (e->kind == IX_NONE) {
            continue;
        }
        if (es.kind != KI_KIND_TENSOR || ki_shapeop_broadcast(g->b.d, &g->b.ndim, &es) >= 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "index %d does not broadcast with the others", i);
        }
        first = first < 0 ? i : first, last = i, n_adv++;
    }
    for (int i = 0; i < s->n_e; i++) {
        const ix_entry *e = &s->e[i];
        ki_shape es =
            e->kind == IX_TENSOR ? in[e->slot] : ki_shape_make(e->ndim, &(int64_t){ e->n });
        if (e->kind != IX_NONE) {
            ki_shapeop_broadcast_strides(&es, &g->b, g->est[i]);
        }
    }
    if (x->ndim - n_adv + g->b.ndim > KI_MAX_DIMS) {
        return KI_FAIL(err, KI_ERR_LIMIT, "the result has more than %d dims", KI_MAX_DIMS);
    }
    /* B stays in place when the indexed dims are adjacent, else it goes first */
    const int at = (n_adv > 0 && last - first + 1 == n_adv) ? first : 0;
    for (int d = 0; d <= x->ndim; d++) {
        if (d == at) {
            for (int j = 0; j < g->b.ndim; j++, nd++) {
                g->r.d[nd] = g->b.d[j], g->src[nd] = -1 - j;
            }
        }
        if (d < x->ndim && (d >= s->n_e || s->e[d].kind == IX_NONE)) {
            g->r.d[nd] = x->d[d], g->src[nd++] = d;
        }
    }
    return ki_shapeop_make(&g->r, nd, g->r.d, err);
}

static ki_status ix_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const ix_state *s = state;
    ix_geom g;
    (void)n_in, (void)n_out;
    ki_status st = ix_geometry(s, in, &g, err);
    if (st != KI_OK || !s->put) {
        out[0] = g.r;
        return st;
    }
    int64_t d[KI_MAX_DIMS];
    int n = g.r.ndim;
    memcpy(d, g.r.d, sizeof d);
    if (in[s->values].kind != KI_KIND_TENSOR || ki_shapeop_broadcast(d, &n, &in[s->values]) >= 0 ||
        n != g.r.ndim || memcmp(d, g.r.d, (size_t)n * sizeof *d) != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "values do not broadcast to the indexed shape");
    }
    return ki_shapeop_make(&out[0], in[s->in].ndim, in[s->in].d, err);
}

/* The x offset of result element r, or -1 for an index out of range. */
static int64_t ix_offset(const ix_state *s, const ki_tensor *in, const ix_geom *g,
                         const int64_t *xst, int64_t r)
{
    int64_t bc[KI_MAX_DIMS], off = 0;
    const ki_shape *xs = &in[s->in].shape;
    for (int k = g->r.ndim - 1; k >= 0; k--) {
        const int64_t c = r % g->r.d[k];
        r /= g->r.d[k];
        if (g->src[k] >= 0) {
            off += c * xst[g->src[k]];
        } else {
            bc[-1 - g->src[k]] = c;
        }
    }
    for (int i = 0; i < s->n_e; i++) {
        const ix_entry *e = &s->e[i];
        if (e->kind == IX_NONE) {
            continue;
        }
        int64_t at = 0;
        for (int j = 0; j < g->b.ndim; j++) {
            at += bc[j] * g->est[i][j];
        }
        const float v = e->kind == IX_TENSOR ? in[e->slot].data[at] : s->vals[e->off + at];
        const int64_t n = xs->d[i];
        if (v != floorf(v) || !(v >= (float)-n && v < (float)n)) {
            return -1;
        }
        off += ((int64_t)v + (v < 0 ? n : 0)) * xst[i];
    }
    return off;
}

static ki_status ix_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const ix_state *s = state;
    ki_shape shapes[KI_MAX_DIMS + 2];
    int64_t xst[KI_MAX_DIMS], vst[KI_MAX_DIMS];
    ix_geom g;
    (void)n_out, (void)ex;
    for (int i = 0; i < n_in && i < KI_MAX_DIMS + 2; i++) {
        shapes[i] = in[i].shape;
    }
    if (n_in > KI_MAX_DIMS + 2 || ix_geometry(s, shapes, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    ki_shapeop_strides(in[s->in].shape.ndim, in[s->in].shape.d, xst);
    const int64_t total = ki_shape_count(&g.r);
    if (!s->put) {
        for (int64_t r = 0; r < total; r++) {
            const int64_t off = ix_offset(s, in, &g, xst, r);
            if (off < 0) {
                return KI_ERR_LIMIT;
            }
            out[0].data[r] = in[s->in].data[off];
        }
        return KI_OK;
    }
    ki_shapeop_view_copy(&in[s->in], &out[0]);
    ki_shapeop_broadcast_strides(&in[s->values].shape, &g.r, vst);
    for (int64_t r = 0; r < total; r++) {
        const int64_t off = ix_offset(s, in, &g, xst, r);
        int64_t vo = 0, q = r;
        if (off < 0) {
            return KI_ERR_LIMIT;
        }
        for (int k = g.r.ndim - 1; k >= 0; k--) {
            vo += (q % g.r.d[k]) * vst[k];
            q /= g.r.d[k];
        }
        const float v = in[s->values].data[vo];
        out[0].data[off] = s->accumulate ? out[0].data[off] + v : v;
    }
    return KI_OK;
}

static ki_status index_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return ix_create_kind(op, false, state, err);
}

static ki_status index_put_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return ix_create_kind(op, true, state, err);
}

const ki_layer_ops ki_layer_tensor_index = { .type = "Tensor.index",
                                             .create = index_create,
                                             .shape = ix_shape,
                                             .forward = ix_forward,
                                             .destroy = free };
const ki_layer_ops ki_layer_tensor_index_put = { .type = "Tensor.index_put",
                                                 .create = index_put_create,
                                                 .shape = ix_shape,
                                                 .forward = ix_forward,
                                                 .destroy = free };
