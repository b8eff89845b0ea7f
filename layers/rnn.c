/* rnn.c - nn.LSTM, nn.GRU and nn.RNN at inference: num_layers stacked layers, each one or two
 * directions, bias or not, batch_first or not, an unbatched (L, H_in) input too; LSTM with
 * proj_size (h = (o * tanh(c)) W_hr^T); RNN with tanh or relu. Inputs: x, optionally h0 (and c0
 * for LSTM); outputs: y, optionally h_n (and c_n for LSTM), as pnnx exports them.
 *
 * PyTorch's cell equations and gate order (RNN.cpp): LSTM gates i, f, g, o with
 * c' = f*c + i*g, h' = o*tanh(c'); GRU gates r, z, n with n = tanh(W_in x + b_in + r*(W_hn h +
 * b_hn)) and h' = (h - n)*z + n; RNN h' = act(W_ih x + b_ih + W_hh h + b_hh). Per layer and
 * direction, the input projection of all time steps is one product; each step then multiplies
 * the hidden state by W_hh^T and applies the cell. Rows of x, y and the inter-layer buffers keep
 * x's order (time-major, or batch-major with batch_first). The products run on kinfer's GEMM
 * micro-kernel of the CPU's level, the weights packed once at create, each product's tiles split
 * over the team (so the result does not depend on the thread count); everything else lives in
 * thread 0's workspace slice.
 * State: the parameters, weight pointers (the model's) and packed weights, immutable;
 * thread-safe. */
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/cpu.h"
#include "../core/layer.h"
#include "gemm.h"
#include "shape_common.h"

#define RNN_MAX_LAYERS 64

enum { CELL_TANH, CELL_RELU, CELL_LSTM, CELL_GRU };

typedef struct rnn_w {
    const float *w_ih, *w_hh, *b_ih, *b_hh, *w_hr;
    float *p_ih, *p_hh, *p_hr; /* their transposes as packed GEMM panels (owned), p_hr or NULL */
} rnn_w;

typedef struct rnn_state {
    int cell;
    int layers, dirs;
    bool batch_first, bias;
    int64_t in_size, hid, proj, out_h, gh; /* out_h: proj or hid; gh: gates * hid */
    rnn_w w[2 * RNN_MAX_LAYERS];
    ki_gemm_ukernel uk; /* the level's micro-kernel */
    ki_dot_fn dot;      /* and dot product */
} rnn_state;

/* Dimensions of one run, from x's shape. */
typedef struct rnn_dims {
    bool batched;
    int64_t len, batch, rows; /* rows = len * batch */
} rnn_dims;

static ki_status rnn_weight(const ki_op_desc *op, const char *what, int l, int d, int ndim,
                            int64_t d0, int64_t d1, const float **out, ki_error *err)
{
    char key[64];
    const int64_t dims[2] = { d0, d1 };
    const ki_attr *a;
    snprintf(key, sizeof key, "%s_l%d%s", what, l, d ? "_reverse" : "");
    ki_status st = ki_op_require_attr(op, key, ndim, dims, &a, err);
    *out = st == KI_OK ? a->data : NULL;
    return st;
}

static ki_status rnn_weights(const ki_op_desc *op, rnn_state *s, ki_error *err)
{
    ki_status st = KI_OK;
    for (int l = 0; st == KI_OK && l < s->layers; l++) {
        const int64_t in_l = l == 0 ? s->in_size : s->dirs * s->out_h;
        for (int d = 0; st == KI_OK && d < s->dirs; d++) {
            rnn_w *w = &s->w[l * s->dirs + d];
            st = rnn_weight(op, "weight_ih", l, d, 2, s->gh, in_l, &w->w_ih, err);
            st = st != KI_OK ? st
                             : rnn_weight(op, "weight_hh", l, d, 2, s->gh, s->out_h, &w->w_hh, err);
            if (st == KI_OK && s->bias) {
                st = rnn_weight(op, "bias_ih", l, d, 1, s->gh, 0, &w->b_ih, err);
                st = st != KI_OK ? st : rnn_weight(op, "bias_hh", l, d, 1, s->gh, 0, &w->b_hh, err);
            }
            if (st == KI_OK && s->proj > 0) {
                st = rnn_weight(op, "weight_hr", l, d, 2, s->proj, s->hid, &w->w_hr, err);
            }
            if (st == KI_OK) {
                w->p_ih = ki_gemm_pack_wt_new(w->w_ih, s->gh, in_l);
                w->p_hh = ki_gemm_pack_wt_new(w->w_hh, s->gh, s->out_h);
                w->p_hr = s->proj > 0 ? ki_gemm_pack_wt_new(w->w_hr, s->proj, s->hid) : NULL;
                if (!w->p_ih || !w->p_hh || (s->proj > 0 && !w->p_hr)) {
                    st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory for the packed weights");
                }
            }
        }
    }
    return st;
}

