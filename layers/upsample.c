/* upsample.c - nn.Upsample / F.interpolate / F.upsample / F.upsample_nearest /
 * F.upsample_bilinear (and nn.UpsamplingNearest2d / nn.UpsamplingBilinear2d).
 *
 * Modes nearest and nearest-exact on 3-D..5-D input, linear / bilinear / trilinear on 3-D / 4-D /
 * 5-D input, following PyTorch's CPU kernels (aten/src/ATen/native/UpSample.h) bit for bit in
 * the index computation: float scales, floorf, and the out == in / out == 2 * in shortcuts of
 * nearest. The output size comes from `size` (parameter or a `$size` list input) or from
 * floor(in * scale_factor). The state is read-only after create and owns nothing else. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/layer.h"
#include "../core/team.h"

#define MAX_SPATIAL 3

typedef enum up_mode { UP_NEAREST, UP_NEAREST_EXACT, UP_LINEAR, UP_CUBIC } up_mode;

typedef struct up_state {
    up_mode mode;
    int rank;           /* spatial rank the mode needs (1 linear, 2 bilinear, 3 trilinear); 0 any */
    bool align_corners; /* linear modes only */
    bool recompute;     /* recompute_scale_factor=True: interpolate with in/out, not 1/scale */
    int n_size, n_scale; /* entries in size / scale_factor parameters, -1 when None */
    int64_t size[MAX_SPATIAL];
    double scale[MAX_SPATIAL];
    int size_in, scale_in; /* input indices of $size / $scale_factor, or -1 */
} up_state;

/* One spatial axis: sizes and PyTorch's float32 source-index scale. */
typedef struct up_axis {
    int64_t in, out;
    float scale;
} up_axis;

typedef struct up_default {
    const char *type;
    const char *mode;
    bool align_corners;
} up_default;

static const up_default up_defaults[] = {
    { "nn.Upsample", "nearest", false },
    { "F.interpolate", "nearest", false },
    { "F.upsample", "nearest", false },
    { "F.upsample_nearest", "nearest", false },
    { "F.upsample_bilinear", "bilinear", true },
    { "nn.UpsamplingNearest2d", "nearest", false },
    { "nn.UpsamplingBilinear2d", "bilinear", true },
};

static ki_status up_mode_parse(const char *mode, up_state *p, ki_error *err)
{
    static const char *const names[] = { "nearest", "nearest-exact", "linear", "bilinear",
                                         "trilinear" };
    if (strcmp(mode, "bicubic") == 0) {
        p->mode = UP_CUBIC, p->rank = 2;
        return KI_OK;
    }
    for (int i = 0; i < 5; i++) {
        if (strcmp(mode, names[i]) == 0) {
            p->mode = i == 0 ? UP_NEAREST : (i == 1 ? UP_NEAREST_EXACT : UP_LINEAR);
            p->rank = i < 2 ? 0 : i - 1;
            return KI_OK;
        }
    }
    return KI_FAIL(err, KI_ERR_UNSUPPORTED, "mode=%s is not supported", mode);
}

static ki_status up_read_params(const ki_op_desc *op, up_state *p, ki_error *err)
{
    const up_default *d = &up_defaults[0];
    const char *mode;
    bool antialias;
    for (size_t i = 0; i < sizeof up_defaults / sizeof up_defaults[0]; i++) {
        d = strcmp(op->type, up_defaults[i].type) == 0 ? &up_defaults[i] : d;
    }
    ki_status st = ki_op_get_string(op, "mode", d->mode, &mode, err);
    if (st == KI_OK) {
        st = up_mode_parse(mode, p, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "align_corners", d->align_corners, &p->align_corners, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "recompute_scale_factor", false, &p->recompute, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "antialias", false, &antialias, err);
    }
    if (st == KI_OK && antialias) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "antialias=True is not supported");
    }
    if (st == KI_OK) {
        st = ki_op_get_int_list(op, "size", MAX_SPATIAL, p->size, &p->n_size, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_float_list(op, "scale_factor", MAX_SPATIAL, p->scale, &p->n_scale, err);
    }
    /* Only linear and cubic modes interpolate between pixels; nearest ignores align_corners. */
    p->align_corners = p->align_corners && (p->mode == UP_LINEAR || p->mode == UP_CUBIC);
    return st;
}

