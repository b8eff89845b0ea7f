/* test_expr_eval.c - both expression evaluators: every function against the C library, the
 * PyTorch rules (half-to-even round, remainder/floor_divide signs, int() truncation, ...), and
 * Python's integer rules in the scalar evaluator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../parser/expr.h"

static ki_expr *compile_ok(const char *text)
{
    ki_expr *e = NULL;
    ki_error err = { 0 };
    if (ki_expr_compile(text, &e, NULL, &err) != KI_OK) {
        fail_msg("compile '%.80s' failed: %s", text, err.msg);
    }
    return e;
}

/* Scalar evaluation with inputs v[0..n-1]; returns the status, the value in *out. */
static ki_status eval_scalar(const char *text, const double *v, int n, double *out, ki_error *err)
{
    ki_expr *e = compile_ok(text);
    ki_expr_input in[4] = { { 0 } };
    ki_expr_scalar stack[64];
    double vals[16];
    int n_out = 0;
    for (int i = 0; i < n; i++) {
        in[i].value = v[i];
        in[i].ndim = -1;
    }
    assert_true(e->max_stack <= 64);
    ki_status st = ki_expr_eval_scalar(e, in, n, stack, vals, 16, &n_out, err);
    *out = vals[0];
    ki_expr_destroy(e);
    return st;
}

static double eval_d(const char *text, double a, double b)
{
    double v[2] = { a, b }, out;
    ki_error err = { 0 };
    if (eval_scalar(text, v, 2, &out, &err) != KI_OK) {
        fail_msg("eval '%s' (%g, %g): %s", text, a, b, err.msg);
    }
    return out;
}

/* Chunk evaluation over n elements of inputs a and b (both step 1). */
static void eval_f(const char *text, const float *a, const float *b, size_t n, float *out)
{
    ki_expr *e = compile_ok(text);
    ki_expr_input in[2] = { { .data = a, .step = 1, .ndim = -1 },
                            { .data = b, .step = 1, .ndim = -1 } };
    float *stack = malloc(ki_expr_chunk_stack_floats(e, n) * sizeof(float));
    assert_non_null(stack);
    ki_expr_eval_chunk(e, in, n, stack, out);
    free(stack);
    ki_expr_destroy(e);
}

static bool same(double got, double want)
{
    return (isnan(got) && isnan(want)) || (got == want && signbit(got) == signbit(want));
}

static void expect_d(const char *text, double a, double b, double want)
{
    double got = eval_d(text, a, b);
    if (!same(got, want)) {
        fail_msg("%s with (%g, %g): got %.17g, want %.17g", text, a, b, got, want);
    }
}

static void expect_f(const char *text, float a, float b, float want)
{
    float got;
    eval_f(text, &a, &b, 1, &got);
    if (!same(got, want)) {
        fail_msg("%s with (%g, %g) in float32: got %.9g, want %.9g", text, a, b, got, want);
    }
}

/* ---- every function against libm ---- */

typedef struct unary_case {
    const char *name;
    float (*f)(float);
    double (*d)(double);
} unary_case;

static float f_neg(float x)
{
    return -x;
}
static double d_neg(double x)
{
    return -x;
}
static float f_recip(float x)
{
    return 1.0f / x;
}
static double d_recip(double x)
{
    return 1.0 / x;
}
static float f_rsqrt(float x)
{
    return 1.0f / sqrtf(x);
}
static double d_rsqrt(double x)
{
    return 1.0 / sqrt(x);
}
static float f_square(float x)
{
    return x * x;
}
static double d_square(double x)
{
    return x * x;
}
static float f_sign(float x)
{
    return (float)((x > 0) - (x < 0));
}
static double d_sign(double x)
{
    return (double)((x > 0) - (x < 0));
}

