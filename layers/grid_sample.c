/* grid_sample.c - F.grid_sample on 4-D inputs ((N, C, H, W) sampled at the (x, y) pairs of a
 * (N, Ho, Wo, 2) grid in [-1, 1] into (N, C, Ho, Wo); modes bilinear, nearest and bicubic,
 * padding zeros, border and reflection, align_corners either way) and F.affine_grid for 2-D
 * (theta (N, 2, 3) and size (N, C, H, W), a parameter or a list input known at shape time, into
 * the (N, H, W, 2) grid theta applied to the base grid). Volumetric (5-D) forms are rejected.
 *
 * The arithmetic follows PyTorch's vectorised CPU kernel (GridSamplerKernel.cpp): unnormalise
 * (x + 1) * s (- 0.5), then clip or reflect for bilinear and nearest (nearest rounds half to
 * even); bicubic takes the 4 x 4 taps around the unnormalised point, each tap's integer
 * coordinate clipped or reflected, A = -0.75. Taps outside the input read as zero. One thread
 * computes a whole output row (all channels), so results do not depend on the thread count.
 * State: the parameters, immutable; thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/layer.h"
#include "shape_common.h"

enum { GS_BILINEAR, GS_NEAREST, GS_BICUBIC };
enum { GS_ZEROS, GS_BORDER, GS_REFLECTION };

typedef struct gs_state {
    int mode, pad;
    bool align;
    int in_x, in_grid;
} gs_state;

/* One axis of the input: how grid coordinates map to pixel positions (ComputeLocationBase). */
typedef struct gs_axis {
    float max_val, scale, low, twice_span;
    bool empty;
    int pad;
    bool align;
} gs_axis;

static int input_slot(const ki_op_desc *op, const char *key, int def)
{
    int i = ki_op_input_index(op, key);
    return i >= 0 ? i : def;
}

static ki_status gs_create(const ki_op_desc *op, void **state, ki_error *err)
{
    const char *mode = NULL, *pad = NULL;
    gs_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_shapeop_check_io(op, 2, 1, err);
    st = st != KI_OK ? st : ki_op_get_string(op, "mode", "bilinear", &mode, err);
    st = st != KI_OK ? st : ki_op_get_string(op, "padding_mode", "zeros", &pad, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "align_corners", false, &s->align, err);
    if (st == KI_OK) {
        s->mode = strcmp(mode, "bilinear") == 0  ? GS_BILINEAR
                  : strcmp(mode, "nearest") == 0 ? GS_NEAREST
                  : strcmp(mode, "bicubic") == 0 ? GS_BICUBIC
                                                 : -1;
        s->pad = strcmp(pad, "zeros") == 0        ? GS_ZEROS
                 : strcmp(pad, "border") == 0     ? GS_BORDER
                 : strcmp(pad, "reflection") == 0 ? GS_REFLECTION
                                                  : -1;
        if (s->mode < 0 || s->pad < 0) {
            st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "mode '%s' / padding_mode '%s'", mode, pad);
        }
    }
    s->in_x = input_slot(op, "input", 0);
    s->in_grid = input_slot(op, "grid", 1);
    if (st == KI_OK && (s->in_x == s->in_grid || s->in_x > 1 || s->in_grid > 1)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "inputs $input and $grid are not two distinct inputs");
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status gs_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const gs_state *s = state;
    const ki_shape *x = &in[s->in_x], *g = &in[s->in_grid];
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || g->kind != KI_KIND_TENSOR || x->ndim != 4 || g->ndim != 4) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "input and grid must be 4-D (got %d and %d dims)",
                       x->ndim, g->ndim);
    }
    if (g->d[0] != x->d[0] || g->d[3] != 2) {
        return KI_FAIL(err, KI_ERR_SHAPE, "grid must be (%lld, Ho, Wo, 2)", (long long)x->d[0]);
    }
    if (x->d[2] < 1 || x->d[3] < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has an empty spatial dimension");
    }
    int64_t d[4] = { x->d[0], x->d[1], g->d[1], g->d[2] };
    return ki_shapeop_make(out, 4, d, err);
}

static gs_axis gs_axis_make(int64_t size, int pad, bool align)
{
    gs_axis a = { .max_val = (float)(size - 1), .pad = pad, .align = align };
    if (align) {
        a.scale = (float)(size - 1) / 2;
        a.low = 0.0f;
        a.twice_span = (float)(size - 1) * 2;
        a.empty = size <= 1;
    } else {
        a.scale = (float)size / 2;
        a.low = -0.5f;
        a.twice_span = (float)size * 2;
        a.empty = size <= 0;
    }
    return a;
}

static float gs_unnormalize(const gs_axis *a, float v)
{
    return a->align ? (v + 1.0f) * a->scale : (v + 1.0f) * a->scale - 0.5f;
}

