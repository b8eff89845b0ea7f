/* attention.c - nn.MultiheadAttention at inference: self- or cross-attention of num_heads heads
 * over embed_dim (kdim = vdim = embed_dim, no bias_kv / zero_attn), batch_first or not, an
 * optional attn_mask ((L, S) or (N*heads, L, S); a float mask is added to the scores, a 0 / 1
 * mask from a boolean one is not: kinfer cannot tell them apart, so a mask whose values are all
 * 0 or 1 and declared bool in the param file blocks where it is 1) and the first output only
 * (need_weights=False, as pnnx exports it).
 *
 * Per batch entry: Q, K, V = x W^T + b, per head softmax(Q K^T / sqrt(d) + mask) V (a stable
 * softmax per row), then the heads' concatenation times out_proj^T + bias. Every product runs on
 * kinfer's GEMM micro-kernel of the CPU's level (the plain one at the generic level): the
 * projections' weights packed once at create, each head's K^T and V per run, so the result does
 * not depend on the thread count. The workspace of thread 0 holds Q, K, V, the scores of one
 * head, the concatenated heads and the packed K^T and V. State: the parameters, weight pointers
 * (the model's) and packed projections, immutable; thread-safe. */
#include "attention.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../core/bigbuf.h"
#include "conv_common.h"
#include "gemm.h"
#include "softmax.h"

/* Query rows per work item of the attention proper (scores of ATT_ROWS x S in a thread's slice):
 * two row tiles, so that a 197-token sequence of three heads is 39 items to share out. */
#define ATT_ROWS 32

typedef struct mha {
    int64_t e, heads;
    bool batch_first, mask_bool;
    int q_in, k_in, v_in, mask_in; /* input indices (k = v = q for self-attention); mask -1 */
    const float *w_in, *b_in, *w_out, *b_out;
    /* in_proj^T (its Q, K and V parts each in whole panels: pin_part floats apart) and
     * out_proj^T as packed GEMM panels (owned) */
    float *p_in, *p_out;
    int64_t pin_part;
    ki_gemm_ukernel uk;
    ki_softmax_row_fn row;
    int res_in;    /* a fused residual add(@0,@1): the input added to the output, or -1 */
    int n_in_decl; /* the operator's own inputs (a fused residual comes after them) */
} mha;

/* W^T of `parts` (n x k) weights, one after another in w, into panels of KI_GEMM_NR columns (the
 * B of x W^T), each part's from a new panel (*part floats apart), or NULL. */
static float *pack_t(const float *w, int64_t n, int64_t k, int parts, int64_t *part)
{
    int64_t floats;
    if (!ki_gemm_packed_floats(k, n, part) || !ki_ckd_mul_i64(&floats, *part, parts) ||
        (uint64_t)floats > SIZE_MAX / sizeof(float)) {
        return NULL;
    }
    float *b = ki_bigbuf_alloc((size_t)floats * sizeof(float));
    for (int i = 0; b && i < parts; i++) {
        ki_gemm_pack_wt(w + i * n * k, n, k, b + i * *part);
    }
    return b;
}

/* c (rows x n, row stride ldc) = a (rows x k, row stride lda) times the packed B + bias (+ res,
 * with c's layout), each thread finishing its own row blocks. */
static void gemm_packed(const mha *m, const float *a, int64_t lda, int64_t rows, const float *bp,
                        int64_t n, const float *bias, const float *res, float *c, int64_t ldc,
                        int nt)
{
    const ki_gemm_col_finish f = { bias, res, { NULL, { KI_ACT_NONE, 0, 0 }, false }, NULL };
    const ki_gemm_args ga = { .m = rows,
                              .n = n,
                              .k = m->e,
                              .a = a,
                              .lda = lda,
                              .bp = bp,
                              .c = c,
                              .ldc = ldc,
                              .uk = m->uk,
                              .rows_done = bias || res ? ki_gemm_finish_cols : NULL,
                              .done_ctx = &f };
#pragma omp parallel num_threads(nt)
    ki_gemm_compute(&ga, omp_get_thread_num(), omp_get_num_threads());
}