static const unary_case unary_cases[] = {
    { "abs", fabsf, fabs },        { "acos", acosf, acos },
    { "acosh", acoshf, acosh },    { "asin", asinf, asin },
    { "asinh", asinhf, asinh },    { "atan", atanf, atan },
    { "atanh", atanhf, atanh },    { "cos", cosf, cos },
    { "cosh", coshf, cosh },       { "sin", sinf, sin },
    { "sinh", sinhf, sinh },       { "tan", tanf, tan },
    { "tanh", tanhf, tanh },       { "exp", expf, exp },
    { "log", logf, log },          { "log10", log10f, log10 },
    { "sqrt", sqrtf, sqrt },       { "erf", erff, erf },
    { "expm1", expm1f, expm1 },    { "log1p", log1pf, log1p },
    { "ceil", ceilf, ceil },       { "floor", floorf, floor },
    { "trunc", truncf, trunc },    { "round", nearbyintf, nearbyint },
    { "neg", f_neg, d_neg },       { "reciprocal", f_recip, d_recip },
    { "rsqrt", f_rsqrt, d_rsqrt }, { "square", f_square, d_square },
    { "sign", f_sign, d_sign },
};

static const float probe[] = { -3.7f, -2.5f, -1.0f, -0.5f, -0.25f, 0.0f,  0.3f,  0.5f,
                               0.99f, 1.0f,  1.5f,  2.5f,  3.5f,   7.25f, 1e-3f, 40.0f };
#define N_PROBE (sizeof probe / sizeof probe[0])

static void test_unary_vs_libm(void **state)
{
    (void)state;
    char text[64];
    float out[N_PROBE];
    for (size_t u = 0; u < sizeof unary_cases / sizeof unary_cases[0]; u++) {
        const unary_case *c = &unary_cases[u];
        snprintf(text, sizeof text, "%s(@0)", c->name);
        eval_f(text, probe, probe, N_PROBE, out);
        for (size_t i = 0; i < N_PROBE; i++) {
            if (!same(out[i], c->f(probe[i]))) {
                fail_msg("%s(%g): float %.9g vs libm %.9g", c->name, probe[i], out[i],
                         c->f(probe[i]));
            }
            /* the scalar evaluator, on a float input (0.3 etc. are not ints) */
            double x = (double)probe[i] + 0.0625;
            snprintf(text, sizeof text, "%s(@0)", c->name);
            double got = eval_d(text, x, 0);
            if (!same(got, c->d(x))) {
                fail_msg("%s(%g): double %.17g vs libm %.17g", c->name, x, got, c->d(x));
            }
        }
    }
}

typedef struct binary_case {
    const char *name;
    float (*f)(float, float);
    double (*d)(double, double);
} binary_case;

static float f_add(float a, float b)
{
    return a + b;
}
static double d_add(double a, double b)
{
    return a + b;
}
static float f_sub(float a, float b)
{
    return a - b;
}
static double d_sub(double a, double b)
{
    return a - b;
}
static float f_mul(float a, float b)
{
    return a * b;
}
static double d_mul(double a, double b)
{
    return a * b;
}
static float f_div(float a, float b)
{
    return a / b;
}
static double d_div(double a, double b)
{
    return a / b;
}
static float f_max(float a, float b)
{
    return a > b ? a : b;
}
static double d_max(double a, double b)
{
    return a > b ? a : b;
}
static float f_min(float a, float b)
{
    return a < b ? a : b;
}
static double d_min(double a, double b)
{
    return a < b ? a : b;
}
static float f_lae(float a, float b)
{
    return logf(expf(a) + expf(b));
}
static double d_lae(double a, double b)
{
    return log(exp(a) + exp(b));
}
static float f_rem(float a, float b)
{
    return a - b * floorf(a / b);
}
static double d_rem(double a, double b)
{
    return a - b * floor(a / b);
}
static float f_fdiv(float a, float b)
{
    return floorf(a / b);
}
static double d_fdiv(double a, double b)
{
    return floor(a / b);
}

