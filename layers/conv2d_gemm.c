/* conv2d_gemm.c - fast nn.Conv2d kernels: im2col straight into packed B panels + our SGEMM
 * (gemm.h), the 1x1 case that packs the input planes, and a direct depthwise kernel. Chosen by
 * ki_conv2d_pick (conv2d.c). */
#include <stdint.h>
#include <string.h>

#include "../core/team.h"
#include "conv2d.h"

/* Columns the 1x1 packing looks ahead: those of the next group of panels (up to 4 of NR), whose
 * input rows it asks the cache for while packing this one. The rows of the k input planes are
 * k read streams, more than the hardware prefetchers follow: without this, packing waited on
 * memory for half of a 64 -> 32 channel layer at 160x160 (2.5 -> 1.4 ms on one thread). */
#define PF_AHEAD (4 * KI_GEMM_NR)

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

/* d[0..len) = input row src (w columns) seen at output columns ox.. (zero padding): zeros
 * outside the valid range [lo, hi), a copy (stride 1) or a strided gather inside it. */
static void zero_pad_run(const ki_conv2d *c, const float *src, int64_t w, int64_t ox, int64_t len,
                         int64_t lo, int64_t hi, int64_t off, float *restrict d)
{
    int64_t a = lo > ox ? lo - ox : 0, b = hi - ox < len ? hi - ox : len, sw = c->sw;
    a = a < len ? a : len;
    b = b < a ? a : b;
    memset(d, 0, (size_t)a * sizeof *d);
    if (sw == 1) {
        memcpy(d + a, src + ox + a + off, (size_t)(b - a) * sizeof *d);
    } else if (sw == 2 && b > a) {
        /* gather2 also reads the odd column after the last one: keep that inside the row */
        int64_t n = (ox + b - 1) * 2 + off + 1 <= w - 1 ? b - a : b - a - 1;
        c->gather2(src + (ox + a) * 2 + off, d + a, n);
        for (int64_t i = a + n; i < b; i++) {
            d[i] = src[(ox + i) * 2 + off];
        }
    } else {
        for (int64_t i = a; i < b; i++) {
            d[i] = src[(ox + i) * sw + off];
        }
    }
    memset(d + b, 0, (size_t)(len - b) * sizeof *d);
}

void ki_conv2d_tap_row(const ki_conv2d *c, const float *src, int64_t w, int64_t off, int64_t len,
                       float *restrict d)
{
    int64_t lo, hi;
    valid_range(off, c->sw, w, len, &lo, &hi);
    zero_pad_run(c, src, w, 0, len, lo, hi, off, d);
}

/* Columns [j0, j0+nr) of the column-matrix row for input plane `plane` seen through kernel tap
 * (ky,kx), for the reflect / replicate / circular modes (zero padding: pack_zero_padded): output
 * pixels j0.. walked in runs along output rows. */
static void col_run(const ki_conv2d *c, const ki_conv2d_geom *g, const float *plane, int64_t ky,
                    int64_t kx, int64_t j0, int64_t nr, float *restrict d)
{
    int64_t ow = g->ow, oy = j0 / ow, ox = j0 % ow, off = kx * c->dw - c->pl;
    for (int64_t j = 0; j < nr; oy++, ox = 0) {
        int64_t len = nr - j < ow - ox ? nr - j : ow - ox;
        int64_t iy = ki_conv_pad_index(oy * c->sh - c->pt + ky * c->dh, g->in.h, c->pad_mode);
        const float *src = plane + (iy < 0 ? 0 : iy) * g->in.w;
        if (iy < 0) { /* not for these modes (shape() bounds the padding); kept as a guard */
            memset(d + j, 0, (size_t)len * sizeof *d);
        } else {
            for (int64_t i = 0; i < len; i++) {
                d[j + i] = src[ki_conv_pad_index((ox + i) * c->sw + off, g->in.w, c->pad_mode)];
            }
        }
        j += len;
    }
}

/* pack_panel with zero padding: rows walked as (channel, ky, kx) without divisions, each row's
 * nr columns (output pixels j0..) in runs along the output rows; a run whose columns all lie
 * inside the input row is one copy (stride 1) or one stride-2 gather, the rest zero_pad_run. */