static ki_status up_check(const ki_op_desc *op, const up_state *p, ki_error *err)
{
    const bool has_size = p->n_size >= 0 || p->size_in >= 0;
    const bool has_scale = p->n_scale >= 0 || p->scale_in >= 0;
    const int want = 1 + (p->size_in >= 0) + (p->scale_in >= 0);
    if (op->n_inputs != want || op->n_outputs != 1 || ki_op_input_index(op, "input") > 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                       "expects the input first, %d inputs and 1 output, got %d and %d", want,
                       op->n_inputs, op->n_outputs);
    }
    if (has_size == has_scale) {
        return KI_FAIL(err, KI_ERR_FORMAT, "exactly one of size and scale_factor must be given");
    }
    for (int i = 0; i < p->n_size; i++) {
        if (p->size[i] < 1 || p->size[i] > KI_MAX_DIM) {
            return KI_FAIL(err, KI_ERR_FORMAT, "size entry %lld is not positive",
                           (long long)p->size[i]);
        }
    }
    for (int i = 0; i < p->n_scale; i++) {
        if (!(p->scale[i] > 0.0) || !isfinite(p->scale[i])) {
            return KI_FAIL(err, KI_ERR_FORMAT, "scale_factor entry %g is not positive",
                           p->scale[i]);
        }
    }
    return KI_OK;
}

static ki_status up_create(const ki_op_desc *op, void **state, ki_error *err)
{
    up_state *p = calloc(1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->size_in = ki_op_input_index(op, "size");
    p->scale_in = ki_op_input_index(op, "scale_factor");
    ki_status st = up_read_params(op, p, err);
    if (st == KI_OK) {
        st = up_check(op, p, err);
    }
    if (st != KI_OK) {
        free(p);
        return st;
    }
    *state = p;
    return KI_OK;
}

/* The numbers of a runtime size / scale_factor input: its shape-time values, else (in forward)
 * its data. *n = -1 when they are not known. */
static void runtime_values(const ki_shape *s, const float *data, double *v, int *n)
{
    const int count = s->kind == KI_KIND_SCALAR ? 1 : (int)s->d[0];
    *n = -1;
    if ((s->kind != KI_KIND_SCALAR && s->kind != KI_KIND_LIST) || count > MAX_SPATIAL ||
        (!s->has_values && !data)) {
        return;
    }
    for (int i = 0; i < count; i++) {
        v[i] = s->has_values ? s->values[i] : (double)data[i];
    }
    *n = count;
}

/* Per-axis request for sp spatial dims: sizes (*is_size) or scale factors, broadcast from one
 * entry as PyTorch does. Fails when the count is neither 1 nor sp or values are unknown. */
static ki_status up_request(const up_state *p, const ki_shape *in, const float *rt_data, int sp,
                            double *v, bool *is_size, ki_error *err)
{
    double raw[MAX_SPATIAL];
    int n;
    *is_size = p->n_size >= 0 || p->size_in >= 0;
    if (p->size_in >= 0 || p->scale_in >= 0) {
        runtime_values(&in[p->size_in >= 0 ? p->size_in : p->scale_in], rt_data, raw, &n);
    } else {
        n = *is_size ? p->n_size : p->n_scale;
        for (int i = 0; i < n; i++) {
            raw[i] = *is_size ? (double)p->size[i] : p->scale[i];
        }
    }
    if (n != 1 && n != sp) {
        return KI_FAIL(err, KI_ERR_SHAPE, "%s needs 1 or %d known entries",
                       *is_size ? "size" : "scale_factor", sp);
    }
    for (int i = 0; i < sp; i++) {
        v[i] = raw[n == 1 ? 0 : i];
        if (!(v[i] > 0.0) || !isfinite(v[i])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%s entry %g is not positive",
                           *is_size ? "size" : "scale_factor", v[i]);
        }
    }
    return KI_OK;
}