static const binary_case binary_cases[] = {
    { "add", f_add, d_add },       { "sub", f_sub, d_sub },
    { "mul", f_mul, d_mul },       { "div", f_div, d_div },
    { "fmod", fmodf, fmod },       { "pow", powf, pow },
    { "atan2", atan2f, atan2 },    { "max", f_max, d_max },
    { "maximum", f_max, d_max },   { "min", f_min, d_min },
    { "minimum", f_min, d_min },   { "logaddexp", f_lae, d_lae },
    { "remainder", f_rem, d_rem }, { "floor_divide", f_fdiv, d_fdiv },
};

static void test_binary_vs_libm(void **state)
{
    (void)state;
    static const float a[] = { -7.5f, -3.0f, -1.25f, 0.5f, 1.0f, 2.0f, 3.25f, 9.0f };
    static const float b[] = { 2.0f, -2.0f, 0.75f, 3.0f, -4.5f, 1.5f, 2.0f, 0.25f };
    float out[8];
    char text[64];
    for (size_t k = 0; k < sizeof binary_cases / sizeof binary_cases[0]; k++) {
        const binary_case *c = &binary_cases[k];
        snprintf(text, sizeof text, "%s(@0,@1)", c->name);
        eval_f(text, a, b, 8, out);
        for (int i = 0; i < 8; i++) {
            float want = c->f(a[i], b[i]);
            double wd = c->d(a[i] + 0.03125, b[i]);
            if (fabsf(out[i] - want) > 1e-6f * (1 + fabsf(want)) &&
                !(isnan(out[i]) && isnan(want))) {
                fail_msg("%s(%g,%g): float %.9g vs %.9g", c->name, a[i], b[i], out[i], want);
            }
            double got = eval_d(text, a[i] + 0.03125, b[i]);
            if (fabs(got - wd) > 1e-12 * (1 + fabs(wd)) && !(isnan(got) && isnan(wd))) {
                fail_msg("%s(%g,%g): double %.17g vs %.17g", c->name, a[i], b[i], got, wd);
            }
        }
    }
}

/* ---- PyTorch / Python rules ---- */

static void test_torch_rules(void **state)
{
    (void)state;
    /* round: half to even, in both evaluators */
    expect_d("round(@0)", 2.5, 0, 2);
    expect_d("round(@0)", 3.5, 0, 4);
    expect_d("round(@0)", -0.5, 0, -0.0);
    expect_d("round(2.5)", 0, 0, 2);
    expect_f("round(@0)", 2.5f, 0, 2.0f);
    expect_f("round(@0)", -1.5f, 0, -2.0f);
    expect_f("round(@0)", 0.5f, 0, 0.0f);
    /* remainder takes the divisor's sign; fmod the dividend's */
    expect_d("remainder(@0,@1)", -7, 2, 1);
    expect_d("remainder(@0,@1)", 7, -2, -1);
    expect_d("remainder(@0,@1)", -7.5, 2, 0.5);
    expect_f("remainder(@0,@1)", -7.5f, 2.0f, 0.5f);
    expect_f("remainder(@0,@1)", 7.0f, -2.0f, -1.0f);
    expect_d("fmod(@0,@1)", -7, 2, -1);
    expect_f("fmod(@0,@1)", -7.5f, 2.0f, -1.5f);
    /* floor_divide floors */
    expect_d("floor_divide(@0,@1)", -7, 2, -4);
    expect_d("floor_divide(@0,@1)", 7, -2, -4);
    expect_d("floor_divide(@0,@1)", 7, 2, 3);
    expect_d("floor_divide(@0,@1)", -7.5, 2, -4);
    expect_f("floor_divide(@0,@1)", -7.5f, 2.0f, -4.0f);
    expect_f("floor_divide(@0,@1)", 1.0f, 0.0f, INFINITY);
    /* int() truncates toward zero; div is true division even for ints */
    expect_d("int(@0)", -2.7, 0, -2);
    expect_d("int(@0)", 2.7, 0, 2);
    expect_d("int(mul(@0,1.5))", 7, 0, 10);
    expect_d("div(@0,@1)", 7, 2, 3.5);
    expect_d("div(7,2)", 0, 0, 3.5);
    expect_d("div(1,0)", 0, 0, INFINITY);
    /* maximum/minimum propagate NaN */
    expect_f("maximum(@0,@1)", NAN, 1.0f, NAN);
    expect_f("min(@0,@1)", 1.0f, NAN, NAN);
    expect_d("max(@0,@1)", 3, -4, 3);
    expect_d("min(@0,@1)", 3, -4, -4);
    /* logaddexp without overflow, and of equal infinities */
    expect_d("logaddexp(@0,@1)", 1000, 1000, 1000 + log(2.0));
    expect_f("logaddexp(@0,@1)", -INFINITY, -INFINITY, -INFINITY);
    expect_f("logaddexp(@0,@1)", INFINITY, INFINITY, INFINITY);
    /* sign of zero and NaN, pow, atan2 */
    expect_f("sign(@0)", -0.0f, 0, 0.0f);
    expect_f("sign(@0)", -3.0f, 0, -1.0f);
    expect_d("pow(@0,@1)", 2, 10, 1024);
    expect_d("pow(@0,@1)", 2, -1, 0.5);
    expect_d("atan2(@0,@1)", 1, -1, atan2(1.0, -1.0));
    /* non-finite literals */
    expect_d("add(inf,1)", 0, 0, INFINITY);
    expect_d("mul(-inf,1)", 0, 0, -INFINITY);
    expect_d("add(nan,1)", 0, 0, NAN);
    expect_d("add(nan.0,1)", 0, 0, NAN);
    expect_f("add(@0,1.000000e-05)", 1.0f, 0, 1.00001f);
}

