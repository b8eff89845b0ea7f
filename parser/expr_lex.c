/* expr_lex.c - tokenizer for the expression language.
 *
 * Produces tokens with byte offsets [start, end). Names may contain dots (`torch.float`);
 * numbers follow a strict subset of strtod's syntax (no hex, no "infinity"), so the text scanned
 * here is exactly what strtod reads. Whitespace is skipped although pnnx never writes any. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

typedef struct lexer {
    ki_expr *e;
    size_t cap;
    size_t *err_pos;
    ki_error *err;
} lexer;

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_word_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_word_char(char c)
{
    return is_word_start(c) || is_digit(c) || c == '.';
}

static ki_status lex_fail(lexer *lx, ki_status code, size_t pos, const char *what)
{
    if (lx->err_pos) {
        *lx->err_pos = pos;
    }
    return ki_expr_fail_at(lx->err, code, lx->e, pos, what);
}

static ki_status push(lexer *lx, const ki_expr_token *t)
{
    ki_expr *e = lx->e;
    if ((size_t)e->n_tokens == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 16;
        ki_expr_token *p = realloc(e->tokens, cap * sizeof *p);
        if (!p) {
            return KI_FAIL(lx->err, KI_ERR_NOMEM, "out of memory tokenizing an expression");
        }
        e->tokens = p;
        lx->cap = cap;
    }
    e->tokens[e->n_tokens++] = *t;
    return KI_OK;
}

/* Scans [sign] digits [. digits] [e [sign] digits] (or a leading '.'); returns the end offset,
 * or 0 when there is no number at p. *is_float tells whether '.' or an exponent appeared. */
static size_t scan_number(const char *s, size_t p, bool *is_float)
{
    size_t q = p, digits = 0;
    *is_float = false;
    if (s[q] == '-' || s[q] == '+') {
        q++;
    }
    for (; is_digit(s[q]); q++) {
        digits++;
    }
    if (s[q] == '.') {
        *is_float = true;
        for (q++; is_digit(s[q]); q++) {
            digits++;
        }
    }
    if (digits == 0) {
        return 0;
    }
    if (s[q] == 'e' || s[q] == 'E') {
        size_t r = q + 1;
        if (s[r] == '-' || s[r] == '+') {
            r++;
        }
        if (is_digit(s[r])) {
            for (; is_digit(s[r]); r++) {
            }
            *is_float = true;
            q = r;
        }
    }
    return q;
}

/* Decimal integer [start, end) with an optional sign; false on int64 overflow. */
static bool parse_int(const char *s, size_t start, size_t end, int64_t *out)
{
    bool neg = s[start] == '-';
    size_t p = (s[start] == '-' || s[start] == '+') ? start + 1 : start;
    int64_t v = 0;
    for (; p < end; p++) {
        int64_t d = s[p] - '0';
        /* accumulate negatively so INT64_MIN is reachable */
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_sub_overflow(v, d, &v)) {
            return false;
        }
    }
    if (!neg && v == INT64_MIN) {
        return false;
    }
    *out = neg ? v : -v;
    return true;
}

/* A complex tail after a real number ending at q: `j`, or (+|-|+-)number`j`. Returns the end
 * of the token and sets the parts, or returns 0 when there is none. */
static size_t scan_complex(const char *s, size_t start, size_t q, double *re, double *im)
{
    bool f;
    if (s[q] == 'j') {
        *im = strtod(s + start, NULL);
        *re = 0.0;
        return q + 1;
    }
    if (s[q] != '+' && s[q] != '-') {
        return 0;
    }
    size_t r = scan_number(s, q + 1, &f);
    /* the imaginary part's own sign is allowed only in the "+-" spelling */
    if (r == 0 || s[r] != 'j' || s[q + 1] == '+' || (s[q] == '-' && s[q + 1] == '-')) {
        return 0;
    }
    *re = strtod(s + start, NULL);
    *im = strtod(s + q + 1, NULL);
    if (s[q] == '-') {
        *im = -*im;
    }
    return r + 1;
}

static ki_status lex_number(lexer *lx, size_t p, size_t *next)
{
    const char *s = lx->e->text;
    bool is_float;
    size_t q = scan_number(s, p, &is_float);
    ki_expr_token t = { .kind = KI_TOK_INT, .start = p };
    size_t c = scan_complex(s, p, q, &t.fval, &t.fimag);
    if (c) {
        t.kind = KI_TOK_COMPLEX;
        q = c;
    } else if (is_float) {
        char *end;
        t.kind = KI_TOK_FLOAT;
        t.fval = strtod(s + p, &end);
        if ((size_t)(end - s) != q) {
            return lex_fail(lx, KI_ERR_INTERNAL, p, "number scanner disagrees with strtod");
        }
    } else if (!parse_int(s, p, q, &t.ival)) {
        return lex_fail(lx, KI_ERR_FORMAT, p, "integer literal out of range");
    } else {
        t.fval = (double)t.ival;
    }
    if (is_word_char(s[q])) {
        return lex_fail(lx, KI_ERR_FORMAT, q, "unexpected character after a number");
    }
    t.end = q;
    *next = q;
    return push(lx, &t);
}

