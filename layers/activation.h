/* activation.h - scalar activation functions shared by the activation layers and by layers that
 * fuse a following activation into their epilogue (convolution, linear).
 *
 * A ki_act is a small value (kind plus up to two float parameters) built once by ki_act_from_op
 * and then applied with ki_act_apply (one value) or ki_act_apply_n (a run of values; dst may equal
 * src). Formulas are PyTorch's float32 CPU ones, evaluated in float. Only static inline
 * functions live here besides ki_act_from_op, so ISA-specific files may include it. Thread-safe:
 * no state. */
#ifndef KI_ACTIVATION_H
#define KI_ACTIVATION_H

#include <math.h>
#include <stdint.h>

#include "../core/layer.h"

typedef enum ki_act_kind {
    KI_ACT_NONE = 0,    /* identity */
    KI_ACT_RELU,        /* max(x, 0) */
    KI_ACT_RELU6,       /* hardtanh(x, 0, 6) */
    KI_ACT_LEAKY_RELU,  /* a = negative_slope */
    KI_ACT_HARDTANH,    /* a = min_val, b = max_val */
    KI_ACT_SIGMOID,     /* 1 / (1 + exp(-x)) */
    KI_ACT_SILU,        /* x / (1 + exp(-x)) */
    KI_ACT_TANH,        /* tanh(x) */
    KI_ACT_HARDSWISH,   /* x * relu6(x + 3) / 6 */
    KI_ACT_HARDSIGMOID, /* relu6(x + 3) / 6 */
    KI_ACT_GELU,        /* approximate='none': x/2 * (1 + erf(x/sqrt(2))) */
    KI_ACT_GELU_TANH,   /* approximate='tanh' */
    KI_ACT_ELU,         /* a = alpha */
    KI_ACT_MISH,        /* x * tanh(softplus(x)) */
    KI_ACT_SOFTPLUS,    /* a = beta, b = threshold */
    KI_ACT_CELU,        /* a = alpha: max(0, x) + min(0, a * (exp(x / a) - 1)) */
    KI_ACT_SELU,        /* scale * elu(x, alpha), PyTorch's fixed constants */
    KI_ACT_SOFTSIGN,    /* x / (1 + |x|) */
    KI_ACT_TANHSHRINK,  /* x - tanh(x) */
    KI_ACT_HARDSHRINK,  /* a = lambd: x where |x| > a, else 0 */
    KI_ACT_SOFTSHRINK,  /* a = lambd: x - a above a, x + a below -a, else 0 */
    KI_ACT_LOGSIGMOID,  /* log(1 / (1 + exp(-x))) */
    KI_ACT_THRESHOLD    /* a = threshold, b = value: x where x > a, else b */
} ki_act_kind;

typedef struct ki_act {
    ki_act_kind kind;
    float a, b; /* parameters, see ki_act_kind */
} ki_act;

/* Builds the activation of an operator whose type is one of the activation spellings
 * (nn.ReLU6, F.relu6, nn.LeakyReLU, ..., also nn.ReLU / F.relu), reading PyTorch's keyword
 * parameters with PyTorch's defaults. KI_ERR_UNSUPPORTED for any other type (nn.PReLU has
 * per-channel weights and is not a scalar activation). */
ki_status ki_act_from_op(const ki_op_desc *op, ki_act *out, ki_error *err);

static inline float ki_act_hardtanh(float x, float lo, float hi)
{
    /* Comparisons rather than fminf/fmaxf so NaN propagates, as torch.clamp does. */
    return x < lo ? lo : (x > hi ? hi : x);
}

static inline float ki_act_hardswish(float x)
{
    return x * ki_act_hardtanh(x + 3.0f, 0.0f, 6.0f) / 6.0f;
}

static inline float ki_act_hardsigmoid(float x)
{
    return ki_act_hardtanh(x + 3.0f, 0.0f, 6.0f) / 6.0f;
}

static inline float ki_act_gelu_tanh(float x)
{
    /* PyTorch: kBeta = sqrt(2) * (2 / sqrt(pi)) / 2, kKappa = 0.044715. */
    const float beta = 0.7978845608028654f;
    return 0.5f * x * (1.0f + tanhf(beta * (x + 0.044715f * x * x * x)));
}

