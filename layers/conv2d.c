/* conv2d.c - nn.Conv2d: parameters, shapes, kernel choice and the scalar reference kernel.
 * The fast kernels are in conv2d_gemm.c. */
#include "conv2d.h"

#include <stdlib.h>
#include <string.h>

#include "../core/bigbuf.h"
#include "../core/half.h"
#include "../core/team.h"

static ki_status check_range(const char *key, const int64_t *v, int n, int64_t lo, ki_error *err)
{
    for (int i = 0; i < n; i++) {
        if (v[i] < lo || v[i] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_FORMAT, "parameter %s has an out-of-range entry %lld", key,
                           (long long)v[i]);
        }
    }
    return KI_OK;
}

/* padding: (h,w), one int, 4 ints (left,right,top,bottom) or the strings same/valid. PyTorch's
 * 'same' puts total = d*(k-1) with the odd element at the end (bottom/right). */
static ki_status parse_padding(const ki_op_desc *op, ki_conv2d *c, ki_error *err)
{
    const ki_param *p = ki_op_param(op, "padding");
    int64_t v[4];
    int n;
    if (p && p->kind == KI_PARAM_STRING) {
        bool same;
        ki_status st = ki_cv_padding_word(p, c->sh == 1 && c->sw == 1, &same, err);
        if (st != KI_OK || !same) {
            return st;
        }
        c->pt = c->dh * (c->kh - 1) / 2;
        c->pb = c->dh * (c->kh - 1) - c->pt;
        c->pl = c->dw * (c->kw - 1) / 2;
        c->pr = c->dw * (c->kw - 1) - c->pl;
        return KI_OK;
    }
    ki_status st = ki_op_get_int_list(op, "padding", 4, v, &n, err);
    if (st != KI_OK) {
        return st;
    }
    if (n == 1 || n == 2) {
        c->pt = c->pb = v[0];
        c->pl = c->pr = v[n - 1];
    } else if (n == 4) {
        c->pl = v[0], c->pr = v[1], c->pt = v[2], c->pb = v[3];
    } else if (n != -1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "padding=%s needs 1, 2 or 4 entries", p->raw);
    }
    int64_t all[4] = { c->pt, c->pb, c->pl, c->pr };
    return check_range("padding", all, 4, 0, err);
}

/* groups, channels and kernel size from the weight's dims wd (out, in/groups, kh, kw), checked
 * against the optional kernel_size / in_channels / out_channels parameters. */
static ki_status parse_dims(const ki_op_desc *op, const int64_t wd[4], ki_conv2d *c, ki_error *err)
{
    ki_status st = ki_op_get_int(op, "groups", 1, &c->groups, err);
    if (st != KI_OK) {
        return st;
    }
    if (c->groups < 1 || wd[0] % c->groups != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "groups=%lld does not divide out_channels=%lld",
                       (long long)c->groups, (long long)wd[0]);
    }
    if (wd[1] < 1 || !ki_ckd_mul_i64(&c->in_ch, wd[1], c->groups) || c->in_ch > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight has %lld input channels per group",
                       (long long)wd[1]);
    }
    c->out_ch = wd[0];
    int64_t k[2] = { wd[2], wd[3] };
    st = ki_op_get_ints(op, "kernel_size", 2, &wd[2], k, err);
    if (st == KI_OK && (k[0] != wd[2] || k[1] != wd[3])) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "kernel_size does not match @weight");
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "in_channels", c->in_ch, err);
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "out_channels", c->out_ch, err);
    }
    c->kh = k[0], c->kw = k[1];
    return st == KI_OK ? check_range("kernel_size", k, 2, 1, err) : st;
}

