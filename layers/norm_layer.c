/* norm_layer.c - nn.LayerNorm / F.layer_norm, nn.GroupNorm / F.group_norm and
 * nn.InstanceNorm1d/2d/3d / F.instance_norm.
 *
 * Both normalise contiguous rows: LayerNorm over the last dims given by normalized_shape,
 * GroupNorm over each (batch, group) block of channels x spatial. Mean and biased variance are
 * accumulated in double (two passes), then y = (x - mean) / sqrt(var + eps) * w + b. The weight
 * and bias are @attributes, or for F.layer_norm possibly runtime inputs ($weight, $bias). States
 * point at attribute data (which outlives them) and own nothing else. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/layer.h"
#include "layernorm.h"

typedef struct ln_state {
    int n_dims;                /* rank of normalized_shape */
    int64_t dims[KI_MAX_DIMS]; /* normalized_shape */
    int64_t row;               /* product of dims */
    float eps;
    int w_in, b_in;      /* input indices of runtime weight/bias, or -1 */
    const float *w, *b;  /* attribute data or NULL */
    ki_ln_row_fn kernel; /* the level's row kernel */
} ln_state;

typedef struct gn_state {
    int64_t groups, channels; /* channels -1 when not given and there are no weights */
    float eps;
    const float *w, *b; /* channels entries each, or NULL */
    int w_in, b_in;     /* F.group_norm / F.instance_norm: input slots of weight, bias, or -1 */
    bool per_channel;   /* F.instance_norm: one group per channel of the input */
    int extra;          /* F.instance_norm: running statistics given as inputs (not read) */
} gn_state;

/* Mean and 1/sqrt(var + eps) of x[0..n-1], n > 0: sums in double, in eight interleaved partial
 * sums (lane j takes x[8i + j]; independent chains the compiler keeps in vector registers), then
 * added in order. */
#define STAT_LANES 8
static void row_stats(const float *x, int64_t n, float eps, float *mean, float *rstd)
{
    double acc[STAT_LANES] = { 0 }, s = 0.0, ss = 0.0;
    const int64_t full = n / STAT_LANES * STAT_LANES;
    for (int64_t i = 0; i < full; i += STAT_LANES) {
        for (int j = 0; j < STAT_LANES; j++) {
            acc[j] += x[i + j];
        }
    }
    for (int j = 0; j < STAT_LANES; j++) {
        s += acc[j];
        acc[j] = 0.0;
    }
    for (int64_t i = full; i < n; i++) {
        s += x[i];
    }
    const double m = s / (double)n;
    for (int64_t i = 0; i < full; i += STAT_LANES) {
        for (int j = 0; j < STAT_LANES; j++) {
            const double d = x[i + j] - m;
            acc[j] += d * d;
        }
    }
    for (int j = 0; j < STAT_LANES; j++) {
        ss += acc[j];
    }
    for (int64_t i = full; i < n; i++) {
        const double d = x[i] - m;
        ss += d * d;
    }
    *mean = (float)m;
    *rstd = (float)(1.0 / sqrt(ss / (double)n + eps));
}

/* ---- LayerNorm ---- */

void ki_ln_row_ref(const float *x, int64_t n, float eps, const float *w, const float *b, float *y)
{
    float mean, rstd;
    row_stats(x, n, eps, &mean, &rstd);
    for (int64_t i = 0; i < n; i++) {
        const float v = (x[i] - mean) * rstd;
        y[i] = (w ? v * w[i] : v) + (b ? b[i] : 0.0f);
    }
}

ki_ln_row_fn ki_ln_row_for(ki_isa isa)
{
    return isa >= KI_ISA_AVX512 ? KI_X86(ki_ln_row_avx512)
           : isa >= KI_ISA_AVX2 ? KI_X86(ki_ln_row_avx2)
                                : ki_ln_row_ref;
}

