/* conv2d_direct_avx512.c - the direct path for convolutions with few input channels (a network's
 * stem: 3 channels, 3x3 or 6x6, stride 2), where im2col would gather a column matrix as large as
 * the output for a short k. Each output row is computed in blocks of sixteen output channels by
 * sixteen columns: for every kernel tap the sixteen input columns it reads are one vector (masked
 * to the row, so the padding is never materialised; at stride 2 the even or odd lanes of a
 * 32-column window), multiplied into sixteen accumulators by the taps' weights, which are
 * repacked per run as [block][tap][16]. Taps are summed in the order (input channel, ky, kx), as
 * the reference does. The epilogue is applied in registers for clamp-type activations, otherwise
 * after the row is stored. Compiled with -mavx512f; chosen only when the CPU has it
 * (ki_conv2d_set_isa). */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx512.h"

#define OC_BLOCK 16

bool ki_conv2d_direct_shape_ok(const ki_conv2d *c)
{
    return c->groups == 1 && c->in_ch <= KI_DIRECT_MAX_IN && c->dh == 1 && c->dw == 1 &&
           c->pad_mode == KI_CONV_PAD_ZEROS && c->sh == c->sw && (c->sw == 1 || c->sw == 2) &&
           c->kh <= KI_DIRECT_MAX_K && c->kw <= KI_DIRECT_MAX_K;
}

size_t ki_conv2d_direct_workspace(const ki_conv2d *c)
{
    int64_t blocks = (c->out_ch + OC_BLOCK - 1) / OC_BLOCK, n;
    size_t bytes;
    if (!ki_ckd_mul_i64(&n, blocks * OC_BLOCK, c->in_ch * c->kh * c->kw) ||
        !ki_ckd_mul(&bytes, (size_t)n, sizeof(float))) {
        return 0;
    }
    return bytes;
}

/* wp[block][tap][16] = the weight of output channel block*16 + o at tap (ic, ky, kx); zero past
 * out_ch. */
static void pack_weights(const ki_conv2d *c, float *restrict wp)
{
    int64_t k = c->in_ch * c->kh * c->kw, blocks = (c->out_ch + OC_BLOCK - 1) / OC_BLOCK;
    for (int64_t b = 0; b < blocks; b++) {
        for (int64_t t = 0; t < k; t++) {
            for (int64_t o = 0; o < OC_BLOCK; o++) {
                int64_t oc = b * OC_BLOCK + o;
                wp[(b * k + t) * OC_BLOCK + o] = oc < c->out_ch ? c->weight[oc * k + t] : 0.0f;
            }
        }
    }
}

/* a_o += w[o] * v for the sixteen channels of a block (named accumulators: GCC keeps an array of
 * them in memory across the loops). */
#define TAP16(v, w)                                                                                \
    do {                                                                                           \
        const float *w_ = (w);                                                                     \
        const __m512 v_ = (v);                                                                     \
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(w_[0]), v_, a0);                                       \
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(w_[1]), v_, a1);                                       \
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(w_[2]), v_, a2);                                       \
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(w_[3]), v_, a3);                                       \
        a4 = _mm512_fmadd_ps(_mm512_set1_ps(w_[4]), v_, a4);                                       \
        a5 = _mm512_fmadd_ps(_mm512_set1_ps(w_[5]), v_, a5);                                       \
        a6 = _mm512_fmadd_ps(_mm512_set1_ps(w_[6]), v_, a6);                                       \
        a7 = _mm512_fmadd_ps(_mm512_set1_ps(w_[7]), v_, a7);                                       \
        a8 = _mm512_fmadd_ps(_mm512_set1_ps(w_[8]), v_, a8);                                       \
        a9 = _mm512_fmadd_ps(_mm512_set1_ps(w_[9]), v_, a9);                                       \
        a10 = _mm512_fmadd_ps(_mm512_set1_ps(w_[10]), v_, a10);                                    \
        a11 = _mm512_fmadd_ps(_mm512_set1_ps(w_[11]), v_, a11);                                    \
        a12 = _mm512_fmadd_ps(_mm512_set1_ps(w_[12]), v_, a12);                                    \
        a13 = _mm512_fmadd_ps(_mm512_set1_ps(w_[13]), v_, a13);                                    \
        a14 = _mm512_fmadd_ps(_mm512_set1_ps(w_[14]), v_, a14);                                    \
        a15 = _mm512_fmadd_ps(_mm512_set1_ps(w_[15]), v_, a15);                                    \
    } while (0)

/* One block: sixteen output channels (weights wb) by the sixteen columns ox.. of output row oy of
 * image x, into acc. */
