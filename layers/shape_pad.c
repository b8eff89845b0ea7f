/* shape_pad.c - F.pad and the nn padding modules (nn.ZeroPad2d, nn.ConstantPad2d,
 * nn.ReflectionPad2d, nn.ReplicationPad2d, nn.CircularPad2d and their 1d/3d forms).
 *
 * As in PyTorch, the pad list holds (before, after) pairs starting from the last dim and going
 * backwards. Constant padding may be negative (it crops); the other modes map an outside index
 * back into the input: reflect mirrors without repeating the edge, replicate clamps, circular
 * wraps. */
#include <string.h>

#include "shape_common.h"

enum pad_mode { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR };

typedef struct pad_state {
    enum pad_mode mode;
    int n_pairs;
    int64_t pad[2 * KI_MAX_DIMS];
    float value;
} pad_state;

static ki_status parse_mode(const char *s, enum pad_mode *mode, ki_error *err)
{
    static const char *const names[] = { "constant", "reflect", "replicate", "circular" };
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, names[i]) == 0) {
            *mode = (enum pad_mode)i;
            return KI_OK;
        }
    }
    return KI_FAIL(err, KI_ERR_UNSUPPORTED, "padding mode '%s' is not supported", s);
}

static ki_status finish_create(const pad_state *tmp, void **state, ki_error *err)
{
    for (int i = 0; i < 2 * tmp->n_pairs; i++) {
        if (tmp->pad[i] > KI_MAX_DIM || tmp->pad[i] < -KI_MAX_DIM) {
            return KI_FAIL(err, KI_ERR_LIMIT, "padding %lld is too large", (long long)tmp->pad[i]);
        }
    }
    ki_status s = ki_shapeop_alloc(sizeof *tmp, state, err);
    if (s == KI_OK) {
        *(pad_state *)*state = *tmp;
    }
    return s;
}

static ki_status fpad_create(const ki_op_desc *op, void **state, ki_error *err)
{
    pad_state tmp = { .mode = PAD_CONSTANT };
    const char *mode;
    double value;
    int n;
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK) {
        s = ki_op_get_int_list(op, "pad", 2 * KI_MAX_DIMS, tmp.pad, &n, err);
    }
    if (s == KI_OK && (n < 0 || n % 2 != 0)) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "parameter pad must hold an even number of integers");
    }
    if (s == KI_OK) {
        s = ki_op_get_string(op, "mode", "constant", &mode, err);
    }
    if (s == KI_OK) {
        s = parse_mode(mode, &tmp.mode, err);
    }
    if (s == KI_OK) {
        s = ki_op_get_float(op, "value", 0.0, &value, err);
    }
    if (s != KI_OK) {
        return s;
    }
    tmp.n_pairs = n / 2;
    tmp.value = (float)value;
    return finish_create(&tmp, state, err);
}

/* nn.*PadNd: `padding` is one int for every side or 2*dims ints (left, right, top, bottom...). */
static ki_status module_create(const ki_op_desc *op, enum pad_mode mode, int dims, bool has_value,
                               void **state, ki_error *err)
{
    pad_state tmp = { .mode = mode, .n_pairs = dims };
    double value = 0.0;
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK) {
        s = ki_op_get_ints(op, "padding", 2 * dims, NULL, tmp.pad, err);
    }
    if (s == KI_OK && has_value) {
        s = ki_op_get_float(op, "value", 0.0, &value, err);
    }
    if (s != KI_OK) {
        return s;
    }
    tmp.value = (float)value;
    return finish_create(&tmp, state, err);
}

static ki_status check_pair(const pad_state *st, int64_t n, int64_t lo, int64_t hi, int axis,
                            ki_error *err)
{
    bool ok = n + lo + hi >= 0;
    if (st->mode != PAD_CONSTANT) {
        ok = ok && lo >= 0 && hi >= 0;
    }
    if (st->mode == PAD_REFLECT) {
        ok = ok && lo < n && hi < n; /* PyTorch: padding must be below the input size */
    } else if (st->mode == PAD_REPLICATE) {
        ok = ok && (n > 0 || lo + hi == 0);
    } else if (st->mode == PAD_CIRCULAR) {
        ok = ok && lo <= n && hi <= n;
    }
    if (!ok) {
        return KI_FAIL(err, KI_ERR_SHAPE, "padding (%lld,%lld) does not fit dim %d of size %lld",
                       (long long)lo, (long long)hi, axis, (long long)n);
    }
    return KI_OK;
}

static ki_status pad_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    const pad_state *st = state;
    int ndim = in[0].ndim;
    int64_t d[KI_MAX_DIMS];
    (void)n_in;
    (void)n_out;
    /* the non-constant modes need at least one leading (batch or channel) dim */
    if (st->n_pairs > ndim || (st->mode != PAD_CONSTANT && st->n_pairs >= ndim)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "%d padded dims do not fit an input of rank %d",
                       st->n_pairs, ndim);
    }
    for (int a = 0; a < ndim; a++) {
        d[a] = in[0].d[a];
    }
    for (int k = 0; k < st->n_pairs; k++) {
        int a = ndim - 1 - k;
        int64_t lo = st->pad[2 * k], hi = st->pad[2 * k + 1];
        ki_status s = check_pair(st, d[a], lo, hi, a, err);
        if (s != KI_OK) {
            return s;
        }
        d[a] += lo + hi;
    }
    return ki_shapeop_make(&out[0], ndim, d, err);
}

