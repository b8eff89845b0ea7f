/* conv_common.h - helpers shared by the convolution family only (conv2d, deconv2d, linear,
 * matmul, pooling): reading NCHW inputs, the output epilogue, padding index maps and size
 * checks. Only static inline functions and types; no state, thread-safe. */
#ifndef KI_CONV_COMMON_H
#define KI_CONV_COMMON_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/cpu.h"
#include "../core/layer.h"
#include "activation.h"

/* Kernel sizes, strides, dilations and paddings above this are rejected, so that size formulas
 * over dims up to KI_MAX_DIM stay far from int64 overflow. */
#define KI_CV_MAX_PARAM ((int64_t)1 << 20)

/* A spatial input: 4-D (N,C,H,W), or 3-D (C,H,W) unbatched as PyTorch allows (then n = 1). */
typedef struct ki_cv_nchw {
    int64_t n, c, h, w;
    bool batched;
} ki_cv_nchw;

static inline ki_status ki_cv_nchw_get(const ki_shape *s, ki_cv_nchw *o, ki_error *err)
{
    char buf[96];
    if (s->kind != KI_KIND_TENSOR || (s->ndim != 3 && s->ndim != 4)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s is not a 3-D (C,H,W) or 4-D (N,C,H,W) tensor",
                       ki_shape_str(s, buf, sizeof buf));
    }
    o->batched = s->ndim == 4;
    o->n = o->batched ? s->d[0] : 1;
    o->c = s->d[s->ndim - 3];
    o->h = s->d[s->ndim - 2];
    o->w = s->d[s->ndim - 1];
    return KI_OK;
}

/* The output shape in the same batched/unbatched form as the input. */
static inline ki_shape ki_cv_nchw_shape(bool batched, int64_t n, int64_t c, int64_t h, int64_t w)
{
    int64_t d[4] = { n, c, h, w };
    return batched ? ki_shape_make(4, d) : ki_shape_make(3, d + 1);
}

/* What the output loop of a kernel does to each finished value: add the channel's bias, then an
 * optional activation. Every conv/deconv kernel ends in ki_cv_epilogue_plane, so a layer's fuse()
 * hook that absorbs a following activation only has to set `act`; the formulas are the
 * activation layer's own (activation.h), so fusion is exact. */
typedef struct ki_cv_epilogue {
    const float *bias; /* one per output channel, or NULL */
    ki_act act;
    /* a fused residual add comes after the activation (conv, act, add: YOLOv5's bottlenecks)
     * rather than before it (conv, add, act: ResNet's blocks) */
    bool res_after;
} ki_cv_epilogue;

/* Applies the epilogue to n consecutive values of output channel ch (a plane or part of one),
 * with a fused residual add (nn.Conv2d's fuse of `add(@0,@1)`): res holds the n values of the
 * other operand at the same positions, or is NULL. Order as the unfused graph: bias, + res, then
 * the activation (or bias, the activation, then + res when ep->res_after). */
static inline void ki_cv_epilogue_plane_res(const ki_cv_epilogue *ep, const float *res, int64_t ch,
                                            float *restrict p, size_t n)
{
    float b = ep->bias ? ep->bias[ch] : 0.0f;
    const float *pre = ep->res_after ? NULL : res; /* the residual before the activation */
    if (ep->act.kind == KI_ACT_RELU) {
        for (size_t i = 0; i < n; i++) {
            float v = p[i] + b;
            v = pre ? v + pre[i] : v;
            p[i] = v < 0.0f ? 0.0f : v; /* as ki_act_apply: NaN stays NaN, like torch.relu */
        }
    } else {
        if (ep->bias) {
            for (size_t i = 0; i < n; i++) {
                p[i] += b;
            }
        }
        if (pre) {
            for (size_t i = 0; i < n; i++) {
                p[i] += pre[i];
            }
        }
        if (ep->act.kind != KI_ACT_NONE) {
            ki_act_apply_n(&ep->act, p, p, (int64_t)n);
        }
    }
    if (res && ep->res_after) {
        for (size_t i = 0; i < n; i++) {
            p[i] += res[i];
        }
    }
}

