/* linear.c - nn.Linear: y = x W^T + b over the last dimension of an input of any rank >= 1,
 * then an optional fused activation (fuse hook). One row (a classifier): dot products split over
 * the team (AVX2 when the CPU has it); more rows (transformers): kinfer's own GEMM micro-kernels
 * of the CPU's level (the plain one at the generic level), x read in place as A and W^T packed
 * once at create into B panels, the bias and activation in a pass over each finished row (dot
 * products again where no panels were packed: a layer declared one row and given more, or
 * F.linear). Either way each output is computed the same whatever the thread count. The weight and
 * bias point into the model's attribute data, but for a large classifier whose weights are all
 * exactly binary16 values (exports that store f16 weights): with AVX-512 it keeps them as binary16
 * (half the bytes to stream each run, the same dot products) and releases the originals. F.linear,
 * whose weight and bias are inputs, runs the same kernels on them in place (nothing packed: they
 * may change between runs). */
#include <stdlib.h>
#include <string.h>

#include "../core/bigbuf.h"
#include "../core/half.h"
#include "../core/team.h"
#include "conv_common.h"
#include "gemm.h"

typedef ki_dot_fn dot_fn;
struct ki_op_desc;
static bool one_row_declared(const ki_op_desc *op);
float ki_linear_dot_h_avx512(const uint16_t *a, const float *b, int64_t n); /* linear_avx512.c */

/* Float32 weight bytes from which a one-row layer keeps binary16-exact weights as binary16: below
 * that they stay in L2 / L3 between runs (as for the convolutions' KI_OV_HALF_MIN_BYTES).
 * mobilenet_v2's 1280 -> 1000 classifier (5.1 MB): 62-67 -> 38-40 us in the network, 2 threads. */
#define LINEAR_HALF_MIN_BYTES (2 * 1024 * 1024)

typedef struct linear {
    int64_t in_f, out_f;
    const float *weight; /* (out_f, in_f), or NULL when kept as binary16 in wh */
    uint16_t *wh;        /* the weights as binary16 (owned), or NULL */
    const float *bias;   /* (out_f) or NULL */
    ki_act act;          /* fused activation, KI_ACT_NONE without */
    dot_fn dot;
    float *wp;             /* W^T as packed GEMM panels (owned), or NULL: see pack_weights */
    ki_gemm_ukernel uk;    /* the level's micro-kernel for wp */
    ki_cv_epilogue_fn epf; /* applies act to the rows of the wp path */
    bool residual;         /* a fused add(@0,@1): input 1 is added to the output */
    bool res_after;        /* ... after the activation (linear, act, add) */
} linear;

/* W^T (in_f x out_f) into panels of KI_GEMM_NR output features, k = in_f rows each, zero past
 * out_f: the B of y = x W^T, packed once because the weights never change. Not for a layer
 * declared one row (a classifier keeps its dot products). */
static ki_status pack_weights(linear *l, const ki_op_desc *op, ki_error *err)
{
    if (!l->weight || one_row_declared(op) || l->out_f == 0 || l->in_f == 0) {
        return KI_OK;
    }
    l->wp = ki_gemm_pack_wt_new(l->weight, l->out_f, l->in_f);
    if (!l->wp) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for the packed weights");
    }
    l->uk = ki_gemm_ukernel_for(ki_cpu_isa());
    l->epf = ki_cv_epilogue_for(ki_cpu_isa());
    return KI_OK;
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

/* Whether the param file declares a single row (a classifier's (1, in_features)). */
static bool one_row_declared(const ki_op_desc *op)
{
    const ki_shape *d = op->input_decl && op->n_inputs > 0 ? &op->input_decl[0] : NULL;
    if (!d || d->kind != KI_KIND_TENSOR || d->ndim < 1) {
        return false;
    }
    for (int i = 0; i < d->ndim - 1; i++) {
        if (d->d[i] != 1) {
            return false;
        }
    }
    return true;
}

/* Keeps the weights as binary16 (l->wh) when the CPU widens them with AVX-512, the layer is
 * declared one row, they are LINEAR_HALF_MIN_BYTES or more and every one is exactly such a
 * value; the originals are released. Otherwise leaves l as it is. */
static ki_status keep_half(linear *l, const ki_op_desc *op, ki_error *err)
{
    int64_t n;
    if (ki_cpu_isa() < KI_ISA_AVX512 || !l->weight || !one_row_declared(op) ||
        !ki_ckd_mul_i64(&n, l->out_f, l->in_f) ||
        n < LINEAR_HALF_MIN_BYTES / (int64_t)sizeof(float) ||
        (uint64_t)n > SIZE_MAX / sizeof(uint16_t)) {
        return KI_OK;
    }
    uint16_t *h = ki_bigbuf_alloc((size_t)n * sizeof *h);
    if (!h) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for binary16 weights (%lld)",
                       (long long)n);
    }
    for (int64_t i = 0; i < n; i++) {
        if (!ki_half_exact(l->weight[i], &h[i])) {
            free(h);
            return KI_OK;
        }
    }
    l->wh = h;
    if (ki_op_release_attr(op, ki_op_attr(op, "weight"))) {
        l->weight = NULL;
    }
    return KI_OK;
}

