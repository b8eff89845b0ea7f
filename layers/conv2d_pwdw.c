/* conv2d_pwdw.c - a 1x1 convolution and the 3x3 or 5x5 depthwise convolution after it (mobilenet's
 * inverted residual blocks: the expansion, its activation, the depthwise layer), a band of rows at
 * a time; the same for a stem on the direct path and the depthwise layer after it, and for either
 * and a dense 3x3 stride-2 layer after it (yolov5s's stem and 32 -> 64 layer: dense_band). On its
 * own the expansion writes its whole output (mobilenet_v2's 16 -> 96 at 112 x 112: 4.8 MB) to L3 or
 * memory and the depthwise layer reads it straight back; here each thread computes the expansion's
 * rows that a band of the depthwise layer's output rows reads into its slice of the workspace (a
 * few hundred KB, in L2), runs the depthwise kernel on them there, and keeps the band's last rows
 * for the next band (they are its first). The expanded tensor never exists whole.
 *
 * The first layer runs the same GEMM tiles (or direct-path rows) as on its own (the same
 * operations per value) and the depthwise kernel the same blocks, so the results equal the two
 * layers' bit for bit. Taken by nn.Conv2d's fuse() (conv2d.c) when the CPU has a depthwise band
 * kernel (c->dw3_band: AVX2 or AVX-512). Also here, being plain C that generic code calls, the
 * shape test of those kernels (ki_conv2d_dw3_ok). */
#include <string.h>

#include "../core/team.h"
#include "conv2d.h"

bool ki_conv2d_act_in_regs(const ki_cv_epilogue *ep)
{
    ki_gemm_fin f;
    const ki_act_kind k = ep->act.kind;
    return ki_gemm_fin_of(ep, 0, NULL, &f) ||
           (!ep->res_after && (k == KI_ACT_LEAKY_RELU || k == KI_ACT_HARDSWISH ||
                               k == KI_ACT_HARDSIGMOID || k == KI_ACT_SILU || k == KI_ACT_SIGMOID));
}

bool ki_conv2d_dw3_ok(const ki_conv2d *c)
{
    const int64_t s = c->sw, k = c->kh;
    return (k == 3 || k == 5) && c->kw == k && c->sh == s && (s == 1 || s == 2) && c->dh == 1 &&
           c->dw == 1 && c->pad_mode == KI_CONV_PAD_ZEROS && ki_conv2d_act_in_regs(&c->ep);
}

void ki_conv2d_pack_eo_ref(const float *x, int64_t ldb, int64_t w, int64_t j0, int64_t nr,
                           int64_t k, float *restrict dst)
{
    const int64_t np = (nr + KI_GEMM_NR - 1) / KI_GEMM_NR;
    for (int64_t q = 0; q < np; q++) {
        for (int64_t r = 0; r < k; r++) {
            for (int64_t i = 0; i < KI_GEMM_NR; i++) {
                const int64_t j = q * KI_GEMM_NR + i;
                dst[(q * k + r) * KI_GEMM_NR + i] =
                    j < nr ? x[r * ldb + ki_conv2d_eo_src(j0 + j, w)] : 0.0f;
            }
        }
    }
}

/* Bytes a band's expanded rows may take: with the band's input and output it stays in L2. */
#define PWDW_BAND_BYTES ((int64_t)ki_cpu_get()->l2 * 3 / 8) /* 384 KiB of a 1 MiB L2 */

/* Panels multiplied together: their B (k rows of 4 x 32 floats) stays in L1 while every row tile
 * of the 1x1 layer's weights runs over it (in place, B's rows are k streams of a band that is
 * larger than L1). */
#define PWDW_GROUP 4
_Static_assert(PWDW_GROUP <= KI_PACK_EO_PANELS, "a group's panels packed in one call");

/* A thread's band: up to `band` output rows of the depthwise layer (a multiple of 4), which read
 * up to `cap` of its input rows, each channel's rows `cstride` floats apart in the buffer. */
typedef struct pwdw_plan {
    int64_t band, cap, cstride;
    bool eo; /* the rows in the even / odd order (ki_conv2d_pwdw_eo) */
    size_t buf_bytes; /* the band buffer */
    size_t pack2;     /* then the first layer's panel slots or packed weights, from buf_bytes */
    size_t total;     /* and a dense second layer's PWDW_GROUP packed panels, from pack2 */
    size_t pack3;     /* then a projection's panel slots (c->pjf), from total */
    size_t end;
} pwdw_plan;