static bool word_is(const char *s, size_t len, const char *w)
{
    return strlen(w) == len && memcmp(s, w, len) == 0;
}

/* A word at p (after an optional sign at `start`): a function, True/False/None, a non-finite
 * float, or any other identifier (only valid as a whole expression, which the parser checks). */
static ki_status lex_word(lexer *lx, size_t start, size_t p, size_t *next)
{
    const char *s = lx->e->text;
    size_t q = p;
    for (; is_word_char(s[q]); q++) {
    }
    size_t len = q - p;
    ki_expr_token t = { .kind = KI_TOK_WORD, .start = start, .end = q };
    const ki_expr_func *f = ki_expr_func_find(s + p, len);
    if (word_is(s + p, len, "inf")) {
        t.kind = KI_TOK_FLOAT;
        t.fval = s[start] == '-' ? -INFINITY : INFINITY;
    } else if (word_is(s + p, len, "nan") || word_is(s + p, len, "nan.0")) {
        t.kind = KI_TOK_FLOAT;
        t.fval = NAN;
    } else if (start != p) {
        return lex_fail(lx, KI_ERR_FORMAT, start, "expected a number after the sign");
    } else if (f) {
        t.kind = KI_TOK_NAME;
        t.op = f->op;
    } else if (word_is(s + p, len, "True") || word_is(s + p, len, "False")) {
        t.kind = KI_TOK_BOOL;
        t.ival = s[p] == 'T';
        t.fval = (double)t.ival;
    } else if (word_is(s + p, len, "None")) {
        t.kind = KI_TOK_NONE;
    }
    *next = q;
    return push(lx, &t);
}

static ki_status lex_ref(lexer *lx, size_t p, size_t *next)
{
    const char *s = lx->e->text;
    size_t q = p + 1;
    int64_t v = 0;
    if (!is_digit(s[q])) {
        return lex_fail(lx, KI_ERR_FORMAT, q, "expected digits after '@'");
    }
    for (; is_digit(s[q]); q++) {
        v = v * 10 + (s[q] - '0');
        if (v > KI_EXPR_MAX_REF) {
            return lex_fail(lx, KI_ERR_LIMIT, p, "input index too large");
        }
    }
    if (is_word_char(s[q])) {
        return lex_fail(lx, KI_ERR_FORMAT, q, "unexpected character after an input reference");
    }
    ki_expr_token t = { .kind = KI_TOK_REF, .start = p, .end = q, .ival = v };
    *next = q;
    return push(lx, &t);
}

static ki_expr_tok_kind punct_kind(char c)
{
    switch (c) {
    case '(':
        return KI_TOK_LPAREN;
    case ')':
        return KI_TOK_RPAREN;
    case ',':
        return KI_TOK_COMMA;
    case '[':
        return KI_TOK_LBRACKET;
    case ']':
        return KI_TOK_RBRACKET;
    default:
        return KI_TOK_END;
    }
}

static ki_status lex_one(lexer *lx, size_t p, size_t *next)
{
    const char *s = lx->e->text;
    char c = s[p];
    bool f;
    ki_expr_tok_kind k = punct_kind(c);
    if (k != KI_TOK_END) {
        ki_expr_token t = { .kind = k, .start = p, .end = p + 1 };
        *next = p + 1;
        return push(lx, &t);
    }
    if (c == '@') {
        return lex_ref(lx, p, next);
    }
    if (scan_number(s, p, &f)) {
        return lex_number(lx, p, next);
    }
    if ((c == '-' || c == '+') && is_word_start(s[p + 1])) {
        return lex_word(lx, p, p + 1, next);
    }
    if (is_word_start(c)) {
        return lex_word(lx, p, p, next);
    }
    char what[64];
    if ((unsigned char)c >= 0x20 && (unsigned char)c < 0x7f) {
        snprintf(what, sizeof what, "unexpected character '%c'", c);
    } else {
        snprintf(what, sizeof what, "unexpected byte 0x%02x", (unsigned)(unsigned char)c);
    }
    return lex_fail(lx, KI_ERR_FORMAT, p, what);
}

ki_status ki_expr_lex(ki_expr *e, size_t *err_pos, ki_error *err)
{
    lexer lx = { .e = e, .cap = 0, .err_pos = err_pos, .err = err };
    size_t p = 0;
    ki_status st;
    if (e->len > KI_EXPR_MAX_LEN) {
        return lex_fail(&lx, KI_ERR_LIMIT, 0, "expression text too long");
    }
    while (p < e->len) {
        char c = e->text[p];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            p++;
            continue;
        }
        if (c == '\0') {
            return lex_fail(&lx, KI_ERR_FORMAT, p, "unexpected NUL byte");
        }
        st = lex_one(&lx, p, &p);
        if (st != KI_OK) {
            return st;
        }
    }
    ki_expr_token end = { .kind = KI_TOK_END, .start = e->len, .end = e->len };
    return push(&lx, &end);
}