static void pack_zero_padded(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                             int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst)
{
    int64_t hw = g->in.h * g->in.w, w = g->in.w, sw = c->sw, ow = g->ow, r = 0;
    for (int64_t ch = 0; r < k; ch++) {
        const float *plane = x + ch * hw;
        for (int64_t ky = 0; ky < c->kh; ky++) {
            for (int64_t kx = 0; kx < c->kw; kx++, r++) {
                float *d = dst + r * pw;
                int64_t off = kx * c->dw - c->pl, lo = -1, hi = -1;
                for (int64_t j = 0, oy = j0 / ow, ox = j0 % ow; j < nr; oy++, ox = 0) {
                    int64_t len = nr - j < ow - ox ? nr - j : ow - ox;
                    int64_t iy = oy * c->sh - c->pt + ky * c->dh;
                    int64_t first = ox * sw + off, last = first + (len - 1) * sw;
                    const float *src = plane + iy * w;
                    if (iy < 0 || iy >= g->in.h) {
                        memset(d + j, 0, (size_t)len * sizeof *d);
                    } else if (first >= 0 && sw == 1 && last < w && len == KI_GEMM_NR) {
                        memcpy(d + j, src + first, KI_GEMM_NR * sizeof *d); /* inlined */
                    } else if (first >= 0 && sw == 1 && last < w) {
                        memcpy(d + j, src + first, (size_t)len * sizeof *d);
                    } else if (first >= 0 && sw == 2 && last + 1 < w) {
                        c->gather2(src + first, d + j, len);
                    } else {
                        if (lo < 0) {
                            valid_range(off, sw, w, ow, &lo, &hi);
                        }
                        zero_pad_run(c, src, w, ox, len, lo, hi, off, d + j);
                    }
                    j += len;
                }
                memset(d + nr, 0, (size_t)(pw - nr) * sizeof *d);
            }
        }
    }
}

void ki_conv2d_pack_cols(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col, const float *x,
                         int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst)
{
    int64_t khw = c->kh * c->kw, hw = g->in.h * g->in.w;
    if (use_col && c->pack3s2) {
        const ki_conv2d_rows src = { x, hw, 0, g->in.h };
        c->pack3s2(c, g, &src, j0, nr, k, pw, dst);
        return;
    }
    if (use_col && c->pad_mode == KI_CONV_PAD_ZEROS) {
        pack_zero_padded(c, g, x, j0, nr, k, pw, dst);
        return;
    }
    for (int64_t r = 0; r < k; r++) {
        float *d = dst + r * pw;
        if (use_col) {
            int64_t t = r % khw;
            col_run(c, g, x + r / khw * hw, t / c->kw, t % c->kw, j0, nr, d);
        } else if (nr == KI_GEMM_NR) { /* a constant size: inlined, no library call per row */
            if (j0 + PF_AHEAD + KI_GEMM_NR <= hw) { /* to L2 */
                __builtin_prefetch(x + r * hw + j0 + PF_AHEAD, 0, 2);
                __builtin_prefetch(x + r * hw + j0 + PF_AHEAD + 16, 0, 2);
            }
            memcpy(d, x + r * hw + j0, KI_GEMM_NR * sizeof *d);
        } else {
            memcpy(d, x + r * hw + j0, (size_t)nr * sizeof *d);
        }
        if (pw > nr) { /* no library call per row for a full panel */
            memset(d + nr, 0, (size_t)(pw - nr) * sizeof *d);
        }
    }
}

/* Asks the cache (L2) for columns [j0, j0 + n) of the k rows of B at b (row stride ldb): the
 * next group's part of a 1x1 layer's input, read in place. The k rows are k read streams, more
 * than the hardware prefetchers follow. */
static void prefetch_cols(const float *b, int64_t ldb, int64_t k, int64_t j0, int64_t n)
{
    for (int64_t r = 0; r < k; r++) {
        for (int64_t q = 0; q < n; q += 16) {
            __builtin_prefetch(b + r * ldb + j0 + q, 0, 2);
        }
    }
}

/* Packs GEMM panel columns [j0, j0+NR) of B (k rows) into dst. */
static void pack_panel(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col, const float *x,
                       int64_t j0, int64_t k, float *restrict dst)
{
    int64_t n = g->oh * g->ow, nr = n - j0 < KI_GEMM_NR ? n - j0 : KI_GEMM_NR;
    ki_conv2d_pack_cols(c, g, use_col, x, j0, nr, k, KI_GEMM_NR, dst);
}

