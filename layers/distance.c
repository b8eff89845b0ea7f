/* distance.c - F.pairwise_distance(x1, x2, p, eps, keepdim): as PyTorch, the p-norm of
 * x1 - x2 + eps (broadcast) over the last dimension of the broadcast shape, which is dropped
 * unless keepdim. p = 0 counts the nonzero differences, p = inf / -inf take the largest /
 * smallest magnitude. Sums accumulate in double. State: p, eps, keepdim; immutable, thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "shape_common.h"

typedef struct pdist {
    double p;
    float eps;
    bool keepdim;
} pdist;

static ki_status pd_create(const ki_op_desc *op, void **state, ki_error *err)
{
    double eps;
    pdist *s = calloc(1, sizeof *s);
    ki_status st =
        s ? ki_op_get_float(op, "p", 2.0, &s->p, err) : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    st = st != KI_OK ? st : ki_op_get_float(op, "eps", 1e-6, &eps, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "keepdim", false, &s->keepdim, err);
    if (st == KI_OK && (isnan(s->p) || s->p < 0.0 || !isfinite(eps))) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "p must be non-negative and eps finite");
    }
    if (st == KI_OK && (op->n_inputs != 2 || op->n_outputs != 1 ||
                        ki_op_input_slot(op, "x1", 0) != 0 || ki_op_input_slot(op, "x2", 1) != 1)) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects $x1, $x2 and 1 output");
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    s->eps = (float)eps;
    *state = s;
    return KI_OK;
}

/* The broadcast shape of the two inputs (at least 1-D), or an error. */
static ki_status bcast(const ki_shape *in, int64_t *d, int *nd, ki_error *err)
{
    char a[96], b[96];
    *nd = 0;
    for (int i = 0; i < 2; i++) {
        if (in[i].kind != KI_KIND_TENSOR || ki_shapeop_broadcast(d, nd, &in[i]) >= 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "inputs %s and %s do not broadcast",
                           ki_shape_str(&in[0], a, sizeof a), ki_shape_str(&in[1], b, sizeof b));
        }
    }
    if (*nd < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "inputs are 0-d");
    }
    return KI_OK;
}

static ki_status pd_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const pdist *s = state;
    int64_t d[KI_MAX_DIMS];
    int nd;
    (void)n_in, (void)n_out;
    ki_status st = bcast(in, d, &nd, err);
    if (st != KI_OK) {
        return st;
    }
    if (s->keepdim) {
        d[nd - 1] = 1;
    }
    return ki_shapeop_make(&out[0], s->keepdim ? nd : nd - 1, d, err);
}

/* The p-norm of n differences. */
static float norm(const pdist *s, const float *a, int64_t sa, const float *b, int64_t sb, int64_t n)
{
    double acc = isinf(s->p) && s->p < 0 ? INFINITY : 0.0;
    for (int64_t j = 0; j < n; j++) {
        const double v = fabs((double)(a[j * sa] - b[j * sb] + s->eps));
        if (s->p == 0.0) {
            acc += v != 0.0;
        } else if (isinf(s->p)) {
            acc = isnan(v) || (s->p > 0 ? v > acc : v < acc) ? v : acc;
        } else if (s->p == 1.0) {
            acc += v;
        } else if (s->p == 2.0) {
            acc += v * v;
        } else {
            acc += pow(v, s->p);
        }
    }
    if (s->p == 0.0 || s->p == 1.0 || isinf(s->p)) {
        return (float)acc;
    }
    return (float)(s->p == 2.0 ? sqrt(acc) : pow(acc, 1.0 / s->p));
}

static ki_status pd_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const pdist *s = state;
    int64_t d[KI_MAX_DIMS], st[2][KI_MAX_DIMS];
    int nd;
    (void)n_in, (void)n_out;
    if (bcast((const ki_shape[]){ in[0].shape, in[1].shape }, d, &nd, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    const ki_shape full = ki_shape_make(nd, d);
    for (int i = 0; i < 2; i++) {
        ki_shapeop_broadcast_strides(&in[i].shape, &full, st[i]);
    }
    const int64_t rows = ki_shapeop_prod(d, 0, nd - 1), n = d[nd - 1];
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (rows * n > 8192)
    for (int64_t r = 0; r < rows; r++) {
        int64_t o[2] = { 0, 0 }, rem = r;
        for (int k = nd - 2; k >= 0; k--) { /* r's index along each leading dim */
            const int64_t ik = rem % d[k];
            rem /= d[k];
            o[0] += ik * st[0][k], o[1] += ik * st[1][k];
        }
        out[0].data[r] =
            norm(s, in[0].data + o[0], st[0][nd - 1], in[1].data + o[1], st[1][nd - 1], n);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_f_pairwise_distance = { .type = "F.pairwise_distance",
                                                    .create = pd_create,
                                                    .shape = pd_shape,
                                                    .forward = pd_forward,
                                                    .destroy = free };