ki_status ki_conv2d_parse(const ki_op_desc *op, const int64_t wd[4], ki_conv2d *c, ki_error *err)
{
    static const int64_t ones[2] = { 1, 1 };
    int64_t s[2], d[2];
    ki_status st = parse_dims(op, wd, c, err);
    if (st == KI_OK) {
        st = ki_op_get_ints(op, "stride", 2, ones, s, err);
    }
    if (st == KI_OK) {
        st = check_range("stride", s, 2, 1, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_ints(op, "dilation", 2, ones, d, err);
    }
    if (st == KI_OK) {
        st = check_range("dilation", d, 2, 1, err);
    }
    if (st != KI_OK) {
        return st;
    }
    c->sh = s[0], c->sw = s[1], c->dh = d[0], c->dw = d[1];
    st = parse_padding(op, c, err);
    return st == KI_OK ? ki_cv_parse_pad_mode(op, &c->pad_mode, err) : st;
}

/* nn.Conv2d: the parameters for @weight, then its data and the optional @bias. */
static ki_status parse(const ki_op_desc *op, ki_conv2d *c, ki_error *err)
{
    const ki_attr *w;
    ki_status st = ki_cv_weight_attr(op, 4, &w, err);
    st = st == KI_OK ? ki_conv2d_parse(op, w->shape.d, c, err) : st;
    c->weight = st == KI_OK ? w->data : NULL;
    return st == KI_OK ? ki_cv_parse_bias(op, c->out_ch, &c->ep.bias, err) : st;
}

ki_status ki_conv2d_alloc_weights(size_t a, size_t b, size_t c, const char *what, float **out,
                                  size_t *bytes, ki_error *err)
{
    size_t n;
    if (!ki_ckd_mul(&n, a, b) || !ki_ckd_mul(&n, n, c) || !ki_ckd_mul(bytes, n, sizeof(float)) ||
        *bytes > SIZE_MAX - 63) {
        return KI_FAIL(err, KI_ERR_LIMIT, "%s too large", what);
    }
    *out = ki_bigbuf_alloc(*bytes);
    if (!*out) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for the %s (%zu bytes)", what, *bytes);
    }
    return KI_OK;
}

void ki_conv2d_gather2_ref(const float *src, float *restrict d, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        d[i] = src[2 * i];
    }
}

static void conv_destroy(void *state);

/* c->dw_w8 from c's weights (ki_conv2d_want_dw_w8). */
static ki_status dw_w8_prepare(ki_conv2d *c, ki_error *err)
{
    const int64_t groups = c->out_ch / 8;
    size_t bytes;
    ki_status st = ki_conv2d_alloc_weights((size_t)groups, 9, 8, "depthwise weight groups",
                                           &c->dw_w8, &bytes, err);
    for (int64_t q = 0; st == KI_OK && q < groups; q++) {
        for (int64_t t = 0; t < 9; t++) {
            for (int64_t j = 0; j < 8; j++) {
                c->dw_w8[(q * 9 + t) * 8 + j] = c->weight[(q * 8 + j) * 9 + t];
            }
        }
    }
    return st;
}

static ki_status conv_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ki_conv2d *c = calloc(1, sizeof *c);
    if (!c) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = parse(op, c, err);
    ki_conv2d_set_isa(c, ki_cpu_isa());
    const bool stored = st == KI_OK && ki_conv2d_half_stored(c);
    bool wov = false, wh = false, half = ki_conv2d_want_half(c, stored);
    int wm = st == KI_OK ? ki_conv2d_want_wino(c, op, half, stored, &wov, &wh) : 0;
    if (wh) {
        st = ki_conv2d_wino_prepare_h(c, half, err);
    } else if (wm) {
        st = ki_conv2d_wino_prepare(c, wm, wov, err);
    }
    if (st == KI_OK && ki_conv2d_want_ov(c, op)) {
        st = ki_conv2d_ov_prepare(c, half, err);
    }
    if (st == KI_OK && ki_conv2d_want_s2d(c)) {
        st = ki_conv2d_s2d_prepare(c, err);
    }
    if (st == KI_OK && ki_conv2d_want_ws2(c, op)) {
        st = ki_conv2d_ws2_prepare(c, err);
    }
    if (st == KI_OK && ki_conv2d_want_dw_w8(c)) {
        st = dw_w8_prepare(c, err);
    }
    /* with its own form of the weights the layer never reads the originals again */
    if (st == KI_OK && (ki_conv2d_has_wino(c) || c->ov_a || c->ov_h) &&
        ki_op_release_attr(op, ki_op_attr(op, "weight"))) {
        c->weight = NULL;
    }
    if (st != KI_OK) {
        conv_destroy(c);
        return st;
    }
    *state = c;
    return KI_OK;
}

/* One spatial dimension: padding rules of the mode, then PyTorch's output size. */
static ki_status out_dim(const ki_conv2d *c, int64_t in, int64_t k, int64_t s, int64_t d,
                         const int64_t pad[2], int64_t *out, ki_error *err)
{
    int64_t eff = d * (k - 1) + 1, padded = in + pad[0] + pad[1];
    bool pads = pad[0] > 0 || pad[1] > 0;
    if (pads && c->pad_mode == KI_CONV_PAD_REFLECT && (pad[0] >= in || pad[1] >= in)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "reflect padding must be smaller than the input (%lld)",
                       (long long)in);
    }
    if (pads && c->pad_mode != KI_CONV_PAD_ZEROS && (pad[0] > in || pad[1] > in || in == 0)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "padding is larger than the input (%lld)", (long long)in);
    }
    if (padded < eff) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "padded input size %lld is smaller than the dilated kernel %lld",
                       (long long)padded, (long long)eff);
    }
    *out = (padded - eff) / s + 1;
    return KI_OK;
}

