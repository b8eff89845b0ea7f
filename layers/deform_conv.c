/* deform_conv.c - torchvision.ops.DeformConv2d (pnnx keeps the module whole; the export needs
 * torchvision's operator library loaded into pnnx, customop=.../torchvision/_C*.so): a 2-D
 * convolution whose kernel taps are moved by a learned offset and, in DCNv2, scaled by a
 * modulation mask. Inputs: x (N, C, H, W), offset (N, 2*og*kh*kw, oh, ow) and an optional mask
 * (N, og*kh*kw, oh, ow), og offset groups (og divides C; read from the offset's channels, as
 * torchvision does). Offset channel 2*(i*kw + j) of a group holds the tap's dy, the next one its
 * dx. Params: in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias;
 * @weight (out, C/groups, kh, kw) and @bias (out). The function torchvision.ops.deform_conv2d
 * comes as pnnx.custom_op.torchvision.deform_conv2d: input, weight, offset, mask and bias as
 * inputs $arg_0 .. $arg_4, then constants stride, padding, dilation (h, w each), groups,
 * offset_groups and use_mask as arg_5 .. arg_13.
 *
 * The arithmetic follows torchvision's CPU kernel (deform_conv2d_kernel.cpp): the tap of output
 * (oy, ox) at (i, j) reads x at y = (oy*sh - ph + i*dh) + dy, x = (ox*sw - pw + j*dw) + dx by
 * bilinear interpolation, zero when y <= -1, y >= H, x <= -1 or x >= W, and corners outside the
 * plane read as zero; the sample is multiplied by the mask. The output is the grouped product of
 * the weight with these samples, plus the bias.
 *
 * Reference kernel: each task is a tile of DC_TILE output pixels of one image; its samples (C*kh*kw
 * rows of the tile) go to the thread's workspace and every output channel of the tile is summed
 * from them in a fixed order, so results do not depend on the thread count. State: parameters
 * and the model's weights, immutable; thread-safe. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "conv_common.h"

#define DC_TILE 64 /* output pixels per task */

typedef struct dcn_state {
    int64_t in_ch, out_ch, groups;
    int64_t k[2], stride[2], pad[2], dil[2];
    const float *weight; /* (out_ch, in_ch / groups, kh, kw) */
    const float *bias;   /* out_ch values, or NULL */
    bool use_mask;
    /* The function's form (pnnx.custom_op.torchvision.deform_conv2d): weight and bias are
     * inputs, and in_ch, out_ch and k come from the weight's shape when it is bound to a run. */
    bool custom;
    int64_t offset_groups;                    /* custom only: arg_12, checked against the offset */
    int in_x, in_w, in_off, in_mask, in_bias; /* input slots; w and bias -1 for the module */
} dcn_state;

/* kernel_size (checked against @weight), stride, padding and dilation. */
static ki_status dcn_geometry(const ki_op_desc *op, dcn_state *s, const ki_attr *w, ki_error *err)
{
    static const int64_t one[2] = { 1, 1 }, zero[2] = { 0, 0 };
    ki_status st = ki_op_get_ints(op, "kernel_size", 2, &w->shape.d[2], s->k, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "stride", 2, one, s->stride, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "padding", 2, zero, s->pad, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "dilation", 2, one, s->dil, err);
    if (st != KI_OK) {
        return st;
    }
    if (s->k[0] != w->shape.d[2] || s->k[1] != w->shape.d[3]) {
        return KI_FAIL(err, KI_ERR_SHAPE, "kernel_size (%lld,%lld) does not match @weight",
                       (long long)s->k[0], (long long)s->k[1]);
    }
    for (int i = 0; i < 2; i++) {
        if (s->k[i] < 1 || s->k[i] > KI_CV_MAX_PARAM || s->stride[i] < 1 ||
            s->stride[i] > KI_CV_MAX_PARAM || s->dil[i] < 1 || s->dil[i] > KI_CV_MAX_PARAM ||
            s->pad[i] < 0 || s->pad[i] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_FORMAT,
                           "kernel_size, stride and dilation must be in [1, %lld] and padding in "
                           "[0, %lld] (axis %d: %lld, %lld, %lld, %lld)",
                           (long long)KI_CV_MAX_PARAM, (long long)KI_CV_MAX_PARAM, i,
                           (long long)s->k[i], (long long)s->stride[i], (long long)s->dil[i],
                           (long long)s->pad[i]);
        }
    }
    return KI_OK;
}

