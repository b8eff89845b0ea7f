/* conv2d_direct.c - the direct path for convolutions with few input channels (a network's stem:
 * 3 channels, 3x3 to 7x7, stride 2), where im2col would gather a column matrix as large as the
 * output for a short k. The weights are repacked per run as [block][tap][KI_DIRECT_OC]; output
 * rows are computed one at a time for every channel by the row kernel of the CPU's level
 * (c->direct_row: conv2d_direct_avx512.c, conv2d_direct_avx2.c, or the plain C one here), which
 * sums the taps in the order (input channel, ky, kx), as the reference does, and applies the
 * epilogue in registers for clamp-type activations and, in the AVX2 and AVX-512 kernels, for
 * the cheap others (ki_conv2d_direct_act_ok); the rest are applied here after the row is stored.
 * The fused max pool (c->pool) computes bands of rows into the thread's slice of the workspace and
 * pools them with c->direct_pool. Compiled without ISA flags; thread-safe. */
#include <string.h>

#include "../core/team.h"
#include "conv2d.h"
#include "conv_common.h"

bool ki_conv2d_direct_shape_ok(const ki_conv2d *c)
{
    return c->groups == 1 && c->in_ch <= KI_DIRECT_MAX_IN && c->dh == 1 && c->dw == 1 &&
           c->pad_mode == KI_CONV_PAD_ZEROS && c->sh == c->sw && (c->sw == 1 || c->sw == 2) &&
           c->kh <= KI_DIRECT_MAX_K && c->kw <= KI_DIRECT_MAX_K;
}

size_t ki_conv2d_direct_workspace(const ki_conv2d *c)
{
    int64_t blocks = (c->out_ch + KI_DIRECT_OC - 1) / KI_DIRECT_OC, n;
    size_t bytes;
    if (!ki_ckd_mul_i64(&n, blocks * KI_DIRECT_OC, c->in_ch * c->kh * c->kw) ||
        !ki_ckd_mul(&bytes, (size_t)n, sizeof(float))) {
        return 0;
    }
    return bytes;
}

/* wp[block][tap][16] = the weight of output channel block*16 + o at tap (ic, ky, kx); zero past
 * out_ch. */
void ki_conv2d_direct_pack(const ki_conv2d *c, float *restrict wp)
{
    const int64_t k = c->in_ch * c->kh * c->kw;
    const int64_t blocks = (c->out_ch + KI_DIRECT_OC - 1) / KI_DIRECT_OC;
    for (int64_t b = 0; b < blocks; b++) {
        for (int64_t t = 0; t < k; t++) {
            for (int64_t o = 0; o < KI_DIRECT_OC; o++) {
                int64_t oc = b * KI_DIRECT_OC + o;
                wp[(b * k + t) * KI_DIRECT_OC + o] = oc < c->out_ch ? c->weight[oc * k + t] : 0.0f;
            }
        }
    }
}

/* One output value of channel oc at column ox of row oy, from its packed weights wo (tap t at
 * wo[t * KI_DIRECT_OC]); the padding skipped. */
static float dot_ref(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, const float *wo,
                     int64_t oy, int64_t ox)
{
    const int64_t h = g->in.h, w = g->in.w, s = c->sw;
    float acc = 0.0f;
    for (int64_t ic = 0; ic < c->in_ch; ic++) {
        for (int64_t ky = 0; ky < c->kh; ky++) {
            const int64_t iy = oy * s - c->pt + ky, t0 = (ic * c->kh + ky) * c->kw;
            for (int64_t kx = 0; kx < c->kw && iy >= 0 && iy < h; kx++) {
                const int64_t ix = ox * s - c->pl + kx;
                if (ix >= 0 && ix < w) {
                    acc += wo[(t0 + kx) * KI_DIRECT_OC] * x[(ic * h + iy) * w + ix];
                }
            }
        }
    }
    return acc;
}

