/* shape_shuffle.c - nn.PixelShuffle / F.pixel_shuffle, nn.PixelUnshuffle / F.pixel_unshuffle and
 * nn.ChannelShuffle. Each is PyTorch's view-permute-reshape, done as one strided copy. */
#include "shape_common.h"

enum shuffle_kind { PIXEL_SHUFFLE, PIXEL_UNSHUFFLE, CHANNEL_SHUFFLE };

typedef struct shuffle_state {
    enum shuffle_kind kind;
    int64_t factor; /* upscale_factor, downscale_factor or groups */
} shuffle_state;

static ki_status shuffle_create(const ki_op_desc *op, enum shuffle_kind kind, const char *key,
                                void **state, ki_error *err)
{
    int64_t factor;
    ki_status s = ki_shapeop_check_io(op, 1, 1, err);
    if (s == KI_OK) {
        s = ki_op_get_int(op, key, -1, &factor, err);
    }
    if (s == KI_OK && (factor < 1 || factor > KI_MAX_DIM)) {
        s = KI_FAIL(err, KI_ERR_FORMAT, "parameter %s must be a positive integer", key);
    }
    if (s == KI_OK) {
        s = ki_shapeop_alloc(sizeof(shuffle_state), state, err);
    }
    if (s == KI_OK) {
        ((shuffle_state *)*state)->kind = kind;
        ((shuffle_state *)*state)->factor = factor;
    }
    return s;
}

static ki_status pixel_shuffle_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return shuffle_create(op, PIXEL_SHUFFLE, "upscale_factor", state, err);
}

static ki_status pixel_unshuffle_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return shuffle_create(op, PIXEL_UNSHUFFLE, "downscale_factor", state, err);
}

static ki_status channel_shuffle_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return shuffle_create(op, CHANNEL_SHUFFLE, "groups", state, err);
}

static ki_status shuffle_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                               int n_out, ki_error *err)
{
    const shuffle_state *st = state;
    const ki_shape *x = &in[0];
    int64_t r = st->factor, d[KI_MAX_DIMS];
    int n = x->ndim;
    char buf[128];
    (void)n_in;
    (void)n_out;
    if (n < (st->kind == CHANNEL_SHUFFLE ? 2 : 3)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s has too few dims",
                       ki_shape_str(x, buf, sizeof buf));
    }
    for (int i = 0; i < n; i++) {
        d[i] = x->d[i];
    }
    if (st->kind == CHANNEL_SHUFFLE) {
        if (d[1] % r != 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%lld channels do not split into %lld groups",
                           (long long)d[1], (long long)r);
        }
    } else if (st->kind == PIXEL_SHUFFLE) {
        if (d[n - 3] % (r * r) != 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%lld channels are not divisible by %lld^2",
                           (long long)d[n - 3], (long long)r);
        }
        d[n - 3] /= r * r;
        d[n - 2] *= r;
        d[n - 1] *= r;
    } else {
        if (d[n - 2] % r != 0 || d[n - 1] % r != 0) {
            return KI_FAIL(err, KI_ERR_SHAPE,
                           "input %s: height and width are not divisible by %lld",
                           ki_shape_str(x, buf, sizeof buf), (long long)r);
        }
        d[n - 3] *= r * r;
        d[n - 2] /= r;
        d[n - 1] /= r;
    }
    return ki_shapeop_make(&out[0], n, d, err);
}

/* The copy runs over the output as (B, C, H, r, W, r) for pixel shuffle (B = leading dims),
 * (B, C, r, r, H, W) for unshuffle and (N, C/g, g, rest) for channel shuffle. */
static void shuffle_plan(const shuffle_state *st, const ki_shape *x, ki_shapeop_copy *c)
{
    int n = x->ndim;
    int64_t r = st->factor;
    if (st->kind == CHANNEL_SHUFFLE) {
        int64_t rest = ki_shapeop_prod(x->d, 2, n), cg = x->d[1] / r;
        int64_t d[4] = { x->d[0], cg, r, rest };
        ki_shapeop_copy_init(c, 4, d);
        int64_t src[4] = { x->d[1] * rest, rest, cg * rest, 1 };
        for (int i = 0; i < 4; i++) {
            c->src[i] = src[i];
        }
        return;
    }
    int64_t b = ki_shapeop_prod(x->d, 0, n - 3);
    int64_t ch = x->d[n - 3], h = x->d[n - 2], w = x->d[n - 1];
    if (st->kind == PIXEL_SHUFFLE) {
        int64_t d[6] = { b, ch / (r * r), h, r, w, r };
        int64_t src[6] = { ch * h * w, r * r * h * w, w, r * h * w, 1, h * w };
        ki_shapeop_copy_init(c, 6, d);
        for (int i = 0; i < 6; i++) {
            c->src[i] = src[i];
        }
        return;
    }
    int64_t d[6] = { b, ch, r, r, h / r, w / r };
    int64_t src[6] = { ch * h * w, h * w, w, 1, r * w, r };
    ki_shapeop_copy_init(c, 6, d);
    for (int i = 0; i < 6; i++) {
        c->src[i] = src[i];
    }
}

static ki_status shuffle_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                 int n_out, const ki_exec *ex)
{
    ki_shapeop_copy c;
    (void)n_in;
    (void)n_out;
    shuffle_plan(state, &in[0].shape, &c);
    ki_shapeop_copy_run(&c, in[0].data, out[0].data, ex->n_threads);
    return KI_OK;
}

#define SHUFFLE_LAYER(sym, name, create_fn)                                                        \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .create = create_fn,                                                                       \
        .shape = shuffle_shape,                                                                    \
        .forward = shuffle_forward,                                                                \
        .destroy = ki_shapeop_free,                                                                \
    };

SHUFFLE_LAYER(ki_layer_nn_pixelshuffle, "nn.PixelShuffle", pixel_shuffle_create)
SHUFFLE_LAYER(ki_layer_f_pixel_shuffle, "F.pixel_shuffle", pixel_shuffle_create)
SHUFFLE_LAYER(ki_layer_nn_pixelunshuffle, "nn.PixelUnshuffle", pixel_unshuffle_create)
SHUFFLE_LAYER(ki_layer_f_pixel_unshuffle, "F.pixel_unshuffle", pixel_unshuffle_create)
SHUFFLE_LAYER(ki_layer_nn_channelshuffle, "nn.ChannelShuffle", channel_shuffle_create)