/* c (rows x n, row stride ldc) = a (rows x k, row stride lda) times the packed B, on the calling
 * thread alone (inside an item of the team's loop). */
static void gemm_here(const mha *m, const float *a, int64_t lda, int64_t rows, int64_t k,
                      const float *bp, int64_t n, float *c, int64_t ldc)
{
    const ki_gemm_args g = {
        .m = rows, .n = n, .k = k, .a = a, .lda = lda, .bp = bp, .c = c, .ldc = ldc, .uk = m->uk
    };
    ki_gemm_compute(&g, 0, 1);
}

int ki_mha_inputs(const ki_op_desc *op, int idx[3])
{
    const int mask = ki_op_input_index(op, "attn_mask");
    int pos = 0;
    idx[0] = idx[1] = idx[2] = 0;
    for (int i = 0; i < op->n_inputs && pos < 3; i++) {
        if (i != mask && (!op->input_keys || !op->input_keys[i] ||
                          strcmp(op->input_keys[i], "attn_mask") != 0)) {
            idx[pos++] = i;
        }
    }
    /* one: self-attention; two: key and value the same tensor */
    idx[1] = pos > 1 ? idx[1] : idx[0];
    idx[2] = pos > 2 ? idx[2] : idx[1];
    return pos;
}

static ki_status mha_create(const ki_op_desc *op, void **state, ki_error *err)
{
    mha *m = calloc(1, sizeof *m);
    const ki_attr *wi, *bi, *wo, *bo;
    int64_t kd, vd;
    bool kv_bias = false, zero_attn = false;
    if (!m) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_op_get_int(op, "embed_dim", -1, &m->e, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "num_heads", -1, &m->heads, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "kdim", m->e, &kd, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "vdim", m->e, &vd, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "batch_first", false, &m->batch_first, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "add_bias_kv", false, &kv_bias, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "add_zero_attn", false, &zero_attn, err);
    if (st == KI_OK && (m->e <= 0 || m->heads <= 0 || m->e % m->heads != 0 || m->e > KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "embed_dim %lld is not a multiple of num_heads %lld",
                     (long long)m->e, (long long)m->heads);
    }
    if (st == KI_OK && (kd != m->e || vd != m->e || kv_bias || zero_attn)) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED,
                     "kdim / vdim other than embed_dim, add_bias_kv and add_zero_attn");
    }
    const int64_t d3[2] = { 3 * m->e, m->e }, b3 = 3 * m->e, d1[2] = { m->e, m->e };
    st = st != KI_OK ? st : ki_op_require_attr(op, "in_proj_weight", 2, d3, &wi, err);
    st = st != KI_OK ? st : ki_op_require_attr(op, "out_proj.weight", 2, d1, &wo, err);
    if (st == KI_OK) {
        bi = ki_op_attr(op, "in_proj_bias"), bo = ki_op_attr(op, "out_proj.bias");
        if ((bi && bi->numel != b3) || (bo && bo->numel != m->e)) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "bias sizes do not match embed_dim");
        } else {
            m->w_in = wi->data, m->w_out = wo->data;
            m->b_in = bi ? bi->data : NULL, m->b_out = bo ? bo->data : NULL;
        }
    }
    /* inputs: query [key value] by position or key, attn_mask by key */
    m->mask_in = ki_op_input_index(op, "attn_mask");
    m->res_in = -1;
    m->n_in_decl = op->n_inputs;
    int idx[3];
    const int pos = ki_mha_inputs(op, idx);
    if (st == KI_OK && ki_op_input_index(op, "key_padding_mask") >= 0) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "key_padding_mask");
    }
    if (st == KI_OK && (pos < 1 || pos > 3)) {
        st = KI_FAIL(err, KI_ERR_FORMAT,
                     "expects query, or query and key (= value), "
                     "or query, key and value");
    }
    m->q_in = idx[0], m->k_in = idx[1], m->v_in = idx[2];
    m->mask_bool = m->mask_in >= 0 && op->input_dtype && op->input_dtype[m->mask_in] == KI_DT_BOOL;
    if (st == KI_OK) {
        int64_t part;
        m->p_in = pack_t(m->w_in, m->e, m->e, 3, &m->pin_part);
        m->p_out = pack_t(m->w_out, m->e, m->e, 1, &part);
        m->uk = ki_gemm_ukernel_for(ki_cpu_isa());
        m->row = ki_softmax_row_for(ki_cpu_isa());
        if (!m->p_in || !m->p_out) {
            st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory for the packed projections");
        }
    }
    if (st != KI_OK) {
        free(m->p_in);
        free(m->p_out);
        free(m);
        return st;
    }
    *state = m;
    return KI_OK;
}

