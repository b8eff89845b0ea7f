/* roi_align.c - torchvision.ops.RoIAlign (pnnx keeps the module whole; the export needs
 * torchvision's operator library loaded into pnnx, customop=.../torchvision/_C*.so): average of
 * bilinear samples over each bin of each box. Inputs: x (N, C, H, W) and boxes (K, 5), one row
 * (batch index, x1, y1, x2, y2) per box in input coordinates times spatial_scale; output
 * (K, C, ph, pw). Params: output_size (ph, pw), spatial_scale, sampling_ratio, aligned. The
 * function torchvision.ops.roi_align comes as pnnx.custom_op.torchvision.roi_align, the same
 * arguments as arg_0 .. arg_6 (input, rois, spatial_scale, pooled_height, pooled_width,
 * sampling_ratio, aligned), all but the first two constants.
 *
 * The arithmetic follows torchvision's CPU kernel (roi_align_kernel.cpp, roi_align_common.h):
 * aligned shifts the box by -0.5 pixel, otherwise a box is at least 1 x 1; a bin is sampled on a
 * sampling_ratio x sampling_ratio grid (ceil(box / bins) per axis when sampling_ratio <= 0) at
 * the cell centres; a sample below -1 or beyond H (W) counts as zero, one in [-1, 0] is clamped
 * to 0 and one past the last row (column) reads that row (column); the bin value is the sum over
 * its grid divided by the grid size (at least 1).
 *
 * The batch index is read as torchvision does (truncated to an int); a box whose index is outside
 * [0, N), or whose grid is not finite or above RA_MAX_GRID samples a bin, fails the run
 * (KI_ERR_LIMIT). Each (box, channel) plane is computed by one thread, so results do not depend
 * on the thread count. State: the parameters, immutable; thread-safe. */
#include <math.h>
#include <stdlib.h>

#include "../core/layer.h"
#include "shape_common.h"

#define RA_MAX_GRID ((int64_t)1 << 20) /* samples per bin */

typedef struct ra_state {
    int64_t out[2]; /* pooled height, width */
    float scale;
    int64_t ratio;
    bool aligned;
} ra_state;

/* The module's parameters, or the custom operator's arguments (input, rois, spatial_scale,
 * pooled_height, pooled_width, sampling_ratio, aligned as arg_0 .. arg_6). */
static ki_status ra_params(const ki_op_desc *op, bool custom, ra_state *s, double *scale,
                           ki_error *err)
{
    if (!custom) {
        ki_status st = ki_op_get_ints(op, "output_size", 2, NULL, s->out, err);
        st = st != KI_OK ? st : ki_op_get_float(op, "spatial_scale", 1.0, scale, err);
        st = st != KI_OK ? st : ki_op_get_int(op, "sampling_ratio", -1, &s->ratio, err);
        return st != KI_OK ? st : ki_op_get_bool(op, "aligned", false, &s->aligned, err);
    }
    if (ki_op_input_slot(op, "arg_0", 0) != 0 || ki_op_input_slot(op, "arg_1", 1) != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects $arg_0 (input) and $arg_1 (rois) inputs");
    }
    static const char *const keys[5] = { "arg_2", "arg_3", "arg_4", "arg_5", "arg_6" };
    for (int i = 0; i < 5; i++) {
        if (!ki_op_has(op, keys[i])) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "missing constant %s", keys[i]);
        }
    }
    ki_status st = ki_op_get_float(op, "arg_2", 1.0, scale, err);
    st = st != KI_OK ? st : ki_op_get_int(op, "arg_3", 0, &s->out[0], err);
    st = st != KI_OK ? st : ki_op_get_int(op, "arg_4", 0, &s->out[1], err);
    st = st != KI_OK ? st : ki_op_get_int(op, "arg_5", -1, &s->ratio, err);
    return st != KI_OK ? st : ki_op_get_bool(op, "arg_6", false, &s->aligned, err);
}

static ki_status ra_create_common(const ki_op_desc *op, bool custom, void **state, ki_error *err)
{
    double scale = 1.0;
    ra_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ki_shapeop_check_io(op, 2, 1, err);
    st = st != KI_OK ? st : ra_params(op, custom, s, &scale, err);
    if (st == KI_OK &&
        (s->out[0] < 1 || s->out[0] > KI_MAX_DIM || s->out[1] < 1 || s->out[1] > KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "output_size (%lld,%lld) must be positive",
                     (long long)s->out[0], (long long)s->out[1]);
    }
    if (st == KI_OK && (!isfinite(scale) || s->ratio > 1024 || s->ratio < -KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "spatial_scale %g / sampling_ratio %lld out of range",
                     scale, (long long)s->ratio);
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    s->scale = (float)scale;
    *state = s;
    return KI_OK;
}

static ki_status ra_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return ra_create_common(op, false, state, err);
}

static ki_status ra_create_custom(const ki_op_desc *op, void **state, ki_error *err)
{
    return ra_create_common(op, true, state, err);
}

static ki_status ra_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const ra_state *s = state;
    const ki_shape *x = &in[0], *b = &in[1];
    char buf[96];
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || x->ndim != 4) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s is not 4-D (N, C, H, W)",
                       ki_shape_str(x, buf, sizeof buf));
    }
    if (b->kind != KI_KIND_TENSOR || b->ndim != 2 || b->d[1] != 5) {
        return KI_FAIL(err, KI_ERR_SHAPE, "boxes %s is not (K, 5)",
                       ki_shape_str(b, buf, sizeof buf));
    }
    int64_t d[4] = { b->d[0], x->d[1], s->out[0], s->out[1] };
    return ki_shapeop_make(out, 4, d, err);
}

/* One box in feature-map coordinates: its start and bin size per axis (y, x) and sampling grid. */
typedef struct ra_box {
    int64_t batch;
    float start[2], bin[2];
    int64_t grid[2];
} ra_box;