static inline __attribute__((always_inline)) void
block(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t oy, int64_t ox,
      const float *wb, const int s, __m512 acc[OC_BLOCK], const int64_t kw, const bool inner)
{
    const int64_t h = g->in.h, w = g->in.w, kh = c->kh, b = ox * s - c->pl;
    const __m512i even = ki_even_idx(), odd = ki_odd_idx();
    __mmask16 m[2 * (KI_DIRECT_MAX_K + 1)];
    /* stride 2 reads one window past kx = kw - 1; an inner block needs no masks */
    for (int64_t kx = 0; kx < kw + 1 && !inner; kx++) {
        m[2 * kx] = (__mmask16)ki_lane_mask16(b + kx, w);
        m[2 * kx + 1] = (__mmask16)ki_lane_mask16(b + kx + 16, w);
    }
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    __m512 a8 = a0, a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    for (int64_t ic = 0; ic < c->in_ch; ic++) {
        for (int64_t ky = 0; ky < kh; ky++) {
            const int64_t iy = oy * s - c->pt + ky;
            const float *wt = wb + (ic * kh + ky) * kw * OC_BLOCK;
            if (iy < 0 || iy >= h) {
                continue; /* a zero row of the padding */
            }
            const float *r = x + (ic * h + iy) * w;
            if (s == 1) {
                for (int64_t kx = 0; kx < kw; kx++) {
                    const __m512 v =
                        inner ? _mm512_loadu_ps(r + b + kx)
                              : _mm512_maskz_loadu_ps(m[2 * kx], m[2 * kx] ? r + b + kx : r);
                    TAP16(v, wt + kx * OC_BLOCK);
                }
                continue;
            }
            for (int64_t kx = 0; kx < kw; kx += 2) {
                const __mmask16 ml = m[2 * kx], mh = m[2 * kx + 1];
                const __m512 lo = inner ? _mm512_loadu_ps(r + b + kx)
                                        : _mm512_maskz_loadu_ps(ml, ml ? r + b + kx : r);
                const __m512 hi = inner ? _mm512_loadu_ps(r + b + kx + 16)
                                        : _mm512_maskz_loadu_ps(mh, mh ? r + b + kx + 16 : r);
                const __m512 ve = _mm512_permutex2var_ps(lo, even, hi);
                TAP16(ve, wt + kx * OC_BLOCK);
                if (kx + 1 < kw) {
                    const __m512 vo = _mm512_permutex2var_ps(lo, odd, hi);
                    TAP16(vo, wt + (kx + 1) * OC_BLOCK);
                }
            }
        }
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6;
    acc[7] = a7, acc[8] = a8, acc[9] = a9, acc[10] = a10, acc[11] = a11, acc[12] = a12;
    acc[13] = a13, acc[14] = a14, acc[15] = a15;
}

/* block() with the stride and, for the common widths, the kernel width as constants (the taps
 * unrolled), and without masks when every column the block reads lies inside the input row
 * (stride 2 reads 32 columns from each even tap, stride 1 sixteen from each tap). */
#define BLOCK_KW(S, KW)                                                                            \
    do {                                                                                           \
        if (inner) {                                                                               \
            block(c, g, x, oy, ox, wb, S, acc, KW, true);                                          \
        } else {                                                                                   \
            block(c, g, x, oy, ox, wb, S, acc, KW, false);                                         \
        }                                                                                          \
    } while (0)

static void blocks(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t oy,
                   int64_t ox, const float *wb, __m512 acc[OC_BLOCK])
{
    const int64_t s = c->sw, b = ox * s - c->pl, kw = c->kw;
    const bool inner = b >= 0 && b + kw + (s == 2 ? 31 : 15) <= g->in.w;
    if (s == 2 && kw == 3) {
        BLOCK_KW(2, 3);
    } else if (s == 2 && kw == 6) {
        BLOCK_KW(2, 6);
    } else if (s == 2 && kw == 7) {
        BLOCK_KW(2, 7);
    } else if (s == 2) {
        BLOCK_KW(2, kw);
    } else {
        BLOCK_KW(1, kw);
    }
}

/* Output row oy of image n for every channel block: channel oc's row at dst + oc * cstride (its
 * residual row, if any, at res + oc * cstride). */
static void row(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, const float *wp,
                int64_t n, int64_t oy, float *restrict dst, const float *res, int64_t cstride)
{
    const int64_t ow = g->ow, k = c->in_ch * c->kh * c->kw;
    const float *x = in + n * c->in_ch * g->in.h * g->in.w;
    ki_gemm_fin f;
    const bool in_regs = ki_gemm_fin_of(&c->ep, 0, NULL, &f);
    const __m512 lo = _mm512_set1_ps(f.lo), hi = _mm512_set1_ps(f.hi);
    for (int64_t ox = 0; ox < ow; ox += 16) {
        const __mmask16 mo = (__mmask16)ki_lane_mask16(0, ow - ox);
        for (int64_t oc0 = 0; oc0 < c->out_ch; oc0 += OC_BLOCK) {
            const int64_t noc = c->out_ch - oc0 < OC_BLOCK ? c->out_ch - oc0 : OC_BLOCK;
            const float *wb = wp + oc0 * k;
            __m512 acc[OC_BLOCK];
            blocks(c, g, x, oy, ox, wb, acc);
            for (int64_t o = 0; o < noc; o++) {
                const int64_t at = (oc0 + o) * cstride + ox;
                if (in_regs) {
                    const __m512 vb = _mm512_set1_ps(c->ep.bias ? c->ep.bias[oc0 + o] : 0.0f);
                    ki_store16_fin(dst + at, mo, _mm512_add_ps(acc[o], vb), res ? res + at : NULL,
                                   lo, hi);
                } else {
                    _mm512_mask_storeu_ps(dst + at, mo, acc[o]);
                }
            }
        }
    }
    if (!in_regs) {
        for (int64_t oc = 0; oc < c->out_ch; oc++) {
            const int64_t at = oc * cstride;
            c->epf(&c->ep, res ? res + at : NULL, oc, dst + at, (size_t)ow);
        }
    }
}

void ki_conv2d_forward_direct(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex)
{
    float *wp = ex->workspace; /* read by broadcasts: no alignment needed */
    pack_weights(c, wp);
    const int64_t rows = g->in.n * g->oh, ohw = g->oh * g->ow;
    const bool big_out = rows * c->out_ch * g->ow >= KI_CV_PREFETCH_OUT_MIN;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t n = r / g->oh, oy = r % g->oh, at = (n * c->out_ch * g->oh + oy) * g->ow;
        if (big_out && r + 1 < rows) { /* the next row of every channel */
            const int64_t n1 = (r + 1) / g->oh, oy1 = (r + 1) % g->oh;
            const float *q = out + (n1 * c->out_ch * g->oh + oy1) * g->ow;
            for (int64_t oc = 0; oc < c->out_ch; oc++) {
                ki_cv_prefetch_out(q + oc * ohw, g->ow);
            }
        }
        row(c, g, in, wp, n, oy, out + at, c->res ? c->res + at : NULL, ohw);
    }
}