/* Panels p0..p0+cnt-1 packed into b (or read in place, ga->bin, but for a partial last panel)
 * and multiplied; the in-place columns of the ncnt panels from nx (the thread's next group; none
 * when ncnt is 0) asked for meanwhile. */
static void gemm_group_run(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col,
                           const float *x, const ki_gemm_args *ga, float *b, int64_t p0,
                           int64_t cnt, int64_t nx, int64_t ncnt)
{
    for (int64_t q = 0; q < cnt; q++) {
        if (!ga->bin || (p0 + q + 1) * KI_GEMM_NR > ga->n) {
            pack_panel(c, g, use_col, x, (p0 + q) * KI_GEMM_NR, ga->k, b + q * KI_GEMM_NR * ga->k);
        }
    }
    if (ga->bin && ncnt > 0) {
        prefetch_cols(ga->bin, ga->ldb, ga->k, nx * KI_GEMM_NR, ncnt * KI_GEMM_NR);
    }
    ki_gemm_panels(ga, p0, cnt, b);
}

/* Panels [p, end) of one (image, group) on this thread alone, grp at a time (gemm_group_run), each
 * group asking for the next one's in-place columns. */
static void gemm_panel_run(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col,
                           const float *x, const ki_gemm_args *ga, float *b, int64_t p, int64_t end,
                           int64_t grp)
{
    for (int64_t p0 = p; p0 < end; p0 += grp) {
        int64_t cnt = end - p0 < grp ? end - p0 : grp;
        int64_t ncnt = end - p0 - cnt < grp ? end - p0 - cnt : grp;
        gemm_group_run(c, g, use_col, x, ga, b, p0, cnt, p0 + cnt, ncnt);
    }
}

/* One (image, group) on thread p->tid. With enough panels each thread packs one panel at a time
 * into its own slice (L2-resident) and runs all its tiles; otherwise the team packs every panel
 * into one shared buffer and splits the tiles over rows as well (see ki_conv2d_gemm_private).
 * Starts and ends with the team together. */
static void gemm_group(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col, const float *x,
                       const ki_gemm_args *ga, const ki_exec *ex, const ki_part *pt)
{
    int64_t np = (ga->n + KI_GEMM_NR - 1) / KI_GEMM_NR;
    float *ws = ex->workspace;
    if (ki_conv2d_gemm_private(c, np, ex->n_threads)) {
        /* groups of up to grp panels: each thread its own run in order, then what is left of the
         * others' (ki_share) */
        const int64_t grp = ki_conv2d_gemm_group(np, ex->n_threads), ngr = (np + grp - 1) / grp;
        ki_share_begin(pt, ngr);
        float *b = ki_exec_slice(ex, pt->tid);
        for (int64_t q = ki_share_take(pt->share, pt->tid); q >= 0;
             q = ki_share_take(pt->share, pt->tid)) {
            const int64_t nq = ki_share_peek(pt->share, pt->tid), p0 = q * grp;
            const int64_t nx = nq * grp, ncnt = nq < 0 ? 0 : np - nx < grp ? np - nx : grp;
            gemm_group_run(c, g, use_col, x, ga, b, p0, np - p0 < grp ? np - p0 : grp, nx, ncnt);
        }
        return;
    }
    int64_t p0, p1;
    ki_part_range(np, pt, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        pack_panel(c, g, use_col, x, p * KI_GEMM_NR, ga->k, ws + p * KI_GEMM_NR * ga->k);
    }
    ki_part_sync(pt);
    ki_gemm_compute_shared(ga, pt);
}

/* Item it = (image n, group gi) of a batch or a grouped layer: its GEMM arguments. */
static ki_gemm_args gemm_item_args(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col,
                                   const float *in, float *out, int64_t it, const float **x)
{
    int64_t cig = c->in_ch / c->groups, cog = c->out_ch / c->groups, n = it / c->groups,
            gi = it % c->groups;
    int64_t k = cig * c->kh * c->kw, hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    ki_gemm_args ga = { .m = cog,
                        .n = ohw,
                        .k = k,
                        .a = c->weight + gi * cog * k,
                        .lda = k,
                        .c = out + (n * c->out_ch + gi * cog) * ohw,
                        .ldc = ohw,
                        .ep = &c->ep,
                        .epf = c->epf,
                        .ch0 = gi * cog,
                        .uk = c->uk,
                        .res = c->res ? c->res + (n * c->out_ch + gi * cog) * ohw : NULL };
    *x = in + (n * c->in_ch + gi * cig) * hw;
    if (!use_col && cog <= 3 * KI_GEMM_MR) { /* see ki_conv2d_forward_gemm */
        ga.bin = *x, ga.ldb = hw;
    }
    return ga;
}

