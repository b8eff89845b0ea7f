/* gen_arange.c - torch.arange(start, end, step, dtype): a 1-D float tensor of
 * ceil((end - start) / step) values start + i * step.
 *
 * Each bound is a parameter (start=, end=, step=) or a SCALAR input bound to $start, $end or
 * $step whose value is known at shape time (dynamic exports take `end` from size(@0,2)).
 * Unnamed inputs are positional as in torch.arange: (end), (start, end) or (start, end, step).
 * Integer dtypes truncate the bounds the way PyTorch's arange kernel does. The values are
 * computed in double and rounded to float, as PyTorch's CPU kernel does for float32.
 * State is immutable after create; thread-safe. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/layer.h"

enum { AR_START, AR_END, AR_STEP, AR_N };

static const char *const ar_names[AR_N] = { "start", "end", "step" };

typedef struct arange_state {
    double value[AR_N]; /* from parameters (defaults 0, -, 1) */
    int input[AR_N];    /* index of the input carrying the bound, or -1 */
    bool integral;      /* dtype is an integer type: values use truncated start and step */
    bool int_end;       /* int32 and narrower: the length uses them too (int64: doubles) */
} arange_state;

/* 0: floating (or absent), 1: int64, 2: a narrower integer type. */
static int dtype_class(const char *dt)
{
    static const char *const ints[] = { "torch.int64", "torch.long",  "torch.int",  "torch.int32",
                                        "torch.int16", "torch.short", "torch.int8", "torch.uint8" };
    for (size_t i = 0; dt && i < sizeof ints / sizeof ints[0]; i++) {
        if (strcmp(dt, ints[i]) == 0) {
            return i < 2 ? 1 : 2;
        }
    }
    return 0;
}

/* Binds unnamed inputs positionally: 1 -> end, 2 -> start,end, 3 -> start,end,step. */
static ki_status bind_inputs(const ki_op_desc *op, arange_state *s, ki_error *err)
{
    static const int order[3][3] = { { AR_END, -1, -1 },
                                     { AR_START, AR_END, -1 },
                                     { AR_START, AR_END, AR_STEP } };
    int n_pos = 0;
    for (int i = 0; i < op->n_inputs; i++) {
        const char *k = op->input_keys ? op->input_keys[i] : NULL;
        int which = -1;
        for (int j = 0; k && j < AR_N; j++) {
            which = strcmp(k, ar_names[j]) == 0 ? j : which;
        }
        if (k && which < 0) {
            return KI_FAIL(err, KI_ERR_FORMAT, "unexpected input $%s", k);
        }
        if (which >= 0) {
            s->input[which] = i;
        } else {
            n_pos++;
        }
    }
    if (n_pos > 3 || (n_pos > 0 && n_pos != op->n_inputs)) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "cannot tell which of %d unnamed inputs is start/end/step", n_pos);
    }
    for (int i = 0; i < n_pos; i++) {
        s->input[order[n_pos - 1][i]] = i;
    }
    return KI_OK;
}

static ki_status arange_create(const ki_op_desc *op, void **state, ki_error *err)
{
    if (op->n_outputs != 1 || op->n_inputs > 3) {
        return KI_FAIL(err, KI_ERR_FORMAT, "expected at most 3 inputs and 1 output, got %d and %d",
                       op->n_inputs, op->n_outputs);
    }
    arange_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    static const double defaults[AR_N] = { 0.0, NAN, 1.0 };
    const char *dt = NULL;
    ki_status st = ki_op_get_string(op, "dtype", NULL, &dt, err);
    for (int i = 0; i < AR_N && st == KI_OK; i++) {
        s->input[i] = -1;
        st = ki_op_get_float(op, ar_names[i], defaults[i], &s->value[i], err);
    }
    if (st == KI_OK) {
        s->integral = dtype_class(dt) != 0;
        s->int_end = dtype_class(dt) == 2;
        st = bind_inputs(op, s, err);
    }
    if (st == KI_OK && s->input[AR_END] < 0 && isnan(s->value[AR_END])) {
        st = KI_FAIL(err, KI_ERR_FORMAT, "no end: neither a parameter nor an input");
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    *state = s;
    return KI_OK;
}

/* The three bounds for these inputs; values of inputs must be known at shape time. */
static ki_status bounds(const arange_state *s, const ki_shape *in, int n_in, double *b,
                        ki_error *err)
{
    for (int i = 0; i < AR_N; i++) {
        int k = s->input[i];
        b[i] = s->value[i];
        if (k < 0) {
            continue;
        }
        if (k >= n_in || in[k].kind != KI_KIND_SCALAR || !in[k].has_values) {
            return KI_FAIL(err, KI_ERR_SHAPE, "%s must be a scalar known before the run",
                           ar_names[i]);
        }
        b[i] = in[k].values[0];
    }
    /* PyTorch's arange: integer types take start and step as integers (and step 0 is then an
     * error); an int64 range's length still comes from the double values, that of narrower
     * types from the integers */
    if (s->integral && trunc(b[AR_STEP]) == 0.0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "step must be nonzero");
    }
    for (int i = 0; i < AR_N && s->int_end; i++) {
        b[i] = trunc(b[i]);
    }
    return KI_OK;
}

static ki_status arange_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    double b[AR_N];
    (void)n_out;
    ki_status st = bounds(state, in, n_in, b, err);
    if (st != KI_OK) {
        return st;
    }
    if (!isfinite(b[AR_START]) || !isfinite(b[AR_END]) || !isfinite(b[AR_STEP])) {
        return KI_FAIL(err, KI_ERR_SHAPE, "start, end and step must be finite");
    }
    if (b[AR_STEP] == 0.0) {
        return KI_FAIL(err, KI_ERR_SHAPE, "step must be nonzero");
    }
    double len = ceil((b[AR_END] - b[AR_START]) / b[AR_STEP]);
    if (len < 0) {
        return KI_FAIL(err, KI_ERR_SHAPE,
                       "upper bound and lower bound inconsistent with step sign "
                       "(start %g, end %g, step %g)",
                       b[AR_START], b[AR_END], b[AR_STEP]);
    }
    if (len > (double)KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_LIMIT, "%.0f values is more than kinfer allows", len);
    }
    int64_t d = (int64_t)len;
    out[0] = ki_shape_make(1, &d);
    return KI_OK;
}

static ki_status arange_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const arange_state *s = state;
    (void)n_in, (void)n_out, (void)ex;
    double b[AR_N];
    for (int i = 0; i < AR_N; i++) {
        b[i] = s->input[i] >= 0 ? (double)in[s->input[i]].data[0] : s->value[i];
        b[i] = s->integral ? trunc(b[i]) : b[i];
    }
    int64_t n = out[0].shape.d[0];
    for (int64_t i = 0; i < n; i++) {
        out[0].data[i] = (float)(b[AR_START] + (double)i * b[AR_STEP]);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_torch_arange = {
    .type = "torch.arange",
    .create = arange_create,
    .shape = arange_shape,
    .forward = arange_forward,
    .destroy = free,
};
