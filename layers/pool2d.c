/* pool2d.c - nn.MaxPool2d / F.max_pool2d and nn.AvgPool2d / F.avg_pool2d, with PyTorch's
 * window, padding, dilation, ceil_mode, count_include_pad and divisor_override rules, and
 * nn.LPPool2d / F.lp_pool2d, which PyTorch computes as (avg_pool2d(x^p) * kh * kw)^(1/p) with no
 * padding (the average pool's divisor, so a window clipped by ceil_mode is scaled up). The
 * kernels are direct loops (the reference), one plane per iteration of a parallel loop.
 * With return_indices the second output holds each maximum's flat index h*W+w in its plane,
 * stored as float. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/team.h"
#include "conv_common.h"

typedef struct pool2d {
    bool is_max, ceil_mode, count_include_pad, return_indices;
    bool avx2;             /* the max row kernel runs with AVX2 */
    ki_pool_max_s2_fn s2k; /* the stride-2 plane kernel for this CPU level, or NULL */
    ki_pool_max_s1_fn s1k; /* the stride-1 plane kernel for this CPU level, or NULL */
    int64_t kh, kw, sh, sw, ph, pw, dh, dw;
    int64_t divisor; /* divisor_override, 0 when None */
    float lp;        /* LP pooling: norm_type p (0 for max and average pooling) */
} pool2d;

static ki_status check_pairs(const pool2d *p, ki_error *err)
{
    const int64_t v[8] = { p->kh, p->kw, p->sh, p->sw, p->dh, p->dw, p->ph + 1, p->pw + 1 };
    for (int i = 0; i < 8; i++) {
        if (v[i] < 1 || v[i] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_FORMAT,
                           "kernel_size, stride, dilation or padding out of "
                           "range");
        }
    }
    /* PyTorch: pad should be at most half of the effective kernel size. */
    if (p->ph > ((p->kh - 1) * p->dh + 1) / 2 || p->pw > ((p->kw - 1) * p->dw + 1) / 2) {
        return KI_FAIL(err, KI_ERR_SHAPE, "padding must be at most half of the kernel size");
    }
    return KI_OK;
}

static ki_status parse_windows(const ki_op_desc *op, pool2d *p, ki_error *err)
{
    static const int64_t zero[2] = { 0, 0 }, one[2] = { 1, 1 };
    int64_t k[2], s[2], pad[2], d[2];
    ki_status st = ki_op_get_ints(op, "kernel_size", 2, NULL, k, err);
    if (st == KI_OK) { /* stride None (or an empty list) means the kernel size */
        st = ki_op_get_ints(op, "stride", 2, k, s, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_ints(op, "padding", 2, zero, pad, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_ints(op, "dilation", 2, one, d, err);
    }
    if (st != KI_OK) {
        return st;
    }
    if (!p->is_max && (d[0] != 1 || d[1] != 1)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "average pooling has no dilation");
    }
    p->kh = k[0], p->kw = k[1], p->sh = s[0], p->sw = s[1];
    p->ph = pad[0], p->pw = pad[1], p->dh = d[0], p->dw = d[1];
    return check_pairs(p, err);
}

static ki_status parse_flags(const ki_op_desc *op, pool2d *p, ki_error *err)
{
    ki_status st = ki_op_get_bool(op, "ceil_mode", false, &p->ceil_mode, err);
    if (st == KI_OK && p->is_max) {
        st = ki_op_get_bool(op, "return_indices", false, &p->return_indices, err);
    }
    if (st == KI_OK && !p->is_max) {
        st = ki_op_get_bool(op, "count_include_pad", true, &p->count_include_pad, err);
    }
    if (st == KI_OK && !p->is_max) {
        st = ki_op_get_int(op, "divisor_override", 0, &p->divisor, err);
        if (st == KI_OK && ki_op_has(op, "divisor_override") && p->divisor == 0) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "divisor_override must not be zero");
        }
    }
    if (st == KI_OK) {
        st = ki_cv_check_io(op, 1, p->return_indices ? 2 : 1, err);
    }
    return st;
}

