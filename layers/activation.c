/* activation.c - elementwise activation layers (nn.ReLU6 / F.relu6, nn.SiLU / F.silu, ...).
 *
 * Every layer here is one ki_act (activation.h) applied to each element of a tensor of any
 * rank; the module and functional spellings of an activation share all functions. The state is
 * the malloc'd act_state, read-only after create: the ki_act and the convolution epilogue of this
 * CPU's level, which runs the vector activations (SiLU, Sigmoid, Hardswish, ...) and the scalar
 * ones alike. */
#include "activation.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conv_common.h"

typedef struct act_state {
    ki_act act;
    ki_cv_epilogue_fn epf;
} act_state;

/* Elements per parallel chunk: large enough that fork/join cost stays small. */
#define ACT_CHUNK 8192

typedef struct act_name {
    const char *type;
    ki_act_kind kind;
} act_name;

static const act_name act_names[] = {
    { "nn.ReLU", KI_ACT_RELU },
    { "F.relu", KI_ACT_RELU },
    { "nn.ReLU6", KI_ACT_RELU6 },
    { "F.relu6", KI_ACT_RELU6 },
    { "nn.LeakyReLU", KI_ACT_LEAKY_RELU },
    { "F.leaky_relu", KI_ACT_LEAKY_RELU },
    { "nn.Hardtanh", KI_ACT_HARDTANH },
    { "F.hardtanh", KI_ACT_HARDTANH },
    { "torch.clamp", KI_ACT_HARDTANH }, /* min(max, max(min, x)); a None bound is infinite */
    { "nn.CELU", KI_ACT_CELU },
    { "F.celu", KI_ACT_CELU },
    { "nn.SELU", KI_ACT_SELU },
    { "F.selu", KI_ACT_SELU },
    { "nn.Softsign", KI_ACT_SOFTSIGN },
    { "F.softsign", KI_ACT_SOFTSIGN },
    { "nn.Tanhshrink", KI_ACT_TANHSHRINK },
    { "F.tanhshrink", KI_ACT_TANHSHRINK },
    { "nn.Hardshrink", KI_ACT_HARDSHRINK },
    { "F.hardshrink", KI_ACT_HARDSHRINK },
    { "nn.Softshrink", KI_ACT_SOFTSHRINK },
    { "F.softshrink", KI_ACT_SOFTSHRINK },
    { "nn.LogSigmoid", KI_ACT_LOGSIGMOID },
    { "F.logsigmoid", KI_ACT_LOGSIGMOID },
    { "nn.Threshold", KI_ACT_THRESHOLD },
    { "F.threshold", KI_ACT_THRESHOLD },
    { "nn.RReLU", KI_ACT_LEAKY_RELU }, /* at inference: the slope (lower + upper) / 2 */
    { "F.rrelu", KI_ACT_LEAKY_RELU },
    { "nn.Sigmoid", KI_ACT_SIGMOID },
    { "F.sigmoid", KI_ACT_SIGMOID },
    { "nn.SiLU", KI_ACT_SILU },
    { "F.silu", KI_ACT_SILU },
    { "nn.Tanh", KI_ACT_TANH },
    { "F.tanh", KI_ACT_TANH },
    { "nn.Hardswish", KI_ACT_HARDSWISH },
    { "F.hardswish", KI_ACT_HARDSWISH },
    { "nn.Hardsigmoid", KI_ACT_HARDSIGMOID },
    { "F.hardsigmoid", KI_ACT_HARDSIGMOID },
    { "nn.GELU", KI_ACT_GELU },
    { "F.gelu", KI_ACT_GELU },
    { "nn.ELU", KI_ACT_ELU },
    { "F.elu", KI_ACT_ELU },
    { "nn.Mish", KI_ACT_MISH },
    { "F.mish", KI_ACT_MISH },
    { "nn.Softplus", KI_ACT_SOFTPLUS },
    { "F.softplus", KI_ACT_SOFTPLUS },
};

/* Reads one float parameter with PyTorch's default into *out. */
static ki_status get_float(const ki_op_desc *op, const char *key, double def, float *out,
                           ki_error *err)
{
    double v;
    ki_status st = ki_op_get_float(op, key, def, &v, err);
    if (st == KI_OK) {
        *out = (float)v;
    }
    return st;
}

static ki_status read_gelu(const ki_op_desc *op, ki_act *act, ki_error *err)
{
    const char *approx;
    ki_status st = ki_op_get_string(op, "approximate", "none", &approx, err);
    if (st != KI_OK) {
        return st;
    }
    if (strcmp(approx, "none") == 0) {
        act->kind = KI_ACT_GELU;
    } else if (strcmp(approx, "tanh") == 0) {
        act->kind = KI_ACT_GELU_TANH;
    } else {
        return KI_FAIL(err, KI_ERR_FORMAT, "approximate=%s is not 'none' or 'tanh'", approx);
    }
    return KI_OK;
}