static void mha_destroy(void *state)
{
    mha *m = state;
    if (m) {
        free(m->p_in);
        free(m->p_out);
    }
    free(state);
}

/* (L, N) of a (L, N, E) or batch_first (N, L, E) tensor. */
static void seq_batch(const mha *m, const ki_shape *s, int64_t *len, int64_t *n)
{
    *len = m->batch_first ? s->d[1] : s->d[0];
    *n = m->batch_first ? s->d[0] : s->d[1];
}

static ki_status mha_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const mha *m = state;
    int64_t l, n, s, nk;
    (void)n_in;
    for (int k = 0; k < 3; k++) {
        const ki_shape *x = &in[k == 0 ? m->q_in : k == 1 ? m->k_in : m->v_in];
        if (x->ndim != 3 || x->d[2] != m->e) {
            return KI_FAIL(err, KI_ERR_SHAPE, "inputs must be 3-D with embed_dim %lld last",
                           (long long)m->e);
        }
    }
    seq_batch(m, &in[m->q_in], &l, &n);
    seq_batch(m, &in[m->k_in], &s, &nk);
    if (nk != n || !ki_shape_equal(&in[m->k_in], &in[m->v_in])) {
        return KI_FAIL(err, KI_ERR_SHAPE, "query, key and value batches differ");
    }
    if (m->mask_in >= 0) {
        const ki_shape *k = &in[m->mask_in];
        bool ok = (k->ndim == 2 && k->d[0] == l && k->d[1] == s) ||
                  (k->ndim == 3 && k->d[0] == n * m->heads && k->d[1] == l && k->d[2] == s);
        if (!ok) {
            return KI_FAIL(err, KI_ERR_SHAPE, "attn_mask must be (L, S) or (N*heads, L, S)");
        }
    }
    if (m->res_in >= 0 && (n_in <= m->res_in || !ki_shape_equal(&in[m->res_in], &in[m->q_in]))) {
        return KI_FAIL(err, KI_ERR_SHAPE, "the fused residual is not the output's shape");
    }
    for (int i = 0; i < n_out; i++) {
        out[i] = in[m->q_in];
    }
    return KI_OK;
}

/* Columns of a packed GEMM B of n columns (whole panels). */
static int64_t panel_cols(int64_t n)
{
    return (n + KI_GEMM_NR - 1) / KI_GEMM_NR * KI_GEMM_NR;
}

/* Floats: Q (L*E), K and V (S*E each), one head's scores (L*S), the heads (L*E), and every head's
 * K^T and V as packed panels (E*S32 + S*D32 per head). */
static bool mha_floats(const mha *m, const ki_shape *in, int64_t *floats)
{
    int64_t l, s, n, a, b, c = 0, d = 0;
    seq_batch(m, &in[m->q_in], &l, &n);
    seq_batch(m, &in[m->k_in], &s, &n);
    if (!ki_ckd_mul_i64(&c, m->e, panel_cols(s)) ||
        !ki_ckd_mul_i64(&d, s, panel_cols(m->e / m->heads)) || !ki_ckd_mul_i64(&d, d, m->heads) ||
        !ki_ckd_add_i64(&c, c, d)) {
        return false;
    }
    return ki_ckd_mul_i64(&a, 2 * l + 2 * s, m->e) && ki_ckd_mul_i64(&b, l, s) &&
           ki_ckd_add_i64(floats, a, b) && ki_ckd_add_i64(floats, *floats, c);
}

