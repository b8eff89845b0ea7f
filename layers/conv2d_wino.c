/* conv2d_wino.c - nn.Conv2d 3x3 stride 1 by Winograd F(4x4, 3x3): 36 multiplies per 4x4 output
 * tile and channel pair instead of 144. The weights are transformed once (ki_conv2d_wino_prepare,
 * at create); each run transforms blocks of KI_GEMM_NR tiles of the input (wino_xform.h), does
 * the 36 channel products of a block with the SGEMM micro-kernels of gemm.h, and transforms them
 * back into the output with the epilogue. Blocks are independent and each computed the same way
 * whatever the thread count, so results do not depend on it. */
#include <omp.h>
#include <stdlib.h>

#include "../core/bigbuf.h"

#define KI_WINO_SUFFIX _ref
#include "wino_xform.h"

/* G of F(2x2, 3x3) and of F(4x4, 3x3): the weight transform U = G g G^T. */
static const double wino_g2[4][3] = {
    { 1.0, 0.0, 0.0 }, { 0.5, 0.5, 0.5 }, { 0.5, -0.5, 0.5 }, { 0.0, 0.0, 1.0 }
};
static const double wino_g4[6][3] = {
    { 1.0 / 4, 0.0, 0.0 },
    { -1.0 / 6, -1.0 / 6, -1.0 / 6 },
    { -1.0 / 6, 1.0 / 6, -1.0 / 6 },
    { 1.0 / 24, 1.0 / 12, 1.0 / 6 },
    { 1.0 / 24, -1.0 / 12, 1.0 / 6 },
    { 0.0, 0.0, 1.0 },
};

bool ki_conv2d_wino_shape_ok(const ki_conv2d *c)
{
    return c->kh == 3 && c->kw == 3 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1 &&
           c->groups == 1 && c->pad_mode == KI_CONV_PAD_ZEROS;
}

int64_t ki_conv2d_wino_tiles(int64_t oh, int64_t ow, int m)
{
    return ((oh + m - 1) / m) * ((ow + m - 1) / m);
}

ki_status ki_conv2d_wino_prepare(ki_conv2d *c, int m, ki_error *err)
{
    int64_t ic = c->in_ch, oc = c->out_ch;
    const int ts = m + 2;
    const double(*gm)[3] = m == 4 ? wino_g4 : wino_g2;
    size_t n, bytes;
    if (!c->weight || !ki_conv2d_wino_shape_ok(c) || (m != 2 && m != 4)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a 3x3 stride-1 convolution with weights");
    }
    if (!ki_ckd_mul(&n, (size_t)oc, (size_t)ic) || !ki_ckd_mul(&n, n, (size_t)(ts * ts)) ||
        !ki_ckd_mul(&bytes, n, sizeof(float)) || bytes > SIZE_MAX - 63) {
        return KI_FAIL(err, KI_ERR_LIMIT, "Winograd weights too large");
    }
    float *u = ki_bigbuf_alloc(bytes);
    if (!u) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for the Winograd weights (%zu bytes)",
                       bytes);
    }
    for (int64_t o = 0; o < oc; o++) {
        for (int64_t i = 0; i < ic; i++) {
            const float *g = c->weight + (o * ic + i) * 9;
            double t[6][3];
            for (int r = 0; r < ts; r++) { /* t = G g */
                for (int k = 0; k < 3; k++) {
                    t[r][k] = gm[r][0] * g[k] + gm[r][1] * g[3 + k] + gm[r][2] * g[6 + k];
                }
            }
            for (int r = 0; r < ts; r++) { /* U = t G^T, stored [pos][o][i] */
                for (int s = 0; s < ts; s++) {
                    double v = t[r][0] * gm[s][0] + t[r][1] * gm[s][1] + t[r][2] * gm[s][2];
                    u[((r * ts + s) * oc + o) * ic + i] = (float)v;
                }
            }
        }
    }
    free(c->wino_u);
    c->wino_u = u;
    c->wino_m = m;
    return KI_OK;
}

/* Winograd's buffers, shared by the team: V (the transformed input, t^2 x in_ch x tiles, as
 * packed GEMM panels) and M (the products, t^2 x out_ch x tiles), tiles rounded up to a panel. */
#define KI_WINO_MAX_BYTES ((size_t)256 << 20)