ki_status ki_conv2d_geom_make(const ki_conv2d *c, const ki_shape *in, ki_conv2d_geom *g,
                              ki_error *err)
{
    int64_t ph[2] = { c->pt, c->pb }, pw[2] = { c->pl, c->pr };
    size_t col;
    ki_status st = ki_cv_nchw_get(in, &g->in, err);
    if (st != KI_OK) {
        return st;
    }
    if (g->in.c != c->in_ch) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has %lld channels, expected %lld",
                       (long long)g->in.c, (long long)c->in_ch);
    }
    st = out_dim(c, g->in.h, c->kh, c->sh, c->dh, ph, &g->oh, err);
    if (st == KI_OK) {
        st = out_dim(c, g->in.w, c->kw, c->sw, c->dw, pw, &g->ow, err);
    }
    if (st != KI_OK) {
        return st;
    }
    ki_shape o = ki_cv_nchw_shape(g->in.batched, g->in.n, c->out_ch, g->oh, g->ow);
    st = ki_shape_check(&o, err);
    int64_t k = c->in_ch / c->groups * c->kh * c->kw;
    if (st == KI_OK && (!ki_cv_floats3(&col, k, g->oh, g->ow) || !ki_cv_blas_ok(k) ||
                        !ki_cv_blas_ok(g->oh * g->ow) || col > (size_t)KI_MAX_NUMEL * 4)) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "convolution too large");
    }
    return st;
}

/* A fused global mean (c->gap) after path p: whether it sums the OV path's tiles (*ov: their sums
 * per pixel block, the blocks the same for every thread count, ov_layout_of), and the bytes of
 * its buffer at the end of the workspace: those sums, or the whole output of another path (the
 * OV path is the layer's unless its workspace would overflow), which it then averages. */
static bool gap_sizes(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p, bool *ov,
                      int64_t *per, size_t *bytes)
{
    const int64_t n = g->oh * g->ow;
    *ov = p == KI_CONV2D_OV;
    *per = *ov ? ki_conv2d_ov_blocks(n) : n; /* floats an (image, channel) */
    return ki_ckd_mul(bytes, (size_t)g->in.n, (size_t)c->out_ch) &&
           ki_ckd_mul(bytes, *bytes, (size_t)*per) && ki_ckd_mul(bytes, *bytes, sizeof(float)) &&
           ki_ckd_add(bytes, *bytes, 63) && (*bytes = *bytes / 64 * 64, *bytes < SIZE_MAX / 4);
}

/* Whether the layer takes a residual operand (its own, or its absorbed projection's). */
static bool has_residual(const ki_conv2d *c)
{
    return c->residual || (c->pjf && c->pjf->residual);
}

static ki_status conv_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const ki_conv2d *c = state;
    ki_conv2d_geom g;
    char a[96], b[96];
    if (n_in != 1 + (int)has_residual(c) || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = ki_conv2d_geom_make(c, &in[0], &g, err);
    ki_conv2d_geom dg;
    if (st == KI_OK && c->pjf) { /* the projection's output */
        st = ki_conv2d_ovpj_shape(c, &g, &out[0], err);
        if (st == KI_OK && ki_conv2d_ovpj_workspace(c, &g, 1) == 0) {
            st = KI_FAIL(err, KI_ERR_LIMIT, "input %s is too large",
                         ki_shape_str(&in[0], a, sizeof a));
        }
        if (st == KI_OK && c->pjf->residual && !ki_shape_equal(&in[1], &out[0])) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "fused residual add: operand %s differs from output %s",
                         ki_shape_str(&in[1], a, sizeof a), ki_shape_str(&out[0], b, sizeof b));
        }
        return st;
    }
    if (st == KI_OK && c->dwf) { /* the depthwise layer's output */
        st = ki_conv2d_pwdw_geom(c, &g, &dg, err);
        if (st == KI_OK) {
            out[0] = ki_cv_nchw_shape(g.in.batched, g.in.n, c->dwf->out_ch, dg.oh, dg.ow);
        }
        if (st == KI_OK && ki_conv2d_pwdw_workspace(c, &g) == 0) {
            st = KI_FAIL(err, KI_ERR_LIMIT, "input %s is too large",
                         ki_shape_str(&in[0], a, sizeof a));
        }
        return st;
    }
    bool gov;
    int64_t gper;
    size_t gb;
    if (st == KI_OK && c->gap && !gap_sizes(c, &g, ki_conv2d_pick(c, &g), &gov, &gper, &gb)) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "input %s is too large", ki_shape_str(&in[0], a, sizeof a));
    }
    if (st == KI_OK) {
        out[0] = c->pool
                     ? ki_cv_nchw_shape(g.in.batched, g.in.n, c->out_ch,
                                        ki_conv2d_pool_dim(c, g.oh), ki_conv2d_pool_dim(c, g.ow))
                 : c->gap ? ki_cv_nchw_shape(g.in.batched, g.in.n, c->out_ch, 1, 1)
                          : ki_cv_nchw_shape(g.in.batched, g.in.n, c->out_ch, g.oh, g.ow);
        if (c->pool && (ki_conv2d_pool_dim(c, g.oh) < 1 || ki_conv2d_pool_dim(c, g.ow) < 1)) {
            st = KI_FAIL(err, KI_ERR_SHAPE,
                         "the max pool after it does not fit the %lldx%lld output", (long long)g.oh,
                         (long long)g.ow);
        }
    }
    /* only a layer whose original weights were released can lack a path */
    if (st == KI_OK && !ki_conv2d_path_ok(c, &g, ki_conv2d_pick(c, &g))) {
        st =
            KI_FAIL(err, KI_ERR_LIMIT, "input %s is too large for this layer's transformed weights",
                    ki_shape_str(&in[0], a, sizeof a));
    }
    /* the fused add(@0,@1) is exact only without broadcasting */
    if (st == KI_OK && c->residual && !ki_shape_equal(&in[1], &out[0])) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "fused residual add: operand %s differs from output %s",
                     ki_shape_str(&in[1], a, sizeof a), ki_shape_str(&out[0], b, sizeof b));
    }
    return st;
}

