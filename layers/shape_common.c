/* shape_common.c - strided copy, join/split and small helpers for the shape layers. */
#include "shape_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/team.h"

void ki_shapeop_strides(int ndim, const int64_t *d, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= d[i];
    }
}

void ki_shapeop_copy_init(ki_shapeop_copy *c, int ndim, const int64_t *d)
{
    memset(c, 0, sizeof *c);
    c->ndim = ndim;
    memcpy(c->d, d, (size_t)ndim * sizeof *d);
    ki_shapeop_strides(ndim, d, c->dst);
}

/* Drops size-1 dims and merges neighbours that are contiguous in both source and destination,
 * so the innermost loop is as long as possible. Returns false for an empty copy. */
static bool simplify(const ki_shapeop_copy *in, ki_shapeop_copy *c)
{
    c->ndim = 0;
    for (int i = 0; i < in->ndim; i++) {
        if (in->d[i] == 0) {
            return false;
        }
        if (in->d[i] == 1) {
            continue;
        }
        int k = c->ndim;
        if (k > 0 && c->src[k - 1] == in->src[i] * in->d[i] &&
            c->dst[k - 1] == in->dst[i] * in->d[i]) {
            c->d[k - 1] *= in->d[i];
            c->src[k - 1] = in->src[i];
            c->dst[k - 1] = in->dst[i];
            continue;
        }
        c->d[k] = in->d[i];
        c->src[k] = in->src[i];
        c->dst[k] = in->dst[i];
        c->ndim++;
    }
    return true;
}

static void copy_row(const float *src, int64_t ss, float *dst, int64_t ds, int64_t n)
{
    if (ss == 1 && ds == 1) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        dst[j * ds] = src[j * ss];
    }
}

void ki_shapeop_copy_run(const ki_shapeop_copy *c0, const float *src, float *dst, int n_threads)
{
    ki_shapeop_copy c;
    if (!simplify(c0, &c)) {
        return;
    }
    if (c.ndim == 0) {
        dst[0] = src[0];
        return;
    }
    int last = c.ndim - 1;
    int64_t inner = c.d[last];
    int64_t rows = ki_shapeop_prod(c.d, 0, last);
    int nt = rows * inner < KI_SHAPEOP_PAR_MIN ? 1 : n_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t so = 0, dof = 0, rem = r;
        for (int i = last - 1; i >= 0; i--) {
            int64_t k = rem % c.d[i];
            rem /= c.d[i];
            so += k * c.src[i];
            dof += k * c.dst[i];
        }
        copy_row(src + so, c.src[last], dst + dof, c.dst[last], inner);
    }
}

static int64_t row_total(const ki_tensor *pieces, int n, int64_t outer)
{
    int64_t total = 0;
    if (outer == 0) {
        return 0;
    }
    for (int p = 0; p < n; p++) {
        total += ki_shape_count(&pieces[p].shape) / outer;
    }
    return total;
}

typedef struct join_job {
    const ki_tensor *pieces;
    int n;
    int64_t outer, total;
    float *joined;
} join_job;

/* A thread's rows of the output (OpenMP's static split). */
static void join_body(void *arg, const ki_part *pt)
{
    const join_job *j = arg;
    int64_t o0, o1;
    ki_part_range(j->outer, pt, &o0, &o1);
    for (int64_t o = o0; o < o1; o++) {
        float *dst = j->joined + o * j->total;
        for (int p = 0; p < j->n; p++) {
            int64_t len = ki_shape_count(&j->pieces[p].shape) / j->outer;
            if (j->pieces[p].data + o * len != dst) { /* else planned in place (joins) */
                memcpy(dst, j->pieces[p].data + o * len, (size_t)len * sizeof *dst);
            }
            dst += len;
        }
    }
}

void ki_shapeop_join(const ki_tensor *pieces, int n, int64_t outer, float *joined,
                     const ki_exec *ex)
{
    join_job j = { pieces, n, outer, row_total(pieces, n, outer), joined };
    ki_team_run_n(ex, outer * j.total < KI_SHAPEOP_PAR_MIN ? 1 : ex->n_threads, join_body, &j);
}

void ki_shapeop_split(const float *joined, int64_t outer, ki_tensor *pieces, int n, int n_threads)
{
    int64_t total = row_total(pieces, n, outer);
    int nt = outer * total < KI_SHAPEOP_PAR_MIN ? 1 : n_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t o = 0; o < outer; o++) {
        const float *src = joined + o * total;
        for (int p = 0; p < n; p++) {
            int64_t len = ki_shape_count(&pieces[p].shape) / outer;
            memcpy(pieces[p].data + o * len, src, (size_t)len * sizeof *src);
            src += len;
        }
    }
}