static void rnn_destroy(void *state)
{
    rnn_state *s = state;
    for (int i = 0; s && i < 2 * RNN_MAX_LAYERS; i++) {
        free(s->w[i].p_ih);
        free(s->w[i].p_hh);
        free(s->w[i].p_hr);
    }
    free(s);
}

static ki_status rnn_params(const ki_op_desc *op, rnn_state *s, ki_error *err)
{
    int64_t layers;
    bool bidir;
    ki_status st = ki_op_get_int(op, "input_size", -1, &s->in_size, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "hidden_size", -1, &s->hid, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "num_layers", 1, &layers, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "bias", true, &s->bias, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "batch_first", false, &s->batch_first, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "bidirectional", false, &bidir, err);
    st =
        st != KI_OK || s->cell != CELL_LSTM ? st : ki_op_get_int(op, "proj_size", 0, &s->proj, err);
    if (st != KI_OK) {
        return st;
    }
    const int gates = s->cell == CELL_LSTM ? 4 : s->cell == CELL_GRU ? 3 : 1;
    if (s->in_size < 1 || s->in_size > INT_MAX || s->hid < 1 || s->hid > INT_MAX / gates) {
        return KI_FAIL(err, KI_ERR_FORMAT, "input_size %lld / hidden_size %lld out of range",
                       (long long)s->in_size, (long long)s->hid);
    }
    if (layers < 1 || layers > RNN_MAX_LAYERS) {
        return KI_FAIL(err, KI_ERR_FORMAT, "num_layers %lld (1 to %d)", (long long)layers,
                       RNN_MAX_LAYERS);
    }
    if (s->proj < 0 || s->proj >= s->hid) {
        return KI_FAIL(err, KI_ERR_FORMAT, "proj_size %lld (0 to hidden_size - 1)",
                       (long long)s->proj);
    }
    s->layers = (int)layers;
    s->dirs = bidir ? 2 : 1;
    if (s->dirs * (s->proj > 0 ? s->proj : s->hid) > INT_MAX) {
        return KI_FAIL(err, KI_ERR_FORMAT, "hidden_size %lld is out of range", (long long)s->hid);
    }
    s->gh = gates * s->hid;
    s->out_h = s->proj > 0 ? s->proj : s->hid;
    return KI_OK;
}

static ki_status rnn_create_cell(const ki_op_desc *op, int cell, void **state, ki_error *err)
{
    const int max_io = cell == CELL_LSTM ? 3 : 2;
    if (op->n_inputs < 1 || op->n_inputs > max_io || op->n_outputs < 1 || op->n_outputs > max_io ||
        (cell == CELL_LSTM && op->n_inputs == 2)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs and %d outputs (1 to %d each%s)",
                       op->n_inputs, op->n_outputs, max_io,
                       cell == CELL_LSTM ? ", h0 with c0" : "");
    }
    rnn_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->cell = cell;
    ki_status st = KI_OK;
    if (cell != CELL_LSTM && cell != CELL_GRU) {
        const char *nl = NULL;
        st = ki_op_get_string(op, "nonlinearity", "tanh", &nl, err);
        if (st == KI_OK && strcmp(nl, "tanh") != 0 && strcmp(nl, "relu") != 0) {
            st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "nonlinearity '%s'", nl);
        }
        s->cell = st == KI_OK && strcmp(nl, "relu") == 0 ? CELL_RELU : CELL_TANH;
    }
    st = st != KI_OK ? st : rnn_params(op, s, err);
    s->uk = ki_gemm_ukernel_for(ki_cpu_isa());
    s->dot = ki_dot_for(ki_cpu_isa());
    st = st != KI_OK ? st : rnn_weights(op, s, err);
    if (st != KI_OK) {
        rnn_destroy(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status lstm_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return rnn_create_cell(op, CELL_LSTM, state, err);
}

static ki_status gru_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return rnn_create_cell(op, CELL_GRU, state, err);
}

