/* norm_batch.c - nn.BatchNorm1d/2d/3d in inference mode: y = x * scale[c] + shift[c] over dim 1,
 * with scale = weight / sqrt(running_var + eps) and shift = bias - running_mean * scale,
 * precomputed in create in float as PyTorch's CPU kernel does. The state owns both arrays.
 * F.batch_norm (training=False) takes the statistics, weight and bias as inputs, which may change
 * between runs: it forms scale and shift the same way for each plane during the run. */
#include <math.h>
#include <stdlib.h>

#include "../core/ckd.h"
#include "../core/layer.h"

typedef struct bn_state {
    int64_t channels;
    float *scale; /* channels entries, then shift: one allocation */
    float *shift;
} bn_state;

/* Finds the four attributes; weight/bias are NULL when affine is false. */
static ki_status bn_attrs(const ki_op_desc *op, bool affine, const ki_attr **a, ki_error *err)
{
    static const char *const keys[4] = { "running_mean", "running_var", "weight", "bias" };
    int64_t c = -1;
    ki_status st = ki_op_require_attr(op, keys[0], 1, &c, &a[0], err);
    if (st != KI_OK) {
        return st;
    }
    c = a[0]->shape.d[0];
    a[2] = a[3] = NULL;
    for (int i = 1; i < (affine ? 4 : 2); i++) {
        st = ki_op_require_attr(op, keys[i], 1, &c, &a[i], err);
        if (st != KI_OK) {
            return st;
        }
    }
    return KI_OK;
}

/* Where a run gets its coefficients: precomputed (scale, shift), or from the statistics. */
typedef struct bn_src {
    const float *scale, *shift;
    const float *mean, *var, *w, *b; /* w, b may be NULL */
    float eps;
} bn_src;

/* PyTorch's inference coefficients of channel c, in float. */
static void bn_coef(const bn_src *s, int64_t c, float *scale, float *shift)
{
    if (s->scale) {
        *scale = s->scale[c], *shift = s->shift[c];
        return;
    }
    const float invstd = 1.0f / sqrtf(s->var[c] + s->eps);
    *scale = invstd * (s->w ? s->w[c] : 1.0f);
    *shift = (s->b ? s->b[c] : 0.0f) - s->mean[c] * *scale;
}

static ki_status bn_fill(const ki_op_desc *op, const ki_attr *const *a, float eps, void **state,
                         ki_error *err)
{
    const int64_t c = a[0]->shape.d[0];
    size_t bytes;
    int64_t n_feat;
    ki_status st = ki_op_get_int(op, "num_features", c, &n_feat, err);
    if (st != KI_OK) {
        return st;
    }
    if (c < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@running_mean is empty");
    }
    if (n_feat != c) {
        return KI_FAIL(err, KI_ERR_SHAPE, "num_features=%lld but @running_mean has %lld entries",
                       (long long)n_feat, (long long)c);
    }
    bn_state *p = malloc(sizeof *p);
    if (!p || !ki_ckd_mul(&bytes, (size_t)c, 2 * sizeof(float)) || !(p->scale = malloc(bytes))) {
        free(p);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->channels = c;
    p->shift = p->scale + c;
    const bn_src src = {
        NULL, NULL, a[0]->data, a[1]->data, a[2] ? a[2]->data : NULL, a[3] ? a[3]->data : NULL, eps
    };
    for (int64_t i = 0; i < c; i++) {
        bn_coef(&src, i, &p->scale[i], &p->shift[i]);
    }
    *state = p;
    return KI_OK;
}

static ki_status bn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    bool affine;
    double eps;
    const ki_attr *a[4];
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    ki_status st = ki_op_get_bool(op, "affine", true, &affine, err);
    if (st == KI_OK) {
        st = ki_op_get_float(op, "eps", 1e-5, &eps, err);
    }
    if (st == KI_OK && !(eps >= 0.0)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "eps must be a non-negative number");
    }
    if (st == KI_OK) {
        st = bn_attrs(op, affine, a, err);
    }
    return st != KI_OK ? st : bn_fill(op, a, (float)eps, state, err);
}

/* x must be (N, C, *) with C = channels; out is x's shape. */
static ki_status check_input(const ki_shape *x, int64_t channels, ki_shape *out, ki_error *err)
{
    char buf[128];
    if (x->kind != KI_KIND_TENSOR || x->ndim < 2 || x->d[1] != channels) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s has no dim 1 of size %lld (num_features)",
                       ki_shape_str(x, buf, sizeof buf), (long long)channels);
    }
    *out = ki_shape_make(x->ndim, x->d);
    return KI_OK;
}

static ki_status bn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const bn_state *p = state;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 1 input and 1 output");
    }
    return check_input(&in[0], p->channels, &out[0], err);
}

