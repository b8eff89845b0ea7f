/* expr_math.h - PyTorch's elementwise rules that libm does not provide directly, in float (the
 * tensor evaluator) and double (the scalar evaluator). Private to parser/; static inline only.
 * Every conversion to an integer is range-checked first: out-of-range float-to-int casts are
 * undefined in C, and the fuzzer feeds arbitrary values. */
#ifndef KI_EXPR_MATH_H
#define KI_EXPR_MATH_H

#include <math.h>
#include <stdint.h>

/* torch's div_floor_floating: floor of the true quotient, computed from fmod so that the result
 * is exact where a/b rounds up to an integer. */
#define KI_DEFINE_FLOOR_DIVIDE(name, T, FMOD, FLOOR, COPYSIGN)                                     \
    static inline T name(T a, T b)                                                                 \
    {                                                                                              \
        if (b == 0) {                                                                              \
            return a / b;                                                                          \
        }                                                                                          \
        T mod = FMOD(a, b);                                                                        \
        T div = (a - mod) / b;                                                                     \
        if (mod != 0 && (b < 0) != (mod < 0)) {                                                    \
            div -= 1;                                                                              \
        }                                                                                          \
        if (div == 0) {                                                                            \
            return COPYSIGN((T)0, a / b);                                                          \
        }                                                                                          \
        T fl = FLOOR(div);                                                                         \
        return div - fl > (T)0.5 ? fl + 1 : fl;                                                    \
    }
KI_DEFINE_FLOOR_DIVIDE(ki_expr_floordiv_f, float, fmodf, floorf, copysignf)
KI_DEFINE_FLOOR_DIVIDE(ki_expr_floordiv_d, double, fmod, floor, copysign)

/* Python/torch remainder: the result takes the divisor's sign. */
static inline float ki_expr_remainder_f(float a, float b)
{
    float m = fmodf(a, b);
    return (m != 0 && (b < 0) != (m < 0)) ? m + b : m;
}

static inline double ki_expr_remainder_d(double a, double b)
{
    double m = fmod(a, b);
    return (m != 0 && (b < 0) != (m < 0)) ? m + b : m;
}

/* torch.logaddexp: equal infinities give themselves (avoids inf - inf). */
static inline float ki_expr_logaddexp_f(float a, float b)
{
    if (isinf(a) && a == b) {
        return a;
    }
    float m = a > b ? a : b;
    return m + log1pf(expf(-fabsf(a - b)));
}

static inline double ki_expr_logaddexp_d(double a, double b)
{
    if (isinf(a) && a == b) {
        return a;
    }
    double m = a > b ? a : b;
    return m + log1p(exp(-fabs(a - b)));
}

/* torch.maximum/minimum propagate NaN. */
static inline double ki_expr_max_d(double a, double b)
{
    return (a != a || b != b) ? NAN : (a > b ? a : b);
}

static inline double ki_expr_min_d(double a, double b)
{
    return (a != a || b != b) ? NAN : (a < b ? a : b);
}

static inline double ki_expr_sign_d(double x)
{
    return (double)((0 < x) - (x < 0));
}

/* Truncation to int64 with saturation (NaN gives INT64_MIN, as x86's cvttsd2si does). */
static inline int64_t ki_expr_to_i64(double x)
{
    if (!(x > -9223372036854775808.0)) {
        return INT64_MIN;
    }
    if (x >= 9223372036854775808.0) {
        return INT64_MAX;
    }
    return (int64_t)x;
}

/* Two's-complement wrap of the truncated value into `bits` bits (torch's .to(int8) etc). */
static inline double ki_expr_wrap(double x, int bits, int is_signed)
{
    uint64_t u = (uint64_t)ki_expr_to_i64(x);
    uint64_t mask = (bits == 64) ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
    u &= mask;
    if (is_signed && bits < 64 && (u >> (bits - 1))) {
        return (double)(int64_t)u - (double)((uint64_t)1 << bits);
    }
    return is_signed ? (double)(int64_t)u : (double)u;
}

/* Rounds to a binary format with `mant` significant bits and smallest quantum 2^min_exp
 * (half: 11, -24; bfloat16: 8, -133), nearest-even. Overflow comes out as infinity. */
static inline float ki_expr_round_bits(float x, int mant, int min_exp, float overflow)
{
    if (!isfinite(x) || x == 0) {
        return x;
    }
    float a = fabsf(x);
    if (a >= overflow) {
        return copysignf(INFINITY, x);
    }
    int ex;
    frexpf(a, &ex);
    int qe = ex - mant < min_exp ? min_exp : ex - mant;
    float q = ldexpf(1.0f, qe);
    return copysignf(rintf(a / q) * q, x);
}

static inline float ki_expr_to_half(float x)
{
    return ki_expr_round_bits(x, 11, -24, 65520.0f);
}

static inline float ki_expr_to_bf16(float x)
{
    return ki_expr_round_bits(x, 8, -133, INFINITY);
}

/* Bitwise ops on the truncated integer values; shifts follow torch (a count outside [0, 64)
 * gives 0 for <<, and the sign fill for >>). */
static inline double ki_expr_bitwise(int op_and_or_xor, double a, double b)
{
    int64_t x = ki_expr_to_i64(a), y = ki_expr_to_i64(b);
    int64_t r = op_and_or_xor == 0 ? (x & y) : op_and_or_xor == 1 ? (x | y) : (x ^ y);
    return (double)r;
}

static inline double ki_expr_lshift(double a, double b)
{
    int64_t x = ki_expr_to_i64(a), y = ki_expr_to_i64(b);
    if (y < 0 || y >= 64) {
        return 0;
    }
    return (double)(int64_t)((uint64_t)x << y);
}

static inline double ki_expr_rshift(double a, double b)
{
    int64_t x = ki_expr_to_i64(a), y = ki_expr_to_i64(b);
    if (y < 0 || y >= 64) {
        return x < 0 ? -1 : 0;
    }
    return (double)(x >> y);
}

#endif