/* The epilogue without a residual. */
static inline void ki_cv_epilogue_plane(const ki_cv_epilogue *ep, int64_t ch, float *restrict p,
                                        size_t n)
{
    ki_cv_epilogue_plane_res(ep, NULL, ch, p, n);
}

/* An epilogue implementation: ki_cv_epilogue_ref (gemm.c, the inline one above) or an ISA
 * version (ki_cv_epilogue_avx2, ki_cv_epilogue_avx512), chosen when the layer is created. res: see
 * ki_cv_epilogue_plane_res. */
typedef void (*ki_cv_epilogue_fn)(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p,
                                  size_t n);
void ki_cv_epilogue_ref(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p, size_t n);
void ki_cv_epilogue_avx2(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p,
                         size_t n);
/* SiLU and Sigmoid with AVX-512 (the same values as the AVX2 version), others through it. */
void ki_cv_epilogue_avx512(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p,
                           size_t n);
/* The epilogue of level isa (gemm.c), for layers outside the convolution family. */
ki_cv_epilogue_fn ki_cv_epilogue_for(ki_isa isa);

/* The fuse() hook of conv-like layers: absorbs `next` when it is a scalar activation cheap and
 * common enough to be worth it, and no activation was absorbed before. */
static inline bool ki_cv_fuse_act(ki_cv_epilogue *ep, const ki_op_desc *next)
{
    ki_act a;
    if (ep->act.kind != KI_ACT_NONE || ki_act_from_op(next, &a, NULL) != KI_OK) {
        return false;
    }
    switch (a.kind) {
    case KI_ACT_RELU:
    case KI_ACT_RELU6:
    case KI_ACT_LEAKY_RELU:
    case KI_ACT_HARDTANH:
    case KI_ACT_SIGMOID:
    case KI_ACT_SILU:
    case KI_ACT_HARDSWISH:
    case KI_ACT_HARDSIGMOID:
        ep->act = a;
        return true;
    default:
        return false;
    }
}

/* Whether next is the pnnx.Expression add(@0,@1) of two operands declared the same shape (or
 * undeclared): a residual add that conv-like layers absorb (fuse hook with two inputs). */
static inline bool ki_cv_is_residual_add(const ki_op_desc *next)
{
    const ki_param *e = ki_op_param(next, "expr");
    if (next->n_inputs != 2 || strcmp(next->type, "pnnx.Expression") != 0 || !e || !e->raw ||
        strcmp(e->raw, "add(@0,@1)") != 0) {
        return false;
    }
    const ki_shape *d = next->input_decl;
    return !d || d[0].ndim < 0 || d[1].ndim < 0 || ki_shape_equal(&d[0], &d[1]);
}

/* nn.Conv2d's and nn.Conv3d's padding_mode, in the order of ki_cv_parse_pad_mode's names. */
typedef enum ki_conv_pad_mode {
    KI_CONV_PAD_ZEROS = 0,
    KI_CONV_PAD_REFLECT,
    KI_CONV_PAD_REPLICATE,
    KI_CONV_PAD_CIRCULAR
} ki_conv_pad_mode;

/* Maps a padded coordinate i (may be < 0 or >= n) to an input coordinate, or -1 for a zero.
 * Valid for |overhang| <= n (circular) and < n (reflect), which shape() ensures. */
static inline int64_t ki_conv_pad_index(int64_t i, int64_t n, ki_conv_pad_mode m)
{
    if (i >= 0 && i < n) {
        return i;
    }
    switch (m) {
    case KI_CONV_PAD_REFLECT:
        return i < 0 ? -i : 2 * (n - 1) - i;
    case KI_CONV_PAD_REPLICATE:
        return i < 0 ? 0 : n - 1;
    case KI_CONV_PAD_CIRCULAR:
        return i < 0 ? i + n : i - n;
    case KI_CONV_PAD_ZEROS:
        break;
    }
    return -1;
}