bool ki_conv2d_pwdw_dense_fits(const ki_conv2d *d)
{
    int64_t bytes;
    return ki_ckd_mul_i64(&bytes, d->in_ch * d->kh * d->kw,
                          (d->out_ch + PWDW_GROUP * KI_GEMM_NR) * (int64_t)sizeof(float)) &&
           bytes <= (int64_t)ki_cpu_get()->l2 / 2;
}

/* Input rows that `rows` output rows of the depthwise layer d read, at most h. */
static int64_t rows_read(const ki_conv2d *d, int64_t rows, int64_t h)
{
    int64_t n = (rows - 1) * d->sh + d->kh;
    return n < h ? n : h;
}

static bool plan_of(const ki_conv2d *c, const ki_conv2d_geom *dg, pwdw_plan *p)
{
    const ki_conv2d *d = c->dwf;
    const int64_t w = dg->in.w, h = dg->in.h, ch = c->out_ch;
    int64_t row_bytes, cs;
    size_t pack;
    if (!ki_ckd_mul_i64(&row_bytes, ch * (int64_t)sizeof(float), w)) {
        return false;
    }
    p->band = 4;
    while (p->band < dg->oh && rows_read(d, p->band + 4, h) * row_bytes <= PWDW_BAND_BYTES) {
        p->band += 4;
    }
    p->cap = rows_read(d, p->band, h);
    p->eo = ki_conv2d_pwdw_eo(c, dg);
    /* channels a whole number of pages apart would put the GEMM tile's eight rows in one L1 set */
    if (!ki_ckd_mul_i64(&cs, p->cap, w) || !ki_ckd_add_i64(&cs, cs, 15)) {
        return false;
    }
    cs = cs / 16 * 16;
    p->cstride = cs % 1024 == 0 ? cs + 16 : cs;
    if (ki_conv2d_is_pointwise(c)) { /* a group of panels, the last one maybe packed */
        if (!ki_ckd_mul(&pack, (size_t)c->in_ch, PWDW_GROUP * KI_GEMM_NR * sizeof(float))) {
            return false;
        }
    } else if ((pack = ki_conv2d_s2d_on(c, w) ? ki_conv2d_s2d_scratch(c, w)
                                              : ki_conv2d_direct_workspace(c)) == 0) {
        return false; /* the space-to-depth scratch, or the packed weights */
    }
    size_t pack2 = 0; /* a dense second layer's panels: PWDW_GROUP of them, k2 x 32 each */
    if (c->dwf_dense && !ki_ckd_mul(&pack2, (size_t)(d->in_ch * d->kh * d->kw),
                                    PWDW_GROUP * KI_GEMM_NR * sizeof(float))) {
        return false;
    }
    size_t pack3 = 0; /* a projection's group of panels, the last one maybe packed */
    if (c->pjf && !c->dwf_c8 &&
        !ki_ckd_mul(&pack3, (size_t)c->pjf->in_ch, PWDW_GROUP * KI_GEMM_NR * sizeof(float))) {
        return false;
    }
    return ki_ckd_mul(&p->buf_bytes, (size_t)p->cstride, (size_t)ch * sizeof(float)) &&
           ki_ckd_add(&p->pack2, p->buf_bytes, pack) && ki_ckd_add(&p->total, p->pack2, pack2) &&
           (p->pack3 = p->total, ki_ckd_add(&p->end, p->total, pack3)) && p->end <= SIZE_MAX - 63;
}

ki_status ki_conv2d_pwdw_geom(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_geom *dg,
                              ki_error *err)
{
    ki_shape mid = ki_cv_nchw_shape(g->in.batched, g->in.n, c->out_ch, g->oh, g->ow);
    return c->dwf ? ki_conv2d_geom_make(c->dwf, &mid, dg, err)
                  : KI_FAIL(err, KI_ERR_INTERNAL, "no depthwise layer absorbed");
}

size_t ki_conv2d_pwdw_workspace(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    ki_conv2d_geom dg;
    pwdw_plan p;
    if (c->dwf_c8) {
        return ki_conv2d_ovdw_workspace(c, g);
    }
    if (ki_conv2d_pwdw_geom(c, g, &dg, NULL) != KI_OK || !plan_of(c, &dg, &p)) {
        return 0;
    }
    return (p.end + 63) / 64 * 64;
}