/* The GEMM paths pack B: each thread one k x NR panel at a time, or (few panels) the whole
 * packed B shared by the team, spread over the contiguous per-thread slices. */
size_t ki_conv2d_workspace_for(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p,
                               int n_threads)
{
    int64_t k = c->in_ch / c->groups * c->kh * c->kw, ohw = g->oh * g->ow, packed;
    size_t bytes, nt = n_threads > 0 ? (size_t)n_threads : 1;
    int64_t np = (ohw + KI_GEMM_NR - 1) / KI_GEMM_NR;
    if (p == KI_CONV2D_DW) {
        if (ki_conv2d_dw_in_place(c)) {
            return 0;
        }
        return ki_conv2d_dw_padded(c, g, &packed) &&
                       ki_ckd_mul(&bytes, (size_t)packed, sizeof(float))
                   ? (bytes + 63) / 64 * 64
                   : 0;
    }
    if (p == KI_CONV2D_WINO) {
        return ki_conv2d_wino_workspace(c, g, n_threads);
    }
    if (p == KI_CONV2D_OV) {
        return ki_conv2d_ov_workspace(c, g, n_threads);
    }
    if (p == KI_CONV2D_WS2) {
        return ki_conv2d_ws2_workspace(c, g);
    }
    if (p == KI_CONV2D_DIRECT) {
        return ki_conv2d_s2d_on(c, g->ow) ? ki_conv2d_s2d_scratch(c, g->ow)
                                          : ki_conv2d_direct_workspace(c);
    }
    if (p != KI_CONV2D_GEMM && p != KI_CONV2D_GEMM1) {
        return 0;
    }
    /* item by item: each thread its own group of up to KI_CONV2D_ITEM_GROUP panels */
    bool item = ki_conv2d_gemm_by_item(c, g, (int)nt),
         priv = item || ki_conv2d_gemm_private(c, np, (int)nt);
    int64_t cols = item   ? (np < KI_CONV2D_ITEM_GROUP ? np : KI_CONV2D_ITEM_GROUP) * KI_GEMM_NR
                   : priv ? ki_conv2d_gemm_group(np, (int)nt) * KI_GEMM_NR
                          : ohw;
    if (!ki_gemm_packed_floats(k, cols, &packed) ||
        !ki_ckd_mul(&bytes, (size_t)packed, sizeof(float))) {
        return 0;
    }
    return ((priv ? bytes : (bytes + nt - 1) / nt) + 63) / 64 * 64;
}

static void ref_body(void *arg, const ki_part *p)
{
    const ki_conv2d_job *j = arg;
    (void)p;
    ki_conv2d_forward_ref(j->c, j->g, j->in, j->out);
}

