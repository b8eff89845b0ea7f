/* shape_slice.c - Tensor.slice (the old single form dim/start/end/step and the multi form
 * dims/starts/ends/steps/selects) and Tensor.select. Python indexing x[..., a:b:s, ...] and
 * x[..., i, ...] over input dims, done as one strided copy. Bounds may also arrive as inputs
 * (`$start`, `$ends`, ... from pnnx.Expression or pnnx.SliceIndexes) whose values are known at
 * shape time; the dims must be parameters. */
#include <string.h>

#include "shape_common.h"

/* pnnx writes INT64_MAX as this: "to the end" for an end, "not a select" in selects. */
#define PNNX_INT_MAX 2147483647
#define MAX_ENTRIES  (2 * KI_MAX_DIMS)

enum { B_START, B_END, B_STEP, B_SELECT, N_BOUNDS };

static const char *const single_keys[N_BOUNDS] = { "start", "end", "step", "select" };
static const char *const multi_keys[N_BOUNDS] = { "starts", "ends", "steps", "selects" };

typedef struct slice_state {
    int n;
    int64_t dims[MAX_ENTRIES];
    /* starts, ends, steps, selects; a select of PNNX_INT_MAX means a slice, anything else an
     * index that drops the dim */
    int64_t bound[N_BOUNDS][MAX_ENTRIES];
    int input_of[N_BOUNDS]; /* input holding bound[k], or -1 when it is a parameter */
    bool multi;
} slice_state;

typedef struct slice_plan {
    ki_shapeop_copy c;
    int64_t base; /* offset of the first element read */
} slice_plan;

/* Every list given as a parameter must have as many entries as dims; steps default to 1 and
 * selects to none. */
static ki_status read_multi(const ki_op_desc *op, slice_state *st, ki_error *err)
{
    ki_status s = ki_op_get_int_list(op, "dims", MAX_ENTRIES, st->dims, &st->n, err);
    for (int k = 0; s == KI_OK && k < N_BOUNDS; k++) {
        int n;
        s = ki_op_get_int_list(op, multi_keys[k], MAX_ENTRIES, st->bound[k], &n, err);
        if (s != KI_OK || st->input_of[k] >= 0) {
            continue;
        }
        if (n < 0 && k >= B_STEP) {
            for (int i = 0; i < st->n; i++) {
                st->bound[k][i] = k == B_STEP ? 1 : PNNX_INT_MAX;
            }
        } else if (n != st->n) {
            s = KI_FAIL(err, KI_ERR_FORMAT, "parameter %s has %d entries, dims has %d",
                        multi_keys[k], n, st->n);
        }
    }
    return s;
}

static ki_status read_single(const ki_op_desc *op, slice_state *st, ki_error *err)
{
    static const int64_t defaults[N_BOUNDS] = { 0, PNNX_INT_MAX, 1, PNNX_INT_MAX };
    st->n = 1;
    ki_status s = ki_op_get_int(op, "dim", 0, &st->dims[0], err);
    for (int k = 0; s == KI_OK && k < B_SELECT; k++) {
        s = ki_op_get_int(op, single_keys[k], defaults[k], &st->bound[k][0], err);
    }
    st->bound[B_SELECT][0] = PNNX_INT_MAX;
    return s;
}

static ki_status check_steps(const slice_state *st, ki_error *err)
{
    for (int k = 0; k < st->n; k++) {
        if (st->bound[B_SELECT][k] == PNNX_INT_MAX && st->bound[B_STEP][k] < 1) {
            return KI_FAIL(err, KI_ERR_FORMAT, "slice step %lld is not positive",
                           (long long)st->bound[B_STEP][k]);
        }
    }
    return KI_OK;
}

/* Binds `$start`/`$starts`-style inputs; any other extra input is an error. */
static ki_status bind_inputs(const ki_op_desc *op, slice_state *st, ki_error *err)
{
    int bound = 1;
    for (int k = 0; k < N_BOUNDS; k++) {
        st->input_of[k] = ki_op_input_index(op, st->multi ? multi_keys[k] : single_keys[k]);
        bound += st->input_of[k] >= 0;
        if (st->input_of[k] == 0 || (!st->multi && k == B_SELECT && st->input_of[k] >= 0)) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "unexpected slice input order");
        }
    }
    if (op->n_inputs != bound || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "%d inputs and %d outputs are not supported",
                       op->n_inputs, op->n_outputs);
    }
    return KI_OK;
}

static ki_status slice_create(const ki_op_desc *op, void **state, ki_error *err)
{
    slice_state tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.multi = ki_op_has(op, "dims");
    ki_status s = ki_shapeop_check_io(op, -1, 1, err);
    if (s == KI_OK) {
        s = bind_inputs(op, &tmp, err);
    }
    if (s == KI_OK) {
        s = tmp.multi ? read_multi(op, &tmp, err) : read_single(op, &tmp, err);
    }
    bool all_params = tmp.input_of[B_STEP] < 0 && tmp.input_of[B_SELECT] < 0;
    if (s == KI_OK && all_params) {
        s = check_steps(&tmp, err);
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(slice_state *)*state = tmp;
    }
    return s;
}

/* The state with bounds from inputs filled in (their values are known at shape time). */
static ki_status resolve(const slice_state *st, const ki_shape *in, slice_state *r, ki_error *err)
{
    *r = *st;
    for (int k = 0; k < N_BOUNDS; k++) {
        int n, idx = st->input_of[k];
        if (idx < 0) {
            continue;
        }
        const char *key = st->multi ? multi_keys[k] : single_keys[k];
        ki_status s = ki_shapeop_list_values(&in[idx], key, r->bound[k], MAX_ENTRIES, &n, err);
        if (s != KI_OK) {
            return s;
        }
        if (n != r->n) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %s has %d entries, dims has %d", key, n, r->n);
        }
    }
    return check_steps(r, err);
}