/* Rows [r0, r1) of the 1x1 layer c over image x (its input: the expansion, or a projection
 * c->pjf over the depthwise output) into dst (channel stride ldc; res: its residual, the same
 * layout, or NULL), a group of panels at a time: the full 32-pixel panels read in place, a last
 * partial one packed into its slot in `pack` (PWDW_GROUP panels); with eo every panel packed, its
 * columns in the even / odd order (ki_conv2d_pwdw_eo), so the rows come out in that order. */
static void expand(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, int64_t r0,
                   int64_t r1, float *dst, int64_t ldc, const float *res, float *pack, bool eo)
{
    const int64_t w = g->in.w, n = (r1 - r0) * w, np = (n + KI_GEMM_NR - 1) / KI_GEMM_NR;
    const float *b = x + r0 * w;
    ki_gemm_args ga = { .m = c->out_ch,
                        .n = n,
                        .k = c->in_ch,
                        .a = c->weight,
                        .lda = c->in_ch,
                        .bp = pack,
                        .c = dst,
                        .ldc = ldc,
                        .ep = &c->ep,
                        .epf = c->epf,
                        .uk = c->uk,
                        .res = res,
                        .bin = eo ? NULL : b,
                        .ldb = g->in.h * w };
    for (int64_t p0 = 0; p0 < np; p0 += PWDW_GROUP) {
        const int64_t cnt = np - p0 < PWDW_GROUP ? np - p0 : PWDW_GROUP, last = p0 + cnt - 1;
        if (eo) {
            const int64_t j = p0 * KI_GEMM_NR;
            c->pack_eo(b, ga.ldb, w, j, n - j < cnt * KI_GEMM_NR ? n - j : cnt * KI_GEMM_NR,
                       c->in_ch, pack);
        }
        if (!eo && (last + 1) * KI_GEMM_NR > n) {
            ki_conv2d_pack_cols(c, g, false, b, last * KI_GEMM_NR, n - last * KI_GEMM_NR, c->in_ch,
                                KI_GEMM_NR, pack + (cnt - 1) * KI_GEMM_NR * c->in_ch);
        }
        ki_gemm_panels(&ga, p0, cnt, pack);
    }
}

/* Output rows [yb, ye) of a dense second layer d (c->dwf_dense: an im2col of 3-wide
 * stride-2 kernels, d->pack3s2) from the input rows [lo, hi) in buf, into out (d's output
 * planes of image n): its GEMM on PWDW_GROUP panels at a time packed into pack, the same tiles
 * per pixel as on its own. */
static void dense_band(const ki_conv2d *d, const ki_conv2d_geom *dg, const float *buf, int64_t lo,
                       int64_t hi, int64_t cstride, int64_t yb, int64_t ye, float *out, float *pack)
{
    const int64_t ow = dg->ow, n = (ye - yb) * ow, np = (n + KI_GEMM_NR - 1) / KI_GEMM_NR;
    const int64_t k = d->in_ch * d->kh * d->kw;
    const ki_conv2d_rows src = { buf, cstride, lo, hi };
    ki_gemm_args ga = { .m = d->out_ch,
                        .n = n,
                        .k = k,
                        .a = d->weight,
                        .lda = k,
                        .bp = pack,
                        .c = out + yb * ow,
                        .ldc = dg->oh * ow,
                        .ep = &d->ep,
                        .epf = d->epf,
                        .uk = d->uk };
    for (int64_t p0 = 0; p0 < np; p0 += PWDW_GROUP) {
        const int64_t cnt = np - p0 < PWDW_GROUP ? np - p0 : PWDW_GROUP;
        for (int64_t q = 0; q < cnt; q++) {
            const int64_t j = (p0 + q) * KI_GEMM_NR, nr = n - j < KI_GEMM_NR ? n - j : KI_GEMM_NR;
            d->pack3s2(d, dg, &src, yb * ow + j, nr, k, KI_GEMM_NR, pack + q * KI_GEMM_NR * k);
        }
        ki_gemm_panels(&ga, p0, cnt, pack);
    }
}