/* padding_mode: zeros (the default), reflect, replicate or circular. */
static inline ki_status ki_cv_parse_pad_mode(const ki_op_desc *op, ki_conv_pad_mode *m,
                                             ki_error *err)
{
    static const char *const names[] = { "zeros", "reflect", "replicate", "circular" };
    const char *s;
    ki_status st = ki_op_get_string(op, "padding_mode", "zeros", &s, err);
    if (st != KI_OK) {
        return st;
    }
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *m = (ki_conv_pad_mode)i;
            return KI_OK;
        }
    }
    return KI_FAIL(err, KI_ERR_UNSUPPORTED, "padding_mode=%s is not supported", s);
}

/* padding given as a word (p->kind is KI_PARAM_STRING): valid (no padding, *same false) or same
 * (*same true), which PyTorch allows with stride 1 only. */
static inline ki_status ki_cv_padding_word(const ki_param *p, bool stride1, bool *same,
                                           ki_error *err)
{
    *same = false;
    if (strcmp(p->s, "valid") == 0) {
        return KI_OK;
    }
    if (strcmp(p->s, "same") != 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "padding=%s is not same, valid or numbers", p->s);
    }
    if (!stride1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "padding=same needs stride 1");
    }
    *same = true;
    return KI_OK;
}

/* Reads an optional count parameter (in_channels, out_features...) and checks that it agrees
 * with the value the weight implies. */
static inline ki_status ki_cv_check_count(const ki_op_desc *op, const char *key, int64_t have,
                                          ki_error *err)
{
    int64_t v;
    ki_status st = ki_op_get_int(op, key, have, &v, err);
    if (st != KI_OK) {
        return st;
    }
    if (v != have) {
        return KI_FAIL(err, KI_ERR_SHAPE, "%s=%lld does not match the weight (%lld)", key,
                       (long long)v, (long long)have);
    }
    return KI_OK;
}

/* Fails unless the op has exactly n_in inputs and n_out outputs. */
static inline ki_status ki_cv_check_io(const ki_op_desc *op, int n_in, int n_out, ki_error *err)
{
    if (op->n_inputs != n_in || op->n_outputs != n_out) {
        return KI_FAIL(err, KI_ERR_FORMAT, "has %d inputs and %d outputs, expected %d and %d",
                       op->n_inputs, op->n_outputs, n_in, n_out);
    }
    return KI_OK;
}

/* The @weight of an nn. conv-like op with one input and one output: ndim (at most 5) dims of any
 * size. */
static inline ki_status ki_cv_weight_attr(const ki_op_desc *op, int ndim, const ki_attr **w,
                                          ki_error *err)
{
    static const int64_t any[5] = { -1, -1, -1, -1, -1 };
    ki_status st = ki_cv_check_io(op, 1, 1, err);
    return st == KI_OK ? ki_op_require_attr(op, "weight", ndim, any, w, err) : st;
}

/* The optional @bias of n values: present when the bias parameter says so (by default when the
 * attribute exists); *bias is left alone without one. */
static inline ki_status ki_cv_parse_bias(const ki_op_desc *op, int64_t n, const float **bias,
                                         ki_error *err)
{
    const ki_attr *b;
    bool has_bias;
    ki_status st = ki_op_get_bool(op, "bias", ki_op_attr(op, "bias") != NULL, &has_bias, err);
    if (st == KI_OK && has_bias) {
        st = ki_op_require_attr(op, "bias", 1, &n, &b, err);
        *bias = st == KI_OK ? b->data : NULL;
    }
    return st;
}

/* The size limit of the GEMM layers' dimensions (int range: the micro-kernels and drivers index
 * some of them with int, as OpenBLAS's LP64 interface did). */
static inline bool ki_cv_blas_ok(int64_t v)
{
    return v >= 0 && v <= INT_MAX;
}

/* Bytes of a float buffer of a*b*c elements; false on overflow. */
static inline bool ki_cv_floats3(size_t *out, int64_t a, int64_t b, int64_t c)
{
    int64_t n;
    return ki_ckd_mul_i64(&n, a, b) && ki_ckd_mul_i64(&n, n, c) &&
           ki_ckd_mul(out, (size_t)n, sizeof(float));
}