/* lp: LP pooling, whose norm_type is read here. */
static ki_status pool_create(const ki_op_desc *op, bool is_max, bool lp, void **state,
                             ki_error *err)
{
    double norm = 0.0;
    pool2d *p = calloc(1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st0 = lp ? ki_op_get_float(op, "norm_type", NAN, &norm, err) : KI_OK;
    if (st0 == KI_OK && lp && !(isfinite(norm) && norm != 0.0 && fabs(norm) < 1e30)) {
        st0 = KI_FAIL(err, KI_ERR_FORMAT, "norm_type must be a finite nonzero number");
    }
    if (st0 == KI_OK && lp && (ki_op_has(op, "padding") || ki_op_has(op, "dilation"))) {
        st0 = KI_FAIL(err, KI_ERR_FORMAT, "LP pooling has no padding or dilation");
    }
    if (st0 != KI_OK) {
        free(p);
        return st0;
    }
    p->lp = (float)norm;
    p->is_max = is_max;
    p->avx2 = ki_cpu_isa() >= KI_ISA_AVX2;
    p->s1k = p->avx2 ? KI_X86(ki_pool_max_s1_avx2) : NULL;
    p->s2k = ki_cpu_isa() >= KI_ISA_AVX512 ? KI_X86(ki_pool_max_s2_avx512)
             : ki_cpu_isa() >= KI_ISA_AVX2 ? KI_X86(ki_pool_max_s2_avx2)
                                           : NULL;
    ki_status st = parse_windows(op, p, err);
    if (st == KI_OK) {
        st = parse_flags(op, p, err);
    }
    if (st != KI_OK) {
        free(p);
        return st;
    }
    *state = p;
    return KI_OK;
}

static ki_status max_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return pool_create(op, true, false, state, err);
}

static ki_status avg_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return pool_create(op, false, false, state, err);
}

static ki_status lp_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return pool_create(op, false, true, state, err);
}

static ki_status pool_geom(const pool2d *p, const ki_shape *in, ki_cv_nchw *x, int64_t *oh,
                           int64_t *ow, ki_error *err)
{
    ki_status st = ki_cv_nchw_get(in, x, err);
    if (st != KI_OK) {
        return st;
    }
    *oh = ki_cv_pool_out(x->h, p->kh, p->ph, p->sh, p->dh, p->ceil_mode);
    *ow = ki_cv_pool_out(x->w, p->kw, p->pw, p->sw, p->dw, p->ceil_mode);
    if (*oh < 1 || *ow < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %lldx%lld is too small: output %lldx%lld",
                       (long long)x->h, (long long)x->w, (long long)*oh, (long long)*ow);
    }
    return KI_OK;
}

static ki_status pool_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const pool2d *p = state;
    ki_cv_nchw x;
    int64_t oh, ow;
    if (n_in != 1 || n_out != (p->return_indices ? 2 : 1)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = pool_geom(p, &in[0], &x, &oh, &ow, err);
    if (st != KI_OK) {
        return st;
    }
    for (int i = 0; i < n_out; i++) {
        out[i] = ki_cv_nchw_shape(x.batched, x.n, x.c, oh, ow);
    }
    return ki_shape_check(&out[0], err);
}

/* Max over one window; PyTorch keeps the first maximum and lets any NaN win. */
static void max_window(const pool2d *p, const float *x, int64_t h, int64_t w, int64_t oy,
                       int64_t ox, float *val, float *idx)
{
    int64_t y0 = oy * p->sh - p->ph, x0 = ox * p->sw - p->pw;
    int64_t y1 = y0 + (p->kh - 1) * p->dh + 1, x1 = x0 + (p->kw - 1) * p->dw + 1;
    y1 = y1 < h ? y1 : h, x1 = x1 < w ? x1 : w;
    while (y0 < 0) {
        y0 += p->dh;
    }
    while (x0 < 0) {
        x0 += p->dw;
    }
    float best = -INFINITY;
    int64_t at = y0 * w + x0;
    for (int64_t y = y0; y < y1; y += p->dh) {
        for (int64_t xx = x0; xx < x1; xx += p->dw) {
            float v = x[y * w + xx];
            if (v > best || isnan(v)) {
                best = v, at = y * w + xx;
            }
        }
    }
    *val = best, *idx = (float)at;
}