static ki_status linear_create(const ki_op_desc *op, void **state, ki_error *err)
{
    linear *l = calloc(1, sizeof *l);
    if (!l) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = parse(op, l, err);
    l->dot = ki_dot_for(ki_cpu_isa());
    if (st == KI_OK) {
        st = keep_half(l, op, err);
    }
    if (st == KI_OK) {
        st = pack_weights(l, op, err);
    }
    if (st != KI_OK) {
        free(l->wh);
        free(l);
        return st;
    }
    *state = l;
    return KI_OK;
}

/* Output shape for input x: x's with the last dim out_features. */
static ki_status check_shape(const linear *l, const ki_shape *x, ki_shape *out, ki_error *err)
{
    char buf[96];
    int64_t rows = 1;
    bool ok = true;
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

static ki_status linear_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const linear *l = state;
    char a[96], b[96];
    if (n_in != 1 + l->residual || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = check_shape(l, &in[0], out, err);
    if (st == KI_OK && l->residual && !ki_shape_equal(&in[1], out)) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "the fused residual %s is not the output's shape %s",
                     ki_shape_str(&in[1], a, sizeof a), ki_shape_str(out, b, sizeof b));
    }
    return st;
}

/* The residual and activation over y = x W^T + b of the paths that do not finish by tiles (the
 * activation is already applied there unless a residual comes before it). */
static void finish_rows(const linear *l, const float *res, float *y, int64_t n)
{
    for (int64_t i = 0; res && i < n; i++) {
        y[i] = l->res_after ? y[i] + res[i] : ki_act_apply(&l->act, y[i] + res[i]);
    }
}

typedef struct linear_job {
    const linear *l;
    const float *x;
    int64_t rows;
    const float *res;
    float *y;
} linear_job;

/* Outputs [i0, i1) of the rows of x (output i: row i / out_f, feature i % out_f). */
static void gemv_run(const linear_job *j, int64_t i0, int64_t i1)
{
    const linear *l = j->l;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t r = i / l->out_f, o = i % l->out_f;
        const float *xr = j->x + r * l->in_f;
#if KI_HAVE_X86 /* wh is set only with AVX-512 (keep_half) */
        float v = l->wh ? ki_linear_dot_h_avx512(l->wh + o * l->in_f, xr, l->in_f)
                        : l->dot(l->weight + o * l->in_f, xr, l->in_f);
#else
        float v = l->dot(l->weight + o * l->in_f, xr, l->in_f);
#endif
        v += l->bias ? l->bias[o] : 0.0f;
        j->y[i] = l->residual && !l->res_after ? v : ki_act_apply(&l->act, v);
    }
    finish_rows(l, j->res ? j->res + i0 : NULL, j->y + i0, i1 - i0);
}

/* Rows of x: y[r][o] = act(W[o] . x[r] + b[o]) (then the residual), the rows' outputs in runs
 * over the team (ki_share_begin_runs). */
static void gemv_body(void *arg, const ki_part *p)
{
    const linear_job *j = arg;
    const int64_t n = j->rows * j->l->out_f, runs = ki_share_begin_runs(p, n);
    for (int64_t i0, i1; ki_share_take_run(p, n, runs, &i0, &i1);) {
        gemv_run(j, i0, i1);
    }
}

/* y = x W^T on the packed panels, each thread finishing its rows (bias, activation, residual). */
static void gemm_body(void *arg, const ki_part *p)
{
    const linear_job *j = arg;
    const linear *l = j->l;
    const ki_gemm_col_finish f = { l->bias, j->res, { NULL, l->act, l->res_after }, l->epf };
    const ki_gemm_args ga = { .m = j->rows,
                              .n = l->out_f,
                              .k = l->in_f,
                              .a = j->x,
                              .lda = l->in_f,
                              .bp = l->wp,
                              .c = j->y,
                              .ldc = l->out_f,
                              .uk = l->uk,
                              .rows_done = ki_gemm_finish_cols,
                              .done_ctx = &f };
    ki_gemm_compute_shared(&ga, p);
}

/* y = act(x W^T + b) (with a fused residual: + res before or after the activation) for an input
 * x of any rank. */
static void run(const linear *l, const ki_tensor *x, const float *res, float *restrict y,
                const ki_exec *ex)
{
    linear_job j = { l, x->data, 1, res, y };
    for (int i = 0; i < x->shape.ndim - 1; i++) {
        j.rows *= x->shape.d[i];
    }
    /* no panels (binary16 weights): row by row */
    const bool by_row = j.rows == 1 || !l->wp || l->in_f == 0;
    ki_team_run(ex, by_row ? gemv_body : gemm_body, &j);
}