/* Finds weight or bias: a runtime input, an attribute, or nothing. need: absence is an error. */
static ki_status ln_affine(const ki_op_desc *op, const char *key, bool need, ln_state *p,
                           int *in_idx, const float **data, ki_error *err)
{
    const ki_attr *a = ki_op_attr(op, key);
    *in_idx = ki_op_input_index(op, key);
    *data = NULL;
    if (*in_idx >= 0) {
        return KI_OK;
    }
    if (!a) {
        return need ? KI_FAIL(err, KI_ERR_FORMAT, "missing attribute @%s", key) : KI_OK;
    }
    if (a->numel != p->row) {
        return KI_FAIL(err, KI_ERR_SHAPE, "@%s has %lld elements, normalized_shape has %lld", key,
                       (long long)a->numel, (long long)p->row);
    }
    if (!a->data) {
        return KI_FAIL(err, KI_ERR_FORMAT, "attribute @%s has no data (no .bin loaded)", key);
    }
    *data = a->data;
    return KI_OK;
}

static ki_status ln_params(const ki_op_desc *op, ln_state *p, ki_error *err)
{
    double eps;
    ki_status st =
        ki_op_get_int_list(op, "normalized_shape", KI_MAX_DIMS, p->dims, &p->n_dims, err);
    if (st != KI_OK) {
        return st;
    }
    if (p->n_dims < 1) {
        return KI_FAIL(err, KI_ERR_FORMAT, "missing parameter normalized_shape");
    }
    p->row = 1;
    for (int i = 0; i < p->n_dims; i++) {
        if (!ki_ckd_mul_i64(&p->row, p->row, p->dims[i]) || p->row > KI_MAX_NUMEL) {
            return KI_FAIL(err, KI_ERR_FORMAT, "normalized_shape has a bad dimension");
        }
    }
    st = ki_op_get_float(op, "eps", 1e-5, &eps, err);
    if (st == KI_OK && !(eps >= 0.0)) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "eps must be a non-negative number");
    }
    p->eps = (float)eps;
    return st;
}

static ki_status ln_setup(const ki_op_desc *op, ln_state *p, ki_error *err)
{
    bool affine, bias;
    ki_status st = ln_params(op, p, err);
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "elementwise_affine", true, &affine, err);
    }
    /* nn.LayerNorm has bias=True/False; for F.layer_norm `bias` is a tensor (None here). */
    const ki_param *bp = ki_op_param(op, "bias");
    bias = !(bp && bp->kind == KI_PARAM_BOOL && bp->i == 0);
    bool module = strcmp(op->type, "nn.LayerNorm") == 0;
    if (st == KI_OK) {
        st = ln_affine(op, "weight", module && affine, p, &p->w_in, &p->w, err);
    }
    if (st == KI_OK) {
        st = ln_affine(op, "bias", module && affine && bias, p, &p->b_in, &p->b, err);
    }
    if (st == KI_OK && module && !affine) {
        p->w = p->b = NULL;
    }
    /* In-place execution aliases output 0 with input 0, so the data must come first. */
    if (st == KI_OK && ki_op_input_index(op, "input") > 0) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "$input must be the first input");
    }
    int want = 1 + (p->w_in >= 0) + (p->b_in >= 0);
    if (st == KI_OK && (op->n_inputs != want || op->n_outputs != 1)) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects %d inputs and 1 output, got %d and %d", want,
                     op->n_inputs, op->n_outputs);
    }
    return st;
}

static ki_status ln_create(const ki_op_desc *op, void **state, ki_error *err)
{
    ln_state *p = calloc(1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    ki_status st = ln_setup(op, p, err);
    if (st != KI_OK) {
        free(p);
        return st;
    }
    p->kernel = ki_ln_row_for(ki_cpu_isa());
    *state = p;
    return KI_OK;
}

static ki_status ln_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const ln_state *p = state;
    const ki_shape *x = &in[0];
    char buf[128];
    int64_t numel;
    if (n_out != 1 || n_in < 1 || n_in <= p->w_in || n_in <= p->b_in) {
        return KI_FAIL(err, KI_ERR_SHAPE, "wrong number of inputs or outputs");
    }
    bool ok = x->kind == KI_KIND_TENSOR && x->ndim >= p->n_dims;
    for (int i = 0; ok && i < p->n_dims; i++) {
        ok = x->d[x->ndim - p->n_dims + i] == p->dims[i];
    }
    if (!ok) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %s does not end with normalized_shape",
                       ki_shape_str(x, buf, sizeof buf));
    }
    for (int k = 0; k < 2; k++) {
        int idx = k ? p->b_in : p->w_in;
        if (idx >= 0 && (in[idx].kind != KI_KIND_TENSOR || !ki_shape_numel(&in[idx], &numel) ||
                         numel != p->row)) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%s %s does not match normalized_shape",
                           k ? "bias" : "weight", ki_shape_str(&in[idx], buf, sizeof buf));
        }
    }
    out[0] = ki_shape_make(x->ndim, x->d);
    return KI_OK;
}