static ki_status rnn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return rnn_create_cell(op, CELL_TANH, state, err);
}

static rnn_dims rnn_dims_of(const rnn_state *s, const ki_shape *x)
{
    rnn_dims r = { .batched = x->ndim == 3 };
    r.len = r.batched && s->batch_first ? x->d[1] : x->d[0];
    r.batch = !r.batched ? 1 : s->batch_first ? x->d[0] : x->d[1];
    r.rows = r.len * r.batch;
    return r;
}

/* Floats of the workspace: two inter-layer buffers (rows x dirs*out_h), the input gates of all
 * steps (rows x gh), one step's hidden gates (batch x gh), h (batch x out_h), c and o*tanh(c)
 * (batch x hid each). */
static bool rnn_floats(const rnn_state *s, const rnn_dims *r, int64_t *out)
{
    int64_t seq, gx, per_b;
    const int64_t bufs = s->layers > 2 ? 2 : s->layers - 1;
    return ki_ckd_mul_i64(&seq, r->rows, s->dirs * s->out_h) && ki_ckd_mul_i64(&seq, seq, bufs) &&
           ki_ckd_mul_i64(&gx, r->rows, s->gh) &&
           ki_ckd_mul_i64(&per_b, r->batch, s->gh + s->out_h + 2 * s->hid) &&
           ki_ckd_add_i64(out, seq, gx) && ki_ckd_add_i64(out, *out, per_b) &&
           (uint64_t)*out < SIZE_MAX / sizeof(float);
}

/* The shape of h0 / h_n (width out_h) or c0 / c_n (width hid). */
static ki_shape rnn_state_shape(const rnn_state *s, const rnn_dims *r, int64_t width)
{
    int64_t d[3] = { (int64_t)s->layers * s->dirs, r->batch, width };
    if (!r->batched) {
        d[1] = width;
    }
    return ki_shape_make(r->batched ? 3 : 2, d);
}

static ki_status rnn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const rnn_state *s = state;
    const ki_shape *x = &in[0];
    int64_t f;
    char have[64], want_s[64];
    if (x->kind != KI_KIND_TENSOR || (x->ndim != 2 && x->ndim != 3) ||
        x->d[x->ndim - 1] != s->in_size) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s is not (L, N, %lld), (N, L, %lld) or (L, %lld)",
                       ki_shape_str(x, have, sizeof have), (long long)s->in_size,
                       (long long)s->in_size, (long long)s->in_size);
    }
    const rnn_dims r = rnn_dims_of(s, x);
    if (r.len < 1 || r.batch < 1 || r.rows > INT_MAX || !rnn_floats(s, &r, &f)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "input %s: empty, or too large",
                       ki_shape_str(x, have, sizeof have));
    }
    for (int i = 1; i < n_in; i++) {
        const ki_shape want = rnn_state_shape(s, &r, i == 1 ? s->out_h : s->hid);
        if (in[i].kind != KI_KIND_TENSOR || !ki_shape_equal(&in[i], &want)) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%s has shape %s, expected %s", i == 1 ? "h0" : "c0",
                           ki_shape_str(&in[i], have, sizeof have),
                           ki_shape_str(&want, want_s, sizeof want_s));
        }
    }
    out[0] = ki_shape_make(x->ndim, x->d);
    out[0].d[x->ndim - 1] = s->dirs * s->out_h;
    for (int i = 1; i < n_out; i++) {
        out[i] = rnn_state_shape(s, &r, i == 1 ? s->out_h : s->hid);
    }
    return ki_shapeop_make(out, out[0].ndim, out[0].d, err);
}

static size_t rnn_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                            int n_out, int n_threads)
{
    const rnn_state *s = state;
    const rnn_dims r = rnn_dims_of(s, &in[0]);
    int64_t f;
    (void)n_in, (void)out, (void)n_out, (void)n_threads;
    return rnn_floats(s, &r, &f) ? (size_t)f * sizeof(float) : 0;
}

static inline float sigm(float v)
{
    return 1.0f / (1.0f + expf(-v));
}