static void test_bitwise_and_casts(void **state)
{
    (void)state;
    expect_d("and(@0,@1)", 6, 3, 2);
    expect_d("or(@0,@1)", 6, 3, 7);
    expect_d("xor(@0,@1)", 6, 3, 5);
    expect_d("lshift(@0,@1)", 1, 4, 16);
    expect_d("rshift(@0,@1)", -16, 2, -4);
    expect_d("rshift(@0,@1)", -1, 100, -1);
    expect_d("and(True,False)", 0, 0, 0);
    expect_f("and(@0,@1)", 6.0f, 3.0f, 2.0f);
    expect_f("xor(@0,@1)", -1.0f, 1.0f, -2.0f);
    expect_f("lshift(@0,@1)", 3.0f, 2.0f, 12.0f);
    expect_f("lshift(@0,@1)", 3.0f, 64.0f, 0.0f);
    expect_f("rshift(@0,@1)", -8.0f, 70.0f, -1.0f);
    expect_d("torch.long(@0)", -2.7, 0, -2);
    expect_d("torch.int8(@0)", 300, 0, 44);
    expect_d("torch.uint8(@0)", -1, 0, 255);
    expect_d("torch.short(@0)", 40000, 0, -25536);
    expect_d("torch.int(@0)", 4294967297.0, 0, 1);
    expect_d("torch.bool(@0)", 0.5, 0, 1);
    expect_d("torch.bool(@0)", 0, 0, 0);
    expect_d("torch.float(@0)", 0.1, 0, (double)0.1f);
    expect_d("torch.double(@0)", 0.1, 0, 0.1);
    expect_d("torch.half(@0)", 0.1, 0, 0.0999755859375);
    expect_d("torch.half(@0)", 70000, 0, INFINITY);
    expect_d("torch.half(@0)", 65519, 0, 65504);
    expect_d("torch.half(@0)", 1e-7, 0, ldexp(2.0, -24)); /* subnormal half */
    expect_d("torch.bfloat16(@0)", 0.1, 0, 0.10009765625);
    expect_f("torch.bfloat16(@0)", 3.0f, 0, 3.0f);
    expect_f("torch.int8(@0)", 200.0f, 0, -56.0f);
    expect_f("torch.long(@0)", -3.9f, 0, -3.0f);
    expect_f("torch.bool(@0)", -0.0f, 0, 0.0f);
    expect_f("torch.float(@0)", 0.1f, 0, 0.1f);
    expect_f("int(@0)", -3.9f, 0, -3.0f);
    expect_f("torch.half(@0)", 0.1f, 0, 0.0999755859375f);
}

