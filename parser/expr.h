/* expr.h - the pnnx.Expression language: tokens -> tree -> RPN -> evaluation.
 *
 * ki_expr_compile() turns the raw `expr=` text into a ki_expr that owns a copy of the text, its
 * tokens (with byte offsets), an n-ary tree (nodes in one array, linked by index) and the RPN
 * code with its maximum stack depth. The parser is recursive descent with a depth limit, so
 * hostile text fails cleanly. Nothing here knows about graphs, shapes or broadcasting: the
 * evaluators see inputs as runs of floats (ki_expr_eval_chunk, for tensors; the caller handles
 * broadcasting by choosing each input's step) or as doubles (ki_expr_eval_scalar, for the sizes
 * and lists known while shapes are inferred). Both run on a stack the caller provides.
 *
 * Semantics follow PyTorch (docs/pnnx-format.md section 4): round is half-to-even, remainder
 * takes the divisor's sign, floor_divide floors, int() truncates, div is true division.
 *
 * A compiled ki_expr is immutable and may be evaluated from several threads at once. */
#ifndef KI_EXPR_H
#define KI_EXPR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

#define KI_EXPR_MAX_DEPTH 256        /* nesting of calls and lists */
#define KI_EXPR_MAX_LEN   (1u << 24) /* bytes of expression text */
#define KI_EXPR_MAX_REF   (1 << 20)  /* largest N in @N */

/* ---- tokens ---- */
typedef enum ki_expr_tok_kind {
    KI_TOK_END = 0, /* end of text */
    KI_TOK_NAME,    /* a function name from the table (op holds its opcode) */
    KI_TOK_WORD,    /* any other identifier (`ij`); only valid as the whole expression */
    KI_TOK_REF,     /* @N; ival = N */
    KI_TOK_INT,     /* ival */
    KI_TOK_FLOAT,   /* fval (also inf, -inf, nan, nan.0) */
    KI_TOK_COMPLEX, /* fval + fimag j */
    KI_TOK_BOOL,    /* True/False: ival 1/0 */
    KI_TOK_NONE,    /* None */
    KI_TOK_LPAREN,
    KI_TOK_RPAREN,
    KI_TOK_COMMA,
    KI_TOK_LBRACKET,
    KI_TOK_RBRACKET
} ki_expr_tok_kind;

typedef struct ki_expr_token {
    ki_expr_tok_kind kind;
    size_t start, end; /* byte offsets into the text: [start, end) */
    int op;            /* KI_TOK_NAME: opcode */
    int64_t ival;
    double fval, fimag;
} ki_expr_token;