/* y = x * scale + shift over the planes of x (N, C, *), C = channels. */
static void bn_run(const bn_src *p, int64_t channels, const ki_tensor *x, float *dst, int nt)
{
    const ki_shape *s = &x->shape;
    const float *src = x->data;
    int64_t inner = 1;
    for (int i = 2; i < s->ndim; i++) {
        inner *= s->d[i];
    }
    const int64_t planes = s->d[0] * channels;
#pragma omp parallel for num_threads(nt) schedule(static) if (planes * inner > 8192)
    for (int64_t pl = 0; pl < planes; pl++) {
        float a, b;
        bn_coef(p, pl % channels, &a, &b);
        const float *xp = src + pl * inner;
        float *y = dst + pl * inner;
        for (int64_t i = 0; i < inner; i++) {
            y[i] = xp[i] * a + b;
        }
    }
}

static ki_status bn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const bn_state *p = state;
    const bn_src src = { p->scale, p->shift, NULL, NULL, NULL, NULL, 0.0f };
    (void)n_in;
    (void)n_out;
    bn_run(&src, p->channels, &in[0], out[0].data, ex->n_threads);
    return KI_OK;
}

static void bn_destroy(void *state)
{
    bn_state *p = state;
    if (p) {
        free(p->scale);
        free(p);
    }
}

#define BN_LAYER(sym, name)                                                                        \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = bn_create,                                                \
                               .shape = bn_shape,                                                  \
                               .workspace = NULL,                                                  \
                               .forward = bn_forward,                                              \
                               .destroy = bn_destroy }

BN_LAYER(ki_layer_nn_batchnorm1d, "nn.BatchNorm1d");
BN_LAYER(ki_layer_nn_batchnorm2d, "nn.BatchNorm2d");
BN_LAYER(ki_layer_nn_batchnorm3d, "nn.BatchNorm3d");

/* ---- F.batch_norm: input, running_mean, running_var and the optional weight and bias are
 * inputs (slots in[]; -1 when absent). State: the slots and eps. ---- */

enum { FBN_X, FBN_MEAN, FBN_VAR, FBN_W, FBN_B, FBN_N };

typedef struct fbn_state {
    int in[FBN_N];
    float eps;
} fbn_state;

static ki_status fbn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    static const char *const keys[FBN_N] = { "input", "running_mean", "running_var", "weight",
                                             "bias" };
    bool training = false;
    double eps;
    int want = 0;
    fbn_state *p = calloc(1, sizeof *p);
    ki_status st = p ? ki_op_get_float(op, "eps", 1e-5, &eps, err)
                     : KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    st = st != KI_OK ? st : ki_op_get_bool(op, "training", false, &training, err);
    for (int i = 0; st == KI_OK && i < FBN_N; i++) {
        p->in[i] = ki_op_input_slot(op, keys[i], i);
        want += p->in[i] >= 0;
    }
    if (st == KI_OK && !(eps >= 0.0)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "eps must be a non-negative number");
    }
    if (st == KI_OK && training) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "training=True (batch statistics)");
    }
    /* in place: the data first; every input a distinct slot */
    if (st == KI_OK &&
        (p->in[FBN_X] != 0 || p->in[FBN_MEAN] < 0 || p->in[FBN_VAR] < 0 || want != op->n_inputs ||
         op->n_outputs != 1 || ki_op_has(op, "weight") || ki_op_has(op, "bias"))) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED,
                     "expects $input first, $running_mean, $running_var, optional $weight and "
                     "$bias, and 1 output");
    }
    if (st != KI_OK) {
        free(p);
        return st;
    }
    p->eps = (float)eps;
    *state = p;
    return KI_OK;
}

static ki_status fbn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const fbn_state *p = state;
    char buf[96];
    (void)n_in, (void)n_out;
    const ki_shape *m = &in[p->in[FBN_MEAN]];
    if (m->kind != KI_KIND_TENSOR || m->ndim != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "running_mean %s is not 1-D",
                       ki_shape_str(m, buf, sizeof buf));
    }
    for (int i = FBN_VAR; i < FBN_N; i++) {
        const ki_shape *s = p->in[i] >= 0 ? &in[p->in[i]] : NULL;
        if (s && (s->kind != KI_KIND_TENSOR || s->ndim != 1 || s->d[0] != m->d[0])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %s is not (%lld) as running_mean",
                           ki_shape_str(s, buf, sizeof buf), (long long)m->d[0]);
        }
    }
    return check_input(&in[p->in[FBN_X]], m->d[0], &out[0], err);
}

static ki_status fbn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const fbn_state *p = state;
    const float *d[FBN_N];
    (void)n_in, (void)n_out;
    for (int i = 0; i < FBN_N; i++) {
        d[i] = p->in[i] >= 0 ? in[p->in[i]].data : NULL;
    }
    const bn_src src = { NULL, NULL, d[FBN_MEAN], d[FBN_VAR], d[FBN_W], d[FBN_B], p->eps };
    bn_run(&src, in[p->in[FBN_MEAN]].shape.d[0], &in[0], out[0].data, ex->n_threads);
    return KI_OK;
}

const ki_layer_ops ki_layer_f_batch_norm = { .type = "F.batch_norm",
                                             .flags = KI_LAYER_INPLACE,
                                             .create = fbn_create,
                                             .shape = fbn_shape,
                                             .forward = fbn_forward,
                                             .destroy = free };
