/* linear.c - nn.Linear: y = x W^T + b over the last dimension of an input of any rank >= 1,
 * then an optional fused activation (fuse hook). One row (a classifier): dot products split over
 * the team (AVX2 when the CPU has it); more rows: one cblas_sgemm (OpenBLAS threads it; called
 * outside any parallel region). The weight and bias point into the model's attribute data. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "conv_common.h"

typedef float (*dot_fn)(const float *a, const float *b, int64_t n);
float ki_linear_dot_avx2(const float *a, const float *b, int64_t n); /* linear_avx2.c */

typedef struct linear {
    int64_t in_f, out_f;
    const float *weight; /* (out_f, in_f) */
    const float *bias;   /* (out_f) or NULL */
    ki_act act;          /* fused activation, KI_ACT_NONE without */
    dot_fn dot;
} linear;

static float dot_ref(const float *a, const float *b, int64_t n)
{
    float r = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        r += a[i] * b[i];
    }
    return r;
}

static ki_status parse(const ki_op_desc *op, linear *l, ki_error *err)
{
    static const int64_t any2[2] = { -1, -1 };
    const ki_attr *w, *b;
    bool has_bias;
    ki_status st = ki_cv_check_io(op, 1, 1, err);
    if (st == KI_OK) {
        st = ki_op_require_attr(op, "weight", 2, any2, &w, err);
    }
    if (st != KI_OK) {
        return st;
    }
    l->out_f = w->shape.d[0], l->in_f = w->shape.d[1];
    l->weight = w->data;
    if (!ki_cv_blas_ok(l->out_f) || !ki_cv_blas_ok(l->in_f)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "@weight is too large");
    }
    st = ki_cv_check_count(op, "in_features", l->in_f, err);
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "out_features", l->out_f, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "bias", ki_op_attr(op, "bias") != NULL, &has_bias, err);
    }
    if (st == KI_OK && has_bias) {
        st = ki_op_require_attr(op, "bias", 1, &l->out_f, &b, err);
        l->bias = st == KI_OK ? b->data : NULL;
    }
    return st;
}

static ki_status linear_create(const ki_op_desc *op, void **state, ki_error *err)
{
    linear *l = calloc(1, sizeof *l);
    if (!l) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = parse(op, l, err);
    __builtin_cpu_init();
    l->dot = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? ki_linear_dot_avx2
                                                                             : dot_ref;
    if (st != KI_OK) {
        free(l);
        return st;
    }
    *state = l;
    return KI_OK;
}

static ki_status linear_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const linear *l = state;
    char buf[96];
    int64_t rows = 1;
    bool ok = true;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    const ki_shape *x = &in[0];
    if (x->kind != KI_KIND_TENSOR || x->ndim < 1 || x->d[x->ndim - 1] != l->in_f) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s does not end in in_features=%lld",
                       ki_shape_str(x, buf, sizeof buf), (long long)l->in_f);
    }
    *out = ki_shape_make(x->ndim, x->d);
    out->d[x->ndim - 1] = l->out_f;
    ki_status st = ki_shape_check(out, err);
    for (int i = 0; i < x->ndim - 1; i++) {
        ok = ok && ki_ckd_mul_i64(&rows, rows, x->d[i]) && ki_cv_blas_ok(rows);
    }
    if (st == KI_OK && !ok) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "input %s is too large", ki_shape_str(x, buf, sizeof buf));
    }
    return st;
}

/* One row: y[o] = act(W[o] . x + b[o]), outputs split over the team. */
static void gemv(const linear *l, const float *x, float *restrict y, int n_threads)
{
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t o = 0; o < l->out_f; o++) {
        float v = l->dot(l->weight + o * l->in_f, x, l->in_f) + (l->bias ? l->bias[o] : 0.0f);
        y[o] = ki_act_apply(&l->act, v);
    }
}

static ki_status linear_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const linear *l = state;
    int64_t rows = 1;
    float *y = out[0].data;
    (void)n_in, (void)n_out;
    for (int i = 0; i < in[0].shape.ndim - 1; i++) {
        rows *= in[0].shape.d[i];
    }
    if (rows == 1) {
        gemv(l, in[0].data, y, ex->n_threads);
        return KI_OK;
    }
    /* The bias (or zero) is written first and the product added with beta = 1, which also
     * gives the right answer for in_features = 0, where sgemm may not touch y. */
    for (int64_t r = 0; r < rows; r++) {
        if (l->bias) {
            memcpy(y + r * l->out_f, l->bias, (size_t)l->out_f * sizeof *y);
        } else {
            memset(y + r * l->out_f, 0, (size_t)l->out_f * sizeof *y);
        }
    }
    if (rows > 0 && l->out_f > 0 && l->in_f > 0) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)l->out_f, (int)l->in_f,
                    1.0f, in[0].data, (int)l->in_f, l->weight, (int)l->in_f, 1.0f, y,
                    (int)l->out_f);
    }
    if (l->act.kind != KI_ACT_NONE) {
        ki_act_apply_n(&l->act, y, y, rows * l->out_f);
    }
    return KI_OK;
}

/* Absorbs a following activation (see ki_cv_fuse_act); the bias stays per feature. */
static bool linear_fuse(void *state, const ki_op_desc *next, int slot)
{
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    linear *l = state;
    ki_cv_epilogue ep = { NULL, l->act, false };
    bool ok = ki_cv_fuse_act(&ep, next);
    l->act = ep.act;
    return ok;
}

static void linear_destroy(void *state)
{
    free(state);
}

const ki_layer_ops ki_layer_linear = {
    .type = "nn.Linear",
    .create = linear_create,
    .shape = linear_shape,
    .forward = linear_forward,
    .destroy = linear_destroy,
    .fuse = linear_fuse,
};