/* Which input rows of which image the band buffer holds: rows [lo, hi) of image n (n -1: none). */
typedef struct pwdw_held {
    int64_t n, lo, hi;
} pwdw_held;

/* Output rows [yb, ye) of image n's depthwise output (out: its planes) through buf (pack: the 1x1
 * layer's panel slots or the direct path's packed weights; pack2: a dense second layer's panels);
 * rows the buffer holds of the band before (*held) are moved to its front instead of recomputed.
 * ne: the end of this thread's next band of the same image, whose new input rows are asked for
 * ahead, or -1. */
static void band_rows(const ki_conv2d *c, const ki_conv2d_geom *g, const ki_conv2d_geom *dg,
                      const ki_conv2d_geom *pg, const pwdw_plan *p, const float *in, int64_t n,
                      int64_t yb, int64_t ye, int64_t ne, float *buf, float *pack, float *pack2,
                      float *out, pwdw_held *held)
{
    const bool pw = ki_conv2d_is_pointwise(c);
    const ki_conv2d *d = c->dwf;
    const int64_t w = dg->in.w, h = dg->in.h, k = c->in_ch, ch = c->out_ch;
    const int64_t hw = g->in.h * g->in.w;
    const float *x = in + n * k * hw;
    int64_t lo = yb * d->sh - d->pt, hi = lo + rows_read(d, ye - yb, INT64_MAX);
    lo = lo < 0 ? 0 : lo;
    hi = hi > h ? h : hi;
    int64_t from = lo;
    if (held->n == n && held->lo <= lo && lo < held->hi) { /* the band before's last rows */
        for (int64_t q = 0; q < ch && lo > held->lo; q++) {
            float *row = buf + q * p->cstride;
            memmove(row, row + (lo - held->lo) * w, (size_t)((held->hi - lo) * w) * sizeof *row);
        }
        from = held->hi;
    }
    if (from < hi && pw) {
        expand(c, g, x, from, hi, buf + (from - lo) * w, p->cstride, NULL, pack, p->eo);
    } else if (from < hi && ki_conv2d_s2d_on(c, g->ow)) {
        ki_conv2d_s2d_rows(c, g, in, n, from, hi, buf + (from - lo) * w, p->cstride, pack);
    } else if (from < hi) {
        ki_conv2d_direct_rows(c, g, in, pack, n, from, hi, buf + (from - lo) * w, p->cstride);
    }
    *held = (pwdw_held){ n, lo, hi > from ? hi : from };
    if (c->dwf_dense) {
        dense_band(d, dg, buf, lo, hi, p->cstride, yb, ye, out, pack2);
        return;
    }
    /* the depthwise layer in k pieces of channels, each asking for one input plane's rows of the
     * next band (a 1x1 layer's k planes are k read streams, more than the prefetchers follow) */
    const int64_t next = ne < 0 ? 0 : (ne - 1) * d->sh - d->pt + d->kh;
    const int64_t nhi = next > h ? h : next;
    for (int64_t i = 0; i < k; i++) {
        if (pw && nhi > held->hi) {
            ki_cv_prefetch_l2(x + i * hw + held->hi * w, (nhi - held->hi) * w);
        }
        (p->eo ? d->dw3_band_eo : d->dw3_band)(d, dg, buf, lo, p->cstride, ch * i / k,
                                               ch * (i + 1) / k, yb, ye, out);
    }
    if (c->pj_y) { /* the projection's rows of this band, its input rows still in L2 */
        const ki_conv2d *pj = c->pjf;
        const int64_t ohw = dg->oh * dg->ow, at = n * pj->out_ch * ohw + yb * dg->ow;
        expand(pj, pg, out, yb, ye, c->pj_y + at, ohw, c->pj_res ? c->pj_res + at : NULL,
               (float *)((char *)buf + p->pack3), false);
    }
}

/* Bands of an image: each of the nt threads' equal shares of the output rows (its own run of
 * bands in ki_share) in bands of p->band rows (a multiple of four: the depthwise kernels' blocks),
 * the share's last band taking the rest. A rest of one to three rows (which the stride-1 kernels
 * would run a row at a time) takes four rows from the band before when that leaves it four or
 * more. Equal bands across the image had cut the shares into bands of 7 or 3-4 rows on two
 * threads, whose blocks of four computed rows twice (docs/performance.md). */