/* Max pooling along one output row (pool2d.c): d[i] = v > d[i] ? v : d[i] with v = s[i*sw],
 * i < n, for sw 1 or 2 (the order of PyTorch's scan, so ties keep the first maximum); reads
 * s[0 .. (n-1)*sw] only. Returns nonzero when some v is NaN (the caller then redoes the plane
 * with the reference, which lets the NaN win). _avx2: the same with eight lanes. */
int ki_pool_rowmax_ref(const float *s, int64_t sw, float *restrict d, int64_t n);
int ki_pool_rowmax_avx2(const float *s, int64_t sw, float *restrict d, int64_t n);
/* Max pooling of one h x w plane into oh x ow with a kh x kw window, kw 2 or 3, column stride 2,
 * row stride sh, paddings ph / pw, dilation 1, in the reference's tap order (pool2d_avx512.c).
 * Returns nonzero when a value read is NaN; the caller then redoes the plane with _ref (pool2d.c:
 * nn.MaxPool2d's reference windows, any NaN wins; returns 0). */
int ki_pool_max_s2_avx512(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                          int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw);
int ki_pool_max_s2_ref(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                       int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw);
/* sums[p] = the sum of the n floats at x + p * stride, p < planes, each in eight interleaved
 * partial sums (float i into sum i % 8) combined as ((s0 + s4) + (s1 + s5)) + ((s2 + s6) +
 * (s3 + s7)): the adaptive average pool's order (pool_adaptive.c), whose plain loop is the
 * reference. _avx2 (pool2d_avx2.c) keeps each plane's eight sums in one vector and runs four
 * planes side by side, so their adds are four chains instead of one: the same floats. */
typedef void (*ki_plane_sums_fn)(const float *x, int64_t stride, int64_t n, int64_t planes,
                                 float *sums);
void ki_plane_sums_ref(const float *x, int64_t stride, int64_t n, int64_t planes, float *sums);
void ki_plane_sums_avx2(const float *x, int64_t stride, int64_t n, int64_t planes, float *sums);
/* The same with eight-lane vectors, the same taps in the same order (pool2d_avx2.c). */
int ki_pool_max_s2_avx2(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                        int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw);
/* Max pooling of one h x w plane into oh x ow with a kh x kw window at stride 1, dilation 1,
 * paddings ph / pw (pool2d_avx2.c), separably: each input row's maxima over the kw taps, then
 * each output row's over its kh rows, taps ascending, so a window's result is the first of its
 * values equal to the maximum in the reference's order (the first row holding it, the first
 * column in that row) and ties keep the first maximum. ws: ki_pool_max_s1_floats(h, ow, kw)
 * floats (0 on overflow). Returns nonzero when a value read is NaN or a window lies all in the
 * padding; the caller then redoes the plane with the reference. */
size_t ki_pool_max_s1_floats(int64_t h, int64_t ow, int64_t kw);
/* That workspace's layout: one padded input row of *rn floats, then h rows of *owr kw-tap maxima
 * (ow and the row rounded up to whole 8-lane vectors). */
static inline void ki_pool_max_s1_widths(int64_t ow, int64_t kw, int64_t *owr, int64_t *rn)
{
    *owr = (ow + 7) / 8 * 8;
    *rn = (*owr + kw - 1 + 7) / 8 * 8;
}
/* nn.MaxPool2d's reference windows on such a plane (any NaN wins; returns 0). */
int ki_pool_max_s1_ref(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                       int64_t ow, int64_t kh, int64_t kw, int64_t ph, int64_t pw);
int ki_pool_max_s1_avx2(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                        int64_t ow, int64_t kh, int64_t kw, int64_t ph, int64_t pw,
                        float *restrict ws);
typedef int (*ki_pool_max_s1_fn)(const float *src, int64_t h, int64_t w, float *restrict dst,
                                 int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t ph,
                                 int64_t pw, float *restrict ws);
/* One of the three above (nn.MaxPool2d and the conv's fused pool pick one per CPU level). */
typedef int (*ki_pool_max_s2_fn)(const float *src, int64_t h, int64_t w, float *restrict dst,
                                 int64_t oh, int64_t ow, int64_t kh, int64_t kw, int64_t sh,
                                 int64_t ph, int64_t pw);

