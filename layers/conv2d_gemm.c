/* conv2d_gemm.c - fast nn.Conv2d kernels: im2col + cblas_sgemm (and the 1x1 case that needs no
 * im2col), and a direct depthwise kernel. Chosen by ki_conv2d_pick (conv2d.c). */
#include <cblas.h>
#include <string.h>

#include "conv2d.h"

/* Output columns ox in [*lo, *hi) read input column ox*s + off inside [0, w). */
static void valid_range(int64_t off, int64_t s, int64_t w, int64_t ow, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = w - 1 - off < 0 ? 0 : (w - 1 - off) / s + 1;
    *lo = a < ow ? a : ow;
    *hi = b < ow ? b : ow;
    if (*hi < *lo) {
        *hi = *lo;
    }
}

/* One im2col row: the input plane seen through kernel tap (ky,kx), one value per output pixel. */
static void im2col_row(const ki_conv2d *c, const ki_conv2d_geom *g, const float *plane, int64_t ky,
                       int64_t kx, float *restrict dst)
{
    int64_t w = g->in.w, ow = g->ow, off = kx * c->dw - c->pl, lo, hi;
    valid_range(off, c->sw, w, ow, &lo, &hi);
    for (int64_t oy = 0; oy < g->oh; oy++) {
        int64_t iy = ki_conv_pad_index(oy * c->sh - c->pt + ky * c->dh, g->in.h, c->pad_mode);
        float *d = dst + oy * ow;
        if (iy < 0) {
            memset(d, 0, (size_t)ow * sizeof *d);
            continue;
        }
        const float *src = plane + iy * w;
        if (c->pad_mode != KI_CONV_PAD_ZEROS) {
            for (int64_t ox = 0; ox < ow; ox++) {
                d[ox] = src[ki_conv_pad_index(ox * c->sw + off, w, c->pad_mode)];
            }
            continue;
        }
        memset(d, 0, (size_t)lo * sizeof *d);
        for (int64_t ox = lo; ox < hi; ox++) {
            d[ox] = src[ox * c->sw + off];
        }
        memset(d + hi, 0, (size_t)(ow - hi) * sizeof *d);
    }
}

/* Column matrix (cig*kh*kw) x (oh*ow) of one group; rows are independent, split over threads. */
static void im2col(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, float *restrict col,
                   int n_threads)
{
    int64_t khw = c->kh * c->kw, rows = c->in_ch / c->groups * khw;
    int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
#pragma omp parallel for num_threads(n_threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % khw;
        im2col_row(c, g, x + r / khw * hw, t / c->kw, t % c->kw, col + r * ohw);
    }
}

/* Per (image, group): Y[cog x ohw] = W[cog x K] * col[K x ohw], then the epilogue. OpenBLAS
 * threads the product itself, so it is called outside any parallel region. */
void ki_conv2d_forward_gemm(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col,
                            const float *in, float *restrict out, const ki_exec *ex)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups;
    int64_t k = cig * c->kh * c->kw, hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    float *col = ex->workspace;
    if (ohw == 0 || cog == 0) {
        return;
    }
    for (int64_t n = 0; n < g->in.n; n++) {
        for (int64_t gi = 0; gi < c->groups; gi++) {
            const float *x = in + (n * c->in_ch + gi * cig) * hw;
            float *y = out + (n * c->out_ch + gi * cog) * ohw;
            if (use_col) {
                im2col(c, g, x, col, ex->n_threads);
                x = col;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)cog, (int)ohw, (int)k, 1.0f,
                        c->weight + gi * cog * k, (int)k, x, (int)ohw, 0.0f, y, (int)ohw);
            for (int64_t oc = 0; oc < cog; oc++) {
                ki_cv_epilogue_plane(&c->ep, gi * cog + oc, y + oc * ohw, (size_t)ohw);
            }
        }
    }
}

/* One depthwise plane: accumulate each kernel tap over the output rows it reaches. */
static void dw_plane(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, const float *w,
                     float *restrict o)
{
    int64_t ow = g->ow;
    for (int64_t oy = 0; oy < g->oh; oy++) {
        float *d = o + oy * ow;
        memset(d, 0, (size_t)ow * sizeof *d);
        for (int64_t ky = 0; ky < c->kh; ky++) {
            int64_t iy = oy * c->sh - c->pt + ky * c->dh, lo, hi;
            for (int64_t kx = 0; kx < c->kw && iy >= 0 && iy < g->in.h; kx++) {
                int64_t off = kx * c->dw - c->pl;
                const float *src = x + iy * g->in.w;
                float wv = w[ky * c->kw + kx];
                valid_range(off, c->sw, g->in.w, ow, &lo, &hi);
                for (int64_t ox = lo; ox < hi; ox++) {
                    d[ox] += wv * src[ox * c->sw + off];
                }
            }
        }
    }
}

void ki_conv2d_forward_dw(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex)
{
    int64_t planes = g->in.n * c->in_ch, hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
    for (int64_t p = 0; p < planes; p++) {
        int64_t ch = p % c->in_ch;
        dw_plane(c, g, in + p * hw, c->weight + ch * c->kh * c->kw, out + p * ohw);
        ki_cv_epilogue_plane(&c->ep, ch, out + p * ohw, (size_t)ohw);
    }
}