typedef struct pwdw_bands {
    int64_t nb;    /* bands of an image: nt * per (some possibly empty) */
    int64_t per;   /* bands of a thread's share */
    int64_t share; /* rows of a share */
} pwdw_bands;

static pwdw_bands bands_of(const pwdw_plan *p, int64_t oh, int nt)
{
    const int64_t t = nt > 0 ? nt : 1, share = (oh + t - 1) / t;
    const int64_t per = share > 0 ? (share + p->band - 1) / p->band : 1;
    return (pwdw_bands){ t * per, per, share };
}

/* Band i's output rows [*y0, *y1) (empty past the image's rows). */
static void band_span(const pwdw_plan *p, const pwdw_bands *s, int64_t oh, int64_t i, int64_t *y0,
                      int64_t *y1)
{
    const int64_t t = i / s->per, j = i % s->per, base = t * s->share;
    const int64_t end = base + s->share < oh ? base + s->share : oh;
    const int64_t rest = (end - base) - (s->per - 1) * p->band; /* the last band's rows */
    int64_t a = base + j * p->band, b = a + p->band;
    if (rest > 0 && rest < 4 && p->band >= 8 && s->per > 1) { /* the last two: band - 4, rest + 4 */
        a -= j == s->per - 1 ? 4 : 0;
        b -= j == s->per - 2 ? 4 : 0;
    }
    *y0 = a < end ? a : end;
    *y1 = b < end ? b : end;
}

/* The team's bands (ki_share: each thread its own share from the front, then what is left of
 * the others' from their back, so a thread that runs slower, another process on its core, leaves
 * its last bands to the others), each thread's band buffer and packed weights in its own slice.
 * A band taken after the one before it in the same image continues from the rows it left. */
static void pwdw_body(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    ki_conv2d_geom dg;
    pwdw_plan p;
    if (ki_conv2d_pwdw_geom(c, g, &dg, NULL) != KI_OK || !plan_of(c, &dg, &p)) {
        return; /* conv_forward checked the workspace */
    }
    const int64_t oh = dg.oh, ohw = oh * dg.ow;
    const pwdw_bands bs = bands_of(&p, oh, j->ex->n_threads);
    const int64_t nb = bs.nb;
    float *buf = ki_exec_slice(j->ex, pt->tid);
    float *pack = (float *)((char *)buf + p.buf_bytes), *pack2 = (float *)((char *)buf + p.pack2);
    if (!ki_conv2d_is_pointwise(c) && !ki_conv2d_s2d_on(c, g->ow)) {
        ki_conv2d_direct_pack(c, pack); /* each thread its own copy: no barrier */
    }
    pwdw_held held = { -1, 0, 0 };
    ki_conv2d_geom pg; /* a projection run band by band: its geometry */
    const ki_shape mid = ki_cv_nchw_shape(g->in.batched, 1, c->dwf->out_ch, dg.oh, dg.ow);
    if (c->pj_y && ki_conv2d_geom_make(c->pjf, &mid, &pg, NULL) != KI_OK) {
        return;
    }
    ki_share_begin(pt, g->in.n * nb);
    for (int64_t b = ki_share_take(pt->share, pt->tid); b >= 0;
         b = ki_share_take(pt->share, pt->tid)) {
        const int64_t n = b / nb, i = b % nb, after = ki_share_peek(pt->share, pt->tid);
        int64_t y0, y1, n0 = 0, ne = -1;
        band_span(&p, &bs, oh, i, &y0, &y1);
        if (after == b + 1 && i + 1 < nb) {
            band_span(&p, &bs, oh, i + 1, &n0, &ne);
            ne = ne > n0 ? ne : -1;
        }
        if (y0 < y1) {
            band_rows(c, g, &dg, &pg, &p, j->in, n, y0, y1, ne, buf, pack, pack2,
                      j->out + n * c->dwf->out_ch * ohw, &held);
        }
    }
}

void ki_conv2d_forward_pwdw(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                            float *restrict out, const ki_exec *ex)
{
#if KI_HAVE_X86
    if (c->dwf_c8) { /* channel block by channel block instead (ki_conv2d_ovdw_ok) */
        ki_conv2d_forward_ovdw_avx2(c, g, in, out, ex);
        return;
    }
#endif
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, pwdw_body, &j);
}
