/* vol_common.h - helpers shared by the 3-D (volumetric) layers of the convolution family
 * (conv3d.c, deconv3d.c, pool3d.c): reading (N,C,D,H,W) inputs, triples of spatial parameters
 * and the pooling output size. Only static inline functions and types; no
 * state, thread-safe. */
#ifndef KI_VOL_COMMON_H
#define KI_VOL_COMMON_H

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

/* PyTorch's pooling_output_shape: with ceil_mode the last window must start inside the input
 * or the left padding. */
static inline int64_t ki_vol_pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d,
                                      bool ceil_mode)
{
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = ki_cv_floordiv(num, s) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad) {
        o--;
    }
    return o;
}

#endif