/* Clamp into [0, max_val]; NaN becomes 0 (the order of PyTorch's clamp_min / clamp_max). */
static float gs_clip(const gs_axis *a, float v)
{
    float lo = v > 0.0f ? v : 0.0f;
    return lo < a->max_val ? lo : a->max_val;
}

static float gs_reflect(const gs_axis *a, float v)
{
    if (a->empty) {
        return 0.0f;
    }
    const float t = fabsf(v - a->low);
    const float extra = t - truncf(t / a->twice_span) * a->twice_span;
    const float other = a->twice_span - extra;
    return (extra < other ? extra : other) + a->low;
}

/* The padding rule applied to a pixel position (compute_coordinates). */
static float gs_pad(const gs_axis *a, float v)
{
    if (a->pad == GS_BORDER) {
        return gs_clip(a, v);
    }
    if (a->pad == GS_REFLECTION) {
        return gs_clip(a, gs_reflect(a, v));
    }
    return v;
}

/* Integer-valued position v inside [0, n): its index in *i. NaN is outside. */
static bool gs_inside(float v, int64_t n, int64_t *i)
{
    if (v >= 0.0f && v < (float)n) {
        *i = (int64_t)v;
        return true;
    }
    return false;
}

static float gs_tap(const float *plane, int64_t w, int64_t h, float x, float y)
{
    int64_t ix, iy;
    return gs_inside(x, w, &ix) && gs_inside(y, h, &iy) ? plane[iy * w + ix] : 0.0f;
}

static void gs_cubic_coeffs(float t, float *c)
{
    const float a = -0.75f;
    float x = t + 1.0f;
    c[0] = ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
    c[1] = ((a + 2.0f) * t - (a + 3.0f)) * t * t + 1.0f;
    x = 1.0f - t;
    c[2] = ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    x = 2.0f - t;
    c[3] = ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
}

/* All channels of one output point at grid position (gx, gy) of batch entry xs (C planes of h x w),
 * written with stride ostride from o. */
static void gs_point(const gs_state *s, const gs_axis *ax, const gs_axis *ay, const float *xs,
                     int64_t c, int64_t h, int64_t w, float gx, float gy, float *o, int64_t ostride)
{
    if (s->mode == GS_BICUBIC) {
        const float x = gs_unnormalize(ax, gx), y = gs_unnormalize(ay, gy);
        const float x0 = floorf(x), y0 = floorf(y);
        float cx[4], cy[4], px[4], py[4];
        gs_cubic_coeffs(x - x0, cx);
        gs_cubic_coeffs(y - y0, cy);
        for (int i = 0; i < 4; i++) {
            px[i] = gs_pad(ax, x0 - 1.0f + (float)i);
            py[i] = gs_pad(ay, y0 - 1.0f + (float)i);
        }
        for (int64_t ch = 0; ch < c; ch++) {
            const float *p = xs + ch * h * w;
            float acc = 0.0f;
            for (int j = 0; j < 4; j++) {
                const float r =
                    gs_tap(p, w, h, px[0], py[j]) * cx[0] + gs_tap(p, w, h, px[1], py[j]) * cx[1] +
                    gs_tap(p, w, h, px[2], py[j]) * cx[2] + gs_tap(p, w, h, px[3], py[j]) * cx[3];
                acc = j == 0 ? r * cy[0] : acc + r * cy[j];
            }
            o[ch * ostride] = acc;
        }
        return;
    }
    const float x = gs_pad(ax, gs_unnormalize(ax, gx)), y = gs_pad(ay, gs_unnormalize(ay, gy));
    if (s->mode == GS_NEAREST) {
        const float xn = nearbyintf(x), yn = nearbyintf(y);
        for (int64_t ch = 0; ch < c; ch++) {
            o[ch * ostride] = gs_tap(xs + ch * h * w, w, h, xn, yn);
        }
        return;
    }
    const float xw = floorf(x), yn = floorf(y);
    const float fe = x - xw, fw = 1.0f - fe, fs = y - yn, fn = 1.0f - fs;
    const float nw = fn * fw, ne = fn * fe, sw = fs * fw, se = fs * fe;
    for (int64_t ch = 0; ch < c; ch++) {
        const float *p = xs + ch * h * w;
        o[ch * ostride] = gs_tap(p, w, h, xw, yn) * nw + gs_tap(p, w, h, xw + 1.0f, yn) * ne +
                          gs_tap(p, w, h, xw, yn + 1.0f) * sw +
                          gs_tap(p, w, h, xw + 1.0f, yn + 1.0f) * se;
    }
}