static bool wino_floats(const ki_conv2d *c, const ki_conv2d_geom *g, size_t *v, size_t *m)
{
    int64_t t = ki_conv2d_wino_tiles(g->oh, g->ow, c->wino_m), ts = c->wino_m + 2;
    size_t tp = (size_t)((t + KI_GEMM_NR - 1) / KI_GEMM_NR * KI_GEMM_NR);
    return c->wino_m > 0 && ki_ckd_mul(v, tp, (size_t)(ts * ts)) &&
           ki_ckd_mul(m, *v, (size_t)c->out_ch) && ki_ckd_mul(v, *v, (size_t)c->in_ch);
}

size_t ki_conv2d_wino_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads)
{
    size_t v, m, n, bytes, nt = n_threads > 0 ? (size_t)n_threads : 1;
    if (!wino_floats(c, g, &v, &m) || !ki_ckd_add(&n, v, m) ||
        !ki_ckd_mul(&bytes, n, sizeof(float)) || bytes > KI_WINO_MAX_BYTES) {
        return 0;
    }
    return ((bytes + nt - 1) / nt + 63) / 64 * 64;
}

/* Per image: (1) each input channel's tiles transformed into V, (2) for each of the t^2 positions
 * the product U[pos] (out x in) * V[pos] (in x tiles) by the micro-kernels, a few panels per
 * work item, (3) each output channel transformed back from M with the epilogue (activations
 * other than clamps on the finished plane while it is in cache). */
void ki_conv2d_forward_wino(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                            float *restrict out, const ki_exec *ex)
{
    const int64_t wm = c->wino_m, npos = (wm + 2) * (wm + 2);
    int64_t tiles = ki_conv2d_wino_tiles(g->oh, g->ow, (int)wm), ic = c->in_ch, oc = c->out_ch;
    int64_t np = (tiles + KI_GEMM_NR - 1) / KI_GEMM_NR, tp = np * KI_GEMM_NR;
    int64_t grp = np < 4 ? np : 4, ngrp = (np + grp - 1) / grp;
    int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    ki_wino_tiles tg = { (g->ow + wm - 1) / wm, tiles, c->pt, c->pl, g->oh, g->ow, wm };
    float *vbuf = ex->workspace, *mbuf = vbuf + npos * ic * tp;
    ki_gemm_fin gf;
    /* clamp-type activations finish in the output transform, the others on the plane after it */
    bool post = !ki_gemm_fin_of(&c->ep, 0, NULL, &gf);
    const ki_cv_epilogue act_only = { NULL, c->ep.act };
    if (tiles == 0 || oc == 0) {
        return;
    }
    for (int64_t n = 0; n < g->in.n; n++) {
        const float *x = in + n * ic * hw;
        float *y = out + n * oc * ohw;
        const float *res = c->res ? c->res + n * oc * ohw : NULL;
#pragma omp parallel num_threads(ex->n_threads)
        {
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < ic; ch++) {
                c->wino_in(x + ch * hw, g->in.h, g->in.w, &tg, vbuf + ch * KI_GEMM_NR,
                           ic * KI_GEMM_NR, ic * tp);
            }
#pragma omp for schedule(static)
            for (int64_t item = 0; item < npos * ngrp; item++) {
                int64_t pos = item / ngrp, p0 = item % ngrp * grp,
                        cnt = np - p0 < grp ? np - p0 : grp;
                ki_gemm_args ga = { .m = oc,
                                    .n = tp,
                                    .k = ic,
                                    .a = c->wino_u + pos * oc * ic,
                                    .lda = ic,
                                    .bp = vbuf + pos * ic * tp,
                                    .c = mbuf + pos * oc * tp,
                                    .ldc = tp,
                                    .uk = c->uk };
                ki_gemm_panels(&ga, p0, cnt, ga.bp + p0 * ic * KI_GEMM_NR);
            }
#pragma omp for schedule(static)
            for (int64_t ch = 0; ch < oc; ch++) {
                c->wino_out(mbuf + ch * tp, oc * tp, y + ch * ohw, res ? res + ch * ohw : NULL, &tg,
                            c->ep.bias ? c->ep.bias[ch] : 0.0f, post ? -INFINITY : gf.lo,
                            post ? INFINITY : gf.hi);
                if (post) {
                    c->epf(&act_only, NULL, ch, y + ch * ohw, (size_t)ohw);
                }
            }
        }
    }
}
