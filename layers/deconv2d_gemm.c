/* deconv2d_gemm.c - nn.ConvTranspose2d as cblas_sgemm into a column matrix, then col2im.
 * col2im gathers per output channel (one thread owns a plane), so the sums do not depend on
 * the thread count. */
#include <cblas.h>
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

/* Per (image, group): col[cog*kh*kw x hw] = W_g^T * X_g, with W_g the group's (cig x cog*kh*kw)
 * slab of the weight; OpenBLAS threads it outside any parallel region. */
void ki_deconv2d_forward_gemm(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups;
    int64_t m = cog * c->kh * c->kw, hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    float *col = ex->workspace;
    for (int64_t n = 0; n < g->in.n; n++) {
        for (int64_t gi = 0; gi < c->groups; gi++) {
            const float *x = in + (n * c->in_ch + gi * cig) * hw;
            float *y = out + (n * c->out_ch + gi * cog) * ohw;
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)hw, (int)cig, 1.0f,
                        c->weight + gi * cig * m, (int)m, x, (int)hw, 0.0f, col, (int)hw);
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
            for (int64_t oc = 0; oc < cog; oc++) {
                col2im_plane(c, g, col + oc * c->kh * c->kw * hw, y + oc * ohw);
                ki_cv_epilogue_plane(&c->ep, gi * cog + oc, y + oc * ohw, (size_t)ohw);
            }
        }
    }
}