/* Python int rules: exact, overflow and division by zero are errors. */
static void test_int_rules(void **state)
{
    (void)state;
    double v[2] = { 4503599627370496.0, 4096 }, out; /* 2^52 * 2^12 overflows */
    ki_error err = { 0 };
    assert_int_equal(eval_scalar("mul(@0,@1)", v, 2, &out, &err), KI_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "mul: integer overflow at column 1"));
    assert_int_equal(eval_scalar("floor_divide(@0,0)", v, 1, &out, &err), KI_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "division by zero"));
    assert_int_equal(eval_scalar("remainder(@0,0)", v, 1, &out, &err), KI_ERR_LIMIT);
    assert_int_equal(eval_scalar("lshift(@0,-1)", v, 1, &out, &err), KI_ERR_LIMIT);
    assert_int_equal(eval_scalar("lshift(@0,@1)", v, 2, &out, &err), KI_ERR_LIMIT);
    assert_int_equal(eval_scalar("pow(3,100)", v, 0, &out, &err), KI_ERR_LIMIT);
    assert_int_equal(eval_scalar("and(@0,1.5)", v, 1, &out, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "bitwise operators need integers"));
    assert_int_equal(eval_scalar("int(inf)", v, 0, &out, &err), KI_ERR_FORMAT);
    assert_int_equal(eval_scalar("int(nan)", v, 0, &out, &err), KI_ERR_FORMAT);
    assert_int_equal(eval_scalar("neg(-9223372036854775808)", v, 0, &out, &err), KI_ERR_LIMIT);
    assert_int_equal(eval_scalar("add(@0,@1)", v, 1, &out, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "input index beyond"));
    /* exact beyond 2^53 */
    assert_int_equal(eval_scalar("sub(9007199254740993,9007199254740992)", v, 0, &out, &err),
                     KI_OK);
    assert_true(out == 1);
    expect_d("floor_divide(-9223372036854775807,-1)", 0, 0, 9223372036854775807.0);
    expect_d("remainder(-9223372036854775808,-1)", 0, 0, 0);
    expect_d("mul(@0,0.5)", 3, 0, 1.5);
    expect_d("add(True,True)", 0, 0, 2);
}