/* PyTorch's average: the divisor counts padding up to the padded edge unless
 * count_include_pad is off; a window entirely in the padding gives 0. */
static float avg_window(const pool2d *p, const float *x, int64_t h, int64_t w, int64_t oy,
                        int64_t ox)
{
    int64_t y0 = oy * p->sh - p->ph, x0 = ox * p->sw - p->pw;
    int64_t y1 = y0 + p->kh, x1 = x0 + p->kw;
    y1 = y1 < h + p->ph ? y1 : h + p->ph, x1 = x1 < w + p->pw ? x1 : w + p->pw;
    int64_t pool_size = (y1 - y0) * (x1 - x0);
    y0 = y0 > 0 ? y0 : 0, x0 = x0 > 0 ? x0 : 0;
    y1 = y1 < h ? y1 : h, x1 = x1 < w ? x1 : w;
    if (y0 >= y1 || x0 >= x1) {
        return 0.0f;
    }
    float sum = 0.0f;
    for (int64_t y = y0; y < y1; y++) {
        for (int64_t xx = x0; xx < x1; xx++) {
            sum += p->lp != 0.0f ? powf(x[y * w + xx], p->lp) : x[y * w + xx];
        }
    }
    int64_t div =
        p->divisor ? p->divisor : (p->count_include_pad ? pool_size : (y1 - y0) * (x1 - x0));
    return sum / (float)div;
}

int ki_pool_rowmax_ref(const float *s, int64_t sw, float *restrict d, int64_t n)
{
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = s[i * sw];
        nan |= v != v;
        d[i] = v > d[i] ? v : d[i];
    }
    return nan;
}

/* Output columns ox in [*lo, *hi) read input column ox*s + off inside [0, w). */
static void col_range(int64_t off, int64_t s, int64_t w, int64_t ow, int64_t *lo, int64_t *hi)
{
    int64_t a = off >= 0 ? 0 : (-off + s - 1) / s;
    int64_t b = w - 1 - off < 0 ? 0 : (w - 1 - off) / s + 1;
    *lo = a < ow ? a : ow;
    *hi = b < ow ? b : ow;
    *hi = *hi < *lo ? *lo : *hi;
}

/* Whether a plane goes through the row kernels (max_plane_taps or max_plane_sep): max pooling
 * without indices, strides 1 and 2. */
static bool rows_path(const pool2d *p, bool indices)
{
    return p->is_max && !indices && p->sw <= 2;
}

/* d[0..n) = max(d, the n values at s, s + sw, ...): nonzero when one of them is a NaN. */
static int rowmax(const pool2d *p, const float *s, int64_t sw, float *restrict d, int64_t n)
{
#if KI_HAVE_X86
    if (p->avx2) {
        return ki_pool_rowmax_avx2(s, sw, d, n);
    }
#else
    (void)p;
#endif
    return ki_pool_rowmax_ref(s, sw, d, n);
}

/* One plane of max pooling, row by row and tap by tap (the taps of each window in the order of
 * max_window, so ties keep the first maximum and no index arithmetic per element); nonzero when
 * the plane holds a NaN among the values read. */