void ki_conv2d_direct_row_ref(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                              const float *wp, int64_t oy, const ki_conv2d_direct_dst *d)
{
    const int64_t k = c->in_ch * c->kh * c->kw;
    for (int64_t oc = 0; oc < c->out_ch; oc++) {
        const float *wo = wp + oc / KI_DIRECT_OC * k * KI_DIRECT_OC + oc % KI_DIRECT_OC;
        const float b = d->fin && d->fin->bias ? d->fin->bias[oc] : 0.0f;
        for (int64_t ox = 0; ox < g->ow; ox++) {
            const int64_t at = oc * d->cstride + ox;
            float v = dot_ref(c, g, x, wo, oy, ox);
            if (d->fin) { /* as the vector kernels: + bias, + residual, max(lo, v), min(hi, v) */
                v += b;
                v = d->res ? v + d->res[at] : v;
                v = v < d->fin->lo ? d->fin->lo : v; /* a NaN v stays */
                v = v > d->fin->hi ? d->fin->hi : v;
            }
            d->dst[at] = v;
        }
    }
}

/* Output row oy of image n for every channel: channel oc's row at dst + oc * cstride (its
 * residual row, if any, at res + oc * cstride). */
static void row(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, const float *wp,
                int64_t n, int64_t oy, float *restrict dst, const float *res, int64_t cstride)
{
    const float *x = in + n * c->in_ch * g->in.h * g->in.w;
    ki_gemm_fin f; /* without a clamp: lo, hi = -inf, inf */
    const bool clamp = ki_gemm_fin_of(&c->ep, 0, NULL, &f);
    const bool act = !clamp && ki_conv2d_direct_act_ok(c);
    const ki_conv2d_direct_dst d = { dst, res, cstride, clamp || act ? &f : NULL,
                                     act ? &c->ep.act : NULL };
    c->direct_row(c, g, x, wp, oy, &d);
    if (!clamp && !act) {
        for (int64_t oc = 0; oc < c->out_ch; oc++) {
            const int64_t at = oc * cstride;
            c->epf(&c->ep, res ? res + at : NULL, oc, dst + at, (size_t)g->ow);
        }
    }
}

/* The team's rows: each thread its share from the front, then what is left of the others' from
 * their back (ki_share: a thread that runs slower, another process on its core, leaves its last
 * rows to the others), after packing the weights into its own workspace. */
static void direct_body(void *arg, const ki_part *p)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    float *out = j->out;
    /* read by broadcasts: no alignment needed; each thread its own copy */
    float *wp = ki_exec_slice(j->ex, p->tid);
    ki_conv2d_direct_pack(c, wp);
    const int64_t rows = g->in.n * g->oh, ohw = g->oh * g->ow;
    const bool big_out = rows * c->out_ch * g->ow >= ki_cv_prefetch_out_min();
    ki_share_begin(p, rows);
    for (int64_t r = ki_share_take(p->share, p->tid); r >= 0; r = ki_share_take(p->share, p->tid)) {
        const int64_t n = r / g->oh, oy = r % g->oh, at = (n * c->out_ch * g->oh + oy) * g->ow;
        const int64_t r1 = ki_share_peek(p->share, p->tid); /* this thread's next row */
        if (big_out && r1 >= 0) {                           /* its row of every channel */
            const float *q = out + (r1 / g->oh * c->out_ch * g->oh + r1 % g->oh) * g->ow;
            for (int64_t oc = 0; oc < c->out_ch; oc++) {
                ki_cv_prefetch_out(q + oc * ohw, g->ow);
            }
        }
        row(c, g, j->in, wp, n, oy, out + at, c->res ? c->res + at : NULL, ohw);
    }
}

void ki_conv2d_forward_direct(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex)
{
    if (ki_conv2d_s2d_on(c, g->ow)) {
        ki_conv2d_forward_s2d(c, g, in, out, ex);
        return;
    }
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, direct_body, &j);
}

void ki_conv2d_direct_rows(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           const float *wp, int64_t n, int64_t r0, int64_t r1, float *restrict dst,
                           int64_t cstride)
{
    for (int64_t r = r0; r < r1; r++) {
        row(c, g, in, wp, n, r, dst + (r - r0) * g->ow, NULL, cstride);
    }
}

/* Pooled rows per band of the fused max pool: its 2 * 4 + 1 convolution rows of 64 channels of
 * 112 columns (resnet's stem) take 258 KB of L2. */
#define POOL_BAND 4

int64_t ki_conv2d_pool_dim(const ki_conv2d *c, int64_t n)
{
    const int64_t o = n < 1 ? 0 : ki_cv_pool_out(n, 3, c->pool_pad, 2, 1, c->pool_ceil);
    return o > 0 ? o : 0;
}

