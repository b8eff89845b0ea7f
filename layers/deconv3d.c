/* deconv3d.c - nn.ConvTranspose3d and F.conv_transpose3d (weight and bias as inputs): groups,
 * stride, padding, output_padding and dilation on (N,C,D,H,W) or unbatched (C,D,H,W) inputs.
 *
 * Kernel: per (image, group) and chunk of input depth planes, kinfer's GEMM at the CPU's level
 * (ki_sgemm, its tiles split over the team the same way whatever the thread count) forms the
 * column matrix col[cog*kd*kh*kw x planes*h*w] = W_g^T * X_g, then
 * col2vol adds each output channel's rows into its volume, one channel per iteration of a
 * parallel loop, so every output value is summed in the same order whatever the thread count.
 * The bias and a fused activation go through the convolution epilogue. State: parameters only,
 * read-only after create; thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "../core/cpu.h"
#include "gemm.h"
#include "vol_common.h"

typedef struct deconv3d {
    ki_vol_conv v; /* first (see ki_vol_conv); @weight is (in, out/groups, kd, kh, kw) */
    int64_t pad[3], opad[3];
    ki_gemm_ukernel uk; /* the level's micro-kernel */
} deconv3d;

typedef struct d3_geom {
    ki_vol x;
    int64_t out_ch, cig, cog, groups;
    int64_t k[3], o[3];
    int64_t m, hw, dhw, ohw, odhw; /* m = cog*kd*kh*kw, the column rows */
    int64_t pz;                    /* input depth planes per column chunk */
    int64_t ws;                    /* workspace floats: a column chunk, then ki_sgemm's */
} d3_geom;

static ki_status parse(const ki_op_desc *op, void *state, ki_error *err)
{
    static const int64_t zero[3] = { 0, 0, 0 };
    deconv3d *c = state;
    const char *mode;
    ki_status st = ki_vol_conv_parse(op, &c->v, err);
    c->uk = ki_gemm_ukernel_for(ki_cpu_isa());
    if (st == KI_OK) {
        st = ki_vol_triple(op, "padding", zero, 0, c->pad, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "output_padding", zero, 0, c->opad, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_string(op, "padding_mode", "zeros", &mode, err);
    }
    if (st == KI_OK && strcmp(mode, "zeros") != 0) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "padding_mode=%s (only zeros)", mode);
    }
    /* PyTorch: output padding must be smaller than either stride or dilation. */
    for (int i = 0; st == KI_OK && i < 3; i++) {
        if (c->opad[i] >= c->v.s[i] && c->opad[i] >= c->v.dl[i]) {
            st = KI_FAIL(err, KI_ERR_SHAPE,
                         "output_padding must be smaller than either stride or dilation");
        }
    }
    return st;
}

static ki_status deconv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const ki_vol_conv head = { .functional = false, .transposed = true };
    return ki_vol_conv_create(op, &head, sizeof(deconv3d), parse, state, err);
}

static ki_status f_deconv3d_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const ki_vol_conv head = { .functional = true, .transposed = true };
    return ki_vol_conv_create(op, &head, sizeof(deconv3d), parse, state, err);
}

/* The weight's dims (in, out/groups, kd, kh, kw): the attribute's, or the weight input's (and
 * the bias input checked against them). */
static ki_status weight_dims(const deconv3d *c, const ki_shape *in, int n_in, d3_geom *g,
                             ki_error *err)
{
    char buf[96];
    const ki_shape *w = NULL;
    int64_t in_ch;
    ki_status st = KI_OK;
    if (!c->v.functional) {
        in_ch = c->v.d0, g->cog = c->v.d1;
        memcpy(g->k, c->v.k, sizeof g->k);
    } else {
        st = ki_vol_conv_weight_in(&c->v, in, n_in, &w, err);
        if (st != KI_OK) {
            return st;
        }
        if (w->kind != KI_KIND_TENSOR || w->ndim != 5 || w->d[0] < 1 || w->d[1] < 1 ||
            w->d[0] % c->v.groups != 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not a 5-D tensor for groups=%lld",
                           ki_shape_str(w, buf, sizeof buf), (long long)c->v.groups);
        }
        in_ch = w->d[0], g->cog = w->d[1];
        st = ki_vol_conv_kernel_in(w, g->k, err);
    }
    if (st != KI_OK) {
        return st;
    }
    g->groups = c->v.groups, g->cig = in_ch / c->v.groups;
    if (!ki_ckd_mul_i64(&g->out_ch, g->cog, c->v.groups) || g->out_ch > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "too many output channels");
    }
    return ki_vol_conv_bias_in(&c->v, in, g->out_ch, err);
}