/* scale * K_h^T (hd rows of s columns; K_h: s rows of hd at stride lk) into packed panels. */
static void pack_kt(const float *k, int64_t lk, int64_t s, int64_t hd, float scale, float *bp)
{
    for (int64_t p = 0; p < panel_cols(s) / KI_GEMM_NR; p++) {
        for (int64_t kk = 0; kk < hd; kk++) {
            float *d = bp + (p * hd + kk) * KI_GEMM_NR;
            for (int64_t jj = 0; jj < KI_GEMM_NR; jj++) {
                const int64_t j = p * KI_GEMM_NR + jj;
                d[jj] = j < s ? scale * k[j * lk + kk] : 0.0f;
            }
        }
    }
}

/* V_h (s rows of hd at stride lv) into packed panels. */
static void pack_v(const float *v, int64_t lv, int64_t s, int64_t hd, float *bp)
{
    for (int64_t p = 0; p < panel_cols(hd) / KI_GEMM_NR; p++) {
        for (int64_t kk = 0; kk < s; kk++) {
            float *d = bp + (p * s + kk) * KI_GEMM_NR;
            for (int64_t jj = 0; jj < KI_GEMM_NR; jj++) {
                const int64_t c = p * KI_GEMM_NR + jj;
                d[jj] = c < hd ? v[kk * lv + c] : 0.0f;
            }
        }
    }
}

/* Adds (or, for a boolean mask, applies) one row of the attention mask to a row of scores. */
static void mask_row(float *row, int64_t s, const float *mask, bool mask_bool)
{
    for (int64_t j = 0; j < s; j++) {
        row[j] = mask_bool ? (mask[j] != 0.0f ? -INFINITY : row[j]) : row[j] + mask[j];
    }
}

static size_t mha_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                            int n_out, int n_threads)
{
    int64_t f;
    (void)n_in, (void)out, (void)n_out, (void)n_threads;
    return mha_floats(state, in, &f) && (uint64_t)f < SIZE_MAX / 8 ? (size_t)f * sizeof(float) : 0;
}