static ki_status linear_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const linear *l = state;
    (void)n_in, (void)n_out;
    run(l, &in[0], l->residual ? in[1].data : NULL, out[0].data, ex);
    return KI_OK;
}

/* Absorbs a following activation (see ki_cv_fuse_act; also GELU) or residual add(@0,@1); the
 * bias stays per feature. */
static bool linear_fuse(void *state, const ki_op_desc *next, int slot)
{
    linear *l = state;
    if (next->n_inputs == 2) { /* a residual add: the other operand becomes input 1 */
        if (l->residual || !ki_cv_is_residual_add(next)) {
            return false;
        }
        l->residual = true;
        l->res_after = l->act.kind != KI_ACT_NONE;
        return true;
    }
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    ki_cv_epilogue ep = { NULL, l->act, false };
    bool ok = ki_cv_fuse_act(&ep, next);
    ki_act a;
    /* also GELU (a transformer's MLP), which the vector epilogues compute */
    if (!ok && l->act.kind == KI_ACT_NONE && ki_act_from_op(next, &a, NULL) == KI_OK &&
        a.kind == KI_ACT_GELU) {
        ep.act = a;
        ok = true;
    }
    l->act = ep.act;
    return ok;
}

static void linear_destroy(void *state)
{
    linear *l = state;
    if (l) {
        free(l->wh);
        free(l->wp);
    }
    free(state);
}

const ki_layer_ops ki_layer_linear = {
    .type = "nn.Linear",
    .flags = KI_LAYER_TEAM,
    .create = linear_create,
    .shape = linear_shape,
    .forward = linear_forward,
    .destroy = linear_destroy,
    .fuse = linear_fuse,
};

/* ---- F.linear: the weight (out, in) and optional bias (out) are inputs, read in place each run
 * (nothing packed: they may change between runs). State: the input slots and the dot product. */

typedef struct f_linear {
    int x, w, b; /* b: -1 without a bias */
    dot_fn dot;
} f_linear;

static ki_status flin_create(const ki_op_desc *op, void **state, ki_error *err)
{
    f_linear *f = calloc(1, sizeof *f);
    if (!f) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    f->x = ki_op_input_slot(op, "input", 0), f->w = ki_op_input_slot(op, "weight", 1);
    f->b = ki_op_input_slot(op, "bias", 2);
    f->dot = ki_dot_for(ki_cpu_isa());
    if (op->n_inputs < 2 || op->n_inputs > 3 || op->n_outputs != 1 || f->x != 0 || f->w < 0 ||
        (op->n_inputs == 3) != (f->b >= 0) || f->w == f->b || ki_op_has(op, "bias")) {
        free(f);
        return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                       "expects $input, $weight and an optional $bias, and 1 output");
    }
    *state = f;
    return KI_OK;
}

/* The layer for these weight and bias shapes (and data, NULL for shapes only). */
static ki_status flin_bind(const f_linear *f, const ki_shape *in, const float *w, const float *b,
                           linear *l, ki_error *err)
{
    char buf[96];
    const ki_shape *ws = &in[f->w], *bs = f->b >= 0 ? &in[f->b] : NULL;
    memset(l, 0, sizeof *l);
    if (ws->kind != KI_KIND_TENSOR || ws->ndim != 2 || !ki_cv_blas_ok(ws->d[0]) ||
        !ki_cv_blas_ok(ws->d[1])) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not 2-D (out, in)",
                       ki_shape_str(ws, buf, sizeof buf));
    }
    l->out_f = ws->d[0], l->in_f = ws->d[1];
    if (bs && (bs->kind != KI_KIND_TENSOR || bs->ndim != 1 || bs->d[0] != l->out_f)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "bias %s is not (%lld)",
                       ki_shape_str(bs, buf, sizeof buf), (long long)l->out_f);
    }
    l->weight = w, l->bias = b, l->dot = f->dot;
    return KI_OK;
}

static ki_status flin_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const f_linear *f = state;
    linear l;
    (void)n_in, (void)n_out;
    ki_status st = flin_bind(f, in, NULL, NULL, &l, err);
    return st == KI_OK ? check_shape(&l, &in[f->x], out, err) : st;
}

static ki_status flin_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const f_linear *f = state;
    ki_shape s[3];
    linear l;
    (void)n_out;
    for (int i = 0; i < n_in && i < 3; i++) {
        s[i] = in[i].shape;
    }
    if (n_in > 3 ||
        flin_bind(f, s, in[f->w].data, f->b >= 0 ? in[f->b].data : NULL, &l, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    run(&l, &in[f->x], NULL, out[0].data, ex);
    return KI_OK;
}

const ki_layer_ops ki_layer_f_linear = {
    .type = "F.linear",
    .create = flin_create,
    .shape = flin_shape,
    .forward = flin_forward,
    .destroy = free,
};
