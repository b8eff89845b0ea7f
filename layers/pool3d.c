/* pool3d.c - the 3-D pools on (N,C,D,H,W) or unbatched (C,D,H,W) inputs: nn.MaxPool3d /
 * F.max_pool3d and nn.AvgPool3d / F.avg_pool3d with PyTorch's window, padding, dilation,
 * ceil_mode, count_include_pad and divisor_override rules, and nn.AdaptiveAvgPool3d /
 * F.adaptive_avg_pool3d, nn.AdaptiveMaxPool3d / F.adaptive_max_pool3d (output cell i covers
 * [floor(i*D/od), ceil((i+1)*D/od)); an output size of 0 or None keeps the input's). With
 * return_indices the second output holds each maximum's flat index (z*H + y)*W + x in its
 * volume, stored as float. Direct loops (the reference), one volume per iteration of a parallel
 * loop. State: parameters only, read-only after create; thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "vol_common.h"

typedef struct pool3d {
    bool is_max, adaptive, ceil_mode, count_include_pad, return_indices;
    int64_t k[3], s[3], p[3], dl[3];
    int64_t divisor; /* divisor_override, 0 when None */
    int64_t os[3];   /* adaptive output size, 0 = the input's */
} pool3d;

static ki_status parse_windows(const ki_op_desc *op, pool3d *p, ki_error *err)
{
    static const int64_t zero[3] = { 0, 0, 0 }, one[3] = { 1, 1, 1 };
    ki_status st = ki_vol_triple(op, "kernel_size", NULL, 1, p->k, err);
    if (st == KI_OK) { /* stride None (or an empty list) means the kernel size */
        st = ki_vol_triple(op, "stride", p->k, 1, p->s, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "padding", zero, 0, p->p, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "dilation", one, 1, p->dl, err);
    }
    if (st != KI_OK) {
        return st;
    }
    for (int i = 0; i < 3; i++) {
        if (!p->is_max && p->dl[i] != 1) {
            return KI_FAIL(err, KI_ERR_FORMAT, "average pooling has no dilation");
        }
        /* PyTorch: pad should be at most half of the effective kernel size. */
        if (p->p[i] > ((p->k[i] - 1) * p->dl[i] + 1) / 2) {
            return KI_FAIL(err, KI_ERR_SHAPE, "padding must be at most half of the kernel size");
        }
    }
    st = ki_op_get_bool(op, "ceil_mode", false, &p->ceil_mode, err);
    if (st == KI_OK && !p->is_max) {
        st = ki_op_get_bool(op, "count_include_pad", true, &p->count_include_pad, err);
    }
    if (st == KI_OK && !p->is_max) {
        st = ki_op_get_int(op, "divisor_override", 0, &p->divisor, err);
        if (st == KI_OK && ki_op_has(op, "divisor_override") &&
            (p->divisor == 0 || p->divisor < INT32_MIN || p->divisor > INT32_MAX)) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "divisor_override=%lld is out of range",
                         (long long)p->divisor);
        }
    }
    return st;
}

static ki_status parse_size(const ki_op_desc *op, pool3d *a, ki_error *err)
{
    const ki_param *p = ki_op_param(op, "output_size");
    if (!p || p->kind == KI_PARAM_NONE) {
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INT) {
        a->os[0] = a->os[1] = a->os[2] = p->i;
        return p->i >= 0 && p->i <= KI_MAX_DIM
                   ? KI_OK
                   : KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is out of range", p->raw);
    }
    if ((p->kind != KI_PARAM_INTS && p->kind != KI_PARAM_STRINGS) || (p->n != 1 && p->n != 3)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is not one or three sizes", p->raw);
    }
    ki_status st = KI_OK;
    for (int i = 0; st == KI_OK && i < 3; i++) {
        st = ki_cv_size_entry(p, p->n == 1 ? 0 : i, &a->os[i], err);
    }
    return st;
}

static ki_status create(const ki_op_desc *op, bool is_max, bool adaptive, void **state,
                        ki_error *err)
{
    pool3d *p = calloc(1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->is_max = is_max, p->adaptive = adaptive;
    ki_status st = adaptive ? parse_size(op, p, err) : parse_windows(op, p, err);
    if (st == KI_OK && is_max) {
        st = ki_op_get_bool(op, "return_indices", false, &p->return_indices, err);
    }
    if (st == KI_OK) {
        st = ki_cv_check_io(op, 1, p->return_indices ? 2 : 1, err);
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
    return create(op, true, false, state, err);
}

static ki_status avg_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, false, false, state, err);
}

static ki_status amax_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, true, true, state, err);
}

static ki_status aavg_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return create(op, false, true, state, err);
}

static ki_status pool_geom(const pool3d *p, const ki_shape *in, ki_vol *x, int64_t o[3],
                           ki_error *err)
{
    ki_status st = ki_vol_get(in, x, err);
    if (st != KI_OK) {
        return st;
    }
    const int64_t n[3] = { x->d, x->h, x->w };
    for (int i = 0; i < 3; i++) {
        if (p->adaptive) {
            o[i] = p->os[i] ? p->os[i] : n[i];
        } else {
            o[i] = ki_cv_pool_out(n[i], p->k[i], p->p[i], p->s[i], p->dl[i], p->ceil_mode);
        }
        if (p->adaptive ? n[i] < 1 : o[i] < 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %lldx%lldx%lld is too small or empty",
                           (long long)x->d, (long long)x->h, (long long)x->w);
        }
    }
    return KI_OK;
}