/* ---- opcodes: the function table of pnnx-format.md 4.2 plus the leaves ---- */
typedef enum ki_expr_opcode {
    /* leaves and structure */
    KI_EOP_REF = 0, /* push input `ref` */
    KI_EOP_CONST,   /* push `value` */
    KI_EOP_SIZE,    /* push dimension `dim` of input `ref` */
    KI_EOP_SHAPE,   /* the whole shape of input `ref` as a list (root only) */
    KI_EOP_LIST,    /* collect the top `n` values into the result list (root only) */
    /* unary */
    KI_EOP_ABS,
    KI_EOP_ACOS,
    KI_EOP_ACOSH,
    KI_EOP_ASIN,
    KI_EOP_ASINH,
    KI_EOP_ATAN,
    KI_EOP_ATANH,
    KI_EOP_COS,
    KI_EOP_COSH,
    KI_EOP_SIN,
    KI_EOP_SINH,
    KI_EOP_TAN,
    KI_EOP_TANH,
    KI_EOP_EXP,
    KI_EOP_LOG,
    KI_EOP_LOG10,
    KI_EOP_SQRT,
    KI_EOP_ERF,
    KI_EOP_EXPM1,
    KI_EOP_LOG1P,
    KI_EOP_CEIL,
    KI_EOP_FLOOR,
    KI_EOP_TRUNC,
    KI_EOP_ROUND,
    KI_EOP_NEG,
    KI_EOP_RECIPROCAL,
    KI_EOP_RSQRT,
    KI_EOP_SQUARE,
    KI_EOP_SIGN,
    KI_EOP_INT,
    KI_EOP_TO_FLOAT, /* torch.float */
    KI_EOP_TO_DOUBLE,
    KI_EOP_TO_HALF,
    KI_EOP_TO_BF16,
    KI_EOP_TO_LONG,
    KI_EOP_TO_INT,
    KI_EOP_TO_SHORT,
    KI_EOP_TO_INT8,
    KI_EOP_TO_UINT8,
    KI_EOP_TO_BOOL,
    KI_EOP_TO_COMPLEX32, /* parsed, but evaluation is unsupported */
    KI_EOP_TO_COMPLEX64,
    KI_EOP_TO_COMPLEX128,
    /* binary */
    KI_EOP_ADD,
    KI_EOP_SUB,
    KI_EOP_MUL,
    KI_EOP_DIV,
    KI_EOP_FLOOR_DIVIDE,
    KI_EOP_REMAINDER,
    KI_EOP_FMOD,
    KI_EOP_POW,
    KI_EOP_ATAN2,
    KI_EOP_LOGADDEXP,
    KI_EOP_MAX, /* max and maximum */
    KI_EOP_MIN, /* min and minimum */
    KI_EOP_AND,
    KI_EOP_OR,
    KI_EOP_XOR,
    KI_EOP_LSHIFT,
    KI_EOP_RSHIFT,
    KI_EOP_SIZE_CALL, /* size(t[,d]) as parsed; becomes SIZE or SHAPE in the RPN */
    KI_EOP_COUNT
} ki_expr_opcode;

#define KI_EOP_FIRST_UNARY  KI_EOP_ABS
#define KI_EOP_LAST_UNARY   KI_EOP_TO_COMPLEX128
#define KI_EOP_FIRST_BINARY KI_EOP_ADD
#define KI_EOP_LAST_BINARY  KI_EOP_RSHIFT

typedef struct ki_expr_func {
    const char *name;
    int min_args, max_args;
    ki_expr_opcode op;
} ki_expr_func;

/* The function table (every name of pnnx-format.md 4.2 and the torch.<dtype> casts). */
const ki_expr_func *ki_expr_func_find(const char *name, size_t len);
/* The name of an opcode ("add", "torch.float", "@", "const", "size", "list", ...). */
const char *ki_expr_op_name(ki_expr_opcode op);

/* ---- tree ---- */
typedef enum ki_expr_node_kind {
    KI_NODE_CALL = 0, /* op, children */
    KI_NODE_REF,      /* ival */
    KI_NODE_NUM,      /* value; is_int for int and bool literals */
    KI_NODE_COMPLEX,  /* value + imag j */
    KI_NODE_NONE,     /* None */
    KI_NODE_LIST,     /* children (root only) */
    KI_NODE_STRING    /* a bare word: the whole expression is a string (`ij`) */
} ki_expr_node_kind;

typedef struct ki_expr_node {
    ki_expr_node_kind kind;
    ki_expr_opcode op;                         /* KI_NODE_CALL */
    int tok;                                   /* the token that starts the node */
    int parent;                                /* -1 for the root */
    int first_child, next_sibling, n_children; /* -1 when absent */
    int64_t ival;
    double value, imag;
    bool is_int;
} ki_expr_node;

/* ---- RPN code ---- */
typedef struct ki_expr_ins {
    ki_expr_opcode op;
    int n;        /* LIST: number of values */
    int ref;      /* REF, SIZE, SHAPE: input index */
    int64_t dim;  /* SIZE: dimension (negative counts from the end) */
    double value; /* CONST */
    int64_t ival; /* CONST: the exact value when is_int */
    bool is_int;  /* CONST: an int or bool literal */
    size_t pos;   /* byte offset of the source token, for messages */
} ki_expr_ins;

