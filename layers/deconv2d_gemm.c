/* deconv2d_gemm.c - nn.ConvTranspose2d as a GEMM into a column matrix, then col2im. The GEMM
 * col[cog*kh*kw x hw] = W_g^T * X_g is a 1x1 convolution of the group's input planes with the
 * transposed weight (c->wt, or transposed per run into the workspace), so it runs on kinfer's
 * GEMM path (ki_conv2d_run, KI_CONV2D_GEMM1) at the CPU's level: its tiles, and col2im's
 * gathers per output channel (one thread owns a plane), do not depend on the thread count, so
 * neither do the results (OpenBLAS's sgemm, used before, split the products differently on 3
 * threads than on 1 or 2, and ignored --isa). */
#include <stdbool.h>
#include <string.h>

#include "conv2d.h"

/* Input indices i in [*lo, *hi) whose output i*s + off lands inside [0, n_out). */
static void hit_range(int64_t off, int64_t s, int64_t n_out, int64_t n_in, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = n_out - 1 - off < 0 ? 0 : (n_out - 1 - off) / s + 1;
    *lo = a < n_in ? a : n_in;
    *hi = b < n_in ? b : n_in;
    if (*hi < *lo) {
        *hi = *lo;
    }
}

/* Adds the kh*kw column rows of one output channel into its plane. */
static void col2im_plane(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *col,
                         float *restrict o)
{
    int64_t hw = g->in.h * g->in.w;
    memset(o, 0, (size_t)(g->oh * g->ow) * sizeof *o);
    for (int64_t t = 0; t < c->kh * c->kw; t++) {
        int64_t ky = t / c->kw, kx = t % c->kw, ylo, yhi, xlo, xhi;
        int64_t offy = ky * c->dh - c->ph, offx = kx * c->dw - c->pw;
        const float *row = col + t * hw;
        hit_range(offy, c->sh, g->oh, g->in.h, &ylo, &yhi);
        hit_range(offx, c->sw, g->ow, g->in.w, &xlo, &xhi);
        for (int64_t iy = ylo; iy < yhi; iy++) {
            float *d = o + (iy * c->sh + offy) * g->ow;
            const float *src = row + iy * g->in.w;
            for (int64_t ix = xlo; ix < xhi; ix++) {
                d[ix * c->sw + offx] += src[ix];
            }
        }
    }
}

/* Whether the kh*kw column rows tile the output plane, each output taking exactly one value: a
 * kernel the size of its stride, unpadded and undilated, no output padding (U-Net's 2x2 stride-2
 * upsampling). */
static bool tiles_plane(const ki_deconv2d *c, const ki_conv2d_geom *g)
{
    return c->kh == c->sh && c->kw == c->sw && c->ph == 0 && c->pw == 0 && c->dh == 1 &&
           c->dw == 1 && g->oh == g->in.h * c->sh && g->ow == g->in.w * c->sw;
}

/* col2im_plane for such a layer (tiles_plane), plus b (the channel's bias, or 0 when the epilogue
 * comes after): the plane written once, row by row, instead of cleared, added to a tap at a time
 * (the adds strided) and read again for the bias. (0 + v) + b as there, so the same bits (a -0
 * becomes +0, and + 0 changes nothing further). */
static void tile_plane(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *col, float b,
                       float *restrict o)
{
    const int64_t w = g->in.w, hw = g->in.h * w, kw = c->kw;
    for (int64_t iy = 0; iy < g->in.h; iy++) {
        for (int64_t ky = 0; ky < c->kh; ky++) {
            float *d = o + (iy * c->kh + ky) * g->ow;
            const float *src = col + ky * kw * hw + iy * w;
            /* 2-wide kernels (U-Net's) in a loop of their own: through the kx loop below, unet's
             * four layers were 1.04-1.5x slower (docs/performance.md) */
            if (kw == 2) {
                const float *s1 = src + hw;
                for (int64_t ix = 0; ix < w; ix++) {
                    d[2 * ix] = (0.0f + src[ix]) + b;
                    d[2 * ix + 1] = (0.0f + s1[ix]) + b;
                }
                continue;
            }
            for (int64_t ix = 0; ix < w; ix++) {
                for (int64_t kx = 0; kx < kw; kx++) {
                    d[ix * kw + kx] = (0.0f + src[kx * hw + ix]) + b;
                }
            }
        }
    }
}

void ki_deconv2d_transpose(const ki_deconv2d *c, float *restrict wt)
{
    const int64_t cig = c->in_ch / c->groups, m = c->out_ch / c->groups * c->kh * c->kw;
    for (int64_t gi = 0; gi < c->groups; gi++) {
        const float *w = c->weight + gi * cig * m;
        float *d = wt + gi * m * cig;
        for (int64_t i = 0; i < cig; i++) {
            for (int64_t r = 0; r < m; r++) {
                d[r * cig + i] = w[i * m + r];
            }
        }
    }
}