static int max_plane_taps(const pool2d *p, const ki_cv_nchw *x, const float *src, float *dst,
                          int64_t oh, int64_t ow)
{
    int nan = 0;
    for (int64_t oy = 0; oy < oh; oy++) {
        float *d = dst + oy * ow;
        for (int64_t i = 0; i < ow; i++) {
            d[i] = -INFINITY;
        }
        for (int64_t ky = 0; ky < p->kh; ky++) {
            int64_t iy = oy * p->sh - p->ph + ky * p->dh, lo, hi;
            for (int64_t kx = 0; kx < p->kw && iy >= 0 && iy < x->h; kx++) {
                int64_t off = kx * p->dw - p->pw;
                col_range(off, p->sw, x->w, ow, &lo, &hi);
                nan |= rowmax(p, src + iy * x->w + lo * p->sw + off, p->sw, d + lo, hi - lo);
            }
        }
    }
    return nan;
}

/* Whether the separable form saves row passes: h * kw + oh * kh of them against oh * kh * kw,
 * by at least a quarter (its passes along the input rows are strided ones; a 3x3 stride-2 pool
 * makes as many passes either way and is faster tap by tap). */
static bool separable_pays(const pool2d *p, int64_t h, int64_t oh)
{
    return 4 * (h * p->kw + oh * p->kh) <= 3 * oh * p->kh * p->kw;
}

/* One plane of max pooling, separably: hm (x->h rows of ow) first gets each input row's maxima
 * over the kw taps of every output column, then each output row the maxima of its kh rows of hm.
 * Taps are visited ky-major as max_window does (a window's result is the first of its values
 * equal to the maximum: the first row holding it, the first column in that row), so ties keep
 * the first maximum. kh + kw row passes per output row rather than kh * kw (5x5 windows on
 * 20x20 planes of yolov5s: 0.9 -> 0.4 ms). Nonzero when a value read is a NaN (the caller then
 * redoes the plane with the reference, which lets the NaN win). */
static int max_plane_sep(const pool2d *p, const ki_cv_nchw *x, const float *src, float *dst,
                         int64_t oh, int64_t ow, float *restrict hm)
{
    int nan = 0;
    for (int64_t i = 0; i < x->h * ow; i++) {
        hm[i] = -INFINITY;
    }
    for (int64_t kx = 0; kx < p->kw; kx++) {
        int64_t off = kx * p->dw - p->pw, lo, hi;
        col_range(off, p->sw, x->w, ow, &lo, &hi);
        for (int64_t iy = 0; iy < x->h && hi > lo; iy++) {
            nan |= rowmax(p, src + iy * x->w + lo * p->sw + off, p->sw, hm + iy * ow + lo, hi - lo);
        }
    }
    for (int64_t oy = 0; oy < oh; oy++) {
        float *d = dst + oy * ow;
        for (int64_t i = 0; i < ow; i++) {
            d[i] = -INFINITY;
        }
        for (int64_t ky = 0; ky < p->kh; ky++) {
            int64_t iy = oy * p->sh - p->ph + ky * p->dh;
            if (iy >= 0 && iy < x->h) {
                nan |= rowmax(p, hm + iy * ow, 1, d, ow);
            }
        }
    }
    return nan;
}

size_t ki_pool_max_s1_floats(int64_t h, int64_t ow, int64_t kw)
{
    int64_t n;
    if (h < 0 || ow < 0 || kw < 1 || ow > INT64_MAX / 4 || kw > INT64_MAX / 4) {
        return 0;
    }
    int64_t owr, rn;
    ki_pool_max_s1_widths(ow, kw, &owr, &rn);
    if (!ki_ckd_mul_i64(&n, h, owr) || !ki_ckd_add_i64(&n, n, rn) ||
        n > (int64_t)(SIZE_MAX / 2 / sizeof(float))) {
        return 0;
    }
    return (size_t)n;
}

/* Whether planes go through ki_pool_max_s1_avx2 (stride 1, dilation 1, on an AVX2 CPU): a whole
 * plane in vectors, where the row passes of max_plane_sep made a call per 20-column row (yolov5s's
 * 5x5 pools at 20x20: 0.6 ms at one thread). */
static bool s1_path(const pool2d *p, bool indices)
{
    return rows_path(p, indices) && p->s1k && p->sh == 1 && p->sw == 1 && p->dh == 1 && p->dw == 1;
}