static inline float ki_act_softplus(float x, float beta, float threshold)
{
    /* Above the threshold PyTorch returns x itself to avoid overflow in exp. */
    return x * beta > threshold ? x : log1pf(expf(x * beta)) / beta;
}

static inline float ki_act_apply(const ki_act *act, float x)
{
    switch (act->kind) {
    case KI_ACT_NONE:
        return x;
    case KI_ACT_RELU:
        return x < 0.0f ? 0.0f : x;
    case KI_ACT_RELU6:
        return ki_act_hardtanh(x, 0.0f, 6.0f);
    case KI_ACT_LEAKY_RELU:
        return x > 0.0f ? x : x * act->a;
    case KI_ACT_HARDTANH:
        return ki_act_hardtanh(x, act->a, act->b);
    case KI_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-x));
    case KI_ACT_SILU:
        return x / (1.0f + expf(-x));
    case KI_ACT_TANH:
        return tanhf(x);
    case KI_ACT_HARDSWISH:
        return ki_act_hardswish(x);
    case KI_ACT_HARDSIGMOID:
        return ki_act_hardsigmoid(x);
    case KI_ACT_GELU:
        return x * 0.5f * (1.0f + erff(x * 0.70710678118654752f));
    case KI_ACT_GELU_TANH:
        return ki_act_gelu_tanh(x);
    case KI_ACT_ELU:
        return x > 0.0f ? x : expm1f(x) * act->a;
    case KI_ACT_MISH:
        return x * tanhf(log1pf(expf(x)));
    case KI_ACT_SOFTPLUS:
        return ki_act_softplus(x, act->a, act->b);
    case KI_ACT_CELU:
        return x > 0.0f ? x : act->a * expm1f(x / act->a);
    case KI_ACT_SELU:
        return 1.0507009873554804934193349852946f *
               (x > 0.0f ? x : 1.6732632423543772848170429916717f * expm1f(x));
    case KI_ACT_SOFTSIGN:
        return x / (1.0f + fabsf(x));
    case KI_ACT_TANHSHRINK:
        return x - tanhf(x);
    case KI_ACT_HARDSHRINK:
        return x > act->a || x < -act->a ? x : (x != x ? x : 0.0f);
    case KI_ACT_SOFTSHRINK:
        return x > act->a ? x - act->a : x < -act->a ? x + act->a : (x != x ? x : 0.0f);
    case KI_ACT_LOGSIGMOID:
        return (x < 0.0f ? x : 0.0f) - log1pf(expf(-fabsf(x)));
    case KI_ACT_THRESHOLD:
        return x > act->a ? x : (x != x ? x : act->b);
    }
    return x;
}

/* One loop per kind, so the switch is decided once per run and the cheap kinds vectorise. */
#define KI_ACT_MAP_(expr)                                                                          \
    for (int64_t i_ = 0; i_ < n; i_++) {                                                           \
        float x = src[i_];                                                                         \
        dst[i_] = (expr);                                                                          \
    }                                                                                              \
    break

/* dst[i] = act(src[i]) for i < n; dst may equal src (in-place), other overlaps are not allowed. */
static inline void ki_act_apply_n(const ki_act *act, float *dst, const float *src, int64_t n)
{
    const float a = act->a, b = act->b;
    switch (act->kind) {
    case KI_ACT_RELU:
        KI_ACT_MAP_(x < 0.0f ? 0.0f : x);
    case KI_ACT_RELU6:
        KI_ACT_MAP_(ki_act_hardtanh(x, 0.0f, 6.0f));
    case KI_ACT_LEAKY_RELU:
        KI_ACT_MAP_(x > 0.0f ? x : x * a);
    case KI_ACT_HARDTANH:
        KI_ACT_MAP_(ki_act_hardtanh(x, a, b));
    case KI_ACT_HARDSWISH:
        KI_ACT_MAP_(ki_act_hardswish(x));
    case KI_ACT_HARDSIGMOID:
        KI_ACT_MAP_(ki_act_hardsigmoid(x));
    case KI_ACT_SILU:
        KI_ACT_MAP_(x / (1.0f + expf(-x)));
    case KI_ACT_SIGMOID:
        KI_ACT_MAP_(1.0f / (1.0f + expf(-x)));
    default:
        /* The transcendental kinds are dominated by libm; the per-element switch costs little. */
        KI_ACT_MAP_(ki_act_apply(act, x));
    }
}

#undef KI_ACT_MAP_

#endif