/* One step's cell for batch entry n: gx its input gates, g its hidden gates (W_hh h + b_hh),
 * h (out_h, or hid before the projection into hf) and c updated. */
static void rnn_cell(const rnn_state *s, const float *gx, const float *g, float *h, float *c,
                     float *hf)
{
    const int64_t H = s->hid;
    for (int64_t j = 0; j < H; j++) {
        if (s->cell == CELL_LSTM) {
            const float i = sigm(g[j] + gx[j]), f = sigm(g[H + j] + gx[H + j]);
            const float gg = tanhf(g[2 * H + j] + gx[2 * H + j]);
            const float o = sigm(g[3 * H + j] + gx[3 * H + j]);
            c[j] = f * c[j] + i * gg;
            (s->proj > 0 ? hf : h)[j] = o * tanhf(c[j]);
        } else if (s->cell == CELL_GRU) {
            const float r = sigm(g[j] + gx[j]), z = sigm(g[H + j] + gx[H + j]);
            const float nn = tanhf(gx[2 * H + j] + r * g[2 * H + j]);
            h[j] = (h[j] - nn) * z + nn;
        } else {
            const float v = g[j] + gx[j];
            h[j] = s->cell == CELL_RELU ? (v > 0.0f ? v : 0.0f) : tanhf(v);
        }
    }
}

/* c (m x n) = a (m x k) times the packed W^T wp, + bias (per column) when not NULL; the tiles
 * split over nt threads when the product is large enough to pay for the team. */
static void rnn_gemm(const rnn_state *s, const float *a, int64_t m, int64_t k, const float *wp,
                     const float *bias, int64_t n, float *c, int nt)
{
    const ki_gemm_args g = {
        .m = m, .n = n, .k = k, .a = a, .lda = k, .bp = wp, .c = c, .ldc = n, .uk = s->uk
    };
    const int64_t tiles = (m + KI_GEMM_MR - 1) / KI_GEMM_MR * ((n + KI_GEMM_NR - 1) / KI_GEMM_NR);
#pragma omp parallel num_threads(nt) if (tiles > 1 && m * n >= KI_GEMM_TEAM_MIN_MACS / k)
    ki_gemm_compute(&g, omp_get_thread_num(), omp_get_num_threads());
    for (int64_t r = 0; bias && r < m; r++) {
        for (int64_t j = 0; j < n; j++) {
            c[r * n + j] += bias[j];
        }
    }
}

/* Rows up to which a step's products go as dot products with the weight rows (w: n x k) instead of
 * 8-row GEMM tiles, which would compute mostly rows that are not there (batch 1 or 2), when the
 * rows are at least RNN_DOT_MIN_K long (two steps of the dot product's four 8-lane sums; shorter
 * ones spend more on the sums' reduction than the tiles waste). */
#define RNN_DOT_ROWS  2
#define RNN_DOT_MIN_K 64

/* c (m x n) = a (m x k) times w^T + bias, for m <= RNN_DOT_ROWS: one dot product per output, the
 * outputs split over nt threads when there are enough of them to pay for the team. */
static void rnn_dots(const rnn_state *s, const float *a, int64_t m, int64_t k, const float *w,
                     const float *bias, int64_t n, float *c, int nt)
{
#pragma omp parallel for num_threads(nt) schedule(static) if (m * n >= KI_GEMM_TEAM_MIN_MACS / k)
    for (int64_t i = 0; i < m * n; i++) {
        const int64_t r = i / n, j = i % n;
        const float v = s->dot(w + j * k, a + r * k, k);
        c[i] = bias ? v + bias[j] : v;
    }
}

/* A step's product: dot products for a batch of up to RNN_DOT_ROWS (rows of RNN_DOT_MIN_K or
 * more), else the GEMM. */
static void rnn_step_product(const rnn_state *s, const float *a, int64_t m, int64_t k,
                             const float *w, const float *wp, const float *bias, int64_t n,
                             float *c, int nt)
{
    if (m <= RNN_DOT_ROWS && k >= RNN_DOT_MIN_K) {
        rnn_dots(s, a, m, k, w, bias, n, c, nt);
    } else {
        rnn_gemm(s, a, m, k, wp, bias, n, c, nt);
    }
}