/* The separable path's scratch per thread: one plane of row maxima (x->h rows of ow floats). */
static size_t pool_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                             int n_out, int n_threads)
{
    const pool2d *p = state;
    ki_cv_nchw x;
    int64_t oh, ow, floats;
    (void)n_in, (void)out, (void)n_threads;
    if (s1_path(p, n_out > 1)) {
        size_t f = pool_geom(p, &in[0], &x, &oh, &ow, NULL) == KI_OK
                       ? ki_pool_max_s1_floats(x.h, ow, p->kw)
                       : 0;
        return f * sizeof(float);
    }
    if (!rows_path(p, n_out > 1) || pool_geom(p, &in[0], &x, &oh, &ow, NULL) != KI_OK ||
        !separable_pays(p, x.h, oh) || !ki_ckd_mul_i64(&floats, x.h, ow) ||
        floats > (int64_t)(SIZE_MAX / 2 / sizeof(float))) {
        return 0;
    }
    return (size_t)floats * sizeof(float);
}

/* The reference: one window per output element. */
static void pool_plane_ref(const pool2d *p, const ki_cv_nchw *x, const float *src, float *dst,
                           float *ind, int64_t ohw, int64_t ow)
{
    for (int64_t i = 0; i < ohw; i++) {
        float v, at;
        if (p->is_max) {
            max_window(p, src, x->h, x->w, i / ow, i % ow, &v, &at);
        } else {
            v = avg_window(p, src, x->h, x->w, i / ow, i % ow), at = 0;
        }
        if (p->lp != 0.0f) { /* PyTorch: (sign(v) * relu(|v|) * kw * kh)^(1/p) */
            v = powf(v * (float)(p->kh * p->kw), (float)(1.0 / p->lp));
        }
        dst[i] = v;
        if (ind) {
            ind[i] = at;
        }
    }
}

/* The reference max pool of one plane, dilation 1 (the plane kernels' oracles below). */
static void max_plane_ref(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                          int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph,
                          int64_t pw)
{
    const pool2d p = {
        .is_max = true, .kh = kh, .kw = kw, .sh = sh, .sw = sw, .ph = ph, .pw = pw, .dh = 1, .dw = 1
    };
    const ki_cv_nchw x = { 1, 1, h, w, false };
    pool_plane_ref(&p, &x, src, dst, NULL, oh * ow, ow);
}

int ki_pool_max_s2_ref(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                       int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw)
{
    max_plane_ref(src, h, w, dst, oh, ow, kh, kw, sh, 2, ph, pw);
    return 0;
}

int ki_pool_max_s1_ref(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                       int64_t ow, int64_t kh, int64_t kw, int64_t ph, int64_t pw)
{
    max_plane_ref(src, h, w, dst, oh, ow, kh, kw, 1, 1, ph, pw);
    return 0;
}

typedef enum { POOL_S1, POOL_S2, POOL_ROWS } pool_mode;

typedef struct pool_job {
    const pool2d *p;
    ki_cv_nchw x;
    int64_t oh, ow;
    const float *src;
    float *dst, *ind;
    const ki_exec *ex;
    pool_mode mode;
    bool rows, sep;
} pool_job;

