/* expr_scalar.c - the scalar evaluator: RPN code over doubles with Python's number rules.
 *
 * Used while shapes are inferred (size(), int(), shape lists). Values carry an is_int flag:
 * int and bool literals, sizes and integral inputs are ints; integer arithmetic stays exact and
 * integral (overflow is an error rather than a silent wrap, as Python ints never wrap) except
 * under div, which is true division. Float arithmetic follows IEEE (x/0 is inf), as torch does
 * for scalars in traced graphs. No allocation; thread-safe. */
#include <stdio.h>

#include "expr.h"
#include "expr_math.h"

typedef ki_expr_scalar scalar;

static ki_status eval_fail(const ki_expr *e, const ki_expr_ins *c, ki_status code, const char *what,
                           ki_error *err)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s: %s", ki_expr_op_name(c->op), what);
    return ki_expr_fail_at(err, code, e, c->pos, buf);
}

static scalar mk_int(int64_t v)
{
    return (scalar){ .v = (double)v, .i = v, .is_int = true };
}

static scalar mk_float(double v)
{
    return (scalar){ .v = v, .is_int = false };
}

/* Integer rules for unary ops; *done is false when the op is computed as a float. */
static bool unary_int(ki_expr_opcode op, int64_t x, scalar *r, bool *done)
{
    *done = true;
    int64_t y;
    switch (op) {
    case KI_EOP_ABS:
    case KI_EOP_NEG:
        if (x == INT64_MIN) {
            return false;
        }
        *r = mk_int(op == KI_EOP_NEG || x < 0 ? -x : x);
        return true;
    case KI_EOP_SQUARE:
        if (__builtin_mul_overflow(x, x, &y)) {
            return false;
        }
        *r = mk_int(y);
        return true;
    case KI_EOP_SIGN:
        *r = mk_int((0 < x) - (x < 0));
        return true;
    case KI_EOP_CEIL:
    case KI_EOP_FLOOR:
    case KI_EOP_TRUNC:
    case KI_EOP_ROUND:
    case KI_EOP_INT:
    case KI_EOP_TO_LONG:
        *r = mk_int(x);
        return true;
    default:
        *done = false;
        return true;
    }
}

static double unary_math(ki_expr_opcode op, double x)
{
    static double (*const fn[])(double) = {
        fabs, acos, acosh, asin, asinh, atan,  atanh, cos,  cosh,  sin,   sinh,      tan, tanh,
        exp,  log,  log10, sqrt, erf,   expm1, log1p, ceil, floor, trunc, nearbyint, /* half-to-even,
                                                                                        like round()
                                                                                        on tensors
                                                                                      */
    };
    if (op >= KI_EOP_ABS && op <= KI_EOP_ROUND) {
        return fn[op - KI_EOP_ABS](x);
    }
    switch (op) {
    case KI_EOP_NEG:
        return -x;
    case KI_EOP_RECIPROCAL:
        return 1.0 / x;
    case KI_EOP_RSQRT:
        return 1.0 / sqrt(x);
    case KI_EOP_SQUARE:
        return x * x;
    case KI_EOP_SIGN:
        return ki_expr_sign_d(x);
    case KI_EOP_TO_FLOAT:
        return (double)(float)x;
    case KI_EOP_TO_HALF:
        return ki_expr_to_half((float)x);
    case KI_EOP_TO_BF16:
        return ki_expr_to_bf16((float)x);
    default:
        return x; /* torch.double */
    }
}

/* Casts to integer types: non-finite or out-of-range values are errors, as in Python int(). */
static ki_status unary_cast(const ki_expr *e, const ki_expr_ins *c, double x, scalar *r,
                            ki_error *err)
{
    if (c->op == KI_EOP_TO_BOOL) {
        *r = mk_int(x != 0);
        return KI_OK;
    }
    if (!(x > -9223372036854775808.0 && x < 9223372036854775808.0)) {
        return eval_fail(e, c, KI_ERR_FORMAT, "cannot convert a non-finite or huge value to int",
                         err);
    }
    switch (c->op) {
    case KI_EOP_TO_INT:
        *r = mk_int((int64_t)ki_expr_wrap(x, 32, 1));
        break;
    case KI_EOP_TO_SHORT:
        *r = mk_int((int64_t)ki_expr_wrap(x, 16, 1));
        break;
    case KI_EOP_TO_INT8:
        *r = mk_int((int64_t)ki_expr_wrap(x, 8, 1));
        break;
    case KI_EOP_TO_UINT8:
        *r = mk_int((int64_t)ki_expr_wrap(x, 8, 0));
        break;
    default: /* int(), torch.long */
        *r = mk_int((int64_t)x);
        break;
    }
    return KI_OK;
}