static ki_status mha_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const mha *m = state;
    const int64_t e = m->e, hd = e / m->heads;
    int64_t l, s, n;
    (void)n_in, (void)n_out;
    seq_batch(m, &in[m->q_in].shape, &l, &n);
    seq_batch(m, &in[m->k_in].shape, &s, &n);
    float *q = ex->workspace, *k = q + l * e, *v = k + s * e, *sc = v + s * e, *o = sc + l * s;
    const float scale = 1.0f / sqrtf((float)hd);
    /* row r of batch b: batch_first rows are contiguous; otherwise rows are N*E apart */
    const int64_t ld = m->batch_first ? e : n * e;
    /* self-attention: Q, K and V of a row side by side (row stride 3E), in one product when the
     * parts' panels follow one another without padding */
    const bool fused = m->q_in == m->k_in && m->k_in == m->v_in;
    const int64_t lq = fused ? 3 * e : e;
    if (fused) {
        k = q + e, v = q + 2 * e;
    }
    for (int64_t b = 0; b < n; b++) {
        const int64_t boff = m->batch_first ? b * l * e : b * e;
        const int64_t bkoff = m->batch_first ? b * s * e : b * e;
        if (fused && e % KI_GEMM_NR == 0) {
            gemm_packed(m, in[m->q_in].data + boff, ld, l, m->p_in, 3 * e, m->b_in, NULL, q, 3 * e,
                        ex->n_threads);
        } else {
            float *dst[3] = { q, k, v };
            for (int i = 0; i < 3; i++) {
                const float *src = in[i == 0   ? m->q_in
                                      : i == 1 ? m->k_in
                                               : m->v_in]
                                       .data +
                                   (i == 0 ? boff : bkoff);
                gemm_packed(m, src, ld, i == 0 ? l : s, m->p_in + i * m->pin_part, e,
                            m->b_in ? m->b_in + i * e : NULL, NULL, dst[i], lq, ex->n_threads);
            }
        }
        /* (head, block of ATT_ROWS query rows) items over the team, each on one thread: its
         * scores in its own workspace slice. Each head's scale * K^T and V are packed first
         * (after the concatenated heads in thread 0's slice); both products run single-threaded
         * in the item. */
        const int64_t nblk = (l + ATT_ROWS - 1) / ATT_ROWS, items = m->heads * nblk;
        const int64_t kp_size = hd * panel_cols(s), vp_size = s * panel_cols(hd);
        float *kp = o + l * e, *vp = kp + m->heads * kp_size;
        (void)sc;
#pragma omp parallel num_threads(ex->n_threads)
        {
#pragma omp for schedule(static)
            for (int64_t it = 0; it < 2 * m->heads; it++) { /* each head's K^T, then its V */
                const int64_t h = it / 2;
                if (it % 2 == 0) {
                    pack_kt(k + h * hd, lq, s, hd, scale, kp + h * kp_size);
                } else {
                    pack_v(v + h * hd, lq, s, hd, vp + h * vp_size);
                }
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t it = 0; it < items; it++) {
                const int64_t h = it / nblk, r0 = it % nblk * ATT_ROWS;
                const int64_t nr = l - r0 < ATT_ROWS ? l - r0 : ATT_ROWS;
                float *tsc = ki_exec_slice(ex, omp_get_thread_num()) +
                             (l + 2 * s) * e; /* where thread 0 keeps sc */
                const float *qh = q + r0 * lq + h * hd;
                gemm_here(m, qh, lq, nr, hd, kp + h * kp_size, s, tsc, s);
                const float *mk = NULL;
                if (m->mask_in >= 0) {
                    const ki_tensor *mt = &in[m->mask_in];
                    mk = mt->shape.ndim == 2 ? mt->data : mt->data + (b * m->heads + h) * l * s;
                }
                for (int64_t i = 0; i < nr; i++) {
                    if (mk) {
                        mask_row(tsc + i * s, s, mk + (r0 + i) * s, m->mask_bool);
                    }
                    (m->row ? m->row : ki_softmax_row_ref)(tsc + i * s, s);
                }
                float *oh = o + r0 * e + h * hd;
                gemm_here(m, tsc, s, nr, s, vp + h * vp_size, hd, oh, e);
            }
        }
        /* out rows of this batch entry = heads x out_proj^T + bias (+ the fused residual) */
        float *dst = out[0].data + boff;
        const float *res = m->res_in >= 0 ? in[m->res_in].data + boff : NULL;
        gemm_packed(m, o, e, l, m->p_out, e, m->b_out, res, dst, ld, ex->n_threads);
    }
    return KI_OK;
}

/* Absorbs a residual add(@0,@1) of the output and an earlier tensor (a transformer block's
 * x + attention(x)): that operand becomes the last input, added after the projection's bias. */
static bool mha_fuse(void *state, const ki_op_desc *next, int slot)
{
    mha *m = state;
    (void)slot;
    if (m->res_in >= 0 || !ki_cv_is_residual_add(next)) {
        return false;
    }
    m->res_in = m->n_in_decl;
    return true;
}

const ki_layer_ops ki_layer_multihead_attention = {
    .type = "nn.MultiheadAttention",
    .create = mha_create,
    .shape = mha_shape,
    .workspace = mha_workspace,
    .forward = mha_forward,
    .destroy = mha_destroy,
    .fuse = mha_fuse,
};