/* Reads box row r (torchvision's arithmetic); false when torchvision's result would be undefined
 * or the grid too large. */
static bool ra_box_read(const ra_state *s, const float *r, int64_t n, ra_box *b)
{
    const float off = s->aligned ? 0.5f : 0.0f;
    if (!(r[0] > -1.0f && r[0] < (float)n)) {
        return false; /* also NaN */
    }
    b->batch = (int64_t)r[0];
    for (int a = 0; a < 2; a++) {
        const float start = r[1 + (1 - a)] * s->scale - off;
        const float end = r[3 + (1 - a)] * s->scale - off;
        float size = end - start;
        if (!s->aligned) {
            size = size < 1.0f ? 1.0f : size; /* std::max(size, 1): NaN stays NaN */
        }
        b->start[a] = start;
        b->bin[a] = size / (float)s->out[a];
        if (s->ratio > 0) {
            b->grid[a] = s->ratio;
        } else {
            const float g = ceilf(b->bin[a]); /* ceil(size / bins) */
            if (!(g > -(float)RA_MAX_GRID && g <= (float)RA_MAX_GRID)) {
                return false;
            }
            b->grid[a] = (int64_t)g;
        }
    }
    /* both negative grids multiply to a positive count but sample nothing */
    return b->grid[0] <= 0 || b->grid[1] <= 0 || b->grid[0] * b->grid[1] <= RA_MAX_GRID;
}

/* pre_calc_for_bilinear_interpolate: the four taps of the sample at (y, x) of an h x w plane. */
static void ra_taps(float y, float x, int64_t h, int64_t w, int64_t *pos, float *wt)
{
    if (!(y >= -1.0f && y <= (float)h && x >= -1.0f && x <= (float)w)) {
        pos[0] = pos[1] = pos[2] = pos[3] = 0; /* torchvision's empty sample (NaN too) */
        wt[0] = wt[1] = wt[2] = wt[3] = 0.0f;
        return;
    }
    y = y <= 0 ? 0 : y;
    x = x <= 0 ? 0 : x;
    int64_t y0 = (int64_t)y, x0 = (int64_t)x, y1, x1;
    if (y0 >= h - 1) {
        y1 = y0 = h - 1;
        y = (float)y0;
    } else {
        y1 = y0 + 1;
    }
    if (x0 >= w - 1) {
        x1 = x0 = w - 1;
        x = (float)x0;
    } else {
        x1 = x0 + 1;
    }
    const float ly = y - (float)y0, lx = x - (float)x0;
    const float hy = (float)(1. - ly), hx = (float)(1. - lx); /* in double, as torchvision */
    pos[0] = y0 * w + x0, pos[1] = y0 * w + x1, pos[2] = y1 * w + x0, pos[3] = y1 * w + x1;
    wt[0] = hy * hx, wt[1] = hy * lx, wt[2] = ly * hx, wt[3] = ly * lx;
}

/* One (box, channel) plane: dst[ph][pw] from the h x w plane src. */
static void ra_plane(const ra_state *s, const ra_box *b, const float *src, int64_t h, int64_t w,
                     float *dst)
{
    const int64_t gh = b->grid[0], gw = b->grid[1];
    const int64_t cnt = gh * gw;
    const float count = (float)(cnt > 1 ? cnt : 1);
    for (int64_t py = 0; py < s->out[0]; py++) {
        for (int64_t px = 0; px < s->out[1]; px++) {
            float acc = 0.0f;
            for (int64_t iy = 0; iy < gh; iy++) {
                const float y =
                    b->start[0] + (float)py * b->bin[0] + ((float)iy + .5f) * b->bin[0] / (float)gh;
                for (int64_t ix = 0; ix < gw; ix++) {
                    const float x = b->start[1] + (float)px * b->bin[1] +
                                    ((float)ix + .5f) * b->bin[1] / (float)gw;
                    int64_t pos[4];
                    float wt[4];
                    ra_taps(y, x, h, w, pos, wt);
                    acc += wt[0] * src[pos[0]] + wt[1] * src[pos[1]] + wt[2] * src[pos[2]] +
                           wt[3] * src[pos[3]];
                }
            }
            dst[py * s->out[1] + px] = acc / count;
        }
    }
}

static ki_status ra_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const ra_state *s = state;
    const ki_shape *xs = &in[0].shape;
    const int64_t k = in[1].shape.d[0], c = xs->d[1], h = xs->d[2], w = xs->d[3];
    const int64_t plane = s->out[0] * s->out[1];
    ra_box b;
    (void)n_in, (void)n_out;
    for (int64_t i = 0; i < k; i++) {
        if (!ra_box_read(s, in[1].data + i * 5, xs->d[0], &b)) {
            return KI_ERR_LIMIT; /* a batch index outside [0, N) or a runaway sampling grid */
        }
    }
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) private(b)
    for (int64_t t = 0; t < k * c; t++) {
        const int64_t i = t / c, ch = t % c;
        ra_box_read(s, in[1].data + i * 5, xs->d[0], &b);
        ra_plane(s, &b, in[0].data + (b.batch * c + ch) * h * w, h, w, out[0].data + t * plane);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_tv_roi_align = {
    .type = "torchvision.ops.RoIAlign",
    .create = ra_create,
    .shape = ra_shape,
    .forward = ra_forward,
    .destroy = free,
};

/* torchvision.ops.roi_align called as a function: pnnx writes the TorchScript operator. */
const ki_layer_ops ki_layer_tv_roi_align_custom = {
    .type = "pnnx.custom_op.torchvision.roi_align",
    .create = ra_create_custom,
    .shape = ra_shape,
    .forward = ra_forward,
    .destroy = free,
};