static ki_status gs_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const gs_state *s = state;
    const ki_tensor *x = &in[s->in_x], *g = &in[s->in_grid];
    (void)n_in, (void)n_out;
    const int64_t n = x->shape.d[0], c = x->shape.d[1], h = x->shape.d[2], w = x->shape.d[3];
    const int64_t ho = g->shape.d[1], wo = g->shape.d[2];
    const gs_axis ax = gs_axis_make(w, s->pad, s->align), ay = gs_axis_make(h, s->pad, s->align);
    const int64_t rows = n * ho;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (rows * wo * c > 4096)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / ho, oy = r % ho;
        const float *gr = g->data + r * wo * 2;
        const float *xs = x->data + b * c * h * w;
        float *o = out[0].data + b * c * ho * wo + oy * wo;
        for (int64_t ox = 0; ox < wo; ox++) {
            gs_point(s, &ax, &ay, xs, c, h, w, gr[2 * ox], gr[2 * ox + 1], o + ox, ho * wo);
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_f_grid_sample = { .type = "F.grid_sample",
                                              .create = gs_create,
                                              .shape = gs_shape,
                                              .forward = gs_forward,
                                              .destroy = free };

/* ---- F.affine_grid (2-D): grid[n, y, x] = theta[n] (bx, by, 1), the base grid spaced as
 * linspace(-1, 1, size) (times (size - 1) / size without align_corners; 0 for a size of 1) ---- */
typedef struct ag_state {
    bool align;
    int in_theta, in_size; /* in_size -1: the size parameter */
    int64_t size[4];
} ag_state;

static ki_status ag_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int n = 0;
    ag_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_shapeop_check_io(op, -1, 1, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "align_corners", false, &s->align, err);
    s->in_theta = input_slot(op, "theta", 0);
    s->in_size = op->n_inputs > 1 ? input_slot(op, "size", 1) : -1;
    if (st == KI_OK &&
        (op->n_inputs > 2 || s->in_theta == s->in_size || s->in_theta > 1 || s->in_size > 1)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "expected inputs $theta and optionally $size");
    }
    if (st == KI_OK && s->in_size < 0) {
        st = ki_op_get_int_list(op, "size", 6, s->size, &n, err);
        if (st == KI_OK && n != 4) {
            st = KI_FAIL(err, n == 5 ? KI_ERR_UNSUPPORTED : KI_ERR_FORMAT,
                         "size has %d entries (4 expected: 2-D grids only)", n);
        }
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status ag_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const ag_state *s = state;
    const ki_shape *t = &in[s->in_theta];
    int64_t size[KI_MAX_VALUES];
    int n = 4;
    (void)n_in, (void)n_out;
    memcpy(size, s->size, sizeof s->size);
    if (s->in_size >= 0) {
        ki_status st =
            ki_shapeop_list_values(&in[s->in_size], "size", size, KI_MAX_VALUES, &n, err);
        if (st != KI_OK) {
            return st;
        }
        if (n != 4) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "size has %d entries (4 expected)", n);
        }
    }
    if (t->kind != KI_KIND_TENSOR || t->ndim != 3 || t->d[1] != 2 || t->d[2] != 3) {
        return KI_FAIL(err, KI_ERR_SHAPE, "theta must be (N, 2, 3)");
    }
    if (size[0] != t->d[0] || size[2] < 1 || size[3] < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "size (%lld, %lld, %lld, %lld) does not fit theta",
                       (long long)size[0], (long long)size[1], (long long)size[2],
                       (long long)size[3]);
    }
    int64_t d[4] = { size[0], size[2], size[3], 2 };
    return ki_shapeop_make(out, 4, d, err);
}

/* linspace_from_neg_one: entry i of `steps` points, as at::linspace computes it in float. */
static float ag_base(int64_t i, int64_t steps, bool align)
{
    if (steps <= 1) {
        return 0.0f;
    }
    const float step = 2.0f / (float)(steps - 1);
    float v = i < steps / 2 ? -1.0f + step * (float)i : 1.0f - step * (float)(steps - i - 1);
    return align ? v : v * (float)(steps - 1) / (float)steps;
}

static ki_status ag_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const ag_state *s = state;
    const float *th = in[s->in_theta].data;
    const ki_shape *o = &out[0].shape;
    (void)n_in, (void)n_out;
    const int64_t n = o->d[0], h = o->d[1], w = o->d[2], rows = n * h;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (rows * w > 8192)
    for (int64_t r = 0; r < rows; r++) {
        const float *t = th + (r / h) * 6;
        const float by = ag_base(r % h, h, s->align);
        float *g = out[0].data + r * w * 2;
        for (int64_t x = 0; x < w; x++) {
            const float bx = ag_base(x, w, s->align);
            g[2 * x] = bx * t[0] + by * t[1] + t[2];
            g[2 * x + 1] = bx * t[3] + by * t[4] + t[5];
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_f_affine_grid = { .type = "F.affine_grid",
                                              .create = ag_create,
                                              .shape = ag_shape,
                                              .forward = ag_forward,
                                              .destroy = free };