void ki_conv2d_run(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p, const float *in,
                   float *out, const ki_exec *ex)
{
    switch (p) {
    case KI_CONV2D_REF: { /* on one thread (of a running team, the first) */
        ki_conv2d_job j = { c, g, in, out, ex, false };
        ki_team_run_n(ex, 1, ref_body, &j);
        break;
    }
    case KI_CONV2D_GEMM:
    case KI_CONV2D_GEMM1:
        ki_conv2d_forward_gemm(c, g, p == KI_CONV2D_GEMM, in, out, ex);
        break;
    case KI_CONV2D_DW:
        ki_conv2d_forward_dw(c, g, in, out, ex);
        break;
    case KI_CONV2D_WINO:
        ki_conv2d_forward_wino(c, g, in, out, ex);
        break;
    case KI_CONV2D_OV:
        ki_conv2d_forward_ov(c, g, in, out, ex);
        break;
    case KI_CONV2D_DIRECT:
        ki_conv2d_forward_direct(c, g, in, out, ex);
        break;
    case KI_CONV2D_DOT:
        ki_conv2d_forward_dot(c, g, in, out, ex);
        break;
    case KI_CONV2D_WS2:
        ki_conv2d_forward_ws2(c, g, in, out, ex);
        break;
    }
}

static size_t conv_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                             int n_out, int n_threads)
{
    const ki_conv2d *c = state;
    ki_conv2d_geom g;
    (void)n_in, (void)out, (void)n_out;
    if (ki_conv2d_geom_make(c, &in[0], &g, NULL) != KI_OK) {
        return 0;
    }
    if (c->pool) {
        return ki_conv2d_direct_pool_workspace(c, &g);
    }
    if (c->dwf) {
        return c->pjf ? ki_conv2d_ovpj_workspace(c, &g, n_threads)
                      : ki_conv2d_pwdw_workspace(c, &g);
    }
    const ki_conv2d_path p = ki_conv2d_pick(c, &g);
    const size_t need = ki_conv2d_workspace_for(c, &g, p, n_threads);
    bool ov;
    int64_t per;
    size_t gb;
    if (c->gap) { /* its buffer past every thread's slice of the path's workspace (gap_forward) */
        return gap_sizes(c, &g, p, &ov, &per, &gb) && need < SIZE_MAX / 2
                   ? (need + 63) / 64 * 64 + gb
                   : 0;
    }
    return need;
}

typedef struct gap_job {
    const ki_conv2d *c;
    const ki_conv2d_geom *g;
    const float *buf; /* the tiles' sums [image][channel][pixel block], or the whole output */
    int64_t per;      /* floats of buf an (image, channel) */
    float *out;
} gap_job;

/* Each channel's mean from gap_forward's buffer, once the path has filled it: the sums in pixel
 * (block) order, / the pixels, as the adaptive average pool divides. */
static void gap_body(void *arg, const ki_part *p)
{
    const gap_job *j = arg;
    int64_t i0, i1;
    ki_part_sync(p); /* every thread's part of the path is done */
    ki_part_range(j->g->in.n * j->c->out_ch, p, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const float *s = j->buf + i * j->per;
        float acc = 0.0f;
        for (int64_t q = 0; q < j->per; q++) {
            acc += s[q];
        }
        j->out[i] = acc / (float)(j->g->oh * j->g->ow);
    }
}

/* The layer with its global mean (c->gap) into out (n x out_ch values): the path into a buffer at
 * the end of the workspace, past what the path uses (conv_workspace adds it to every thread's
 * share, so it lies beyond the last thread's slice and beyond a team-wide buffer of the path),
 * then the means. On the OV path the buffer takes only the tiles' sums, the output planes never
 * written. */
static ki_status gap_forward(ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p, size_t need,
                             const float *in, float *out, const ki_exec *ex)
{
    bool ov;
    int64_t per;
    size_t gb;
    need = (need + 63) / 64 * 64;
    if (!gap_sizes(c, g, p, &ov, &per, &gb) || need > ex->ws_per_thread ||
        gb > ex->ws_per_thread - need) {
        return KI_ERR_INTERNAL;
    }
    const size_t total = (size_t)(ex->n_threads > 0 ? ex->n_threads : 1) * ex->ws_per_thread;
    float *buf = (float *)(void *)((char *)ex->workspace + total - gb);
    c->gap_sum = ov ? buf : NULL;
    ki_conv2d_run(c, g, p, in, ov ? out : buf, ex);
    const gap_job j = { c, g, buf, per, out };
    ki_team_run(ex, gap_body, (void *)&j);
    return KI_OK;
}