static ki_status up_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const up_state *p = state;
    char buf[128];
    double v[MAX_SPATIAL];
    bool is_size;
    if (n_in != 1 + (p->size_in >= 0) + (p->scale_in >= 0) || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "wrong number of inputs or outputs");
    }
    const int sp = in[0].ndim - 2;
    if (in[0].kind != KI_KIND_TENSOR || sp < 1 || sp > MAX_SPATIAL || (p->rank && sp != p->rank)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s has the wrong rank for this mode",
                       ki_shape_str(&in[0], buf, sizeof buf));
    }
    ki_status st = up_request(p, in, NULL, sp, v, &is_size, err);
    if (st != KI_OK) {
        return st;
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    for (int i = 0; i < sp; i++) {
        /* PyTorch: floor(float(in * scale_factor)), in double. */
        const double o = is_size ? v[i] : floor((double)in[0].d[i + 2] * v[i]);
        if (in[0].d[i + 2] < 1 || !(o >= 1.0) || o > (double)KI_MAX_DIM) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %s gives an empty or too large output",
                           ki_shape_str(&in[0], buf, sizeof buf));
        }
        out[0].d[i + 2] = (int64_t)o;
    }
    return ki_shape_check(&out[0], err);
}

/* The three axes (D, H, W) of a forward call; missing leading axes have size 1. */
static void up_axes(const up_state *p, const ki_tensor *in, const ki_shape *os, up_axis *ax)
{
    const ki_shape *is = &in[0].shape;
    const int sp = is->ndim - 2;
    double sf[MAX_SPATIAL] = { -1.0, -1.0, -1.0 };
    bool is_size;
    /* PyTorch passes scale_factor on to the kernel unless sizes were given or it recomputes. */
    if (!p->recompute && p->n_size < 0 && p->size_in < 0) {
        ki_shape sh[3];
        for (int i = 0; i < 1 + (p->scale_in >= 0); i++) {
            sh[i] = in[i].shape;
        }
        const float *rt = p->scale_in >= 0 ? in[p->scale_in].data : NULL;
        if (up_request(p, sh, rt, sp, sf, &is_size, NULL) != KI_OK) {
            sf[0] = sf[1] = sf[2] = -1.0;
        }
    }
    for (int a = 0; a < MAX_SPATIAL; a++) {
        const int k = a - (MAX_SPATIAL - sp); /* spatial index, < 0 for a missing axis */
        ax[a].in = k < 0 ? 1 : is->d[k + 2];
        ax[a].out = k < 0 ? 1 : os->d[k + 2];
        const double s = k < 0 ? -1.0 : sf[k];
        if (p->align_corners) {
            ax[a].scale = ax[a].out > 1 ? (float)(ax[a].in - 1) / (float)(ax[a].out - 1) : 0.0f;
        } else {
            ax[a].scale = s > 0.0 ? (float)(1.0 / s) : (float)ax[a].in / (float)ax[a].out;
        }
    }
}

/* PyTorch nearest_idx / nearest_exact_idx. */
static int64_t src_nearest(const up_axis *a, up_mode mode, int64_t o)
{
    int64_t i;
    if (a->out == a->in) {
        return o;
    }
    if (mode == UP_NEAREST_EXACT) {
        /* (o + 0.5) is double in PyTorch, the product is rounded to float by floorf. */
        i = (int64_t)floorf((float)(((double)o + 0.5) * a->scale));
    } else if (a->out == 2 * a->in) {
        i = o >> 1;
    } else {
        i = (int64_t)floorf((float)o * a->scale);
    }
    return i < a->in - 1 ? i : a->in - 1;
}

/* PyTorch compute_source_index_and_lambda: the two source pixels and their weights. */
static void src_linear(const up_axis *a, bool align, int64_t o, int64_t *i, float *l)
{
    if (a->out == a->in) {
        i[0] = i[1] = o;
        l[0] = 1.0f;
        l[1] = 0.0f;
        return;
    }
    float r = align ? a->scale * (float)o : a->scale * ((float)o + 0.5f) - 0.5f;
    r = r < 0.0f ? 0.0f : r;
    int64_t i0 = (int64_t)floorf(r);
    i0 = i0 < a->in - 1 ? i0 : a->in - 1;
    float l1 = r - (float)i0;
    l1 = l1 < 0.0f ? 0.0f : (l1 > 1.0f ? 1.0f : l1);
    i[0] = i0;
    i[1] = i0 + (i0 < a->in - 1 ? 1 : 0);
    l[0] = 1.0f - l1;
    l[1] = l1;
}