/* Reads the parameters of act->kind (already set) with PyTorch's defaults. */
static ki_status read_params(const ki_op_desc *op, ki_act *act, ki_error *err)
{
    ki_status st = KI_OK;
    switch (act->kind) {
    case KI_ACT_LEAKY_RELU:
        if (strcmp(op->type, "nn.RReLU") == 0 || strcmp(op->type, "F.rrelu") == 0) {
            float lo, hi;
            st = get_float(op, "lower", 1.0 / 8.0, &lo, err);
            st = st != KI_OK ? st : get_float(op, "upper", 1.0 / 3.0, &hi, err);
            act->a = (lo + hi) / 2.0f;
            return st;
        }
        return get_float(op, "negative_slope", 0.01, &act->a, err);
    case KI_ACT_CELU:
        st = get_float(op, "alpha", 1.0, &act->a, err);
        return st == KI_OK && act->a == 0.0f ? KI_FAIL(err, KI_ERR_FORMAT, "alpha must not be 0")
                                             : st;
    case KI_ACT_HARDSHRINK:
    case KI_ACT_SOFTSHRINK:
        return get_float(op, "lambd", 0.5, &act->a, err);
    case KI_ACT_THRESHOLD:
        st = get_float(op, "threshold", NAN, &act->a, err);
        st = st != KI_OK ? st : get_float(op, "value", NAN, &act->b, err);
        return st == KI_OK && (isnan(act->a) || isnan(act->b))
                   ? KI_FAIL(err, KI_ERR_FORMAT, "threshold and value are required")
                   : st;
    case KI_ACT_HARDTANH:
        if (strcmp(op->type, "torch.clamp") == 0) {
            st = get_float(op, "min", -INFINITY, &act->a, err);
            return st != KI_OK ? st : get_float(op, "max", INFINITY, &act->b, err);
        }
        st = get_float(op, "min_val", -1.0, &act->a, err);
        return st != KI_OK ? st : get_float(op, "max_val", 1.0, &act->b, err);
    case KI_ACT_ELU:
        return get_float(op, "alpha", 1.0, &act->a, err);
    case KI_ACT_SOFTPLUS:
        st = get_float(op, "beta", 1.0, &act->a, err);
        return st != KI_OK ? st : get_float(op, "threshold", 20.0, &act->b, err);
    case KI_ACT_GELU:
        return read_gelu(op, act, err);
    default:
        return KI_OK;
    }
}

ki_status ki_act_from_op(const ki_op_desc *op, ki_act *out, ki_error *err)
{
    ki_act act = { KI_ACT_NONE, 0.0f, 0.0f };
    size_t i = 0;
    while (i < sizeof act_names / sizeof act_names[0] && strcmp(act_names[i].type, op->type)) {
        i++;
    }
    if (i == sizeof act_names / sizeof act_names[0]) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "%s is not a scalar activation", op->type);
    }
    act.kind = act_names[i].kind;
    ki_status st = read_params(op, &act, err);
    if (st != KI_OK) {
        return st;
    }
    if (act.kind == KI_ACT_SOFTPLUS && act.a == 0.0f) {
        return KI_FAIL(err, KI_ERR_FORMAT, "softplus beta must not be 0");
    }
    *out = act;
    return KI_OK;
}

static ki_status act_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ki_act act;
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    ki_status st = ki_act_from_op(op, &act, err);
    if (st != KI_OK) {
        return st;
    }
    act_state *p = malloc(sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->act = act;
    /* the kinds the vector epilogues run (conv2d_avx2.c, epilogue_avx512.c); the others (ELU,
     * Mish, tanh-GELU, ...) straight through the scalar loop, without the epilogue's extra pass */
    switch (act.kind) {
    case KI_ACT_RELU:
    case KI_ACT_RELU6:
    case KI_ACT_HARDTANH:
    case KI_ACT_LEAKY_RELU:
    case KI_ACT_HARDSWISH:
    case KI_ACT_HARDSIGMOID:
    case KI_ACT_SILU:
    case KI_ACT_SIGMOID:
    case KI_ACT_GELU:
        p->epf = ki_cv_epilogue_for(ki_cpu_isa());
        break;
    default:
        p->epf = NULL;
        break;
    }
    *state = p;
    return KI_OK;
}

static ki_status act_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                           int n_out, ki_error *err)
{
    (void)state;
    if (n_in != 1 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects 1 input and 1 output");
    }
    if (in[0].kind != KI_KIND_TENSOR) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "input is not a tensor");
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