static ki_status conv_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    ki_conv2d c = *(const ki_conv2d *)state; /* a copy that carries this run's residual */
    ki_conv2d_geom g;
    (void)n_out;
    if (ki_conv2d_geom_make(&c, &in[0].shape, &g, NULL) != KI_OK ||
        n_in != 1 + (int)has_residual(&c)) {
        return KI_ERR_SHAPE;
    }
    if (c.pool) {
        size_t ws = ki_conv2d_direct_pool_workspace(&c, &g);
        if (ws == 0 || ws > ex->ws_per_thread || !ki_conv2d_path_ok(&c, &g, KI_CONV2D_DIRECT)) {
            return KI_ERR_INTERNAL;
        }
        ki_conv2d_forward_direct_pool(&c, &g, in[0].data, out[0].data, ex);
        return KI_OK;
    }
    if (c.pjf) {
        return ki_conv2d_forward_ovpj(&c, &g, in[0].data, c.pjf->residual ? in[1].data : NULL,
                                      out[0].data, ex);
    }
    if (c.dwf) {
        size_t ws = ki_conv2d_pwdw_workspace(&c, &g);
        if (ws == 0 || ws > ex->ws_per_thread) {
            return KI_ERR_INTERNAL;
        }
        ki_conv2d_forward_pwdw(&c, &g, in[0].data, out[0].data, ex);
        return KI_OK;
    }
    ki_conv2d_path p = ki_conv2d_pick(&c, &g);
    if (!ki_conv2d_path_ok(&c, &g, p)) {
        return KI_ERR_INTERNAL;
    }
    size_t need = ki_conv2d_workspace_for(&c, &g, p, ex->n_threads);
    if (c.gap) {
        return gap_forward(&c, &g, p, need, in[0].data, out[0].data, ex);
    }
    if (need > ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    c.res = c.residual ? in[1].data : NULL;
    ki_conv2d_run(&c, &g, p, in[0].data, out[0].data, ex);
    return KI_OK;
}

/* One output value: the sum over the group's input channels and the kernel window. */
static float conv_point(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, const float *w,
                        int64_t oy, int64_t ox)
{
    int64_t cig = c->in_ch / c->groups, hw = g->in.h * g->in.w;
    float acc = 0.0f;
    for (int64_t ic = 0; ic < cig; ic++) {
        for (int64_t ky = 0; ky < c->kh; ky++) {
            int64_t iy = ki_conv_pad_index(oy * c->sh - c->pt + ky * c->dh, g->in.h, c->pad_mode);
            for (int64_t kx = 0; kx < c->kw && iy >= 0; kx++) {
                int64_t ix =
                    ki_conv_pad_index(ox * c->sw - c->pl + kx * c->dw, g->in.w, c->pad_mode);
                float v = ix >= 0 ? x[ic * hw + iy * g->in.w + ix] : 0.0f;
                acc += v * w[(ic * c->kh + ky) * c->kw + kx];
            }
        }
    }
    return acc;
}

void ki_conv2d_forward_ref(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups;
    int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    for (int64_t n = 0; n < g->in.n; n++) {
        for (int64_t oc = 0; oc < c->out_ch; oc++) {
            const float *x = in + (n * c->in_ch + oc / cog * cig) * hw;
            const float *w = c->weight + oc * cig * c->kh * c->kw;
            float *o = out + (n * c->out_ch + oc) * ohw;
            for (int64_t i = 0; i < ohw; i++) {
                o[i] = conv_point(c, g, x, w, i / g->ow, i % g->ow);
            }
            const float *r = c->res ? c->res + (n * c->out_ch + oc) * ohw : NULL;
            ki_cv_epilogue_plane_res(&c->ep, r, oc, o, (size_t)ohw);
        }
    }
}

static void conv_destroy(void *state)
{
    ki_conv2d *c = state;
    if (c) {
        conv_destroy(c->dwf);
        conv_destroy(c->pjf);
        conv_destroy(c->s2d);
        free(c->wino_u);
        free(c->wino_h);
        free(c->wino_f);
        free(c->ov_a);
        free(c->ov_h);
        free(c->ws2_u);
        free(c->dw_w8);
    }
    free(state);
}

/* Whether next is a residual add of two operands of the same declared shape (when declared). */
/* Whether op is nn.MaxPool2d with a 3x3 window, stride 2, padding 0 or 1 (*pad), dilation 1,
 * floor or ceil mode (*ceil) and one output (no indices): the pool ki_conv2d_forward_direct_pool
 * runs (resnet's, padded by 1; squeezenet's and GoogLeNet's, unpadded in ceil mode). */
static bool is_pool3s2(const ki_op_desc *op, int *pad, bool *ceil_mode)
{
    static const int64_t one[2] = { 1, 1 }, zero[2] = { 0, 0 };
    int64_t k[2], s[2], p[2], d[2];
    bool ceil = true, idx = true;
    ki_error e;
    if (strcmp(op->type, "nn.MaxPool2d") != 0 || op->n_inputs != 1 || op->n_outputs != 1 ||
        ki_op_get_ints(op, "kernel_size", 2, NULL, k, &e) != KI_OK ||
        ki_op_get_ints(op, "stride", 2, k, s, &e) != KI_OK ||
        ki_op_get_ints(op, "padding", 2, zero, p, &e) != KI_OK ||
        ki_op_get_ints(op, "dilation", 2, one, d, &e) != KI_OK ||
        ki_op_get_bool(op, "ceil_mode", false, &ceil, &e) != KI_OK ||
        ki_op_get_bool(op, "return_indices", false, &idx, &e) != KI_OK) {
        return false;
    }
    *pad = (int)p[0], *ceil_mode = ceil;
    return k[0] == 3 && k[1] == 3 && s[0] == 2 && s[1] == 2 && p[0] == p[1] &&
           (p[0] == 0 || p[0] == 1) && d[0] == 1 && d[1] == 1 && !idx;
}

