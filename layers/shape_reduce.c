/* shape_reduce.c - reductions over a set of dims: torch.sum, torch.mean, torch.prod,
 * torch.amax, torch.amin, and torch.max / torch.min (with a dim they may have a second output,
 * the index of the extreme along that dim, stored as float; without a dim one 0-d output);
 * torch.argmax / torch.argmin (the index alone; without a dim, of the flattened tensor);
 * torch.logsumexp, torch.var and torch.std (correction, or unbiased, default 1), torch.norm
 * (p = 2 / 'fro', 1 or inf).
 *
 * Each output element is reduced by one thread in a fixed order, so results do not depend on
 * the thread count. Sums and products accumulate in double. */
#include <math.h>
#include <string.h>

#include "shape_common.h"

/* The extremes (R_MAX, R_MIN) come after the folds that accumulate in double. */
enum reduce_kind { R_SUM, R_MEAN, R_PROD, R_LSE, R_VAR, R_NORM, R_MAX, R_MIN };

typedef struct reduce_state {
    enum reduce_kind kind;
    int n; /* dims given; -1: every dim */
    int64_t dims[KI_MAX_DIMS];
    bool keepdim;
    bool arg_only;     /* argmax / argmin: output 0 is the index */
    bool std;          /* R_VAR: its square root */
    double correction; /* R_VAR: divisor count - correction */
    double p;          /* R_NORM: 1, 2 or inf */
} reduce_state;

/* Kept dims (kd, ks: sizes and input strides) enumerate the outputs; reduced dims (rd, rs)
 * enumerate the elements folded into one output. */
typedef struct reduce_plan {
    int nk, nr;
    int64_t kd[KI_MAX_DIMS], ks[KI_MAX_DIMS], rd[KI_MAX_DIMS], rs[KI_MAX_DIMS];
    int64_t count;         /* elements per output */
    bool red[KI_MAX_DIMS]; /* input dim a is reduced */
} reduce_plan;

/* The parameters of argmax / argmin, var / std and norm. */
static ki_status reduce_params(const ki_op_desc *op, reduce_state *t, ki_error *err)
{
    ki_status s = KI_OK;
    t->arg_only = strcmp(op->type, "torch.argmax") == 0 || strcmp(op->type, "torch.argmin") == 0;
    t->std = strcmp(op->type, "torch.std") == 0;
    if (t->kind == R_VAR) {
        bool unbiased = true;
        s = ki_op_get_bool(op, "unbiased", true, &unbiased, err);
        s = s != KI_OK
                ? s
                : ki_op_get_float(op, "correction", unbiased ? 1.0 : 0.0, &t->correction, err);
    }
    if (s == KI_OK && t->kind == R_NORM) {
        const ki_param *pp = ki_op_param(op, "p");
        t->p = 2.0;
        if (pp && pp->kind == KI_PARAM_STRING && strcmp(pp->s, "fro") != 0) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "norm p=%s is not supported", pp->s);
        }
        if (pp && pp->kind != KI_PARAM_STRING) {
            s = ki_op_get_float(op, "p", 2.0, &t->p, err);
        }
        if (s == KI_OK && t->p != 1.0 && t->p != 2.0 && !isinf(t->p)) {
            s = KI_FAIL(err, KI_ERR_UNSUPPORTED, "norm p=%g is not supported (1, 2, inf)", t->p);
        }
    }
    return s;
}

static ki_status reduce_create(const ki_op_desc *op, enum reduce_kind kind, bool single_dim,
                               void **state, ki_error *err)
{
    reduce_state tmp = { .kind = kind };
    /* torch.max/min return (values, indices) only when a dim is given */
    bool arg = strncmp(op->type, "torch.arg", 9) == 0;
    int max_out = single_dim && kind >= R_MAX && !arg && ki_op_has(op, "dim") ? 2 : 1;
    if (single_dim && kind >= R_MAX && op->n_inputs == 2) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                       "the elementwise form of two tensors is not supported");
    }
    ki_status s = ki_shapeop_check_io(op, 1, -1, err);
    if (s == KI_OK && op->n_outputs > max_out) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "has %d outputs, expected at most %d", op->n_outputs,
                    max_out);
    }
    if (s == KI_OK) {
        s = ki_op_get_int_list(op, "dim", KI_MAX_DIMS, tmp.dims, &tmp.n, err);
    }
    if (s == KI_OK && single_dim && tmp.n > 1) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "parameter dim must be a single integer");
    }
    if (s == KI_OK) {
        s = ki_op_get_bool(op, "keepdim", false, &tmp.keepdim, err);
    }
    if (s == KI_OK) {
        s = reduce_params(op, &tmp, err);
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof tmp, state, err);
    }
    if (s == KI_OK) {
        *(reduce_state *)*state = tmp;
    }
    return s;
}