/* (in-1)*s - 2p + d*(k-1) + output_padding + 1 per spatial dim, which must be positive. */
static ki_status out_dims(const deconv3d *c, d3_geom *g, ki_error *err)
{
    const int64_t in[3] = { g->x.d, g->x.h, g->x.w };
    for (int i = 0; i < 3; i++) {
        g->o[i] =
            (in[i] - 1) * c->v.s[i] - 2 * c->pad[i] + c->v.dl[i] * (g->k[i] - 1) + c->opad[i] + 1;
        if (in[i] < 1 || g->o[i] < 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input size %lld gives output size %lld",
                           (long long)in[i], (long long)g->o[i]);
        }
    }
    return KI_OK;
}

static ki_status geom_make(const deconv3d *c, const ki_shape *in, int n_in, d3_geom *g,
                           ki_error *err)
{
    ki_shape o;
    ki_status st = ki_vol_get(&in[c->v.x_in], &g->x, err);
    if (st == KI_OK) {
        st = weight_dims(c, in, n_in, g, err);
    }
    if (st == KI_OK) {
        st = ki_vol_conv_check_channels(&g->x, g->cig * c->v.groups, err);
    }
    if (st == KI_OK) {
        st = out_dims(c, g, err);
    }
    if (st == KI_OK) {
        st = ki_vol_shape(&g->x, g->out_ch, g->o, &o, err);
    }
    if (st != KI_OK) {
        return st;
    }
    size_t col;
    if (!ki_ckd_mul_i64(&g->m, g->cog, g->k[0]) ||
        !ki_ckd_mul_i64(&g->m, g->m, g->k[1] * g->k[2]) ||
        !ki_cv_floats3(&col, g->m, g->x.h, g->x.w) || col > (size_t)KI_MAX_NUMEL * 4) {
        return KI_FAIL(err, KI_ERR_LIMIT, "transposed convolution too large");
    }
    g->hw = g->x.h * g->x.w, g->dhw = g->x.d * g->hw;
    g->ohw = g->o[1] * g->o[2], g->odhw = g->o[0] * g->ohw;
    g->pz = ki_vol_conv_chunk(g->m * g->hw, g->x.d);
    int64_t gemm_ws;
    if (!ki_sgemm_ws_floats(g->m, g->pz * g->hw, g->cig, true, &gemm_ws) ||
        !ki_ckd_add_i64(&g->ws, g->m * g->pz * g->hw, gemm_ws) || g->ws > KI_MAX_NUMEL * 8) {
        return KI_FAIL(err, KI_ERR_LIMIT, "transposed convolution too large");
    }
    if (!ki_cv_blas_ok(g->m) || !ki_cv_blas_ok(g->pz * g->hw) || !ki_cv_blas_ok(g->dhw) ||
        !ki_cv_blas_ok(g->cig)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "transposed convolution too large for the SGEMM");
    }
    return KI_OK;
}

static ki_status deconv3d_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                                int n_out, ki_error *err)
{
    d3_geom g;
    ki_status st = ki_vol_conv_counts(state, n_in, n_out, err);
    st = st == KI_OK ? geom_make(state, in, n_in, &g, err) : st;
    return st == KI_OK ? ki_vol_shape(&g.x, g.out_ch, g.o, &out[0], err) : st;
}

/* The column chunk and ki_sgemm's scratch, one block spanning the per-thread slices. */
static size_t deconv3d_workspace(const void *state, const ki_shape *in, int n_in,
                                 const ki_shape *out, int n_out, int n_threads)
{
    d3_geom g;
    (void)out, (void)n_out;
    return geom_make(state, in, n_in, &g, NULL) == KI_OK
               ? ki_vol_conv_ws((size_t)g.ws * sizeof(float), n_threads)
               : 0;
}

/* Input indices i in [*lo, *hi) whose output i*s + off lands inside [0, n_out). */
static void hit_range(int64_t off, int64_t s, int64_t n_out, int64_t n_in, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n_out - 1 - off < 0 ? 0 : (n_out - 1 - off) / s + 1;
    *lo = a < n_in ? a : n_in;
    *hi = b < n_in ? b : n_in;
    *hi = *hi < *lo ? *lo : *hi;
}