/* Whether op is nn.AdaptiveAvgPool2d or F.adaptive_avg_pool2d to 1x1 (each plane's mean). */
static bool is_global_mean(const ki_op_desc *op)
{
    if ((strcmp(op->type, "nn.AdaptiveAvgPool2d") != 0 &&
         strcmp(op->type, "F.adaptive_avg_pool2d") != 0) ||
        op->n_inputs != 1 || op->n_outputs != 1) {
        return false;
    }
    const ki_param *p = ki_op_param(op, "output_size");
    if (p && p->kind == KI_PARAM_INT) {
        return p->i == 1;
    }
    return p && p->kind == KI_PARAM_INTS && p->n >= 1 && p->n <= 2 && p->ints[0] == 1 &&
           p->ints[p->n - 1] == 1;
}

/* Whether d (next, created) is a depthwise layer over c's output channels that the band kernel
 * runs. */
static bool pwdw_takes(const ki_conv2d *c, const ki_conv2d *d)
{
    return d->weight && !d->residual && d->groups == c->out_ch && d->in_ch == c->out_ch &&
           d->out_ch == c->out_ch && ki_conv2d_dw_in_place(d);
}

/* Whether d (next, created) is a dense layer over c's output that conv2d_pwdw.c runs band by band
 * after c (c->dwf_dense): one group, c's channels in, its original weights, no residual,
 * on its own the im2col of 3-wide stride-2 kernels (d->pack3s2) and the GEMM, not Winograd or the
 * OV path, and small enough (ki_conv2d_pwdw_dense_fits). */
static bool dense_takes(const ki_conv2d *c, const ki_conv2d *d)
{
    return d->weight && !d->residual && d->groups == 1 && d->in_ch == c->out_ch && d->pack3s2 &&
           !ki_conv2d_has_wino(d) && !d->ov_a && !d->ov_h && ki_conv2d_pwdw_dense_fits(d);
}

/* Whether op next is an nn.Conv2d with one group per channel of c's output. */
static bool depthwise_over(const ki_conv2d *c, const ki_op_desc *next)
{
    int64_t groups, in_ch;
    ki_error e;
    return strcmp(next->type, "nn.Conv2d") == 0 &&
           ki_op_get_int(next, "groups", 1, &groups, &e) == KI_OK &&
           ki_op_get_int(next, "in_channels", 0, &in_ch, &e) == KI_OK && groups > 1 &&
           groups == c->out_ch && in_ch == c->out_ch;
}

/* A residual add or an activation after c, into its epilogue (conv_fuse). */
static bool fuse_epilogue(ki_conv2d *c, const ki_op_desc *next, int slot)
{
    if (next->n_inputs == 2) {
        if (c->residual || !ki_cv_is_residual_add(next)) {
            return false;
        }
        c->residual = true;
        c->ep.res_after = c->ep.act.kind != KI_ACT_NONE;
        return true;
    }
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    return ki_cv_fuse_act(&c->ep, next);
}

/* Absorbs a following activation into the output epilogue (see ki_cv_fuse_act), or a residual
 * add: before any activation (bias, + residual, then the activation absorbed after it) or after
 * the activation absorbed (bias, the activation, + residual: ep.res_after). */