/* groups, the channel counts and the bias, against @weight. */
static ki_status dcn_channels(const ki_op_desc *op, dcn_state *s, const ki_attr *w, ki_error *err)
{
    const ki_attr *b;
    bool has_bias;
    ki_status st = ki_op_get_int(op, "groups", 1, &s->groups, err);
    if (st == KI_OK && (s->groups < 1 || s->groups > KI_MAX_DIM || w->shape.d[0] < 1 ||
                        w->shape.d[1] < 1 || w->shape.d[0] % s->groups != 0)) {
        st = KI_FAIL(err, KI_ERR_SHAPE, "groups=%lld does not divide @weight's %lld out channels",
                     (long long)s->groups, (long long)w->shape.d[0]);
    }
    if (st != KI_OK) {
        return st;
    }
    s->out_ch = w->shape.d[0];
    s->in_ch = w->shape.d[1] * s->groups; /* both at most KI_MAX_DIM: no overflow */
    st = ki_cv_check_count(op, "in_channels", s->in_ch, err);
    st = st != KI_OK ? st : ki_cv_check_count(op, "out_channels", s->out_ch, err);
    st = st != KI_OK ? st
                     : ki_op_get_bool(op, "bias", ki_op_attr(op, "bias") != NULL, &has_bias, err);
    if (st == KI_OK && has_bias) {
        st = ki_op_require_attr(op, "bias", 1, &s->out_ch, &b, err);
        s->bias = st == KI_OK ? b->data : NULL;
    }
    return st;
}

static ki_status dcn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    static const int64_t any4[4] = { -1, -1, -1, -1 };
    const ki_attr *w;
    dcn_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = KI_OK;
    if ((op->n_inputs != 2 && op->n_inputs != 3) || op->n_outputs != 1) {
        st = KI_FAIL(err, KI_ERR_FORMAT,
                     "has %d inputs and %d outputs, expected input, offset, optional mask and 1 "
                     "output",
                     op->n_inputs, op->n_outputs);
    }
    st = st != KI_OK ? st : ki_op_require_attr(op, "weight", 4, any4, &w, err);
    st = st != KI_OK ? st : dcn_channels(op, s, w, err);
    st = st != KI_OK ? st : dcn_geometry(op, s, w, err);
    if (st != KI_OK) {
        free(s);
        return st;
    }
    s->weight = w->data;
    s->use_mask = op->n_inputs == 3;
    s->in_x = 0, s->in_w = -1, s->in_off = 1, s->in_mask = s->use_mask ? 2 : -1, s->in_bias = -1;
    *state = s;
    return KI_OK;
}

/* The function's constants arg_5 .. arg_13: stride, padding and dilation (h, w), groups,
 * offset_groups, use_mask. */
static ki_status dcn_custom_params(const ki_op_desc *op, dcn_state *s, ki_error *err)
{
    static const char *const keys[9] = { "arg_5",  "arg_6",  "arg_7",  "arg_8", "arg_9",
                                         "arg_10", "arg_11", "arg_12", "arg_13" };
    int64_t v[8];
    ki_status st = KI_OK;
    for (int i = 0; i < 9 && st == KI_OK; i++) {
        if (!ki_op_has(op, keys[i])) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "missing constant %s", keys[i]);
        }
        st = i < 8 ? ki_op_get_int(op, keys[i], 0, &v[i], err)
                   : ki_op_get_bool(op, keys[i], false, &s->use_mask, err);
    }
    if (st != KI_OK) {
        return st;
    }
    for (int a = 0; a < 2; a++) {
        s->stride[a] = v[a], s->pad[a] = v[2 + a], s->dil[a] = v[4 + a];
        s->k[a] = 1; /* checked again with the weight's */
        if (s->stride[a] < 1 || s->stride[a] > KI_CV_MAX_PARAM || s->dil[a] < 1 ||
            s->dil[a] > KI_CV_MAX_PARAM || s->pad[a] < 0 || s->pad[a] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_FORMAT,
                           "stride and dilation must be in [1, %lld] and padding in [0, %lld]",
                           (long long)KI_CV_MAX_PARAM, (long long)KI_CV_MAX_PARAM);
        }
    }
    s->groups = v[6], s->offset_groups = v[7];
    if (s->groups < 1 || s->groups > KI_MAX_DIM || s->offset_groups < 1 ||
        s->offset_groups > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_FORMAT, "groups %lld / offset_groups %lld must be positive",
                       (long long)s->groups, (long long)s->offset_groups);
    }
    return KI_OK;
}