static ki_status act_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                             int n_out, const ki_exec *ex)
{
    const act_state *a = state;
    const ki_cv_epilogue ep = { NULL, a->act, false };
    const float *src = in[0].data;
    float *dst = out[0].data;
    const int64_t n = ki_shape_count(&in[0].shape);
    const int64_t n_chunks = (n + ACT_CHUNK - 1) / ACT_CHUNK;
    (void)n_in;
    (void)n_out;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (n_chunks > 1)
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t lo = c * ACT_CHUNK;
        const int64_t len = n - lo < ACT_CHUNK ? n - lo : ACT_CHUNK;
        if (!a->epf) {
            ki_act_apply_n(&a->act, dst + lo, src + lo, len);
            continue;
        }
        if (dst != src) {
            memcpy(dst + lo, src + lo, (size_t)len * sizeof *dst);
        }
        a->epf(&ep, NULL, 0, dst + lo, (size_t)len);
    }
    return KI_OK;
}

static void act_destroy(void *state)
{
    free(state);
}

#define ACT_LAYER(sym, name)                                                                       \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = act_create,                                               \
                               .shape = act_shape,                                                 \
                               .workspace = NULL,                                                  \
                               .forward = act_forward,                                             \
                               .destroy = act_destroy }

ACT_LAYER(ki_layer_relu, "nn.ReLU");
ACT_LAYER(ki_layer_f_relu, "F.relu");
ACT_LAYER(ki_layer_nn_relu6, "nn.ReLU6");
ACT_LAYER(ki_layer_f_relu6, "F.relu6");
ACT_LAYER(ki_layer_nn_leaky_relu, "nn.LeakyReLU");
ACT_LAYER(ki_layer_f_leaky_relu, "F.leaky_relu");
ACT_LAYER(ki_layer_nn_hardtanh, "nn.Hardtanh");
ACT_LAYER(ki_layer_f_hardtanh, "F.hardtanh");
ACT_LAYER(ki_layer_torch_clamp, "torch.clamp");
ACT_LAYER(ki_layer_nn_celu, "nn.CELU");
ACT_LAYER(ki_layer_f_celu, "F.celu");
ACT_LAYER(ki_layer_nn_selu, "nn.SELU");
ACT_LAYER(ki_layer_f_selu, "F.selu");
ACT_LAYER(ki_layer_nn_softsign, "nn.Softsign");
ACT_LAYER(ki_layer_f_softsign, "F.softsign");
ACT_LAYER(ki_layer_nn_tanhshrink, "nn.Tanhshrink");
ACT_LAYER(ki_layer_f_tanhshrink, "F.tanhshrink");
ACT_LAYER(ki_layer_nn_hardshrink, "nn.Hardshrink");
ACT_LAYER(ki_layer_f_hardshrink, "F.hardshrink");
ACT_LAYER(ki_layer_nn_softshrink, "nn.Softshrink");
ACT_LAYER(ki_layer_f_softshrink, "F.softshrink");
ACT_LAYER(ki_layer_nn_logsigmoid, "nn.LogSigmoid");
ACT_LAYER(ki_layer_f_logsigmoid, "F.logsigmoid");
ACT_LAYER(ki_layer_nn_threshold, "nn.Threshold");
ACT_LAYER(ki_layer_f_threshold, "F.threshold");
ACT_LAYER(ki_layer_nn_rrelu, "nn.RReLU");
ACT_LAYER(ki_layer_f_rrelu, "F.rrelu");
ACT_LAYER(ki_layer_nn_sigmoid, "nn.Sigmoid");
ACT_LAYER(ki_layer_f_sigmoid, "F.sigmoid");
ACT_LAYER(ki_layer_nn_silu, "nn.SiLU");
ACT_LAYER(ki_layer_f_silu, "F.silu");
ACT_LAYER(ki_layer_nn_tanh, "nn.Tanh");
ACT_LAYER(ki_layer_f_tanh, "F.tanh");
ACT_LAYER(ki_layer_nn_hardswish, "nn.Hardswish");
ACT_LAYER(ki_layer_f_hardswish, "F.hardswish");
ACT_LAYER(ki_layer_nn_hardsigmoid, "nn.Hardsigmoid");
ACT_LAYER(ki_layer_f_hardsigmoid, "F.hardsigmoid");
ACT_LAYER(ki_layer_nn_gelu, "nn.GELU");
ACT_LAYER(ki_layer_f_gelu, "F.gelu");
ACT_LAYER(ki_layer_nn_elu, "nn.ELU");
ACT_LAYER(ki_layer_f_elu, "F.elu");
ACT_LAYER(ki_layer_nn_mish, "nn.Mish");
ACT_LAYER(ki_layer_f_mish, "F.mish");
ACT_LAYER(ki_layer_nn_softplus, "nn.Softplus");
ACT_LAYER(ki_layer_f_softplus, "F.softplus");
