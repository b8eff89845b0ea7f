/* vol_common.h - helpers shared by the 3-D (volumetric) layers of the convolution family
 * (conv3d.c, deconv3d.c, pool3d.c): reading (N,C,D,H,W) inputs, triples of spatial parameters,
 * the parameters, operands and column chunks both 3-D convolutions share, and the pooling output
 * size. Only static inline functions, types and the layer-table macro KI_VOL_CONV_OPS; no state,
 * thread-safe. */
#ifndef KI_VOL_COMMON_H
#define KI_VOL_COMMON_H

#include <stdlib.h>
#include <string.h>

#include "conv_common.h"

/* A volumetric input: 5-D (N,C,D,H,W), or 4-D (C,D,H,W) unbatched as PyTorch allows (n = 1). */
typedef struct ki_vol {
    int64_t n, c, d, h, w;
    bool batched;
} ki_vol;

static inline ki_status ki_vol_get(const ki_shape *s, ki_vol *o, ki_error *err)
{
    char buf[96];
    if (s->kind != KI_KIND_TENSOR || (s->ndim != 4 && s->ndim != 5)) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "input %s is not a 4-D (C,D,H,W) or 5-D (N,C,D,H,W) tensor",
                       ki_shape_str(s, buf, sizeof buf));
    }
    o->batched = s->ndim == 5;
    o->n = o->batched ? s->d[0] : 1;
    o->c = s->d[s->ndim - 4];
    o->d = s->d[s->ndim - 3];
    o->h = s->d[s->ndim - 2];
    o->w = s->d[s->ndim - 1];
    return KI_OK;
}

/* The output shape in the same batched/unbatched form as the input, checked against the
 * limits. */
static inline ki_status ki_vol_shape(const ki_vol *x, int64_t c, const int64_t sp[3], ki_shape *out,
                                     ki_error *err)
{
    int64_t d[5] = { x->n, c, sp[0], sp[1], sp[2] };
    *out = x->batched ? ki_shape_make(5, d) : ki_shape_make(4, d + 1);
    return ki_shape_check(out, err);
}

/* A triple parameter (kernel_size, stride, ...): one int or three; absent or None gives def
 * (NULL: required). Every entry must lie in [lo, KI_CV_MAX_PARAM]. */
static inline ki_status ki_vol_triple(const ki_op_desc *op, const char *key, const int64_t *def,
                                      int64_t lo, int64_t out[3], ki_error *err)
{
    ki_status st = ki_op_get_ints(op, key, 3, def, out, err);
    for (int i = 0; st == KI_OK && i < 3; i++) {
        if (out[i] < lo || out[i] > KI_CV_MAX_PARAM) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "parameter %s has an out-of-range entry %lld", key,
                         (long long)out[i]);
        }
    }
    return st;
}

/* A column chunk of the 3-D convolutions holds about this many floats (8 MiB) unless one plane
 * needs more. */
#define KI_VOL_COL_FLOATS ((int64_t)1 << 21)

/* What nn.Conv3d and nn.ConvTranspose3d (and F.conv3d, F.conv_transpose3d) share: the first
 * member of each one's state, so that ki_vol_conv_create and ki_vol_conv_fuse serve both. */
typedef struct ki_vol_conv {
    bool functional; /* F. form: weight (and bias) are inputs w_in (b_in, or -1) */
    bool transposed; /* ConvTranspose3d: @weight is (in, out/groups, kd, kh, kw) */
    int x_in, w_in, b_in;
    int64_t groups;
    int64_t d0, d1; /* nn. form: @weight's first two dims, (out, in/groups) or (in, out/groups) */
    int64_t k[3], s[3], dl[3];
    const float *weight;
    ki_cv_epilogue ep;
} ki_vol_conv;

/* The F. form: input, weight and an optional bias, by `$key` or in that order. */
static inline ki_status ki_vol_conv_inputs(const ki_op_desc *op, ki_vol_conv *v, ki_error *err)
{
    if ((op->n_inputs != 2 && op->n_inputs != 3) || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs and %d outputs, expected 2 or 3 and 1",
                       op->n_inputs, op->n_outputs);
    }
    int x = ki_op_input_index(op, "input"), w = ki_op_input_index(op, "weight");
    int b = ki_op_input_index(op, "bias");
    v->x_in = x >= 0 ? x : 0;
    v->w_in = w >= 0 ? w : 1;
    v->b_in = b >= 0 ? b : (op->n_inputs == 3 ? 2 : -1);
    if (v->x_in == v->w_in || v->x_in == v->b_in || v->w_in == v->b_in || v->w_in >= op->n_inputs ||
        v->x_in >= op->n_inputs || v->b_in >= op->n_inputs ||
        (op->n_inputs == 3) != (v->b_in >= 0)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "cannot tell the input, weight and bias operands apart");
    }
    return KI_OK;
}