/* pnnx.custom_op.torchvision.deform_conv2d: input, weight, offset, mask, bias as $arg_0 ..
 * $arg_4 (pnnx passes a None mask or bias as a constant operand; the mask is read only with
 * use_mask). */
static ki_status dcn_create_custom(const ki_op_desc *op, void **state, ki_error *err)
{
    static const char *const keys[5] = { "arg_0", "arg_1", "arg_2", "arg_3", "arg_4" };
    int slot[5];
    dcn_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st =
        op->n_inputs == 5 && op->n_outputs == 1
            ? KI_OK
            : KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs and %d outputs, expected 5 and 1",
                      op->n_inputs, op->n_outputs);
    for (int i = 0; i < 5 && st == KI_OK; i++) {
        slot[i] = ki_op_input_index(op, keys[i]);
        if (slot[i] < 0) {
            st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects $arg_0 .. $arg_4 as inputs");
        }
    }
    st = st != KI_OK ? st : dcn_custom_params(op, s, err);
    if (st != KI_OK) {
        free(s);
        return st;
    }
    s->custom = true;
    s->in_x = slot[0], s->in_w = slot[1], s->in_off = slot[2], s->in_bias = slot[4];
    s->in_mask = s->use_mask ? slot[3] : -1;
    *state = s;
    return KI_OK;
}

/* The layer for these input shapes: the function's takes channels and kernel from the weight
 * and checks it and the bias; the module's is the state itself. */
static ki_status dcn_bind(const dcn_state *s, const ki_shape *in, dcn_state *b, ki_error *err)
{
    char buf[96];
    *b = *s;
    if (!s->custom) {
        return KI_OK;
    }
    const ki_shape *w = &in[s->in_w], *bias = &in[s->in_bias];
    if (w->kind != KI_KIND_TENSOR || w->ndim != 4 || w->d[0] < 1 || w->d[1] < 1 ||
        w->d[1] > KI_MAX_DIM / s->groups || w->d[0] % s->groups != 0 || w->d[2] < 1 ||
        w->d[2] > KI_CV_MAX_PARAM || w->d[3] < 1 || w->d[3] > KI_CV_MAX_PARAM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "weight %s is not (out, in/%lld, kh, kw)",
                       ki_shape_str(w, buf, sizeof buf), (long long)s->groups);
    }
    if (bias->kind != KI_KIND_TENSOR || bias->ndim != 1 || bias->d[0] != w->d[0]) {
        return KI_FAIL(err, KI_ERR_SHAPE, "bias %s does not hold %lld values",
                       ki_shape_str(bias, buf, sizeof buf), (long long)w->d[0]);
    }
    b->out_ch = w->d[0], b->in_ch = w->d[1] * s->groups, b->k[0] = w->d[2], b->k[1] = w->d[3];
    return KI_OK;
}

/* Output size along one axis, with torchvision's integer division (truncating). */
static int64_t dcn_out_size(const dcn_state *s, int ax, int64_t n)
{
    return (n + 2 * s->pad[ax] - (s->dil[ax] * (s->k[ax] - 1) + 1)) / s->stride[ax] + 1;
}

/* One of the per-pixel inputs (offset, mask): (n, ch, oh, ow) with ch a positive multiple of
 * per_group; *groups gets ch / per_group. */
static ki_status dcn_check_map(const ki_shape *m, const char *what, const int64_t *want,
                               int64_t per_group, int64_t *groups, ki_error *err)
{
    char buf[96];
    if (m->kind != KI_KIND_TENSOR || m->ndim != 4 || m->d[0] != want[0] || m->d[2] != want[2] ||
        m->d[3] != want[3] || m->d[1] < per_group || m->d[1] % per_group != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "%s %s is not (%lld, k*%lld, %lld, %lld) for the input and kernel", what,
                       ki_shape_str(m, buf, sizeof buf), (long long)want[0], (long long)per_group,
                       (long long)want[2], (long long)want[3]);
    }
    *groups = m->d[1] / per_group;
    return KI_OK;
}