/* Adds the kd*kh*kw column rows of one output channel (input planes [z0, z0 + nz)) into its
 * volume o. */
static void col2vol(const deconv3d *c, const d3_geom *g, const float *col, int64_t z0, int64_t nz,
                    float *restrict o)
{
    int64_t k3 = g->k[0] * g->k[1] * g->k[2], cols = nz * g->hw, r[3][2];
    for (int64_t t = 0; t < k3; t++) {
        const int64_t tap[3] = { t / (g->k[1] * g->k[2]), t / g->k[2] % g->k[1], t % g->k[2] };
        const int64_t n_in[3] = { z0 + nz, g->x.h, g->x.w };
        int64_t off[3];
        for (int i = 0; i < 3; i++) {
            off[i] = tap[i] * c->v.dl[i] - c->pad[i];
            hit_range(off[i], c->v.s[i], g->o[i], n_in[i], &r[i][0], &r[i][1]);
        }
        r[0][0] = r[0][0] > z0 ? r[0][0] : z0;
        const float *row = col + t * cols;
        for (int64_t iz = r[0][0]; iz < r[0][1]; iz++) {
            for (int64_t iy = r[1][0]; iy < r[1][1]; iy++) {
                float *d =
                    o + ((iz * c->v.s[0] + off[0]) * g->o[1] + iy * c->v.s[1] + off[1]) * g->o[2];
                const float *src = row + (iz - z0) * g->hw + iy * g->x.w;
                for (int64_t ix = r[2][0]; ix < r[2][1]; ix++) {
                    d[ix * c->v.s[2] + off[2]] += src[ix];
                }
            }
        }
    }
}

/* One (image, group): y (cog output volumes) from x (cig input volumes). */
static void deconv_group(const deconv3d *c, const d3_geom *g, const float *w, const float *x,
                         float *y, float *col, int nt)
{
    memset(y, 0, (size_t)(g->cog * g->odhw) * sizeof *y);
    for (int64_t z0 = 0; z0 < g->x.d; z0 += g->pz) {
        int64_t nz = g->x.d - z0 < g->pz ? g->x.d - z0 : g->pz, cols = nz * g->hw;
        const ki_sgemm_args s = { .m = g->m,
                                  .n = cols,
                                  .k = g->cig,
                                  .a = w,
                                  .lda = g->m,
                                  .ta = true,
                                  .b = x + z0 * g->hw,
                                  .ldb = g->dhw,
                                  .c = col,
                                  .ldc = cols };
        ki_sgemm(&s, c->uk, col + g->m * g->pz * g->hw, nt);
        int64_t per = g->m / g->cog * cols;
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t oc = 0; oc < g->cog; oc++) {
            col2vol(c, g, col + oc * per, z0, nz, y + oc * g->odhw);
        }
    }
}

static ki_status deconv3d_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                  int n_out, const ki_exec *ex)
{
    const deconv3d *c = state;
    d3_geom g;
    ki_shape sh[3];
    ki_cv_epilogue ep;
    (void)n_out;
    if (!ki_vol_conv_shapes(in, n_in, sh) || geom_make(c, sh, n_in, &g, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    if (!ki_vol_conv_ws_fits((size_t)g.ws * sizeof(float), ex)) {
        return KI_ERR_INTERNAL;
    }
    const float *weight = ki_vol_conv_operands(&c->v, in, &ep);
    const float *x = in[c->v.x_in].data;
    float *y = out[0].data;
    for (int64_t n = 0; n < g.x.n; n++) {
        for (int64_t gi = 0; gi < g.groups; gi++) {
            deconv_group(c, &g, weight + gi * g.cig * g.m, x + (n * g.x.c + gi * g.cig) * g.dhw,
                         y + (n * g.out_ch + gi * g.cog) * g.odhw, ex->workspace, ex->n_threads);
        }
        float *yn = y + n * g.out_ch * g.odhw;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
        for (int64_t oc = 0; oc < g.out_ch; oc++) {
            ki_cv_epilogue_plane(&ep, oc, yn + oc * g.odhw, (size_t)g.odhw);
        }
    }
    return KI_OK;
}

KI_VOL_CONV_OPS(ki_layer_conv_transpose3d, "nn.ConvTranspose3d", deconv3d_create, deconv3d);
KI_VOL_CONV_OPS(ki_layer_f_conv_transpose3d, "F.conv_transpose3d", f_deconv3d_create, deconv3d);