static ki_status ln_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const ln_state *p = state;
    const float *src = in[0].data;
    const float *w = p->w_in >= 0 ? in[p->w_in].data : p->w;
    const float *b = p->b_in >= 0 ? in[p->b_in].data : p->b;
    float *dst = out[0].data;
    const int64_t n = p->row;
    const int64_t rows = n > 0 ? ki_shape_count(&in[0].shape) / n : 0;
    (void)n_in;
    (void)n_out;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (rows * n > 8192)
    for (int64_t r = 0; r < rows; r++) {
        const float *x = src + r * n;
        p->kernel(x, n, p->eps, w, b, dst + r * n);
    }
    return KI_OK;
}

/* ---- GroupNorm ---- */

static ki_status gn_setup(const ki_op_desc *op, gn_state *p, ki_error *err)
{
    bool affine;
    double eps;
    const ki_attr *w, *b;
    ki_status st = ki_op_get_int(op, "num_groups", 0, &p->groups, err);
    if (st == KI_OK) {
        st = ki_op_get_int(op, "num_channels", -1, &p->channels, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_float(op, "eps", 1e-5, &eps, err);
    }
    if (st == KI_OK) {
        st = ki_op_get_bool(op, "affine", true, &affine, err);
    }
    if (st != KI_OK) {
        return st;
    }
    if (p->groups < 1 || p->groups > KI_MAX_DIM || !(eps >= 0.0)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "num_groups must be positive and eps non-negative");
    }
    if (p->channels >= 0 && p->channels % p->groups != 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "num_channels=%lld is not divisible by num_groups=%lld",
                       (long long)p->channels, (long long)p->groups);
    }
    p->eps = (float)eps;
    if (!affine) {
        return KI_OK;
    }
    st = ki_op_require_attr(op, "weight", 1, &p->channels, &w, err);
    if (st == KI_OK) {
        p->channels = w->shape.d[0];
        st = ki_op_require_attr(op, "bias", 1, &p->channels, &b, err);
    }
    if (st == KI_OK) {
        p->w = w->data;
        p->b = b->data;
    }
    return st;
}

static ki_status gn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    if (op->n_inputs != 1 || op->n_outputs != 1) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    gn_state *p = calloc(1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->w_in = p->b_in = -1;
    ki_status st = gn_setup(op, p, err);
    if (st != KI_OK) {
        free(p);
        return st;
    }
    *state = p;
    return KI_OK;
}

static ki_status gn_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const gn_state *p = state;
    char buf[128];
    if (n_in != 1 + (p->w_in >= 0) + (p->b_in >= 0) + p->extra || n_out != 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "wrong number of inputs or outputs");
    }
    const int64_t groups = p->per_channel && in[0].ndim >= 2 ? in[0].d[1] : p->groups;
    /* PyTorch: input (N, C, *) with C divisible by num_groups (and equal to num_channels). */
    if (in[0].kind != KI_KIND_TENSOR || in[0].ndim < 2 || groups < 1 || in[0].d[1] % groups != 0 ||
        (p->channels >= 0 && in[0].d[1] != p->channels)) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "input %s: dim 1 must be num_channels and divisible by %lld groups",
                       ki_shape_str(&in[0], buf, sizeof buf), (long long)groups);
    }
    for (int k = 0; k < 2; k++) {
        int idx = k ? p->b_in : p->w_in;
        if (idx >= 0 &&
            (in[idx].kind != KI_KIND_TENSOR || in[idx].ndim != 1 || in[idx].d[0] != in[0].d[1])) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%s %s is not one value per channel",
                           k ? "bias" : "weight", ki_shape_str(&in[idx], buf, sizeof buf));
        }
    }
    out[0] = ki_shape_make(in[0].ndim, in[0].d);
    return KI_OK;
}