static ki_status dcn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    dcn_state bound;
    const dcn_state *s = &bound;
    char buf[96];
    int64_t og, mg;
    (void)n_in, (void)n_out;
    ki_status st = dcn_bind(state, in, &bound, err);
    if (st != KI_OK) {
        return st;
    }
    const ki_shape *x = &in[s->in_x];
    const int64_t kk = s->k[0] * s->k[1];
    if (x->kind != KI_KIND_TENSOR || x->ndim != 4 || x->d[1] != s->in_ch) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s is not (N, %lld, H, W)",
                       ki_shape_str(x, buf, sizeof buf), (long long)s->in_ch);
    }
    int64_t d[4] = { x->d[0], s->out_ch, dcn_out_size(s, 0, x->d[2]), dcn_out_size(s, 1, x->d[3]) };
    if (d[2] < 1 || d[3] < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s is too small for the kernel (output %lldx%lld)",
                       ki_shape_str(x, buf, sizeof buf), (long long)d[2], (long long)d[3]);
    }
    st = dcn_check_map(&in[s->in_off], "offset", d, 2 * kk, &og, err);
    if (st != KI_OK) {
        return st;
    }
    if (s->custom && og != s->offset_groups) {
        return KI_FAIL(err, KI_ERR_SHAPE, "offset has %lld groups, offset_groups is %lld",
                       (long long)og, (long long)s->offset_groups);
    }
    if (s->in_ch % og != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "%lld offset groups do not divide %lld input channels",
                       (long long)og, (long long)s->in_ch);
    }
    if (s->use_mask) {
        st = dcn_check_map(&in[s->in_mask], "mask", d, kk, &mg, err);
        if (st == KI_OK && mg != og) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "mask has %lld groups, offset %lld", (long long)mg,
                         (long long)og);
        }
    }
    *out = ki_shape_make(4, d);
    return st != KI_OK ? st : ki_shape_check(out, err);
}

static size_t dcn_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                            int n_out, int n_threads)
{
    dcn_state b;
    ki_error err;
    size_t bytes;
    (void)n_in, (void)out, (void)n_out, (void)n_threads;
    if (dcn_bind(state, in, &b, &err) != KI_OK) {
        return SIZE_MAX; /* shape() has failed already */
    }
    return ki_cv_floats3(&bytes, b.in_ch * b.k[0], b.k[1], DC_TILE) ? bytes : SIZE_MAX;
}

/* torchvision's bilinear_interpolate for deformable convolution. */
static float dcn_bilinear(const float *in, int64_t h, int64_t w, float y, float x)
{
    if (!(y > -1.0f && y < (float)h && x > -1.0f && x < (float)w)) {
        return 0.0f; /* also for NaN, which torchvision leaves undefined */
    }
    const int64_t y0 = (int64_t)floorf(y), x0 = (int64_t)floorf(x), y1 = y0 + 1, x1 = x0 + 1;
    const float ly = y - (float)y0, lx = x - (float)x0, hy = 1 - ly, hx = 1 - lx;
    const float v1 = y0 >= 0 && x0 >= 0 ? in[y0 * w + x0] : 0.0f;
    const float v2 = y0 >= 0 && x1 <= w - 1 ? in[y0 * w + x1] : 0.0f;
    const float v3 = y1 <= h - 1 && x0 >= 0 ? in[y1 * w + x0] : 0.0f;
    const float v4 = y1 <= h - 1 && x1 <= w - 1 ? in[y1 * w + x1] : 0.0f;
    const float w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
    return w1 * v1 + w2 * v2 + w3 * v3 + w4 * v4;
}

/* One image's tensors and sizes, for a tile's sampling. */
typedef struct dcn_image {
    const float *x, *offset, *mask; /* this image's planes; mask NULL without one */
    int64_t h, w, oh, ow, og;
} dcn_image;

/* The samples of pixels [p0, p0 + np) into col: row c*kh*kw + i*kw + j, DC_TILE floats a row. */
static void dcn_sample(const dcn_state *s, const dcn_image *im, int64_t p0, int64_t np, float *col)
{
    const int64_t kk = s->k[0] * s->k[1], plane = im->oh * im->ow, cpg = s->in_ch / im->og;
    for (int64_t c = 0; c < s->in_ch; c++) {
        const int64_t g = c / cpg;
        const float *src = im->x + c * im->h * im->w;
        const float *off = im->offset + g * 2 * kk * plane;
        const float *msk = im->mask ? im->mask + g * kk * plane : NULL;
        for (int64_t t = 0; t < kk; t++) {
            const int64_t i = t / s->k[1], j = t % s->k[1];
            float *row = col + (c * kk + t) * DC_TILE;
            for (int64_t q = 0; q < np; q++) {
                const int64_t p = p0 + q, oy = p / im->ow, ox = p % im->ow;
                const float dy = off[2 * t * plane + p], dx = off[(2 * t + 1) * plane + p];
                const float y = (float)(oy * s->stride[0] - s->pad[0] + i * s->dil[0]) + dy;
                const float xx = (float)(ox * s->stride[1] - s->pad[1] + j * s->dil[1]) + dx;
                const float m = msk ? msk[t * plane + p] : 1.0f;
                row[q] = m * dcn_bilinear(src, im->h, im->w, y, xx);
            }
        }
    }
}