static ki_status eval_unary(const ki_expr *e, const ki_expr_ins *c, scalar *s, ki_error *err)
{
    bool done;
    if (s->is_int && c->op >= KI_EOP_TO_INT && c->op <= KI_EOP_TO_BOOL) {
        return unary_cast(e, c, s->v, s, err);
    }
    if (s->is_int) {
        if (!unary_int(c->op, s->i, s, &done)) {
            return eval_fail(e, c, KI_ERR_LIMIT, "integer overflow", err);
        }
        if (done) {
            return KI_OK;
        }
    }
    if (c->op == KI_EOP_INT || (c->op >= KI_EOP_TO_LONG && c->op <= KI_EOP_TO_BOOL)) {
        return unary_cast(e, c, s->v, s, err);
    }
    *s = mk_float(unary_math(c->op, s->v));
    return KI_OK;
}

/* pow, bitwise ops and shifts on ints (Python semantics; a negative exponent gives a float). */
static const char *binary_int2(ki_expr_opcode op, int64_t a, int64_t b, scalar *r, bool *done)
{
    int64_t y = 1;
    switch (op) {
    case KI_EOP_POW:
        if (b < 0) {
            *done = false;
            return NULL;
        }
        for (int64_t base = a; b > 0; b >>= 1) { /* square-and-multiply, overflow-checked */
            if ((b & 1) && __builtin_mul_overflow(y, base, &y)) {
                return "integer overflow";
            }
            if (b > 1 && __builtin_mul_overflow(base, base, &base)) {
                return "integer overflow";
            }
        }
        break;
    case KI_EOP_AND:
    case KI_EOP_OR:
    case KI_EOP_XOR:
        y = op == KI_EOP_AND ? (a & b) : op == KI_EOP_OR ? (a | b) : (a ^ b);
        break;
    case KI_EOP_LSHIFT:
    case KI_EOP_RSHIFT:
        if (b < 0) {
            return "negative shift count";
        }
        if (op == KI_EOP_RSHIFT) {
            y = b >= 64 ? (a < 0 ? -1 : 0) : a >> b;
        } else {
            y = b >= 63 ? 0 : (int64_t)((uint64_t)a << b); /* unsigned: no UB on negatives */
            if ((b >= 63 && a != 0) || (b < 63 && (y >> b) != a)) {
                return "integer overflow";
            }
        }
        break;
    default:
        *done = false;
        return NULL;
    }
    *r = mk_int(y);
    return NULL;
}

/* Integer rules for binary ops (both operands ints). Returns a message on error, NULL on
 * success; *done is false when the op is computed as a float. */
static const char *binary_int(ki_expr_opcode op, int64_t a, int64_t b, scalar *r, bool *done)
{
    int64_t y = 0;
    *done = true;
    switch (op) {
    case KI_EOP_ADD:
    case KI_EOP_SUB:
    case KI_EOP_MUL: {
        bool o = op == KI_EOP_ADD   ? __builtin_add_overflow(a, b, &y)
                 : op == KI_EOP_SUB ? __builtin_sub_overflow(a, b, &y)
                                    : __builtin_mul_overflow(a, b, &y);
        *r = mk_int(y);
        return o ? "integer overflow" : NULL;
    }
    case KI_EOP_FLOOR_DIVIDE:
    case KI_EOP_REMAINDER:
    case KI_EOP_FMOD:
        if (b == 0) {
            return "integer division by zero";
        }
        if (b == -1) { /* INT64_MIN / -1 overflows in C */
            *r = mk_int(op == KI_EOP_FLOOR_DIVIDE ? -a : 0);
            return (op == KI_EOP_FLOOR_DIVIDE && a == INT64_MIN) ? "integer overflow" : NULL;
        }
        y = op == KI_EOP_FLOOR_DIVIDE ? a / b : a % b;
        if (op != KI_EOP_FMOD && a % b != 0 && ((a < 0) != (b < 0))) {
            y = op == KI_EOP_FLOOR_DIVIDE ? y - 1 : y + b; /* Python floors */
        }
        *r = mk_int(y);
        return NULL;
    case KI_EOP_MAX:
    case KI_EOP_MIN:
        *r = mk_int((op == KI_EOP_MAX) == (a > b) ? a : b);
        return NULL;
    default:
        break;
    }
    return binary_int2(op, a, b, r, done);
}