/* size(), lists and the pnnx examples. */
static void test_sizes_and_lists(void **state)
{
    (void)state;
    const int64_t dims[4] = { 2, 255, 20, 40 };
    ki_expr_input in[2] = { { .ndim = 4, .dims = dims }, { .value = 1.5, .ndim = 0 } };
    ki_expr_scalar stack[16];
    double out[8];
    int n = 0;
    ki_error err = { 0 };
    ki_expr *e = compile_ok("[size(@0,0),3,85,size(@0,-2),40]");
    assert_int_equal(ki_expr_eval_scalar(e, in, 2, stack, out, 8, &n, &err), KI_OK);
    assert_int_equal(n, 5);
    assert_true(out[0] == 2 && out[1] == 3 && out[2] == 85 && out[3] == 20 && out[4] == 40);
    ki_expr_destroy(e);

    e = compile_ok("[size(@0,0),3,int(mul(size(@0,2),@1)),int(mul(size(@0,3),1.5))]");
    assert_int_equal(ki_expr_eval_scalar(e, in, 2, stack, out, 2, &n, &err), KI_OK);
    assert_int_equal(n, 4); /* only two written */
    assert_true(out[0] == 2 && out[1] == 3);
    assert_int_equal(ki_expr_eval_scalar(e, in, 2, stack, out, 8, &n, &err), KI_OK);
    assert_true(out[2] == 30 && out[3] == 60);
    ki_expr_destroy(e);

    e = compile_ok("size(@0)");
    assert_true(e->is_list);
    assert_int_equal(ki_expr_eval_scalar(e, in, 2, stack, out, 8, &n, &err), KI_OK);
    assert_int_equal(n, 4);
    assert_true(out[1] == 255);
    ki_expr_destroy(e);

    e = compile_ok("size(@0,4)");
    assert_int_equal(ki_expr_eval_scalar(e, in, 2, stack, out, 8, &n, &err), KI_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "size(@0,4) of a 4-d input"));
    ki_expr_destroy(e);
    e = compile_ok("size(@1,0)");
    assert_int_equal(ki_expr_check_sizes(e, in, 2, &err), KI_ERR_SHAPE);
    ki_expr_destroy(e);

    e = compile_ok("[]");
    assert_int_equal(ki_expr_eval_scalar(e, in, 2, stack, out, 8, &n, &err), KI_OK);
    assert_int_equal(n, 0);
    ki_expr_destroy(e);

    double v[3] = { 2, 3, 4 }, r;
    assert_int_equal(eval_scalar("mul(@2,add(@0,@1))", v, 3, &r, &err), KI_OK);
    assert_true(r == 20);
    float fa[3] = { 2, 3, 4 }, fo;
    ki_expr_input fin[3] = { { .data = &fa[0] }, { .data = &fa[1] }, { .data = &fa[2] } };
    float fstack[8];
    e = compile_ok("mul(@2,add(@0,@1))");
    ki_expr_eval_chunk(e, fin, 1, fstack, &fo);
    assert_true(fo == 20);
    ki_expr_destroy(e);
    e = compile_ok("mul(size(@0,1),@1)");
    in[1].data = &fa[1];
    in[1].step = 0;
    ki_expr_eval_chunk(e, in, 1, fstack, &fo);
    assert_true(fo == 765);
    ki_expr_destroy(e);
}

/* pnnx writes some unary functions as bare tokens and reads an expression as a prefix stream
 * (brackets and commas only separate tokens; each function takes its fixed number of operands
 * from what follows): those texts evaluate as pnnx means them. */
static void test_prefix_stream(void **state)
{
    (void)state;
    const double a = 2.0, b = -3.0;
    const struct {
        const char *text;
        double want;
    } cases[] = {
        { "expm1,sub(@0,0.5)", expm1(a - 0.5) },
        { "add(add(@0,expm1),@0),log1p,abs(@1)", (a + expm1(a)) + log1p(fabs(b)) },
        { "mul(neg,@1,@0)", -b * a },
        { "sqrt,abs,@1", sqrt(fabs(b)) },
        { "add(@0,@1,)", a + b }, /* empty arguments: pnnx drops them */
        { "add(,@0,@1)", a + b },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = eval_d(cases[i].text, a, b);
        if (fabs(got - cases[i].want) > 1e-12 * fabs(cases[i].want)) {
            fail_msg("%s: %.17g, want %.17g", cases[i].text, got, cases[i].want);
        }
    }
    /* streams that do not parse either way keep the grammar's error */
    ki_expr *e = NULL;
    ki_error err;
    size_t pos = 0;
    assert_int_equal(ki_expr_compile("add(@0)", &e, &pos, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'add' takes 2 arguments, got 1"));
    assert_int_equal(ki_expr_compile("neg,@0,@1", &e, &pos, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "expected '(' after 'neg'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unary_vs_libm), cmocka_unit_test(test_binary_vs_libm),
        cmocka_unit_test(test_prefix_stream),
        cmocka_unit_test(test_torch_rules),   cmocka_unit_test(test_bitwise_and_casts),
        cmocka_unit_test(test_int_rules),     cmocka_unit_test(test_sizes_and_lists),
    };
    return cmocka_run_group_tests_name("expr_eval", tests, NULL, NULL);
}