/* The GEMM of a group as a 1x1 convolution: cig -> m channels, no epilogue, at this CPU's level
 * (its weight set to each group's transposed slab before it runs); *g1 its geometry on one image
 * of h x w. False on an unusable size. */
static bool gemm_layer(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_conv2d *pw,
                       ki_conv2d_geom *g1)
{
    memset(pw, 0, sizeof *pw);
    pw->in_ch = c->in_ch / c->groups;
    pw->out_ch = c->out_ch / c->groups * c->kh * c->kw;
    pw->groups = 1;
    pw->kh = pw->kw = pw->sh = pw->sw = pw->dh = pw->dw = 1;
    pw->pad_mode = KI_CONV_PAD_ZEROS;
    pw->weight = c->weight;
    ki_conv2d_set_isa(pw, ki_cpu_isa());
    const ki_shape s = ki_shape_make(4, (const int64_t[]){ 1, pw->in_ch, g->in.h, g->in.w });
    return ki_conv2d_geom_make(pw, &s, g1, NULL) == KI_OK;
}

/* Bytes of the column matrix and of the transposed weight when made per run (else 0), the GEMM's
 * bytes per thread, and the GEMM layer with its geometry (gemm_layer). */
static bool gemm_sizes(const ki_deconv2d *c, const ki_conv2d_geom *g, int n_threads, size_t *col,
                       size_t *wt, size_t *conv, ki_conv2d *pw, ki_conv2d_geom *g1)
{
    const int64_t cig = c->in_ch / c->groups, m = c->out_ch / c->groups * c->kh * c->kw;
    *wt = 0;
    if (!ki_cv_floats3(col, m, g->in.h, g->in.w) ||
        (!c->wt && !ki_cv_floats3(wt, m, cig, c->groups)) || !gemm_layer(c, g, pw, g1)) {
        return false;
    }
    *conv = ki_conv2d_workspace_for(pw, g1, KI_CONV2D_GEMM1, n_threads);
    return *col <= SIZE_MAX / 8 && *wt <= SIZE_MAX / 8 && *conv <= SIZE_MAX / 8;
}

size_t ki_deconv2d_gemm_workspace(const ki_deconv2d *c, const ki_conv2d_geom *g, int n_threads)
{
    size_t col, wt, conv, nt = n_threads > 0 ? (size_t)n_threads : 1;
    ki_conv2d pw;
    ki_conv2d_geom g1;
    if (!gemm_sizes(c, g, n_threads, &col, &wt, &conv, &pw, &g1)) {
        return 0;
    }
    /* the GEMM's slices first, one after another, then col and wt over the rest of the team's
     * workspace (see ki_deconv2d_forward_gemm) */
    return (conv + 63) / 64 * 64 + ((col + wt + nt - 1) / nt + 63) / 64 * 64;
}

/* Per (image, group): the GEMM into col, then col2im per output channel with the epilogue. */
void ki_deconv2d_forward_gemm(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups;
    int64_t m = cog * c->kh * c->kw, hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    size_t col_b, wt_b, conv, nt = ex->n_threads > 0 ? (size_t)ex->n_threads : 1;
    ki_conv2d pw;
    ki_conv2d_geom g1;
    if (!gemm_sizes(c, g, ex->n_threads, &col_b, &wt_b, &conv, &pw, &g1)) {
        return; /* the layer's workspace() said 0 */
    }
    /* the team's workspace: the GEMM's slices of conv bytes one after another, then col (m x hw)
     * and the transposed weight when it is made here */
    const size_t conv_al = (conv + 63) / 64 * 64;
    const ki_exec sub = { ex->n_threads, ex->workspace, conv_al, ex->crew };
    float *col = (float *)(void *)((char *)ex->workspace + nt * conv_al);
    float *wt = c->wt ? c->wt : col + col_b / sizeof(float);
    if (!c->wt) {
        ki_deconv2d_transpose(c, wt);
    }
    /* a plane that tiles takes its bias as it is written when no activation follows (fold) */
    const bool tiles = tiles_plane(c, g), fold = tiles && c->ep.act.kind == KI_ACT_NONE;
    for (int64_t n = 0; n < g->in.n; n++) {
        for (int64_t gi = 0; gi < c->groups; gi++) {
            const float *x = in + (n * c->in_ch + gi * cig) * hw;
            float *y = out + (n * c->out_ch + gi * cog) * ohw;
            pw.weight = wt + gi * m * cig;
            ki_conv2d_run(&pw, &g1, KI_CONV2D_GEMM1, x, col, &sub);
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
            for (int64_t oc = 0; oc < cog; oc++) {
                const int64_t ch = gi * cog + oc;
                const float *co = col + oc * c->kh * c->kw * hw;
                if (tiles) {
                    tile_plane(c, g, co, fold && c->ep.bias ? c->ep.bias[ch] : 0.0f, y + oc * ohw);
                } else {
                    col2im_plane(c, g, co, y + oc * ohw);
                }
                if (!fold) {
                    ki_cv_epilogue_plane(&c->ep, ch, y + oc * ohw, (size_t)ohw);
                }
            }
        }
    }
}