static ki_status make_plan(const reduce_state *st, const ki_shape *x, reduce_plan *p, ki_error *err)
{
    bool *red = p->red;
    int64_t strides[KI_MAX_DIMS];
    for (int a = 0; a < KI_MAX_DIMS; a++) {
        red[a] = st->n < 0;
    }
    for (int k = 0; k < st->n; k++) {
        int a;
        if (!ki_axis_norm(st->dims[k], x->ndim, &a) || red[a]) {
            return KI_FAIL(err, KI_ERR_SHAPE, "dim %lld is out of range or repeated for rank %d",
                           (long long)st->dims[k], x->ndim);
        }
        red[a] = true;
    }
    ki_shapeop_strides(x->ndim, x->d, strides);
    p->nk = p->nr = 0;
    p->count = 1;
    for (int a = 0; a < x->ndim; a++) {
        if (red[a]) {
            p->rd[p->nr] = x->d[a];
            p->rs[p->nr++] = strides[a];
            p->count *= x->d[a];
        } else {
            p->kd[p->nk] = x->d[a];
            p->ks[p->nk++] = strides[a];
        }
    }
    if (p->count == 0 && st->kind >= R_MAX) {
        return KI_FAIL(err, KI_ERR_SHAPE, "cannot take the maximum or minimum of no elements");
    }
    return KI_OK;
}

static ki_status reduce_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const reduce_state *st = state;
    reduce_plan p;
    int64_t d[KI_MAX_DIMS];
    int n = 0;
    (void)n_in;
    ki_status s = make_plan(st, &in[0], &p, err);
    for (int a = 0; s == KI_OK && a < in[0].ndim; a++) {
        if (!p.red[a]) {
            d[n++] = in[0].d[a];
        } else if (st->keepdim) {
            d[n++] = 1;
        }
    }
    for (int k = 0; s == KI_OK && k < n_out; k++) {
        s = ki_shapeop_make(&out[k], n, d, err);
    }
    return s;
}

/* Folds the elements of one output; *arg gets the row-major position of the extreme among
 * them (the index along the dim when a single dim is reduced). NaN wins, as in PyTorch. */
/* The elements of one output in row-major order of the reduced dims: BODY sees v and its
 * position r * inner + j. */
#define VISIT(BODY)                                                                                \
    for (int64_t r = 0; r < rows; r++) {                                                           \
        int64_t off = 0, rem = r;                                                                  \
        for (int i = last - 1; i >= 0; i--) {                                                      \
            off += (rem % p->rd[i]) * p->rs[i];                                                    \
            rem /= p->rd[i];                                                                       \
        }                                                                                          \
        const float *row = x + off;                                                                \
        for (int64_t j = 0; j < inner; j++) {                                                      \
            const double v = row[j * is];                                                          \
            BODY;                                                                                  \
        }                                                                                          \
    }

/* logsumexp, var / std and norm in double, two passes where they need one. */
static double fold2(const reduce_plan *p, const reduce_state *st, const float *x)
{
    int last = p->nr - 1;
    int64_t inner = p->nr > 0 ? p->rd[last] : 1, is = p->nr > 0 ? p->rs[last] : 0;
    int64_t rows = p->nr > 0 ? ki_shapeop_prod(p->rd, 0, last) : 1;
    double a = 0.0, b = 0.0;
    if (st->kind == R_LSE) {
        a = -INFINITY;
        VISIT(a = v > a || isnan(v) ? v : a);
        if (!isfinite(a)) {
            return a; /* all -inf, an inf or a NaN: torch gives that value */
        }
        VISIT(b += exp(v - a));
        return a + log(b);
    }
    if (st->kind == R_VAR) {
        VISIT(a += v);
        a /= (double)p->count;
        VISIT(b += (v - a) * (v - a));
        double var = b / ((double)p->count - st->correction);
        return st->std ? sqrt(var) : var;
    }
    if (isinf(st->p)) {
        VISIT(a = fabs(v) > a || isnan(v) ? fabs(v) : a);
        return a;
    }
    VISIT(a += st->p == 1.0 ? fabs(v) : v * v);
    return st->p == 1.0 ? a : sqrt(a);
}