/* One output row (fixed plane, od, oh) of nearest upsampling. */
static void row_nearest(const up_state *p, const up_axis *ax, const float *plane, int64_t od,
                        int64_t oh, float *y)
{
    const int64_t sd = src_nearest(&ax[0], p->mode, od);
    const int64_t sh = src_nearest(&ax[1], p->mode, oh);
    const float *row = plane + (sd * ax[1].in + sh) * ax[2].in;
    if (p->mode == UP_NEAREST && ax[2].out == 2 * ax[2].in) { /* src_nearest's o >> 1, unrolled */
        for (int64_t i = 0; i < ax[2].in; i++) {
            y[2 * i] = y[2 * i + 1] = row[i];
        }
        return;
    }
    for (int64_t ow = 0; ow < ax[2].out; ow++) {
        y[ow] = row[src_nearest(&ax[2], p->mode, ow)];
    }
}

/* An output column's two source columns and weights along W (src_linear), computed once per
 * run into each thread's workspace. */
typedef struct up_col {
    int64_t i0, i1;
    float l0, l1;
} up_col;

/* One output row of (bi/tri)linear upsampling: a weighted sum of up to four input rows
 * (d0/d1 x h0/h1), each interpolated along W through the column table. */
static void row_linear(const up_state *p, const up_axis *ax, const up_col *col, const float *plane,
                       int64_t od, int64_t oh, float *restrict y)
{
    int64_t di[2], hi[2];
    float dl[2], hl[2], cw[4];
    const float *rows[4];
    const int n_rows =
        ax[0].in == 1 && ax[0].out == 1 ? (ax[1].in == 1 && ax[1].out == 1 ? 1 : 2) : 4;
    src_linear(&ax[0], p->align_corners, od, di, dl);
    src_linear(&ax[1], p->align_corners, oh, hi, hl);
    for (int c = 0; c < 4; c++) {
        rows[c] = plane + (di[c >> 1] * ax[1].in + hi[c & 1]) * ax[2].in;
        cw[c] = dl[c >> 1] * hl[c & 1];
    }
    if (n_rows == 2) { /* bilinear: the same sums as below, with the row loop unrolled */
        const float *r0 = rows[0], *r1 = rows[1];
        const float c0 = cw[0], c1 = cw[1];
        for (int64_t ow = 0; ow < ax[2].out; ow++) {
            const up_col t = col[ow];
            float acc = 0.0f;
            acc += c0 * (t.l0 * r0[t.i0] + t.l1 * r0[t.i1]);
            acc += c1 * (t.l0 * r1[t.i0] + t.l1 * r1[t.i1]);
            y[ow] = acc;
        }
        return;
    }
    for (int64_t ow = 0; ow < ax[2].out; ow++) {
        const up_col t = col[ow];
        float acc = 0.0f;
        for (int c = 0; c < n_rows; c++) {
            acc += cw[c] * (t.l0 * rows[c][t.i0] + t.l1 * rows[c][t.i1]);
        }
        y[ow] = acc;
    }
}

/* PyTorch's cubic convolution weights (A = -0.75) of the four taps around fraction t. */
static void cubic_coeffs(float t, float *c)
{
    const float a = -0.75f;
    float x = t + 1.0f;
    c[0] = ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
    x = t;
    c[1] = ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    x = 1.0f - t;
    c[2] = ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
    x = 2.0f - t;
    c[3] = ((a * x - 5.0f * a) * x + 8.0f * a) * x - 4.0f * a;
}

/* One output row of bicubic upsampling (upsample_bicubic2d: the source index unclamped, the 4 x 4
 * taps clamped to the plane, interpolated along W for each of the four rows, then along H). */
static void row_cubic(const up_state *p, const up_axis *ax, const float *plane, int64_t oh,
                      float *y)
{
    const up_axis *h = &ax[1], *w = &ax[2];
    const float ry = p->align_corners ? h->scale * (float)oh : h->scale * ((float)oh + 0.5f) - 0.5f;
    const int64_t iy = (int64_t)floorf(ry);
    float cy[4], cx[4];
    cubic_coeffs(ry - (float)iy, cy);
    for (int64_t ow = 0; ow < w->out; ow++) {
        const float rx =
            p->align_corners ? w->scale * (float)ow : w->scale * ((float)ow + 0.5f) - 0.5f;
        const int64_t ix = (int64_t)floorf(rx);
        cubic_coeffs(rx - (float)ix, cx);
        float col[4];
        for (int i = 0; i < 4; i++) {
            int64_t yy = iy - 1 + i;
            yy = yy < 0 ? 0 : yy > h->in - 1 ? h->in - 1 : yy;
            const float *row = plane + yy * w->in;
            float v[4];
            for (int j = 0; j < 4; j++) {
                int64_t xx = ix - 1 + j;
                v[j] = row[xx < 0 ? 0 : xx > w->in - 1 ? w->in - 1 : xx];
            }
            col[i] = v[0] * cx[0] + v[1] * cx[1] + v[2] * cx[2] + v[3] * cx[3];
        }
        y[ow] = col[0] * cy[0] + col[1] * cy[1] + col[2] * cy[2] + col[3] * cy[3];
    }
}

