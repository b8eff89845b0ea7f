/* expr_eval.c - the chunk evaluator: runs the RPN code over n floats at a time.
 *
 * Each stack slot is a run of n floats in the caller's scratch buffer. A leaf fills its slot
 * (from an input run, or a broadcast constant), a function works in place on the top slot(s)
 * through a table of whole-run kernels, so the dispatch costs one indirect call per chunk, not
 * per element. Arithmetic is float32, as PyTorch computes float tensors. No allocation; the
 * code and the inputs are read-only, so threads may share them. */
#include <stdio.h>
#include <string.h>

#include "../core/ckd.h"
#include "expr.h"
#include "expr_math.h"

typedef void (*unary_fn)(float *x, size_t n);
typedef void (*binary_fn)(float *restrict a, const float *restrict b, size_t n);

#define UNARY(name, expr)                                                                          \
    static void name(float *x, size_t n)                                                           \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            const float v = x[i];                                                                  \
            x[i] = (expr);                                                                         \
        }                                                                                          \
    }

#define BINARY(name, expr)                                                                         \
    static void name(float *restrict a, const float *restrict b, size_t n)                         \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            const float x = a[i], y = b[i];                                                        \
            a[i] = (expr);                                                                         \
        }                                                                                          \
    }

UNARY(u_abs, fabsf(v))
UNARY(u_acos, acosf(v))
UNARY(u_acosh, acoshf(v))
UNARY(u_asin, asinf(v))
UNARY(u_asinh, asinhf(v))
UNARY(u_atan, atanf(v))
UNARY(u_atanh, atanhf(v))
UNARY(u_cos, cosf(v))
UNARY(u_cosh, coshf(v))
UNARY(u_sin, sinf(v))
UNARY(u_sinh, sinhf(v))
UNARY(u_tan, tanf(v))
UNARY(u_tanh, tanhf(v))
UNARY(u_exp, expf(v))
UNARY(u_log, logf(v))
UNARY(u_log10, log10f(v))
UNARY(u_sqrt, sqrtf(v))
UNARY(u_erf, erff(v))
UNARY(u_expm1, expm1f(v))
UNARY(u_log1p, log1pf(v))
UNARY(u_ceil, ceilf(v))
UNARY(u_floor, floorf(v))
UNARY(u_trunc, truncf(v))
UNARY(u_round, nearbyintf(v)) /* half-to-even in the default rounding mode, like torch.round */
UNARY(u_neg, -v)
UNARY(u_reciprocal, 1.0f / v)
UNARY(u_rsqrt, 1.0f / sqrtf(v))
UNARY(u_square, v *v)
UNARY(u_sign, (float)((0 < v) - (v < 0)))
UNARY(u_ident, v)
UNARY(u_half, ki_expr_to_half(v))
UNARY(u_bf16, ki_expr_to_bf16(v))
UNARY(u_long, (float)ki_expr_to_i64(v))
UNARY(u_int32, (float)ki_expr_wrap(v, 32, 1))
UNARY(u_int16, (float)ki_expr_wrap(v, 16, 1))
UNARY(u_int8, (float)ki_expr_wrap(v, 8, 1))
UNARY(u_uint8, (float)ki_expr_wrap(v, 8, 0))
UNARY(u_bool, (float)(v != 0))

BINARY(b_add, x + y)
BINARY(b_sub, x - y)
BINARY(b_mul, x *y)
BINARY(b_div, x / y)
BINARY(b_floordiv, ki_expr_floordiv_f(x, y))
BINARY(b_remainder, ki_expr_remainder_f(x, y))
BINARY(b_fmod, fmodf(x, y))
BINARY(b_pow, powf(x, y))
BINARY(b_atan2, atan2f(x, y))
BINARY(b_logaddexp, ki_expr_logaddexp_f(x, y))
BINARY(b_max, (x != x || y != y) ? NAN : (x > y ? x : y))
BINARY(b_min, (x != x || y != y) ? NAN : (x < y ? x : y))
BINARY(b_and, (float)ki_expr_bitwise(0, x, y))
BINARY(b_or, (float)ki_expr_bitwise(1, x, y))
BINARY(b_xor, (float)ki_expr_bitwise(2, x, y))
BINARY(b_lshift, (float)ki_expr_lshift(x, y))
BINARY(b_rshift, (float)ki_expr_rshift(x, y))