void ki_conv2d_direct_pack(const ki_conv2d *c, float *restrict wp)
{
    pack_weights(c, wp);
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

int64_t ki_conv2d_pool_dim(int64_t n)
{
    return n < 1 ? 0 : (n - 1) / 2 + 1; /* (n + 2 * 1 - 3) / 2 + 1, floor mode */
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
    const int64_t oh = g->oh, ow = g->ow, ph = ki_conv2d_pool_dim(oh), pw = ki_conv2d_pool_dim(ow);
    const int64_t cstride = (2 * POOL_BAND + 1) * ow;
    const int64_t n = b / per, py0 = b % per * POOL_BAND;
    const int64_t py1 = ph - py0 < POOL_BAND ? ph : py0 + POOL_BAND;
    const int64_t r0 = py0 > 0 ? 2 * py0 - 1 : 0;
    const int64_t r1 = 2 * py1 < oh ? 2 * py1 : oh; /* rows r0 .. r1 - 1 */
    if (carry) { /* row r0 sat at r0 minus the band before's first row */
        const int64_t q0 = py0 - POOL_BAND, at = (r0 - (q0 > 0 ? 2 * q0 - 1 : 0)) * ow;
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
        /* output row py0 + i reads band rows 2 * i + ky - (r0 - 2 * py0 + 1), ky < 3 */
        if (ki_pool_max_s2_avx512(src, r1 - r0, ow, dst, py1 - py0, pw, 3, 3, 2, r0 - 2 * py0 + 1,
                                  1)) {
            ki_pool_max_s2_ref(src, r1 - r0, ow, dst, py1 - py0, pw, 3, 3, 2, r0 - 2 * py0 + 1, 1);
        }
    }
}

void ki_conv2d_forward_direct_pool(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                   float *restrict out, const ki_exec *ex)
{
    size_t wbytes, total;
    if (!pool_sizes(c, g, &wbytes, &total)) {
        return; /* conv_forward checked the workspace */
    }
    float *wp = ex->workspace;
    pack_weights(c, wp);
    const int64_t per = (ki_conv2d_pool_dim(g->oh) + POOL_BAND - 1) / POOL_BAND;
    const int64_t bands = g->in.n * per;
#pragma omp parallel num_threads(ex->n_threads)
    {
        float *buf = (float *)((char *)ex->workspace +
                               (size_t)omp_get_thread_num() * ex->ws_per_thread + wbytes);
        int64_t prev = -1; /* the band this thread did last */
#pragma omp for schedule(static)
        for (int64_t b = 0; b < bands; b++) {
            pool_band(c, g, in, wp, b, per, buf, prev == b - 1 && b % per != 0, out);
            prev = b;
        }
    }
}