/* Whole (image, group) items per thread (ki_conv2d_gemm_by_item), handed out as threads come
 * free, each packed KI_CONV2D_ITEM_GROUP panels at a time into the thread's own slice. */
static void gemm_items(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    const int64_t np = (g->oh * g->ow + KI_GEMM_NR - 1) / KI_GEMM_NR;
    float *b = ki_exec_slice(j->ex, pt->tid);
    ki_share_begin(pt, g->in.n * c->groups);
    for (int64_t it = ki_share_take(pt->share, pt->tid); it >= 0;
         it = ki_share_take(pt->share, pt->tid)) {
        const float *x;
        ki_gemm_args ga = gemm_item_args(c, g, j->use_col, j->in, j->out, it, &x);
        ga.bp = b;
        gemm_panel_run(c, g, j->use_col, x, &ga, b, 0, np, KI_CONV2D_ITEM_GROUP);
    }
}

/* Every (image, group) item in turn, the team on each (gemm_group). */
static void gemm_each_item(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    for (int64_t it = 0; it < j->g->in.n * j->c->groups; it++) {
        const float *x;
        ki_gemm_args ga = gemm_item_args(j->c, j->g, j->use_col, j->in, j->out, it, &x);
        ga.bp = j->ex->workspace;
        if (it > 0) {
            ki_part_sync(pt); /* the item before is done with the shared buffers */
        }
        gemm_group(j->c, j->g, j->use_col, x, &ga, j->ex, pt);
    }
}

/* Per (image, group): Y[cog x ohw] = W[cog x K] * col[K x ohw], the epilogue fused into the
 * tiles' last k block. The weight is used in place as A (row stride K). */
void ki_conv2d_forward_gemm(const ki_conv2d *c, const ki_conv2d_geom *g, bool use_col,
                            const float *in, float *restrict out, const ki_exec *ex)
{
    if (g->oh * g->ow == 0 || c->out_ch / c->groups == 0) {
        return;
    }
    ki_conv2d_job j = { c, g, in, out, ex, use_col };
    /* 1x1 into at most three row tiles: the input planes are B, read in place (a packed panel
     * would serve too few tiles to pay for its copy: mobilenet_v2's 32->16 at 112x112 0.26 ->
     * 0.19 ms, 144->24 at 56x56 0.34 -> 0.27 on one thread; with more tiles the packing's
     * streamed copy is faster: yolov5s's 64->32 at 160x160 1.07-1.21x slower in place on two
     * threads): gemm_item_args sets ga.bin then */
    ki_team_run(ex, ki_conv2d_gemm_by_item(c, g, ex->n_threads) ? gemm_items : gemm_each_item, &j);
}

/* Outputs of ki_conv2d_forward_dot per chunk: a thread's unit, finished by the epilogue at once
 * (a call per output cost as much as its dot product). The chunks are fixed whatever the thread
 * count, so each output's epilogue sees the same lanes. */
#define DOT_CHUNK 16
/* Multiply-adds below which the dot products run on one thread: waking the team costs more
 * (mobilenet_v3_small's 16 -> 8 excitation has 128). */
#define DOT_PAR_MIN ((int64_t)1 << 15)

/* A thread's chunks (OpenMP's static split). */
static void dot_body(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const int64_t k = c->in_ch, oc = c->out_ch, per = (oc + DOT_CHUNK - 1) / DOT_CHUNK;
    const ki_dot_fn dot = ki_dot_for(c->isa);
    /* the bias goes with each dot product, so the epilogue adds none */
    ki_cv_epilogue ep = c->ep;
    ep.bias = NULL;
    int64_t i0, i1;
    ki_part_range(j->g->in.n * per, pt, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        const int64_t n = i / per, o0 = i % per * DOT_CHUNK;
        const int64_t o1 = oc - o0 < DOT_CHUNK ? oc : o0 + DOT_CHUNK;
        const float *x = j->in + n * k;
        float *y = j->out + n * oc;
        for (int64_t o = o0; o < o1; o++) {
            y[o] = dot(c->weight + o * k, x, k) + (c->ep.bias ? c->ep.bias[o] : 0.0f);
        }
        c->epf(&ep, c->res ? c->res + n * oc + o0 : NULL, 0, y + o0, (size_t)(o1 - o0));
    }
}