static ki_status select_create(const ki_op_desc *op, void **state, ki_error *err)
{
    slice_state tmp;
    memset(&tmp, 0, sizeof tmp);
    tmp.n = 1;
    for (int k = 0; k < N_BOUNDS; k++) {
        tmp.input_of[k] = -1;
    }
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK && (!ki_op_has(op, "dim") || !ki_op_has(op, "index"))) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "missing parameter dim or index");
    }
    if (s == KI_OK) {
        s = ki_op_get_int(op, "dim", 0, &tmp.dims[0], err);
    }
    if (s == KI_OK) {
        s = ki_op_get_int(op, "index", 0, &tmp.bound[B_SELECT][0], err);
    }
    if (s == KI_OK && tmp.bound[B_SELECT][0] == PNNX_INT_MAX) {
        s = KI_FAIL(err, KI_ERR_UNSUPPORTED, "select index %d is out of range", PNNX_INT_MAX);
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(slice_state *)*state = tmp;
    }
    return s;
}

/* Python's rule for a bound: negative counts from the end, then clamp to [0, len]. */
static int64_t clamp_bound(int64_t b, int64_t len)
{
    if (b < 0) {
        b += len;
    }
    return b < 0 ? 0 : b > len ? len : b;
}

/* Applies the entries one after another to a (offset, step, length) view of each input dim. */
static ki_status apply_entries(const slice_state *st, const ki_shape *x, int64_t *off,
                               int64_t *step, int64_t *len, bool *gone, ki_error *err)
{
    for (int k = 0; k < st->n; k++) {
        int a;
        if (!ki_axis_norm(st->dims[k], x->ndim, &a) || gone[a]) {
            return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range for rank %d",
                           (long long)st->dims[k], x->ndim);
        }
        int64_t sel = st->bound[B_SELECT][k], stp = st->bound[B_STEP][k];
        if (sel != PNNX_INT_MAX) {
            int64_t i = sel < 0 ? sel + len[a] : sel;
            if (i < 0 || i >= len[a]) {
                return KI_FAIL(err, KI_ERR_SHAPE,
                               "index %lld is out of range for dim %d of size %lld", (long long)sel,
                               a, (long long)len[a]);
            }
            off[a] += i * step[a];
            gone[a] = true;
            continue;
        }
        int64_t b = clamp_bound(st->bound[B_START][k], len[a]), e = st->bound[B_END][k];
        e = e >= PNNX_INT_MAX ? len[a] : clamp_bound(e, len[a]);
        off[a] += b * step[a];
        len[a] = e > b ? (e - b - 1) / stp + 1 : 0;
        /* a step only matters between two elements, and then it is below the dim: no overflow */
        step[a] = len[a] > 1 ? step[a] * stp : 1;
    }
    return KI_OK;
}

/* in[0] is the data; the other inputs hold bounds. */
static ki_status make_plan(const slice_state *st0, const ki_shape *in, slice_plan *p, ki_error *err)
{
    int64_t off[KI_MAX_DIMS], step[KI_MAX_DIMS], len[KI_MAX_DIMS], strides[KI_MAX_DIMS];
    bool gone[KI_MAX_DIMS] = { false };
    const ki_shape *x = &in[0];
    slice_state st;
    ki_status s = resolve(st0, in, &st, err);
    if (s != KI_OK) {
        return s;
    }
    for (int a = 0; a < x->ndim; a++) {
        off[a] = 0;
        step[a] = 1;
        len[a] = x->d[a];
    }
    s = apply_entries(&st, x, off, step, len, gone, err);
    if (s != KI_OK) {
        return s;
    }
    ki_shapeop_strides(x->ndim, x->d, strides);
    memset(&p->c, 0, sizeof p->c);
    p->base = 0;
    for (int a = 0; a < x->ndim; a++) {
        p->base += off[a] * strides[a];
        if (!gone[a]) {
            p->c.d[p->c.ndim] = len[a];
            p->c.src[p->c.ndim++] = step[a] * strides[a];
        }
    }
    ki_shapeop_strides(p->c.ndim, p->c.d, p->c.dst);
    return KI_OK;
}

static ki_status slice_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    slice_plan p;
    (void)n_in;
    (void)n_out;
    ki_status s = make_plan(state, in, &p, err);
    return s != KI_OK ? s : ki_shapeop_make(&out[0], p.c.ndim, p.c.d, err);
}

static ki_status slice_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    ki_shape shapes[1 + N_BOUNDS];
    slice_plan p;
    ki_error err;
    (void)n_out;
    for (int k = 0; k < n_in && k <= N_BOUNDS; k++) {
        shapes[k] = in[k].shape; /* create() allows at most one input per bound */
    }
    if (make_plan(state, shapes, &p, &err) != KI_OK) {
        return err.code; /* shape() accepted this input, so this cannot happen */
    }
    if (ki_shape_count(&out[0].shape) == 0) {
        return KI_OK; /* base may point past the end of an input with an empty result */
    }
    ki_shapeop_copy_run(&p.c, in[0].data + p.base, out[0].data, ex->n_threads);
    return KI_OK;
}

const ki_layer_ops ki_layer_tensor_slice = {
    .type = "Tensor.slice",
    .create = slice_create,
    .shape = slice_shape,
    .forward = slice_forward,
    .destroy = ki_shapeop_free,
};

const ki_layer_ops ki_layer_tensor_select = {
    .type = "Tensor.select",
    .create = select_create,
    .shape = slice_shape,
    .forward = slice_forward,
    .destroy = ki_shapeop_free,
};