static bool conv_fuse(void *state, const ki_op_desc *next, int slot)
{
    ki_conv2d *c = state;
    if (c->pool || c->gap) {
        return false; /* the pool is the last thing the layer does */
    }
    if (c->pjf) { /* after the projection its residual add or activation */
        return fuse_epilogue(c->pjf, next, slot);
    }
    if (c->dwf) { /* after the second layer only its activation (one its kernel applies) */
        ki_conv2d t = *c->dwf;
        ki_gemm_fin f;
        if (next->n_inputs != 1 || slot != 0 || !ki_cv_fuse_act(&t.ep, next) ||
            !(c->dwf_dense || ki_conv2d_dw3_ok(&t)) ||
            (c->dwf_c8 && !ki_gemm_fin_of(&t.ep, 0, NULL, &f))) { /* the ch8 blocks': a clamp */
            return false;
        }
        c->dwf->ep = t.ep;
        return true;
    }
    c->next_dw = slot == 0 && depthwise_over(c, next);
    /* the next layer run with this one: in bands (large data between them), or a channel block at
     * a time on this 1x1 layer's OV weights (small planes, ki_conv2d_ovdw_ok) */
    const bool bands = ki_conv2d_want_pwdw(c, next);
    if (slot == 0 && next->n_inputs == 1 && (bands || (c->next_dw && ki_conv2d_is_pointwise(c)))) {
        void *dv = NULL;
        ki_error e;
        if (conv_create(next, &dv, &e) != KI_OK) {
            return false;
        }
        ki_conv2d *d = dv;
        const bool dw = bands && pwdw_takes(c, d); /* a depthwise layer (also of one channel) */
        c->dwf_dense = bands && !dw && dense_takes(c, d);
        c->dwf_c8 = !bands && ki_conv2d_want_ovdw(c, d, next) &&
                    (c->ov_a || ki_conv2d_ov_prepare(c, false, &e) == KI_OK);
        if (!dw && !c->dwf_dense && !c->dwf_c8) {
            conv_destroy(d);
            return false;
        }
        /* it runs with this layer: a two-phase Winograd form of its weights goes unused */
        c->dwf = d;
        free(d->ws2_u);
        d->ws2_u = NULL;
        return true;
    }
    int pool_pad;
    bool pool_ceil;
    if (is_pool3s2(next, &pool_pad, &pool_ceil)) {
        /* on the direct path (resnet's and squeezenet's stems), whose rows it pools from L2 */
        c->pool =
            slot == 0 && !c->residual && c->weight && c->direct && ki_conv2d_direct_shape_ok(c);
        c->pool_pad = c->pool ? pool_pad : 0;
        c->pool_ceil = c->pool && pool_ceil;
        return c->pool;
    }
    if (is_global_mean(next)) {
        c->gap = slot == 0 && ki_conv2d_gap_ok(c);
        return c->gap;
    }
    return fuse_epilogue(c, next, slot);
}

/* A channel-block or band step's projection, the 1x1 layer after it (ki_conv2d_want_pjf), taken
 * over as created (its original weights may already be given back, so it is not made again from
 * next, as the depthwise layer is). */
static bool conv_fuse_state(void *state, const ki_op_desc *next, const ki_layer_ops *next_layer,
                            void *next_state, int slot, bool *taken)
{
    ki_conv2d *c = state, *pj = next_state;
    *taken = false;
    if (next_layer->create != conv_create || !pj || !c->dwf || c->pjf || slot != 0 ||
        next->n_inputs != 1 || !ki_conv2d_want_pjf(c, pj)) {
        return false;
    }
    c->pjf = pj;
    *taken = true;
    return true;
}

static void conv_describe(const void *state, const ki_shape *in, int n_in, char *buf, size_t n)
{
    (void)n_in;
    ki_conv2d_describe(state, &in[0], buf, n);
}

/* One image's multiply-adds of c at geometry g: every output value sums (in_ch / groups) x kh x
 * kw products. */
static double conv_image_macs(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    return (double)c->out_ch * (double)g->oh * (double)g->ow * (double)(c->in_ch / c->groups) *
           (double)c->kh * (double)c->kw;
}

/* This convolution's and, when it absorbed one, the next layer's (c->dwf) on its output. */
static double conv_macs(const void *state, const ki_shape *in, int n_in)
{
    const ki_conv2d *c = state;
    ki_conv2d_geom g, dg;
    if (n_in < 1 || ki_conv2d_geom_make(c, &in[0], &g, NULL) != KI_OK) {
        return -1;
    }
    double macs = conv_image_macs(c, &g);
    if (c->dwf) {
        if (ki_conv2d_pwdw_geom(c, &g, &dg, NULL) != KI_OK) {
            return -1;
        }
        macs += conv_image_macs(c->dwf, &dg);
        ki_shape mid = ki_cv_nchw_shape(g.in.batched, 1, c->dwf->out_ch, dg.oh, dg.ow);
        ki_conv2d_geom pg;
        if (c->pjf && ki_conv2d_geom_make(c->pjf, &mid, &pg, NULL) != KI_OK) {
            return -1;
        }
        macs += c->pjf ? conv_image_macs(c->pjf, &pg) : 0.0;
    }
    return macs * (double)g.in.n;
}

const ki_layer_ops ki_layer_conv2d = {
    .type = "nn.Conv2d",
    .flags = KI_LAYER_TEAM,
    .create = conv_create,
    .shape = conv_shape,
    .workspace = conv_workspace,
    .forward = conv_forward,
    .destroy = conv_destroy,
    .fuse = conv_fuse,
    .fuse_state = conv_fuse_state,
    .describe = conv_describe,
    .macs = conv_macs,
};