/* Entry i of an adaptive pool's output_size p (ints, or strings in a mixed list like (None,7)):
 * a size in [0, KI_MAX_DIM], None giving 0 (keep the input's size). */
static inline ki_status ki_cv_size_entry(const ki_param *p, int i, int64_t *out, ki_error *err)
{
    if (p->kind == KI_PARAM_INTS) {
        *out = p->ints[i];
    } else if (p->kind == KI_PARAM_STRINGS && strcmp(p->strs[i], "None") == 0) {
        *out = 0;
    } else if (p->kind == KI_PARAM_STRINGS) {
        char *end;
        *out = strtoll(p->strs[i], &end, 10);
        if (end == p->strs[i] || *end != '\0') {
            return KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is not a size", p->raw);
        }
    } else {
        return KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is not a size", p->raw);
    }
    if (*out < 0 || *out > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is out of range", p->raw);
    }
    return KI_OK;
}

/* The input range [*lo, *hi) that output cell i of o cells over n inputs covers in adaptive
 * pooling, as PyTorch: [floor(i*n/o), ceil((i+1)*n/o)). */
static inline void ki_cv_adaptive_range(int64_t i, int64_t n, int64_t o, int64_t *lo, int64_t *hi)
{
    *lo = i * n / o;
    *hi = ((i + 1) * n + o - 1) / o;
}

/* Python floor division for a positive divisor. */
static inline int64_t ki_cv_floordiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}

/* PyTorch's pooling_output_shape along one side of `in` (window k, padding pad, stride s,
 * dilation d): with ceil_mode the last window must start inside the input or the left padding.
 * Below 1 when no window fits (PyTorch's "output size is too small"). The pools (2-D, 3-D) and
 * the convolution's fused pool take their sizes from it. */
static inline int64_t ki_cv_pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d,
                                     bool ceil_mode)
{
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = ki_cv_floordiv(num, s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) {
        o--;
    }
    return o;
}

/* Asks for the floats [p, p + n) in L2 ahead of use, one request per 64-byte line. A layer that
 * walks its planes one after another calls it for the next plane: a plane the layer before has
 * just written (and that has left L2 for L3, or sits in the other core's L2) is read in
 * column blocks and bands whose strided rows the hardware prefetchers do not run ahead of.
 * resnet18's max pool after the stem and mobilenet_v2's 112 x 112 depthwise layers, 2 threads,
 * in the network: 335 -> 244 us, 251 -> 158 us and 81 -> 67 us. */
static inline void ki_cv_prefetch_l2(const float *p, int64_t n)
{
    for (int64_t q = 0; q < n; q += 16) {
        __builtin_prefetch(p + q, 0, 2);
    }
}

/* Outputs of at least this many floats (as many bytes as one core's L2: more than a thread's
 * share of it next to its inputs; 1 MiB on the machine these were timed on) have their lines
 * asked for ahead of the stores (ki_cv_prefetch_out). */
static inline int64_t ki_cv_prefetch_out_min(void)
{
    return (int64_t)(ki_cpu_get()->l2 / sizeof(float));
}

/* Asks for the lines of the floats [p, p + n) a kernel is about to write. A large output lies in
 * L3 or memory, and kernels that write it as many strided streams at once (a stem row's every
 * channel, a GEMM tile's eight rows) outrun the hardware prefetchers: each store's line was
 * fetched on its own, after the store missed. mobilenet_v2, 2 threads, in the network: the stem
 * (32 x 112 x 112) 313 -> 248 us, the 16 -> 96 1x1 at 112 x 112 264 -> 194 us, the 112 -> 56
 * depthwise 158 -> 150 us. Smaller outputs, mostly in L2 already, would only pay the requests. */
static inline void ki_cv_prefetch_out(const float *p, int64_t n)
{
    for (int64_t q = 0; q < n; q += 16) {
        __builtin_prefetch(p + q, 1, 3);
    }
}

#endif