static double binary_math(ki_expr_opcode op, double a, double b)
{
    switch (op) {
    case KI_EOP_ADD:
        return a + b;
    case KI_EOP_SUB:
        return a - b;
    case KI_EOP_MUL:
        return a * b;
    case KI_EOP_DIV:
        return a / b;
    case KI_EOP_FLOOR_DIVIDE:
        return ki_expr_floordiv_d(a, b);
    case KI_EOP_REMAINDER:
        return ki_expr_remainder_d(a, b);
    case KI_EOP_FMOD:
        return fmod(a, b);
    case KI_EOP_POW:
        return pow(a, b);
    case KI_EOP_ATAN2:
        return atan2(a, b);
    case KI_EOP_LOGADDEXP:
        return ki_expr_logaddexp_d(a, b);
    case KI_EOP_MAX:
        return ki_expr_max_d(a, b);
    default: /* KI_EOP_MIN */
        return ki_expr_min_d(a, b);
    }
}

static ki_status eval_binary(const ki_expr *e, const ki_expr_ins *c, scalar *a, const scalar *b,
                             ki_error *err)
{
    bool done = false;
    if (a->is_int && b->is_int) {
        const char *msg = binary_int(c->op, a->i, b->i, a, &done);
        if (msg) {
            return eval_fail(e, c, KI_ERR_LIMIT, msg, err);
        }
        if (done) {
            return KI_OK;
        }
    }
    if (c->op >= KI_EOP_AND && c->op <= KI_EOP_RSHIFT) {
        return eval_fail(e, c, KI_ERR_FORMAT, "bitwise operators need integers", err);
    }
    *a = mk_float(binary_math(c->op, a->v, b->v));
    return KI_OK;
}

/* An input's value; integral finite values count as ints (sizes arrive as floats). */
static scalar input_value(const ki_expr_input *in)
{
    double v = in->value;
    if (v == v && v > -9007199254740992.0 && v < 9007199254740992.0 && v == (double)(int64_t)v) {
        return mk_int((int64_t)v);
    }
    return mk_float(v);
}

static ki_status eval_leaf(const ki_expr *e, const ki_expr_ins *c, const ki_expr_input *in,
                           int n_in, scalar *s, ki_error *err)
{
    if (c->ref >= n_in && c->op != KI_EOP_CONST) {
        return eval_fail(e, c, KI_ERR_FORMAT, "input index beyond the inputs given", err);
    }
    if (c->op == KI_EOP_CONST) {
        *s = c->is_int ? mk_int(c->ival) : mk_float(c->value);
    } else if (c->op == KI_EOP_REF) {
        *s = input_value(&in[c->ref]);
    } else { /* SIZE, checked by ki_expr_check_sizes on entry */
        int64_t d = c->dim < 0 ? c->dim + in[c->ref].ndim : c->dim;
        *s = mk_int(in[c->ref].dims[d]);
    }
    return KI_OK;
}

/* Writes the list result: the bottom n stack values, or the dims of input `ref`. */
static ki_status emit_list(const ki_expr_ins *c, const ki_expr_input *in, const scalar *stack,
                           double *out, int max_out, int *n_out)
{
    int n = c->op == KI_EOP_SHAPE ? in[c->ref].ndim : c->n;
    for (int i = 0; i < n && i < max_out; i++) {
        out[i] = c->op == KI_EOP_SHAPE ? (double)in[c->ref].dims[i] : stack[i].v;
    }
    *n_out = n;
    return KI_OK;
}

ki_status ki_expr_eval_scalar(const ki_expr *e, const ki_expr_input *in, int n_in,
                              ki_expr_scalar *stack, double *out, int max_out, int *n_out,
                              ki_error *err)
{
    int sp = 0;
    ki_status st;
    if (e->is_string || e->n_code == 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "the string expression '%s' has no value", e->text);
    }
    if ((st = ki_expr_check_sizes(e, in, n_in, err)) != KI_OK) {
        return st;
    }
    for (int k = 0; k < e->n_code && st == KI_OK; k++) {
        const ki_expr_ins *c = &e->code[k];
        if (c->op == KI_EOP_LIST || c->op == KI_EOP_SHAPE) {
            return emit_list(c, in, stack, out, max_out, n_out);
        } else if (c->op == KI_EOP_REF || c->op == KI_EOP_CONST || c->op == KI_EOP_SIZE) {
            st = eval_leaf(e, c, in, n_in, &stack[sp++], err);
        } else if (c->op >= KI_EOP_FIRST_UNARY && c->op <= KI_EOP_LAST_UNARY) {
            st = eval_unary(e, c, &stack[sp - 1], err);
        } else {
            st = eval_binary(e, c, &stack[sp - 2], &stack[sp - 1], err);
            sp--;
        }
    }
    if (st == KI_OK && max_out > 0) {
        out[0] = stack[0].v;
    }
    *n_out = 1;
    return st;
}