/* Input index for output index o of a dim of size n padded by lo in front; -1: the fill value. */
static int64_t pad_map(int64_t o, int64_t lo, int64_t n, enum pad_mode mode)
{
    int64_t i = o - lo;
    if (i >= 0 && i < n) {
        return i;
    }
    switch (mode) {
    case PAD_REFLECT:
        return i < 0 ? -i : 2 * (n - 1) - i;
    case PAD_REPLICATE:
        return i < 0 ? 0 : n - 1;
    case PAD_CIRCULAR:
        return ((i % n) + n) % n;
    case PAD_CONSTANT:
    default:
        return -1;
    }
}

typedef struct pad_geom {
    int ndim;
    int64_t lo[KI_MAX_DIMS], n[KI_MAX_DIMS], out[KI_MAX_DIMS], stride[KI_MAX_DIMS];
} pad_geom;

/* One output row (last dim): the mapped edges around a plain copy of the middle. */
static void pad_row(const pad_geom *g, enum pad_mode mode, float value, const float *src,
                    float *dst)
{
    int last = g->ndim - 1;
    int64_t lo = g->lo[last], n = g->n[last], w = g->out[last];
    int64_t a = lo > 0 ? lo : 0, b = lo + n < w ? lo + n : w;
    if (b > a) {
        memcpy(dst + a, src + (a - lo), (size_t)(b - a) * sizeof *dst);
    } else {
        a = b = w; /* no middle: map every element below */
    }
    for (int64_t j = 0; j < w; j++) {
        if (j == a) {
            j = b;
            if (j >= w) {
                break;
            }
        }
        int64_t m = pad_map(j, lo, n, mode);
        dst[j] = m < 0 ? value : src[m];
    }
}

static ki_status pad_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const pad_state *st = state;
    pad_geom g = { .ndim = in[0].shape.ndim };
    (void)n_in;
    (void)n_out;
    if (g.ndim == 0 || ki_shape_count(&out[0].shape) == 0) {
        ki_shapeop_view_copy(&in[0], &out[0]);
        return KI_OK;
    }
    ki_shapeop_strides(g.ndim, in[0].shape.d, g.stride);
    for (int a = 0; a < g.ndim; a++) {
        int k = g.ndim - 1 - a;
        g.lo[a] = k < st->n_pairs ? st->pad[2 * k] : 0;
        g.n[a] = in[0].shape.d[a];
        g.out[a] = out[0].shape.d[a];
    }
    int last = g.ndim - 1;
    int64_t rows = ki_shapeop_prod(g.out, 0, last), w = g.out[last];
    int nt = rows * w < ((int64_t)1 << 15) ? 1 : ex->n_threads;
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off = 0, rem = r;
        for (int a = last - 1; a >= 0 && off >= 0; a--) {
            int64_t m = pad_map(rem % g.out[a], g.lo[a], g.n[a], st->mode);
            rem /= g.out[a];
            off = m < 0 ? -1 : off + m * g.stride[a];
        }
        float *dst = out[0].data + r * w;
        if (off < 0 || g.n[last] == 0) {
            for (int64_t j = 0; j < w; j++) {
                dst[j] = st->value; /* the row lies in constant padding */
            }
        } else {
            pad_row(&g, st->mode, st->value, in[0].data + off, dst);
        }
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_f_pad = {
    .type = "F.pad",
    .create = fpad_create,
    .shape = pad_shape,
    .forward = pad_forward,
    .destroy = ki_shapeop_free,
};

#define PAD_MODULE(sym, name, mode, dims, has_value)                                               \
    static ki_status sym##_create(const ki_op_desc *op, void **state, ki_error *err)               \
    {                                                                                              \
        return module_create(op, mode, dims, has_value, state, err);                               \
    }                                                                                              \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .create = sym##_create,                                                                    \
        .shape = pad_shape,                                                                        \
        .forward = pad_forward,                                                                    \
        .destroy = ki_shapeop_free,                                                                \
    };

PAD_MODULE(ki_layer_nn_zeropad1d, "nn.ZeroPad1d", PAD_CONSTANT, 1, false)
PAD_MODULE(ki_layer_nn_zeropad2d, "nn.ZeroPad2d", PAD_CONSTANT, 2, false)
PAD_MODULE(ki_layer_nn_zeropad3d, "nn.ZeroPad3d", PAD_CONSTANT, 3, false)
PAD_MODULE(ki_layer_nn_constantpad1d, "nn.ConstantPad1d", PAD_CONSTANT, 1, true)
PAD_MODULE(ki_layer_nn_constantpad2d, "nn.ConstantPad2d", PAD_CONSTANT, 2, true)
PAD_MODULE(ki_layer_nn_constantpad3d, "nn.ConstantPad3d", PAD_CONSTANT, 3, true)
PAD_MODULE(ki_layer_nn_reflectionpad1d, "nn.ReflectionPad1d", PAD_REFLECT, 1, false)
PAD_MODULE(ki_layer_nn_reflectionpad2d, "nn.ReflectionPad2d", PAD_REFLECT, 2, false)
PAD_MODULE(ki_layer_nn_reflectionpad3d, "nn.ReflectionPad3d", PAD_REFLECT, 3, false)
PAD_MODULE(ki_layer_nn_replicationpad1d, "nn.ReplicationPad1d", PAD_REPLICATE, 1, false)
PAD_MODULE(ki_layer_nn_replicationpad2d, "nn.ReplicationPad2d", PAD_REPLICATE, 2, false)
PAD_MODULE(ki_layer_nn_replicationpad3d, "nn.ReplicationPad3d", PAD_REPLICATE, 3, false)
PAD_MODULE(ki_layer_nn_circularpad1d, "nn.CircularPad1d", PAD_CIRCULAR, 1, false)
PAD_MODULE(ki_layer_nn_circularpad2d, "nn.CircularPad2d", PAD_CIRCULAR, 2, false)
PAD_MODULE(ki_layer_nn_circularpad3d, "nn.CircularPad3d", PAD_CIRCULAR, 3, false)