typedef struct ki_expr {
    char *text; /* NUL-terminated copy */
    size_t len;
    ki_expr_token *tokens;
    int n_tokens; /* including the final KI_TOK_END */
    ki_expr_node *nodes;
    int n_nodes;
    int root;
    ki_expr_ins *code;
    int n_code;
    int max_stack; /* values on the evaluation stack at most */
    int n_refs;    /* 1 + the largest @N anywhere (0 when there is none) */
    bool is_list;  /* the result is a list ([...] or size(@i)) */
    bool is_string;
} ki_expr;

/* Tokenizes, parses and converts `text`. On failure returns KI_ERR_FORMAT (KI_ERR_UNSUPPORTED
 * for valid text that cannot be evaluated, e.g. complex numbers; KI_ERR_LIMIT for too long or
 * too deep text; KI_ERR_NOMEM) with a message "what at column N: text", and sets *err_pos (if
 * not NULL) to the byte offset of the offending character. *out is set only on success. */
ki_status ki_expr_compile(const char *text, ki_expr **out, size_t *err_pos, ki_error *err);
void ki_expr_destroy(ki_expr *e);

/* The three stages, used by ki_expr_compile (and by tests and the CLI). Each fills part of e;
 * e must be zeroed with text/len set before ki_expr_lex. */
ki_status ki_expr_lex(ki_expr *e, size_t *err_pos, ki_error *err);
ki_status ki_expr_parse(ki_expr *e, size_t *err_pos, ki_error *err);
ki_status ki_expr_to_rpn(ki_expr *e, size_t *err_pos, ki_error *err);

/* Formats "what at column N: <text>" into err, showing a window of a long text. */
ki_status ki_expr_fail_at(ki_error *err, ki_status code, const ki_expr *e, size_t pos,
                          const char *what);

/* ---- evaluation ---- */
typedef struct ki_expr_input {
    const float *data; /* chunk evaluator: n floats (step 1) or one float (step 0) */
    int step;          /* 0 or 1 */
    double value;      /* scalar evaluator: the value of a scalar input */
    int ndim;          /* for size(): the input's rank and dims; -1 when it has no shape */
    const int64_t *dims;
} ki_expr_input;

/* A value on the scalar evaluator's stack. */
typedef struct ki_expr_scalar {
    double v;  /* the value (also for ints) */
    int64_t i; /* the exact value when is_int */
    bool is_int;
} ki_expr_scalar;

/* Floats of stack the chunk evaluator needs for n elements (max_stack * n), or 0 on overflow. */
size_t ki_expr_chunk_stack_floats(const ki_expr *e, size_t n);

/* Evaluates a non-list expression elementwise over n elements: out[i] from in[*].data[i*step].
 * `stack` holds ki_expr_chunk_stack_floats(e, n) floats. Cannot fail: the caller has checked
 * every SIZE (ki_expr_check_sizes) and that e is neither a list nor a string. Computes in
 * float32 like PyTorch does for float tensors. */
void ki_expr_eval_chunk(const ki_expr *e, const ki_expr_input *in, size_t n, float *stack,
                        float *out);

/* Checks every size(@i,d) and size(@i) against the inputs' ranks (KI_ERR_SHAPE). */
ki_status ki_expr_check_sizes(const ki_expr *e, const ki_expr_input *in, int n_in, ki_error *err);

/* Evaluates with doubles and Python scalar rules (ints stay ints except under div; int()
 * truncates; integer overflow, division by zero and bitwise ops on floats are errors).
 * `stack` holds e->max_stack entries (at least 1). Writes the result (1 value, or the list's
 * values, or the shape for size(@i)) to out[0..max_out-1] and its length to *n_out; values past
 * max_out are computed but dropped. */
ki_status ki_expr_eval_scalar(const ki_expr *e, const ki_expr_input *in, int n_in,
                              ki_expr_scalar *stack, double *out, int max_out, int *n_out,
                              ki_error *err);

#endif
