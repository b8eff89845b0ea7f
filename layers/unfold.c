/* unfold.c - nn.Unfold / F.unfold (im2col: the sliding kh x kw blocks of a (N, C, H, W) input as
 * the columns of a (N, C*kh*kw, L) output, L blocks, zeros where a block reaches into the
 * padding) and nn.Fold / F.fold (col2im: the inverse placement into a (N, C, oh, ow) output of
 * output_size, overlapping values summed). Both take an unbatched input too (3-D for unfold, 2-D
 * for fold), as PyTorch does. kernel_size, dilation, padding and stride are ints or pairs.
 *
 * Unfold writes each output row (one channel and kernel offset) from one thread; fold sums each
 * output plane from one thread in a fixed order, so results do not depend on the thread count.
 * State: the parameters, immutable; thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/layer.h"
#include "shape_common.h"

typedef struct fold_state {
    bool fold;
    int64_t k[2], dil[2], pad[2], stride[2];
    int64_t osize[2]; /* fold only: output_size */
} fold_state;

/* Blocks along one axis of size n, or -1 when none fits. */
static int64_t fold_blocks(const fold_state *s, int ax, int64_t n)
{
    int64_t span = s->dil[ax] * (s->k[ax] - 1) + 1;
    int64_t room = n + 2 * s->pad[ax] - span;
    return room < 0 ? -1 : room / s->stride[ax] + 1;
}

static ki_status fold_create_common(const ki_op_desc *op, bool fold, void **state, ki_error *err)
{
    static const int64_t one[2] = { 1, 1 }, zero[2] = { 0, 0 };
    fold_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->fold = fold;
    ki_status st = ki_shapeop_check_io(op, 1, 1, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "kernel_size", 2, NULL, s->k, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "dilation", 2, one, s->dil, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "padding", 2, zero, s->pad, err);
    st = st != KI_OK ? st : ki_op_get_ints(op, "stride", 2, one, s->stride, err);
    if (st == KI_OK && fold) {
        st = ki_op_get_ints(op, "output_size", 2, NULL, s->osize, err);
    }
    for (int i = 0; st == KI_OK && i < 2; i++) {
        if (s->k[i] < 1 || s->k[i] > KI_MAX_DIM || s->dil[i] < 1 || s->dil[i] > KI_MAX_DIM ||
            s->stride[i] < 1 || s->stride[i] > KI_MAX_DIM || s->pad[i] < 0 ||
            s->pad[i] > KI_MAX_DIM) {
            st = KI_FAIL(err, KI_ERR_FORMAT,
                         "kernel_size, dilation and stride must be positive and padding "
                         "non-negative (axis %d: %lld, %lld, %lld, %lld)",
                         i, (long long)s->k[i], (long long)s->dil[i], (long long)s->stride[i],
                         (long long)s->pad[i]);
        } else if (fold && (s->osize[i] < 1 || s->osize[i] > KI_MAX_DIM)) {
            st = KI_FAIL(err, KI_ERR_FORMAT, "output_size %lld is out of range",
                         (long long)s->osize[i]);
        }
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

static ki_status unfold_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return fold_create_common(op, false, state, err);
}

static ki_status fold_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return fold_create_common(op, true, state, err);
}

static ki_status unfold_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const fold_state *s = state;
    const ki_shape *x = &in[0];
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || (x->ndim != 3 && x->ndim != 4)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input must be 3-D or 4-D, got %d dims", x->ndim);
    }
    const int b = x->ndim - 3;
    const int64_t bh = fold_blocks(s, 0, x->d[b + 1]), bw = fold_blocks(s, 1, x->d[b + 2]);
    int64_t rows, l;
    if (bh < 1 || bw < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "no block fits an input of %lld x %lld",
                       (long long)x->d[b + 1], (long long)x->d[b + 2]);
    }
    if (!ki_ckd_mul_i64(&rows, x->d[b], s->k[0]) || !ki_ckd_mul_i64(&rows, rows, s->k[1]) ||
        !ki_ckd_mul_i64(&l, bh, bw)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "output size overflows");
    }
    int64_t d[3] = { x->d[0], rows, l };
    return ki_shapeop_make(out, x->ndim - 1, b ? d : d + 1, err);
}