void ki_conv2d_forward_dot(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out, const ki_exec *ex)
{
    const int64_t per = (c->out_ch + DOT_CHUNK - 1) / DOT_CHUNK, chunks = g->in.n * per;
    int64_t macs;
    const int nt = ki_ckd_mul_i64(&macs, chunks * DOT_CHUNK, c->in_ch) && macs >= DOT_PAR_MIN
                       ? ex->n_threads
                       : 1;
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run_n(ex, nt, dot_body, &j);
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

/* The AVX2 kernel indexes columns with 32-bit lanes. */
static bool ow_fits_i32(const ki_conv2d_geom *g, const ki_conv2d *c)
{
    return (g->ow + 8) * c->sw + c->kw * c->dw + c->pl < INT32_MAX;
}

#if KI_HAVE_X86
/* The plane with its zero padding around it and zeroed slack after it (see
 * ki_conv2d_dw_padded). */
static void pad_plane(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, float *xp,
                      int64_t floats)
{
    int64_t wp = g->in.w + c->pl + c->pr, top = c->pt * wp;
    memset(xp, 0, (size_t)top * sizeof *xp);
    for (int64_t y = 0; y < g->in.h; y++) {
        float *d = xp + top + y * wp;
        memset(d, 0, (size_t)c->pl * sizeof *d);
        memcpy(d + c->pl, x + y * g->in.w, (size_t)g->in.w * sizeof *d);
        memset(d + c->pl + g->in.w, 0, (size_t)c->pr * sizeof *d);
    }
    int64_t used = top + g->in.h * wp;
    memset(xp + used, 0, (size_t)(floats - used) * sizeof *xp);
}
#endif

/* The team's runs of planes (ki_share_begin_runs), each in one call of the kernel (the call's
 * setup, its masks and row checks, is paid per run, not per plane), whole groups of the kernel's
 * granule (ki_conv2d_dw_granule); epilogue at the store. */
static void dw_in_place_body(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const int64_t planes = j->g->in.n * j->c->in_ch, gran = ki_conv2d_dw_granule(j->c, j->g);
    const int64_t items = (planes + gran - 1) / gran, runs = ki_share_begin_runs(pt, items);
    for (int64_t q0, q1; ki_share_take_run(pt, items, runs, &q0, &q1);) {
        j->c->dw3_planes(j->c, j->g, j->in, q0 * gran, q1 * gran < planes ? q1 * gran : planes,
                         j->out);
    }
}

/* A thread's planes (OpenMP's static split), one at a time. */
static void dw_body(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    int64_t hw = g->in.h * g->in.w, ohw = g->oh * g->ow, floats, p0, p1;
    bool padded = ki_conv2d_dw_padded(c, g, &floats);
    bool simd = !padded && c->dw_avx2 && g->in.w <= INT32_MAX / 2 && ow_fits_i32(g, c);
    (void)simd; /* read only where the x86 kernels are built */
    ki_part_range(g->in.n * c->in_ch, pt, &p0, &p1);
    for (int64_t p = p0; p < p1; p++) {
        int64_t ch = p % c->in_ch;
        const float *w = c->weight + ch * c->kh * c->kw;
        const float *res = c->res ? c->res + p * ohw : NULL;
#if KI_HAVE_X86 /* padded and simd need the AVX2 kernels (c->dw_avx2) */
        if (padded) {
            float *xp = ki_exec_slice(j->ex, pt->tid);
            pad_plane(c, g, j->in + p * hw, xp, floats);
            if (ki_conv2d_dw_plane_padded_avx2(c, g, xp, ch, res, j->out + p * ohw)) {
                continue; /* epilogue applied at the store */
            }
        } else if (simd) {
            ki_conv2d_dw_plane_avx2(c, g, j->in + p * hw, w, j->out + p * ohw);
        } else
#endif
        {
            dw_plane(c, g, j->in + p * hw, w, j->out + p * ohw);
        }
        c->epf(&c->ep, res, ch, j->out + p * ohw, (size_t)ohw);
    }
}

void ki_conv2d_forward_dw(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex)
{
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, ki_conv2d_dw_in_place(c) ? dw_in_place_body : dw_body, &j);
}