/* The nn. form: @weight, whose first dim groups must divide, checked against kernel_size,
 * in_channels and out_channels when they are given, and the optional @bias. */
static inline ki_status ki_vol_conv_weights(const ki_op_desc *op, ki_vol_conv *v, ki_error *err)
{
    const char *first = v->transposed ? "in" : "out", *per = v->transposed ? "output" : "input";
    const ki_attr *w;
    int64_t other, k[3];
    ki_status st = ki_cv_weight_attr(op, 5, &w, err);
    if (st != KI_OK) {
        return st;
    }
    if (w->shape.d[0] < 1 || w->shape.d[0] % v->groups != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "groups=%lld does not divide %s_channels=%lld",
                       (long long)v->groups, first, (long long)w->shape.d[0]);
    }
    v->d0 = w->shape.d[0], v->d1 = w->shape.d[1], v->weight = w->data;
    if (v->d1 < 1 || !ki_ckd_mul_i64(&other, v->d1, v->groups) || other > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@weight has %lld %s channels per group",
                       (long long)v->d1, per);
    }
    st = ki_vol_triple(op, "kernel_size", &w->shape.d[2], 1, k, err);
    for (int i = 0; st == KI_OK && i < 3; i++) {
        v->k[i] = k[i];
        if (k[i] != w->shape.d[2 + i]) {
            st = KI_FAIL(err, KI_ERR_SHAPE, "kernel_size does not match @weight");
        }
    }
    int64_t in_ch = v->transposed ? v->d0 : other, out_ch = v->transposed ? other : v->d0;
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "in_channels", in_ch, err);
    }
    if (st == KI_OK) {
        st = ki_cv_check_count(op, "out_channels", out_ch, err);
    }
    return st == KI_OK ? ki_cv_parse_bias(op, out_ch, &v->ep.bias, err) : st;
}

/* groups, the operands (F. form) or @weight and @bias (nn. form), stride and dilation. */
static inline ki_status ki_vol_conv_parse(const ki_op_desc *op, ki_vol_conv *v, ki_error *err)
{
    static const int64_t one[3] = { 1, 1, 1 };
    ki_status st = ki_op_get_int(op, "groups", 1, &v->groups, err);
    if (st == KI_OK && (v->groups < 1 || v->groups > KI_MAX_DIM)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "groups=%lld is out of range", (long long)v->groups);
    }
    if (st == KI_OK) {
        st = v->functional ? ki_vol_conv_inputs(op, v, err) : ki_vol_conv_weights(op, v, err);
    }
    if (st == KI_OK) {
        st = ki_vol_triple(op, "stride", one, 1, v->s, err);
    }
    return st == KI_OK ? ki_vol_triple(op, "dilation", one, 1, v->dl, err) : st;
}

/* Parses the rest of a layer's state (whose first member is its ki_vol_conv). */
typedef ki_status (*ki_vol_conv_parse_fn)(const ki_op_desc *op, void *state, ki_error *err);

/* create(): a zeroed state of size bytes whose ki_vol_conv starts as head (no bias operand),
 * filled by parse; freed again when that fails. */
static inline ki_status ki_vol_conv_create(const ki_op_desc *op, const ki_vol_conv *head,
                                           size_t size, ki_vol_conv_parse_fn parse, void **state,
                                           ki_error *err)
{
    ki_vol_conv *v = calloc(1, size);
    if (!v) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    *v = *head;
    v->b_in = -1;
    ki_status st = parse(op, v, err);
    if (st != KI_OK) {
        free(v);
        return st;
    }
    *state = v;
    return KI_OK;
}

/* The F. form's weight operand w_in (and bias operand), which shape() was given. */
static inline ki_status ki_vol_conv_weight_in(const ki_vol_conv *v, const ki_shape *in, int n_in,
                                              const ki_shape **w, ki_error *err)
{
    if (v->w_in >= n_in || v->b_in >= n_in) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input count");
    }
    *w = &in[v->w_in];
    return KI_OK;
}