static ki_status gn_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const gn_state *p = state;
    const ki_shape *s = &in[0].shape;
    const float *w = p->w_in >= 0 ? in[p->w_in].data : p->w;
    const float *bias = p->b_in >= 0 ? in[p->b_in].data : p->b;
    int64_t inner = 1;
    (void)n_in;
    (void)n_out;
    for (int i = 2; i < s->ndim; i++) {
        inner *= s->d[i];
    }
    const int64_t groups = p->per_channel ? s->d[1] : p->groups;
    const int64_t cpg = s->d[1] / groups; /* channels per group */
    const int64_t blocks = s->d[0] * groups;
    const int64_t n = cpg * inner;
#pragma omp parallel for num_threads(ex->n_threads) schedule(static) if (blocks * n > 8192)
    for (int64_t blk = 0; blk < blocks; blk++) {
        const float *x = in[0].data + blk * n;
        float *y = out[0].data + blk * n;
        float mean = 0.0f, rstd = 0.0f;
        if (n > 0) {
            row_stats(x, n, p->eps, &mean, &rstd);
        }
        for (int64_t c = 0; c < cpg; c++) {
            const int64_t ch = (blk % groups) * cpg + c;
            const float a = w ? rstd * w[ch] : rstd;
            const float b = (bias ? bias[ch] : 0.0f) - mean * a;
            for (int64_t i = 0; i < inner; i++) {
                y[c * inner + i] = x[c * inner + i] * a + b;
            }
        }
    }
    return KI_OK;
}

/* ---- F.group_norm and F.instance_norm: weight and bias absent or inputs ($weight, $bias);
 * F.instance_norm normalises each channel with the input's own statistics (use_input_stats, its
 * default; running statistics given as inputs only get updated, which inference skips) ---- */

/* Input slots of $weight / $bias (-1 when absent); fails unless $input is first and every
 * input is one of them (or, for F.instance_norm, $running_mean / $running_var). */
static ki_status fgn_slots(const ki_op_desc *op, gn_state *p, ki_error *err)
{
    p->w_in = ki_op_input_slot(op, "weight", 1);
    p->b_in = ki_op_input_slot(op, "bias", 1 + (p->w_in >= 0));
    if (p->per_channel) {
        p->extra = (ki_op_input_index(op, "running_mean") >= 0) +
                   (ki_op_input_index(op, "running_var") >= 0);
    }
    int want = 1 + (p->w_in >= 0) + (p->b_in >= 0) + p->extra;
    if (ki_op_input_slot(op, "input", 0) != 0 || op->n_inputs != want || op->n_outputs != 1 ||
        ki_op_has(op, "weight") || ki_op_has(op, "bias")) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                       "expects $input first, optional $weight and $bias, and 1 output");
    }
    return KI_OK;
}

static ki_status fgn_create(const ki_op_desc *op, void **state, ki_error *err)
{
    bool inst = strcmp(op->type, "F.instance_norm") == 0, stats = true;
    double eps;
    gn_state *p = calloc(1, sizeof *p);
    if (!p) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->channels = -1, p->groups = 1, p->per_channel = inst;
    ki_status st = ki_op_get_float(op, "eps", 1e-5, &eps, err);
    if (st == KI_OK && inst) {
        st = ki_op_get_bool(op, "use_input_stats", true, &stats, err);
    } else if (st == KI_OK) {
        st = ki_op_get_int(op, "num_groups", 0, &p->groups, err);
    }
    if (st == KI_OK && (!stats || p->groups < 1 || p->groups > KI_MAX_DIM || !(eps >= 0.0))) {
        st = KI_FAIL(err, KI_ERR_FORMAT,
                     "num_groups must be positive, eps non-negative, use_input_stats true");
    }
    st = st != KI_OK ? st : fgn_slots(op, p, err);
    if (st != KI_OK) {
        free(p);
        return st;
    }
    p->eps = (float)eps;
    *state = p;
    return KI_OK;
}