static ki_status pool_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const pool3d *p = state;
    ki_vol x;
    int64_t o[3];
    if (n_in != 1 || n_out != (p->return_indices ? 2 : 1)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = pool_geom(p, &in[0], &x, o, err);
    for (int i = 0; st == KI_OK && i < n_out; i++) {
        st = ki_vol_shape(&x, x.c, o, &out[i], err);
    }
    return st;
}

/* The input range [r[2i], r[2i+1]) of each spatial dim i that output position at[] reads, its
 * step, and the divisor of an average. */
typedef struct window {
    int64_t r[6], step[3], div;
} window;

/* PyTorch's windows: a max window skips taps in the padding (by whole dilation steps); an
 * average divides by the window clipped at the padded edge (count_include_pad), the window
 * clipped at the input, or divisor_override. */
static void window_at(const pool3d *p, const ki_vol *x, const int64_t o[3], const int64_t at[3],
                      window *w)
{
    const int64_t n[3] = { x->d, x->h, x->w };
    int64_t pool_size = 1, inside = 1;
    for (int i = 0; i < 3; i++) {
        int64_t lo, hi;
        if (p->adaptive) {
            ki_cv_adaptive_range(at[i], n[i], o[i], &lo, &hi);
        } else if (p->is_max) {
            lo = at[i] * p->s[i] - p->p[i], hi = lo + (p->k[i] - 1) * p->dl[i] + 1;
            while (lo < 0) {
                lo += p->dl[i];
            }
        } else {
            lo = at[i] * p->s[i] - p->p[i], hi = lo + p->k[i];
            hi = hi < n[i] + p->p[i] ? hi : n[i] + p->p[i];
            pool_size *= hi - lo;
            lo = lo > 0 ? lo : 0;
        }
        hi = hi < n[i] ? hi : n[i];
        w->r[2 * i] = lo, w->r[2 * i + 1] = hi;
        w->step[i] = p->is_max && !p->adaptive ? p->dl[i] : 1;
        inside *= hi > lo ? hi - lo : 0;
    }
    w->div = p->divisor ? p->divisor : (p->count_include_pad && !p->adaptive ? pool_size : inside);
}

/* The first maximum of a window (any NaN wins) and its flat index, or the average. */
static void reduce(const pool3d *p, const ki_vol *x, const float *v, const window *w, float *val,
                   float *idx)
{
    if (!p->is_max && (w->r[0] >= w->r[1] || w->r[2] >= w->r[3] || w->r[4] >= w->r[5])) {
        *val = 0.0f, *idx = 0.0f; /* a window entirely in the padding */
        return;
    }
    float acc = p->is_max ? -INFINITY : 0.0f;
    int64_t best = (w->r[0] * x->h + w->r[2]) * x->w + w->r[4];
    for (int64_t z = w->r[0]; z < w->r[1]; z += w->step[0]) {
        for (int64_t y = w->r[2]; y < w->r[3]; y += w->step[1]) {
            const float *row = v + (z * x->h + y) * x->w;
            for (int64_t xx = w->r[4]; xx < w->r[5]; xx += w->step[2]) {
                if (!p->is_max) {
                    acc += row[xx];
                } else if (row[xx] > acc || isnan(row[xx])) {
                    acc = row[xx], best = (z * x->h + y) * x->w + xx;
                }
            }
        }
    }
    *val = p->is_max ? acc : acc / (float)w->div;
    *idx = (float)best;
}

static ki_status pool_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const pool3d *p = state;
    ki_vol x;
    int64_t o[3];
    (void)n_in;
    if (pool_geom(p, &in[0].shape, &x, o, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    int64_t vols = x.n * x.c, dhw = x.d * x.h * x.w, ohw = o[1] * o[2], odhw = o[0] * ohw;
    const float *src = in[0].data;
    float *dst = out[0].data, *ind = n_out > 1 ? out[1].data : NULL;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
    for (int64_t v = 0; v < vols; v++) {
        for (int64_t i = 0; i < odhw; i++) {
            const int64_t at[3] = { i / ohw, i / o[2] % o[1], i % o[2] };
            window w;
            float val, idx;
            window_at(p, &x, o, at, &w);
            reduce(p, &x, src + v * dhw, &w, &val, &idx);
            dst[v * odhw + i] = val;
            if (ind) {
                ind[v * odhw + i] = idx;
            }
        }
    }
    return KI_OK;
}

static void pool_destroy(void *state)
{
    free(state);
}

#define POOL3D_OPS(sym, name, create_fn)                                                           \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .create = create_fn,                                                                       \
        .shape = pool_shape,                                                                       \
        .forward = pool_forward,                                                                   \
        .destroy = pool_destroy,                                                                   \
    }

POOL3D_OPS(ki_layer_max_pool3d, "nn.MaxPool3d", max_create);
POOL3D_OPS(ki_layer_f_max_pool3d, "F.max_pool3d", max_create);
POOL3D_OPS(ki_layer_avg_pool3d, "nn.AvgPool3d", avg_create);
POOL3D_OPS(ki_layer_f_avg_pool3d, "F.avg_pool3d", avg_create);
POOL3D_OPS(ki_layer_adaptive_max_pool3d, "nn.AdaptiveMaxPool3d", amax_create);
POOL3D_OPS(ki_layer_f_adaptive_max_pool3d, "F.adaptive_max_pool3d", amax_create);
POOL3D_OPS(ki_layer_adaptive_avg_pool3d, "nn.AdaptiveAvgPool3d", aavg_create);
POOL3D_OPS(ki_layer_f_adaptive_avg_pool3d, "F.adaptive_avg_pool3d", aavg_create);