/* The kernel dims of a 5-D weight operand w, each in [1, KI_CV_MAX_PARAM]. */
static inline ki_status ki_vol_conv_kernel_in(const ki_shape *w, int64_t k[3], ki_error *err)
{
    char buf[96];
    for (int i = 0; i < 3; i++) {
        k[i] = w->d[2 + i];
        if (k[i] < 1 || k[i] > KI_CV_MAX_PARAM) {
            return KI_FAIL(err, KI_ERR_SHAPE, "weight %s has an empty or huge kernel",
                           ki_shape_str(w, buf, sizeof buf));
        }
    }
    return KI_OK;
}

/* The F. form's bias operand, when there is one, must hold out_ch values. */
static inline ki_status ki_vol_conv_bias_in(const ki_vol_conv *v, const ki_shape *in,
                                            int64_t out_ch, ki_error *err)
{
    char buf[96];
    const ki_shape *b = v->b_in >= 0 ? &in[v->b_in] : NULL;
    if (b && (b->kind != KI_KIND_TENSOR || b->ndim != 1 || b->d[0] != out_ch)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "bias %s does not hold %lld values",
                       ki_shape_str(b, buf, sizeof buf), (long long)out_ch);
    }
    return KI_OK;
}

/* The input must have groups * cig channels. */
static inline ki_status ki_vol_conv_check_channels(const ki_vol *x, int64_t want, ki_error *err)
{
    if (x->c != want) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has %lld channels, expected %lld", (long long)x->c,
                       (long long)want);
    }
    return KI_OK;
}

/* shape(): one output, and the input among the n_in operands. */
static inline ki_status ki_vol_conv_counts(const ki_vol_conv *v, int n_in, int n_out, ki_error *err)
{
    if (n_out != 1 || n_in < 1 || v->x_in >= n_in) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    return KI_OK;
}

/* Depth planes per column chunk of per floats a plane, of planes in all (at least 1). */
static inline int64_t ki_vol_conv_chunk(int64_t per, int64_t planes)
{
    int64_t pz = per > 0 && per < KI_VOL_COL_FLOATS ? KI_VOL_COL_FLOATS / per : 1;
    pz = pz < planes ? pz : planes;
    return pz > 0 ? pz : 1;
}

/* The per-thread workspace slice when a column chunk of bytes spans all n_threads slices (they
 * are contiguous). */
static inline size_t ki_vol_conv_ws(size_t bytes, int n_threads)
{
    size_t nt = n_threads > 0 ? (size_t)n_threads : 1;
    return ((bytes + nt - 1) / nt + 63) / 64 * 64;
}

/* forward(): the shapes of the (up to three) operands, the missing ones as the input's, for
 * geom_make; false when there are more. */
static inline bool ki_vol_conv_shapes(const ki_tensor *in, int n_in, ki_shape sh[3])
{
    for (int i = 0; i < 3; i++) {
        sh[i] = i < n_in ? in[i].shape : in[0].shape;
    }
    return n_in <= 3;
}

/* forward(): whether the workspace holds a column chunk of bytes. */
static inline bool ki_vol_conv_ws_fits(size_t bytes, const ki_exec *ex)
{
    size_t nt = ex->n_threads > 0 ? (size_t)ex->n_threads : 1;
    return bytes <= nt * ex->ws_per_thread;
}

/* forward(): the weight, and in *ep the epilogue with the bias, of either form. */
static inline const float *ki_vol_conv_operands(const ki_vol_conv *v, const ki_tensor *in,
                                                ki_cv_epilogue *ep)
{
    *ep = v->ep;
    ep->bias = v->functional ? (v->b_in >= 0 ? in[v->b_in].data : NULL) : v->ep.bias;
    return v->functional ? in[v->w_in].data : v->weight;
}

/* The fuse() hook of both: absorbs a following activation into the output epilogue (see
 * ki_cv_fuse_act). */
static inline bool ki_vol_conv_fuse(void *state, const ki_op_desc *next, int slot)
{
    ki_vol_conv *v = state;
    if (next->n_inputs != 1 || slot != 0) {
        return false;
    }
    return ki_cv_fuse_act(&v->ep, next);
}

/* The layer table of a 3-D convolution whose shape, workspace and forward functions are
 * prefix_shape, prefix_workspace and prefix_forward. */
#define KI_VOL_CONV_OPS(sym, name, create_fn, prefix)                                              \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .create = create_fn,                                                                       \
        .shape = prefix##_shape,                                                                   \
        .workspace = prefix##_workspace,                                                           \
        .forward = prefix##_forward,                                                               \
        .destroy = free,                                                                           \
        .fuse = ki_vol_conv_fuse,                                                                  \
    }

#endif