static ki_status fold_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                            int n_out, ki_error *err)
{
    const fold_state *s = state;
    const ki_shape *x = &in[0];
    (void)n_in, (void)n_out;
    if (x->kind != KI_KIND_TENSOR || (x->ndim != 2 && x->ndim != 3)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input must be 2-D or 3-D, got %d dims", x->ndim);
    }
    const int b = x->ndim - 2;
    const int64_t bh = fold_blocks(s, 0, s->osize[0]), bw = fold_blocks(s, 1, s->osize[1]);
    const int64_t kk = s->k[0] * s->k[1]; /* both <= 2^31: no overflow in int64 */
    int64_t l = 0;
    if (bh < 1 || bw < 1 || !ki_ckd_mul_i64(&l, bh, bw) || x->d[b + 1] != l) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input has %lld blocks, output_size gives %lld",
                       (long long)x->d[b + 1], (long long)l);
    }
    if (x->d[b] % kk != 0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input dim %d (%lld) is not a multiple of %lld", b,
                       (long long)x->d[b], (long long)kk);
    }
    int64_t d[4] = { x->d[0], x->d[b] / kk, s->osize[0], s->osize[1] };
    return ki_shapeop_make(out, x->ndim + 1, b ? d : d + 1, err);
}

/* Input position of block index o, kernel tap t along axis ax (may be in the padding). */
static inline int64_t fold_src(const fold_state *s, int ax, int64_t o, int64_t t)
{
    return o * s->stride[ax] - s->pad[ax] + t * s->dil[ax];
}

static ki_status unfold_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const fold_state *s = state;
    const ki_shape *x = &in[0].shape;
    (void)n_in, (void)n_out;
    const int b = x->ndim - 3;
    const int64_t c = x->d[b], h = x->d[b + 1], w = x->d[b + 2];
    const int64_t bh = fold_blocks(s, 0, h), bw = fold_blocks(s, 1, w);
    const int64_t kk = s->k[0] * s->k[1], rows = (b ? x->d[0] : 1) * c * kk;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (rows * bh * bw > 8192)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t plane = r / kk, ki = r % kk / s->k[1], kj = r % s->k[1];
        const float *src = in[0].data + plane * h * w;
        float *dst = out[0].data + r * bh * bw;
        for (int64_t oy = 0; oy < bh; oy++) {
            const int64_t y = fold_src(s, 0, oy, ki);
            for (int64_t ox = 0; ox < bw; ox++) {
                const int64_t xx = fold_src(s, 1, ox, kj);
                dst[oy * bw + ox] = y >= 0 && y < h && xx >= 0 && xx < w ? src[y * w + xx] : 0.0f;
            }
        }
    }
    return KI_OK;
}

static ki_status fold_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                              int n_out, const ki_exec *ex)
{
    const fold_state *s = state;
    const ki_shape *o = &out[0].shape;
    (void)n_in, (void)n_out;
    const int b = o->ndim - 3;
    const int64_t h = s->osize[0], w = s->osize[1];
    const int64_t bh = fold_blocks(s, 0, h), bw = fold_blocks(s, 1, w);
    const int64_t kk = s->k[0] * s->k[1], planes = (b ? o->d[0] : 1) * o->d[b];
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (planes * h * w > 8192)
    for (int64_t p = 0; p < planes; p++) {
        float *dst = out[0].data + p * h * w;
        memset(dst, 0, (size_t)(h * w) * sizeof(float));
        for (int64_t t = 0; t < kk; t++) {
            const int64_t ki = t / s->k[1], kj = t % s->k[1];
            const float *src = in[0].data + (p * kk + t) * bh * bw;
            for (int64_t oy = 0; oy < bh; oy++) {
                const int64_t y = fold_src(s, 0, oy, ki);
                for (int64_t ox = 0; ox < bw && y >= 0 && y < h; ox++) {
                    const int64_t xx = fold_src(s, 1, ox, kj);
                    if (xx >= 0 && xx < w) {
                        dst[y * w + xx] += src[oy * bw + ox];
                    }
                }
            }
        }
    }
    return KI_OK;
}

#define UNFOLD_OPS(sym, name)                                                                      \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = unfold_create,                                            \
                               .shape = unfold_shape,                                              \
                               .forward = unfold_forward,                                          \
                               .destroy = free }
#define FOLD_OPS(sym, name)                                                                        \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .create = fold_create,                                              \
                               .shape = fold_shape,                                                \
                               .forward = fold_forward,                                            \
                               .destroy = free }

UNFOLD_OPS(ki_layer_nn_unfold, "nn.Unfold");
UNFOLD_OPS(ki_layer_f_unfold, "F.unfold");
FOLD_OPS(ki_layer_nn_fold, "nn.Fold");
FOLD_OPS(ki_layer_f_fold, "F.fold");