int64_t ki_shapeop_prod(const int64_t *d, int from, int to)
{
    int64_t p = 1;
    for (int i = from; i < to; i++) {
        p *= d[i];
    }
    return p;
}

void ki_shapeop_blocks(const ki_shape *s, int ax, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = ki_shapeop_prod(s->d, 0, ax);
    *n = s->ndim ? s->d[ax] : 1;
    *inner = ki_shapeop_prod(s->d, ax + 1, s->ndim);
}

void ki_shapeop_view_copy(const ki_tensor *in, ki_tensor *out)
{
    if (out->data != in->data) {
        memcpy(out->data, in->data, (size_t)ki_shape_count(&in->shape) * sizeof(float));
    }
}

ki_status ki_shapeop_check_io(const ki_op_desc *op, int n_in, int n_out, ki_error *err)
{
    if (n_in >= 0 ? op->n_inputs != n_in : op->n_inputs < 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs, expected %s%d", op->n_inputs,
                       n_in >= 0 ? "" : "at least ", n_in >= 0 ? n_in : 1);
    }
    if (n_out >= 0 ? op->n_outputs != n_out : op->n_outputs < 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d outputs, expected %s%d", op->n_outputs,
                       n_out >= 0 ? "" : "at least ", n_out >= 0 ? n_out : 1);
    }
    return KI_OK;
}

int ki_shapeop_broadcast(int64_t *d, int *nd, const ki_shape *x)
{
    if (x->ndim > *nd) { /* the new leading dims are 1 */
        const int grow = x->ndim - *nd;
        memmove(d + grow, d, (size_t)*nd * sizeof *d);
        for (int k = 0; k < grow; k++) {
            d[k] = 1;
        }
        *nd = x->ndim;
    }
    for (int k = 0; k < x->ndim; k++) {
        int64_t a = x->d[k], *o = &d[*nd - x->ndim + k];
        if (a < 0 || (a != *o && a != 1 && *o != 1)) {
            return k;
        }
        *o = *o == 1 ? a : *o;
    }
    return -1;
}

void ki_shapeop_broadcast_strides(const ki_shape *x, const ki_shape *out, int64_t *st)
{
    int64_t acc = 1;
    for (int k = out->ndim - 1; k >= 0; k--) {
        int j = k - (out->ndim - x->ndim);
        int64_t dim = (j >= 0 && x->kind == KI_KIND_TENSOR) ? x->d[j] : 1;
        st[k] = dim == 1 ? 0 : acc;
        acc *= dim;
    }
}

ki_status ki_shapeop_make(ki_shape *out, int ndim, const int64_t *d, ki_error *err)
{
    *out = ki_shape_make(ndim, d);
    return ki_shape_check(out, err);
}

ki_status ki_shapeop_list_values(const ki_shape *s, const char *what, int64_t *vals, int max,
                                 int *n, ki_error *err)
{
    if ((s->kind != KI_KIND_LIST && s->kind != KI_KIND_SCALAR) || !s->has_values) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "input %s has no values known at shape time", what);
    }
    int count = s->kind == KI_KIND_SCALAR ? 1 : (int)s->d[0];
    if (count > max || count > KI_MAX_VALUES) {
        return KI_FAIL(err, KI_ERR_LIMIT, "input %s has %d entries, at most %d allowed", what,
                       count, max);
    }
    for (int i = 0; i < count; i++) {
        double v = s->values[i];
        if (!(fabs(v) <= (double)KI_MAX_NUMEL) || v != floor(v)) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %s entry %d (%g) is not a valid size", what, i,
                           v);
        }
        vals[i] = (int64_t)v;
    }
    *n = count;
    return KI_OK;
}

ki_status ki_shapeop_alloc(size_t size, void **state, ki_error *err)
{
    void *p = calloc(1, size);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory (%zu bytes of layer state)", size);
    }
    *state = p;
    return KI_OK;
}

ki_status ki_shapeop_save(const void *t, size_t size, void **state, ki_error *err)
{
    ki_status st = ki_shapeop_alloc(size, state, err);
    if (st == KI_OK) {
        memcpy(*state, t, size);
    }
    return st;
}

void ki_shapeop_free(void *state)
{
    free(state);
}
