/* expr_func.c - the function table of the expression language (pnnx-format.md 4.2).
 *
 * Each name maps to an opcode and an argument count. pnnx gives every function a fixed arity;
 * only size() takes one or two arguments. Read-only; thread-safe. */
#include <string.h>

#include "expr.h"

static const ki_expr_func funcs[] = {
    { "abs", 1, 1, KI_EOP_ABS },
    { "acos", 1, 1, KI_EOP_ACOS },
    { "acosh", 1, 1, KI_EOP_ACOSH },
    { "add", 2, 2, KI_EOP_ADD },
    { "and", 2, 2, KI_EOP_AND },
    { "asin", 1, 1, KI_EOP_ASIN },
    { "asinh", 1, 1, KI_EOP_ASINH },
    { "atan", 1, 1, KI_EOP_ATAN },
    { "atan2", 2, 2, KI_EOP_ATAN2 },
    { "atanh", 1, 1, KI_EOP_ATANH },
    { "ceil", 1, 1, KI_EOP_CEIL },
    { "cos", 1, 1, KI_EOP_COS },
    { "cosh", 1, 1, KI_EOP_COSH },
    { "div", 2, 2, KI_EOP_DIV },
    { "erf", 1, 1, KI_EOP_ERF },
    { "exp", 1, 1, KI_EOP_EXP },
    { "expm1", 1, 1, KI_EOP_EXPM1 },
    { "floor", 1, 1, KI_EOP_FLOOR },
    { "floor_divide", 2, 2, KI_EOP_FLOOR_DIVIDE },
    { "fmod", 2, 2, KI_EOP_FMOD },
    { "int", 1, 1, KI_EOP_INT },
    { "log", 1, 1, KI_EOP_LOG },
    { "log10", 1, 1, KI_EOP_LOG10 },
    { "log1p", 1, 1, KI_EOP_LOG1P },
    { "logaddexp", 2, 2, KI_EOP_LOGADDEXP },
    { "lshift", 2, 2, KI_EOP_LSHIFT },
    { "max", 2, 2, KI_EOP_MAX },
    { "maximum", 2, 2, KI_EOP_MAX },
    { "min", 2, 2, KI_EOP_MIN },
    { "minimum", 2, 2, KI_EOP_MIN },
    { "mul", 2, 2, KI_EOP_MUL },
    { "neg", 1, 1, KI_EOP_NEG },
    { "or", 2, 2, KI_EOP_OR },
    { "pow", 2, 2, KI_EOP_POW },
    { "reciprocal", 1, 1, KI_EOP_RECIPROCAL },
    { "remainder", 2, 2, KI_EOP_REMAINDER },
    { "round", 1, 1, KI_EOP_ROUND },
    { "rshift", 2, 2, KI_EOP_RSHIFT },
    { "rsqrt", 1, 1, KI_EOP_RSQRT },
    { "sign", 1, 1, KI_EOP_SIGN },
    { "sin", 1, 1, KI_EOP_SIN },
    { "sinh", 1, 1, KI_EOP_SINH },
    { "size", 1, 2, KI_EOP_SIZE_CALL },
    { "sqrt", 1, 1, KI_EOP_SQRT },
    { "square", 1, 1, KI_EOP_SQUARE },
    { "sub", 2, 2, KI_EOP_SUB },
    { "tan", 1, 1, KI_EOP_TAN },
    { "tanh", 1, 1, KI_EOP_TANH },
    { "torch.bfloat16", 1, 1, KI_EOP_TO_BF16 },
    { "torch.bool", 1, 1, KI_EOP_TO_BOOL },
    { "torch.complex128", 1, 1, KI_EOP_TO_COMPLEX128 },
    { "torch.complex32", 1, 1, KI_EOP_TO_COMPLEX32 },
    { "torch.complex64", 1, 1, KI_EOP_TO_COMPLEX64 },
    { "torch.double", 1, 1, KI_EOP_TO_DOUBLE },
    { "torch.float", 1, 1, KI_EOP_TO_FLOAT },
    { "torch.half", 1, 1, KI_EOP_TO_HALF },
    { "torch.int", 1, 1, KI_EOP_TO_INT },
    { "torch.int8", 1, 1, KI_EOP_TO_INT8 },
    { "torch.long", 1, 1, KI_EOP_TO_LONG },
    { "torch.short", 1, 1, KI_EOP_TO_SHORT },
    { "torch.uint8", 1, 1, KI_EOP_TO_UINT8 },
    { "trunc", 1, 1, KI_EOP_TRUNC },
    { "xor", 2, 2, KI_EOP_XOR },
};

const ki_expr_func *ki_expr_func_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) {
        if (strlen(funcs[i].name) == len && memcmp(funcs[i].name, name, len) == 0) {
            return &funcs[i];
        }
    }
    return NULL;
}

const char *ki_expr_op_name(ki_expr_opcode op)
{
    switch (op) {
    case KI_EOP_REF:
        return "@";
    case KI_EOP_CONST:
        return "const";
    case KI_EOP_SIZE:
    case KI_EOP_SHAPE:
    case KI_EOP_SIZE_CALL:
        return "size";
    case KI_EOP_LIST:
        return "list";
    case KI_EOP_MAX:
        return "maximum";
    case KI_EOP_MIN:
        return "minimum";
    default:
        break;
    }
    for (size_t i = 0; i < sizeof funcs / sizeof funcs[0]; i++) {
        if (funcs[i].op == op) {
            return funcs[i].name;
        }
    }
    return "?";
}