typedef struct rnn_run {
    const rnn_dims *r;
    const float *h0, *c0; /* inputs or NULL */
    float *hn, *cn;       /* outputs or NULL */
    float *gx, *g, *h, *c, *hf;
    int nt; /* the team's size */
} rnn_run;

/* Layer l, direction d: src (rows x in_l) into its half of dst (rows x dirs*out_h). */
static void rnn_direction(const rnn_state *s, const rnn_run *u, int l, int d, const float *src,
                          float *dst)
{
    const rnn_dims *r = u->r;
    const int ld = l * s->dirs + d;
    const rnn_w *w = &s->w[ld];
    const int64_t in_l = l == 0 ? s->in_size : s->dirs * s->out_h, yw = s->dirs * s->out_h;
    const int64_t nb = r->batch, oh = s->out_h, H = s->hid;
    rnn_gemm(s, src, r->rows, in_l, w->p_ih, w->b_ih, s->gh, u->gx, u->nt);
    for (int64_t i = 0; i < nb * oh; i++) {
        u->h[i] = u->h0 ? u->h0[ld * nb * oh + i] : 0.0f;
    }
    for (int64_t i = 0; i < nb * H; i++) {
        u->c[i] = u->c0 ? u->c0[ld * nb * H + i] : 0.0f;
    }
    for (int64_t step = 0; step < r->len; step++) {
        const int64_t t = d ? r->len - 1 - step : step;
        rnn_step_product(s, u->h, nb, oh, w->w_hh, w->p_hh, w->b_hh, s->gh, u->g, u->nt);
        for (int64_t n = 0; n < nb; n++) {
            const int64_t row = s->batch_first ? n * r->len + t : t * nb + n;
            rnn_cell(s, u->gx + row * s->gh, u->g + n * s->gh, u->h + n * oh, u->c + n * H,
                     u->hf + n * H);
        }
        if (s->proj > 0) {
            rnn_step_product(s, u->hf, nb, H, w->w_hr, w->p_hr, NULL, oh, u->h, u->nt);
        }
        for (int64_t n = 0; n < nb; n++) {
            const int64_t row = s->batch_first ? n * r->len + t : t * nb + n;
            memcpy(dst + row * yw + d * oh, u->h + n * oh, (size_t)oh * sizeof(float));
        }
    }
    if (u->hn) {
        memcpy(u->hn + ld * nb * oh, u->h, (size_t)(nb * oh) * sizeof(float));
    }
    if (u->cn) {
        memcpy(u->cn + ld * nb * H, u->c, (size_t)(nb * H) * sizeof(float));
    }
}

static ki_status rnn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const rnn_state *s = state;
    const rnn_dims r = rnn_dims_of(s, &in[0].shape);
    const int64_t seq = r.rows * s->dirs * s->out_h;
    float *buf[2] = { ex->workspace, (float *)ex->workspace + (s->layers > 1 ? seq : 0) };
    float *gx = buf[1] + (s->layers > 2 ? seq : 0);
    float *g = gx + r.rows * s->gh, *h = g + r.batch * s->gh, *c = h + r.batch * s->out_h;
    const rnn_run u = { &r,
                        n_in > 1 ? in[1].data : NULL,
                        n_in > 2 ? in[2].data : NULL,
                        n_out > 1 ? out[1].data : NULL,
                        n_out > 2 ? out[2].data : NULL,
                        gx,
                        g,
                        h,
                        c,
                        c + r.batch * s->hid,
                        ex->n_threads };
    for (int l = 0; l < s->layers; l++) {
        const float *src = l == 0 ? in[0].data : buf[(l - 1) % 2];
        float *dst = l == s->layers - 1 ? out[0].data : buf[l % 2];
        for (int d = 0; d < s->dirs; d++) {
            rnn_direction(s, &u, l, d, src, dst);
        }
    }
    return KI_OK;
}

#define RNN_OPS(sym, name, mk)                                                                     \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = mk,                                                       \
                               .shape = rnn_shape,                                                 \
                               .workspace = rnn_workspace,                                         \
                               .forward = rnn_forward,                                             \
                               .destroy = rnn_destroy }

RNN_OPS(ki_layer_nn_lstm, "nn.LSTM", lstm_create);
RNN_OPS(ki_layer_nn_gru, "nn.GRU", gru_create);
RNN_OPS(ki_layer_nn_rnn, "nn.RNN", rnn_create);