/* Planes [p0, p1) by the kernel pool_forward chose; ws: the thread's slice, or NULL. */
static void pool_run(const pool_job *j, int64_t p0, int64_t p1, float *ws)
{
    const pool2d *p = j->p;
    const ki_cv_nchw *x = &j->x;
    const int64_t planes = x->n * x->c, hw = x->h * x->w, oh = j->oh, ow = j->ow, ohw = oh * ow;
    for (int64_t pl = p0; pl < p1; pl++) {
        const float *s = j->src + pl * hw;
        float *d = j->dst + pl * ohw;
        if (j->mode == POOL_S1) {
            if (p->s1k(s, x->h, x->w, d, oh, ow, p->kh, p->kw, p->ph, p->pw, ws)) {
                pool_plane_ref(p, x, s, d, NULL, ohw, ow);
            }
        } else if (j->mode == POOL_S2) {
            if (pl + 1 < planes) {
                ki_cv_prefetch_l2(s + hw, hw);
            }
            if (p->s2k(s, x->h, x->w, d, oh, ow, p->kh, p->kw, p->sh, p->ph, p->pw)) {
                pool_plane_ref(p, x, s, d, NULL, ohw, ow);
            }
        } else if (!j->rows || (j->sep ? max_plane_sep(p, x, s, d, oh, ow, ws)
                                       : max_plane_taps(p, x, s, d, oh, ow))) {
            pool_plane_ref(p, x, s, d, j->ind ? j->ind + pl * ohw : NULL, ohw, ow);
        }
    }
}

/* The team's runs of planes (ki_share_begin_runs), each thread its own slice. */
static void pool_body(void *arg, const ki_part *pt)
{
    const pool_job *j = arg;
    const int64_t planes = j->x.n * j->x.c;
    /* the thread's slice (no workspace when the kernel needs none: not even an offset from NULL) */
    float *ws = j->mode == POOL_S1 || j->sep ? ki_exec_slice(j->ex, pt->tid) : NULL;
    const int64_t runs = ki_share_begin_runs(pt, planes);
    for (int64_t p0, p1; ki_share_take_run(pt, planes, runs, &p0, &p1);) {
        pool_run(j, p0, p1, ws);
    }
}

static ki_status pool_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    pool_job j = { .p = state, .src = in[0].data, .ex = ex };
    const pool2d *p = j.p;
    (void)n_in;
    if (pool_geom(p, &in[0].shape, &j.x, &j.oh, &j.ow, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    j.dst = out[0].data, j.ind = n_out > 1 ? out[1].data : NULL;
    int64_t hmf;
    j.rows = rows_path(p, j.ind != NULL);
    j.sep = j.rows && separable_pays(p, j.x.h, j.oh) && ki_ckd_mul_i64(&hmf, j.x.h, j.ow) &&
            ex->ws_per_thread / sizeof *j.dst >= (size_t)hmf;
    const size_t s1f = s1_path(p, j.ind != NULL) ? ki_pool_max_s1_floats(j.x.h, j.ow, p->kw) : 0;
    /* 2- or 3-wide windows at column stride 2: every tap in registers (resnet's 3x3 stride-2
     * pool 2.3x faster than tap by tap) */
    const bool s2 = j.rows && !j.sep && p->s2k && p->sw == 2 && (p->kw == 2 || p->kw == 3) &&
                    p->dw == 1 && p->dh == 1;
    j.mode = s1f > 0 && ex->ws_per_thread / sizeof *j.dst >= s1f ? POOL_S1
             : s2                                                ? POOL_S2
                                                                 : POOL_ROWS;
    ki_team_run(ex, pool_body, &j);
    return KI_OK;
}

static void pool_destroy(void *state)
{
    free(state);
}

#define POOL_OPS(sym, name, create_fn)                                                             \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .flags = KI_LAYER_TEAM,                                                                    \
        .create = create_fn,                                                                       \
        .shape = pool_shape,                                                                       \
        .workspace = pool_workspace,                                                               \
        .forward = pool_forward,                                                                   \
        .destroy = pool_destroy,                                                                   \
    }

POOL_OPS(ki_layer_max_pool2d, "nn.MaxPool2d", max_create);
POOL_OPS(ki_layer_f_max_pool2d, "F.max_pool2d", max_create);
POOL_OPS(ki_layer_avg_pool2d, "nn.AvgPool2d", avg_create);
POOL_OPS(ki_layer_f_avg_pool2d, "F.avg_pool2d", avg_create);
POOL_OPS(ki_layer_lp_pool2d, "nn.LPPool2d", lp_create);
POOL_OPS(ki_layer_f_lp_pool2d, "F.lp_pool2d", lp_create);