/* Every output channel of the tile: y[oc][p0 + q] = bias + sum_r weight[oc][r] * col[r][q] over
 * the rows r of oc's group, in increasing r. */
static void dcn_gemm(const dcn_state *s, const float *col, int64_t np, float *y, int64_t plane)
{
    const int64_t cpg = s->in_ch / s->groups, opg = s->out_ch / s->groups;
    const int64_t rows = cpg * s->k[0] * s->k[1];
    float acc[DC_TILE];
    for (int64_t oc = 0; oc < s->out_ch; oc++) {
        const float *wr = s->weight + oc * rows;
        const float *cg = col + (oc / opg) * rows * DC_TILE;
        for (int64_t q = 0; q < np; q++) {
            acc[q] = 0.0f;
        }
        for (int64_t r = 0; r < rows; r++) {
            const float wv = wr[r];
            const float *cr = cg + r * DC_TILE;
            for (int64_t q = 0; q < np; q++) {
                acc[q] += wv * cr[q];
            }
        }
        const float b = s->bias ? s->bias[oc] : 0.0f;
        for (int64_t q = 0; q < np; q++) {
            y[oc * plane + q] = acc[q] + b;
        }
    }
}

static ki_status dcn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    ki_shape shapes[5];
    dcn_state bound;
    const dcn_state *s = &bound;
    ki_error err;
    (void)n_out;
    for (int i = 0; i < n_in && i < 5; i++) {
        shapes[i] = in[i].shape;
    }
    if (dcn_bind(state, shapes, &bound, &err) != KI_OK ||
        ex->ws_per_thread < dcn_workspace(state, shapes, n_in, NULL, 0, ex->n_threads)) {
        return KI_ERR_INTERNAL; /* shape() has checked them */
    }
    if (s->custom) {
        bound.weight = in[s->in_w].data, bound.bias = in[s->in_bias].data;
    }
    const ki_shape *xs = &in[s->in_x].shape, *os = &out[0].shape;
    const int64_t kk = s->k[0] * s->k[1], plane = os->d[2] * os->d[3];
    const int64_t og = in[s->in_off].shape.d[1] / (2 * kk), tiles = (plane + DC_TILE - 1) / DC_TILE;
    const int64_t tasks = os->d[0] * tiles;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static)
    for (int64_t task = 0; task < tasks; task++) {
        const int64_t b = task / tiles, p0 = task % tiles * DC_TILE;
        const int64_t np = plane - p0 < DC_TILE ? plane - p0 : DC_TILE;
        float *col = ki_exec_slice(ex, omp_get_thread_num());
        const dcn_image im = {
            .x = in[s->in_x].data + b * xs->d[1] * xs->d[2] * xs->d[3],
            .offset = in[s->in_off].data + b * 2 * og * kk * plane,
            .mask = s->use_mask ? in[s->in_mask].data + b * og * kk * plane : NULL,
            .h = xs->d[2],
            .w = xs->d[3],
            .oh = os->d[2],
            .ow = os->d[3],
            .og = og,
        };
        dcn_sample(s, &im, p0, np, col);
        dcn_gemm(s, col, np, out[0].data + b * s->out_ch * plane + p0, plane);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_tv_deform_conv2d = {
    .type = "torchvision.ops.DeformConv2d",
    .create = dcn_create,
    .shape = dcn_shape,
    .workspace = dcn_workspace,
    .forward = dcn_forward,
    .destroy = free,
};

/* torchvision.ops.deform_conv2d called as a function: pnnx writes the TorchScript operator. */
const ki_layer_ops ki_layer_tv_deform_conv2d_custom = {
    .type = "pnnx.custom_op.torchvision.deform_conv2d",
    .create = dcn_create_custom,
    .shape = dcn_shape,
    .workspace = dcn_workspace,
    .forward = dcn_forward,
    .destroy = free,
};