/* Indexed by opcode - KI_EOP_FIRST_UNARY; complex casts never reach here (rejected by RPN). */
static const unary_fn unary_table[] = {
    u_abs,
    u_acos,
    u_acosh,
    u_asin,
    u_asinh,
    u_atan,
    u_atanh,
    u_cos,
    u_cosh,
    u_sin,
    u_sinh,
    u_tan,
    u_tanh,
    u_exp,
    u_log,
    u_log10,
    u_sqrt,
    u_erf,
    u_expm1,
    u_log1p,
    u_ceil,
    u_floor,
    u_trunc,
    u_round,
    u_neg,
    u_reciprocal,
    u_rsqrt,
    u_square,
    u_sign,
    u_trunc /* int */,
    u_ident /* float */,
    u_ident /* double: float32 tensors cannot hold more */,
    u_half,
    u_bf16,
    u_long,
    u_int32,
    u_int16,
    u_int8,
    u_uint8,
    u_bool,
    u_ident,
    u_ident,
    u_ident,
};

static const binary_fn binary_table[] = {
    b_add,       b_sub, b_mul, b_div, b_floordiv, b_remainder, b_fmod,   b_pow,    b_atan2,
    b_logaddexp, b_max, b_min, b_and, b_or,       b_xor,       b_lshift, b_rshift,
};

_Static_assert(sizeof unary_table / sizeof unary_table[0] ==
                   KI_EOP_LAST_UNARY - KI_EOP_FIRST_UNARY + 1,
               "one kernel per unary opcode");
_Static_assert(sizeof binary_table / sizeof binary_table[0] ==
                   KI_EOP_LAST_BINARY - KI_EOP_FIRST_BINARY + 1,
               "one kernel per binary opcode");

size_t ki_expr_chunk_stack_floats(const ki_expr *e, size_t n)
{
    size_t r;
    return ki_ckd_mul(&r, (size_t)e->max_stack, n) ? r : 0;
}

static void fill(float *dst, float v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = v;
    }
}

/* dims[d] of an input, d negative from the end; NaN if out of range (checked beforehand). */
static double size_of(const ki_expr_input *in, int64_t d)
{
    if (d < 0) {
        d += in->ndim;
    }
    return (in->ndim < 0 || d < 0 || d >= in->ndim) ? NAN : (double)in->dims[d];
}

static void load(float *dst, const ki_expr_input *in, size_t n)
{
    if (in->step == 0) {
        fill(dst, in->data[0], n);
    } else {
        memcpy(dst, in->data, n * sizeof *dst);
    }
}

void ki_expr_eval_chunk(const ki_expr *e, const ki_expr_input *in, size_t n, float *stack,
                        float *out)
{
    size_t sp = 0; /* slots in use */
    for (int k = 0; k < e->n_code; k++) {
        const ki_expr_ins *c = &e->code[k];
        float *top = stack + sp * n;
        if (c->op == KI_EOP_REF) {
            load(top, &in[c->ref], n);
            sp++;
        } else if (c->op == KI_EOP_CONST) {
            fill(top, (float)c->value, n);
            sp++;
        } else if (c->op == KI_EOP_SIZE) {
            fill(top, (float)size_of(&in[c->ref], c->dim), n);
            sp++;
        } else if (c->op >= KI_EOP_FIRST_UNARY && c->op <= KI_EOP_LAST_UNARY) {
            unary_table[c->op - KI_EOP_FIRST_UNARY](top - n, n);
        } else if (c->op >= KI_EOP_FIRST_BINARY && c->op <= KI_EOP_LAST_BINARY) {
            binary_table[c->op - KI_EOP_FIRST_BINARY](top - 2 * n, top - n, n);
            sp--;
        }
    }
    memcpy(out, stack, n * sizeof *out);
}

ki_status ki_expr_check_sizes(const ki_expr *e, const ki_expr_input *in, int n_in, ki_error *err)
{
    for (int k = 0; k < e->n_code; k++) {
        const ki_expr_ins *c = &e->code[k];
        if (c->op != KI_EOP_SIZE && c->op != KI_EOP_SHAPE) {
            continue;
        }
        if (c->ref >= n_in || in[c->ref].ndim < 0) {
            return ki_expr_fail_at(err, KI_ERR_SHAPE, e, c->pos,
                                   "size() of an input that has no shape");
        }
        if (c->op == KI_EOP_SIZE && isnan(size_of(&in[c->ref], c->dim))) {
            char what[96];
            snprintf(what, sizeof what, "size(@%d,%lld) of a %d-d input", c->ref, (long long)c->dim,
                     in[c->ref].ndim);
            return ki_expr_fail_at(err, KI_ERR_SHAPE, e, c->pos, what);
        }
    }
    return KI_OK;
}