/* ---- InstanceNorm1d/2d/3d: GroupNorm with one channel per group; without running statistics
 * (track_running_stats=False, PyTorch's default), affine off unless the export says so ---- */

static ki_status in_create(const ki_op_desc *op, void **state, ki_error *err)
{
    bool affine = false, track = false;
    double eps = 1e-5;
    const ki_attr *w, *b;
    gn_state *p = calloc(1, sizeof *p);
    ki_status st = !p ? KI_FAIL(err, KI_ERR_NOMEM, "out of memory")
                   : op->n_inputs != 1 || op->n_outputs != 1
                       ? KI_FAIL(err, KI_ERR_UNSUPPORTED, "expects 1 input and 1 output")
                       : KI_OK;
    st = st != KI_OK ? st : ki_op_get_int(op, "num_features", -1, &p->channels, err);
    st = st != KI_OK ? st : ki_op_get_float(op, "eps", 1e-5, &eps, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "affine", false, &affine, err);
    st = st != KI_OK ? st : ki_op_get_bool(op, "track_running_stats", false, &track, err);
    if (st == KI_OK && (p->channels < 1 || p->channels > KI_MAX_DIM || !(eps >= 0.0))) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "num_features must be positive and eps non-negative");
    }
    if (st == KI_OK && track) {
        st = KI_FAIL(err, KI_ERR_UNSUPPORTED, "track_running_stats=True");
    }
    if (st == KI_OK && affine) {
        st = ki_op_require_attr(op, "weight", 1, &p->channels, &w, err);
        st = st != KI_OK ? st : ki_op_require_attr(op, "bias", 1, &p->channels, &b, err);
        if (st == KI_OK) {
            p->w = w->data, p->b = b->data;
        }
    }
    if (st != KI_OK) {
        free(p);
        return st;
    }
    p->groups = p->channels;
    p->eps = (float)eps;
    p->w_in = p->b_in = -1;
    *state = p;
    return KI_OK;
}

static void norm_destroy(void *state)
{
    free(state);
}

#define LN_LAYER(sym, name)                                                                        \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = ln_create,                                                \
                               .shape = ln_shape,                                                  \
                               .workspace = NULL,                                                  \
                               .forward = ln_forward,                                              \
                               .destroy = norm_destroy }

LN_LAYER(ki_layer_nn_layer_norm, "nn.LayerNorm");
LN_LAYER(ki_layer_f_layer_norm, "F.layer_norm");

const ki_layer_ops ki_layer_nn_group_norm = { .type = "nn.GroupNorm",
                                              .flags = KI_LAYER_INPLACE,
                                              .create = gn_create,
                                              .shape = gn_shape,
                                              .workspace = NULL,
                                              .forward = gn_forward,
                                              .destroy = norm_destroy };

#define IN_LAYER(sym, name)                                                                        \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = in_create,                                                \
                               .shape = gn_shape,                                                  \
                               .forward = gn_forward,                                              \
                               .destroy = norm_destroy }

IN_LAYER(ki_layer_nn_instance_norm1d, "nn.InstanceNorm1d");
IN_LAYER(ki_layer_nn_instance_norm2d, "nn.InstanceNorm2d");
IN_LAYER(ki_layer_nn_instance_norm3d, "nn.InstanceNorm3d");

#define FGN_LAYER(sym, name)                                                                       \
    const ki_layer_ops sym = { .type = name,                                                       \
                               .flags = KI_LAYER_INPLACE,                                          \
                               .create = fgn_create,                                               \
                               .shape = gn_shape,                                                  \
                               .forward = gn_forward,                                              \
                               .destroy = norm_destroy }

FGN_LAYER(ki_layer_f_group_norm, "F.group_norm");
FGN_LAYER(ki_layer_f_instance_norm, "F.instance_norm");