/* The packed weights, then a band: (2 * POOL_BAND + 1) rows of every channel. */
static bool pool_sizes(const ki_conv2d *c, const ki_conv2d_geom *g, size_t *wbytes, size_t *total)
{
    size_t band;
    *wbytes = (ki_conv2d_direct_workspace(c) + 63) / 64 * 64;
    return *wbytes > 0 && ki_ckd_mul(&band, (size_t)c->out_ch, (size_t)(2 * POOL_BAND + 1)) &&
           ki_ckd_mul(&band, band, (size_t)g->ow) && ki_ckd_mul(&band, band, sizeof(float)) &&
           ki_ckd_add(total, *wbytes, band);
}

size_t ki_conv2d_direct_pool_workspace(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    size_t w, total;
    return pool_sizes(c, g, &w, &total) ? (total + 63) / 64 * 64 : 0;
}

/* Band b of the pool's output rows (per bands an image): the convolution's rows it reads into
 * buf (the first one copied from the band before when `carry`, as this thread did that band
 * and its last row is this band's first), then each channel pooled into out. */
static void pool_band(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, const float *wp,
                      int64_t b, int64_t per, float *buf, bool carry, float *restrict out)
{
    const int64_t oh = g->oh, ow = g->ow, pad = c->pool_pad;
    const int64_t ph = ki_conv2d_pool_dim(c, oh), pw = ki_conv2d_pool_dim(c, ow);
    const int64_t cstride = (2 * POOL_BAND + 1) * ow;
    const int64_t n = b / per, py0 = b % per * POOL_BAND;
    const int64_t py1 = ph - py0 < POOL_BAND ? ph : py0 + POOL_BAND;
    /* pooled row py reads the convolution's rows 2 * py - pad + ky, ky < 3, inside [0, oh) */
    const int64_t r0 = 2 * py0 - pad > 0 ? 2 * py0 - pad : 0;
    const int64_t r1 = 2 * py1 - pad + 1 < oh ? 2 * py1 - pad + 1 : oh; /* rows r0 .. r1 - 1 */
    if (carry) { /* row r0 (the band before's last) sat at r0 minus the band before's first row */
        const int64_t q0 = py0 - POOL_BAND, at = (r0 - (2 * q0 - pad > 0 ? 2 * q0 - pad : 0)) * ow;
        for (int64_t oc = 0; oc < c->out_ch; oc++) {
            memcpy(buf + oc * cstride, buf + oc * cstride + at, (size_t)ow * sizeof(float));
        }
    }
    for (int64_t r = carry ? r0 + 1 : r0; r < r1; r++) {
        row(c, g, in, wp, n, r, buf + (r - r0) * ow, NULL, cstride);
    }
    for (int64_t oc = 0; oc < c->out_ch; oc++) {
        const float *src = buf + oc * cstride;
        float *dst = out + ((n * c->out_ch + oc) * ph + py0) * pw;
        /* output row py0 + i reads band rows 2 * i + ky - (r0 - 2 * py0 + pad), ky < 3 */
        const int64_t top = r0 - 2 * py0 + pad;
        if (c->direct_pool(src, r1 - r0, ow, dst, py1 - py0, pw, 3, 3, 2, top, pad)) {
            ki_pool_max_s2_ref(src, r1 - r0, ow, dst, py1 - py0, pw, 3, 3, 2, top, pad);
        }
    }
}

/* The team's bands as direct_body shares its rows (ki_share), the packed weights in each
 * thread's own workspace. */
static void direct_pool_body(void *arg, const ki_part *p)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    size_t wbytes, total;
    if (!pool_sizes(c, g, &wbytes, &total)) {
        return; /* conv_forward checked the workspace */
    }
    float *wp = ki_exec_slice(j->ex, p->tid);
    float *buf = (float *)((char *)wp + wbytes);
    ki_conv2d_direct_pack(c, wp);
    const int64_t per = (ki_conv2d_pool_dim(c, g->oh) + POOL_BAND - 1) / POOL_BAND;
    ki_share_begin(p, g->in.n * per);
    int64_t prev = -1; /* the band this thread did last: its last rows are in buf */
    for (int64_t b = ki_share_take(p->share, p->tid); b >= 0; b = ki_share_take(p->share, p->tid)) {
        pool_band(c, g, j->in, wp, b, per, buf, prev == b - 1 && b % per != 0, j->out);
        prev = b;
    }
}

void ki_conv2d_forward_direct_pool(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                   float *restrict out, const ki_exec *ex)
{
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, direct_pool_body, &j);
}