static double fold(const reduce_plan *p, enum reduce_kind kind, const float *x, int64_t *arg)
{
    int last = p->nr - 1;
    int64_t inner = p->nr > 0 ? p->rd[last] : 1, is = p->nr > 0 ? p->rs[last] : 0;
    int64_t rows = p->nr > 0 ? ki_shapeop_prod(p->rd, 0, last) : 1;
    double acc = kind == R_PROD ? 1.0 : 0.0;
    float best = kind >= R_MAX ? x[0] : 0.0f; /* make_plan: the extremes fold some elements */
    *arg = 0;
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0, rem = r;
        for (int i = last - 1; i >= 0; i--) {
            off += (rem % p->rd[i]) * p->rs[i];
            rem /= p->rd[i];
        }
        const float *row = x + off;
        for (int64_t j = 0; j < inner; j++) {
            float v = row[j * is];
            if (kind == R_SUM || kind == R_MEAN) {
                acc += v;
            } else if (kind == R_PROD) {
                acc *= v;
            } else if ((kind == R_MAX ? v > best : v < best) || (isnan(v) && !isnan(best))) {
                best = v;
                *arg = r * inner + j;
            }
        }
    }
    if (kind >= R_MAX) {
        return best;
    }
    return kind == R_MEAN ? acc / (double)p->count : acc;
}

static ki_status reduce_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const reduce_state *st = state;
    reduce_plan p;
    ki_error err;
    (void)n_in;
    if (make_plan(st, &in[0].shape, &p, &err) != KI_OK) {
        return err.code; /* shape() accepted this input, so this cannot happen */
    }
    int64_t n = ki_shape_count(&out[0].shape);
    const float *x = in[0].data;
    float *val = out[0].data, *idx = n_out > 1 ? out[1].data : NULL;
    int nt = n * p.count < ((int64_t)1 << 15) ? 1 : ex->n_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t o = 0; o < n; o++) {
        int64_t off = 0, rem = o, arg;
        for (int i = p.nk - 1; i >= 0; i--) {
            off += (rem % p.kd[i]) * p.ks[i];
            rem /= p.kd[i];
        }
        if (st->kind >= R_LSE && st->kind <= R_NORM) {
            val[o] = (float)fold2(&p, st, x + off);
            continue;
        }
        val[o] = (float)fold(&p, st->kind, x + off, &arg);
        if (st->arg_only) {
            val[o] = (float)arg;
        } else if (idx) {
            idx[o] = (float)arg;
        }
    }
    return KI_OK;
}

#define REDUCE_LAYER(sym, name, kind, single)                                                      \
    static ki_status sym##_create(const ki_op_desc *op, void **state, ki_error *err)               \
    {                                                                                              \
        return reduce_create(op, kind, single, state, err);                                        \
    }                                                                                              \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .create = sym##_create,                                                                    \
        .shape = reduce_shape,                                                                     \
        .forward = reduce_forward,                                                                 \
        .destroy = ki_shapeop_free,                                                                \
    };

REDUCE_LAYER(ki_layer_torch_sum, "torch.sum", R_SUM, false)
REDUCE_LAYER(ki_layer_torch_mean, "torch.mean", R_MEAN, false)
REDUCE_LAYER(ki_layer_torch_prod, "torch.prod", R_PROD, true)
REDUCE_LAYER(ki_layer_torch_amax, "torch.amax", R_MAX, false)
REDUCE_LAYER(ki_layer_torch_amin, "torch.amin", R_MIN, false)
REDUCE_LAYER(ki_layer_torch_max, "torch.max", R_MAX, true)
REDUCE_LAYER(ki_layer_torch_min, "torch.min", R_MIN, true)
REDUCE_LAYER(ki_layer_torch_argmax, "torch.argmax", R_MAX, true)
REDUCE_LAYER(ki_layer_torch_argmin, "torch.argmin", R_MIN, true)
REDUCE_LAYER(ki_layer_torch_logsumexp, "torch.logsumexp", R_LSE, false)
REDUCE_LAYER(ki_layer_torch_var, "torch.var", R_VAR, false)
REDUCE_LAYER(ki_layer_torch_std, "torch.std", R_VAR, false)
REDUCE_LAYER(ki_layer_torch_norm, "torch.norm", R_NORM, false)