/* What the team's threads share in a run. */
typedef struct up_job {
    const up_state *p;
    const up_axis *ax;
    const ki_tensor *in;
    float *out;
    const ki_exec *ex;
    int64_t rows, rows_per_plane, in_plane;
} up_job;

/* Each thread its share of the output rows (and, for the linear modes, its own column table in
 * its slice of the workspace). */
static void up_body(void *arg, const ki_part *pt)
{
    const up_job *j = arg;
    const up_state *p = j->p;
    const up_axis *ax = j->ax;
    up_col *col = NULL;
    if (p->mode == UP_LINEAR) {
        col = (up_col *)(void *)ki_exec_slice(j->ex, pt->tid);
        for (int64_t ow = 0; ow < ax[2].out; ow++) {
            int64_t wi[2];
            float wl[2];
            src_linear(&ax[2], p->align_corners, ow, wi, wl);
            col[ow] = (up_col){ wi[0], wi[1], wl[0], wl[1] };
        }
    }
    int64_t r0, r1;
    ki_part_range(j->rows, pt, &r0, &r1);
    for (int64_t r = r0; r < r1; r++) {
        const int64_t pl = r / j->rows_per_plane;
        const int64_t od = (r % j->rows_per_plane) / ax[1].out;
        const int64_t oh = r % ax[1].out;
        const float *plane = j->in->data + pl * j->in_plane;
        float *y = j->out + r * ax[2].out;
        if (p->mode == UP_LINEAR) {
            row_linear(p, ax, col, plane, od, oh, y);
        } else if (p->mode == UP_CUBIC) {
            row_cubic(p, ax, plane, oh, y);
        } else {
            row_nearest(p, ax, plane, od, oh, y);
        }
    }
}

/* Outputs up to which one thread does the whole layer. */
#define UP_PAR_MIN 16384

static ki_status up_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const up_state *p = state;
    const ki_shape *os = &out[0].shape;
    up_axis ax[MAX_SPATIAL];
    (void)n_in;
    (void)n_out;
    up_axes(p, in, os, ax);
    const int64_t rows_per_plane = ax[0].out * ax[1].out;
    up_job j = { p,
                 ax,
                 &in[0],
                 out[0].data,
                 ex,
                 os->d[0] * os->d[1] * rows_per_plane,
                 rows_per_plane,
                 ax[0].in * ax[1].in * ax[2].in };
    ki_team_run_n(ex, j.rows * ax[2].out > UP_PAR_MIN ? ex->n_threads : 1, up_body, &j);
    return KI_OK;
}

/* The linear modes' column table: one up_col per output column, per thread. */
static size_t up_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                           int n_out, int n_threads)
{
    const up_state *p = state;
    (void)in, (void)n_in, (void)n_out, (void)n_threads;
    return p->mode == UP_LINEAR && out[0].ndim >= 3
               ? (size_t)out[0].d[out[0].ndim - 1] * sizeof(up_col)
               : 0;
}

static void up_destroy(void *state)
{
    free(state);
}

#define UP_LAYER(sym, name)                                                                        \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_TEAM,                                             \
                               .create = up_create,                                                \
                               .shape = up_shape,                                                  \
                               .workspace = up_workspace,                                          \
                               .forward = up_forward,                                              \
                               .destroy = up_destroy }

UP_LAYER(ki_layer_nn_upsample, "nn.Upsample");
UP_LAYER(ki_layer_f_interpolate, "F.interpolate");
UP_LAYER(ki_layer_f_upsample, "F.upsample");
UP_LAYER(ki_layer_f_upsample_nearest, "F.upsample_nearest");
UP_LAYER(ki_layer_f_upsample_bilinear, "F.upsample_bilinear");
UP_LAYER(ki_layer_nn_upsampling_nearest2d, "nn.UpsamplingNearest2d");
UP_LAYER(ki_layer_nn_upsampling_bilinear2d, "nn.UpsamplingBilinear2d");
