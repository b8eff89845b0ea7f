/* param_value.c - classifying parameter values and parsing shape annotations
 * (pnnx-format.md §1.5, §1.6). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckd.h"
#include "graph.h"

static const struct {
    const char *name;
    ki_dtype type;
    size_t size;
} dtypes[] = {
    { "null", KI_DT_NULL, 0 }, { "f32", KI_DT_F32, 4 },    { "f64", KI_DT_F64, 8 },
    { "f16", KI_DT_F16, 2 },   { "bf16", KI_DT_BF16, 2 },  { "i8", KI_DT_I8, 1 },
    { "u8", KI_DT_U8, 1 },     { "i16", KI_DT_I16, 2 },    { "i32", KI_DT_I32, 4 },
    { "i64", KI_DT_I64, 8 },   { "bool", KI_DT_BOOL, 1 },  { "c32", KI_DT_C32, 4 },
    { "c64", KI_DT_C64, 8 },   { "c128", KI_DT_C128, 16 },
};

size_t ki_dtype_size(ki_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (dtypes[i].type == t) {
            return dtypes[i].size;
        }
    }
    return 0;
}

const char *ki_dtype_name(ki_dtype t)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (dtypes[i].type == t) {
            return dtypes[i].name;
        }
    }
    return "?";
}

static bool dtype_lookup(const char *s, size_t n, ki_dtype *out)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0) {
            *out = dtypes[i].type;
            return true;
        }
    }
    return false;
}

typedef enum { SC_STRING, SC_INT, SC_FLOAT, SC_COMPLEX } scalar_kind;

typedef struct scalar {
    scalar_kind kind;
    int64_t i;
    double re, im;
} scalar;

/* Parses all of s[0..n) with strtod; false unless every byte is consumed. */
static bool parse_double(const char *s, size_t n, double *out, size_t *used)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf) {
        return false;
    }
    *out = v;
    if (used) {
        *used = (size_t)(end - buf);
        return true;
    }
    return *end == '\0';
}

static bool parse_int64(const char *s, size_t n, int64_t *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf) {
        return false;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (*end != '\0' || errno == ERANGE) {
        return false;
    }
    *out = v;
    return true;
}

/* "re(+|-|+-)imj" with both parts in any strtod spelling. */
static bool parse_complex(const char *s, size_t n, double *re, double *im)
{
    size_t used;
    if (n < 2 || s[n - 1] != 'j' || !parse_double(s, n - 1, re, &used) || used >= n - 1) {
        return false;
    }
    const char *p = s + used;
    size_t rest = n - 1 - used;
    if (rest >= 2 && p[0] == '+' && p[1] == '-') {
        p++;
        rest--;
    }
    if (p[0] != '+' && p[0] != '-') {
        return false;
    }
    return parse_double(p, rest, im, NULL);
}

static scalar classify(const char *s, size_t n)
{
    scalar v = { SC_STRING, 0, 0, 0 };
    bool numeric = n > 0 && (isdigit((unsigned char)s[0]) ||
                             (n > 1 && s[0] == '-' && isdigit((unsigned char)s[1])));
    if (!numeric) {
        return v;
    }
    if (s[n - 1] == 'j') {
        if (parse_complex(s, n, &v.re, &v.im)) {
            v.kind = SC_COMPLEX;
        }
        return v;
    }
    if (memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n)) {
        if (parse_double(s, n, &v.re, NULL)) {
            v.kind = SC_FLOAT;
            v.re = (double)(float)v.re; /* pnnx floats are float32 */
        }
        return v;
    }
    if (parse_int64(s, n, &v.i)) {
        v.kind = SC_INT;
        v.re = (double)v.i;
    }
    return v;
}

static bool is_word(const char *s, size_t n, const char *w)
{
    return strlen(w) == n && memcmp(s, w, n) == 0;
}

static ki_status parse_list(ki_arena *a, const char *s, size_t n, ki_param *p, ki_error *err)
{
    /* s excludes the brackets */
    int count = 1;
    for (size_t i = 0; i < n; i++) {
        count += s[i] == ',';
        if (count > KI_MAX_LIST) {
            return KI_FAIL(err, KI_ERR_LIMIT, "list has more than %d elements", KI_MAX_LIST);
        }
    }
    int64_t *ints = ki_arena_calloc(a, (size_t)count, sizeof *ints);
    double *floats = ki_arena_calloc(a, (size_t)count * 2, sizeof *floats);
    const char **strs = ki_arena_calloc(a, (size_t)count, sizeof *strs);
    if (!ints || !floats || !strs) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    int n_int = 0, n_float = 0, n_complex = 0;
    size_t start = 0;
    for (int k = 0; k < count; k++) {
        size_t end = start;
        while (end < n && s[end] != ',') {
            end++;
        }
        scalar v = classify(s + start, end - start);
        strs[k] = ki_arena_strndup(a, s + start, end - start);
        if (!strs[k]) {
            return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
        ints[k] = v.i;
        n_int += v.kind == SC_INT;
        n_float += v.kind == SC_FLOAT;
        n_complex += v.kind == SC_COMPLEX;
        start = end + 1;
        floats[k] = v.re;
        if (v.kind == SC_COMPLEX) {
            floats[count + k] = v.im;
        }
    }
    p->n = count;
    p->ints = ints;
    p->strs = strs;
    p->floats = floats;
    if (n_int == count) {
        p->kind = KI_PARAM_INTS;
    } else if (n_int + n_float == count) {
        p->kind = KI_PARAM_FLOATS;
    } else if (n_int + n_float + n_complex == count) {
        /* interleave re, im pairs */
        double *pairs = ki_arena_calloc(a, (size_t)count * 2, sizeof *pairs);
        if (!pairs) {
            return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
        for (int k = 0; k < count; k++) {
            pairs[2 * k] = floats[k];
            pairs[2 * k + 1] = floats[count + k];
        }
        p->floats = pairs;
        p->kind = KI_PARAM_COMPLEXES;
    } else {
        p->kind = KI_PARAM_STRINGS;
    }
    return KI_OK;
}

ki_status ki_param_value_parse(ki_arena *a, const char *s, size_t n, ki_param *p, ki_error *err)
{
    p->raw = ki_arena_strndup(a, s, n);
    p->s = p->raw;
    if (!p->raw) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    p->kind = KI_PARAM_NONE;
    if (n == 0 || is_word(s, n, "None") || is_word(s, n, "()") || is_word(s, n, "[]")) {
        return KI_OK;
    }
    if (memchr(s, '%', n)) {
        p->kind = KI_PARAM_STRING;
        return KI_OK;
    }
    if (is_word(s, n, "True") || is_word(s, n, "False")) {
        p->kind = KI_PARAM_BOOL;
        p->i = s[0] == 'T';
        return KI_OK;
    }
    if (n >= 2 && ((s[0] == '(' && s[n - 1] == ')') || (s[0] == '[' && s[n - 1] == ']'))) {
        return parse_list(a, s + 1, n - 2, p, err);
    }
    scalar v = classify(s, n);
    switch (v.kind) {
    case SC_INT:
        p->kind = KI_PARAM_INT;
        p->i = v.i;
        p->f = v.re;
        break;
    case SC_FLOAT:
        p->kind = KI_PARAM_FLOAT;
        p->f = v.re;
        break;
    case SC_COMPLEX:
        p->kind = KI_PARAM_COMPLEX;
        p->f = v.re;
        p->fi = v.im;
        break;
    case SC_STRING:
        p->kind = KI_PARAM_STRING;
        break;
    }
    return KI_OK;
}

static ki_status parse_dim(const char *s, size_t n, bool allow_unknown, int64_t *out, ki_error *err)
{
    if (allow_unknown && n == 1 && s[0] == '?') {
        *out = -1;
        return KI_OK;
    }
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)s[i])) {
            return KI_FAIL(err, KI_ERR_FORMAT, "bad dimension '%.*s'", (int)(n > 40 ? 40 : n), s);
        }
    }
    int64_t v;
    if (!parse_int64(s, n, &v) || v > KI_MAX_DIM) {
        return KI_FAIL(err, KI_ERR_LIMIT, "dimension '%.*s' is larger than %lld",
                       (int)(n > 40 ? 40 : n), s, (long long)KI_MAX_DIM);
    }
    *out = v;
    return KI_OK;
}

ki_status ki_param_shape_parse(const char *s, size_t n, bool allow_unknown, ki_shape *shape,
                               ki_dtype *dtype, ki_error *err)
{
    memset(shape, 0, sizeof *shape);
    size_t close = n;
    while (close > 0 && s[close - 1] != ')') {
        close--;
    }
    if (n == 0 || s[0] != '(' || close == 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "expected (d0,d1,...)TYPE, got '%.*s'",
                       (int)(n > 60 ? 60 : n), s);
    }
    close--; /* index of ')' */
    if (!dtype_lookup(s + close + 1, n - close - 1, dtype)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "unknown element type '%.*s'",
                       (int)(n - close - 1 > 40 ? 40 : n - close - 1), s + close + 1);
    }
    size_t start = 1;
    if (close == 1) {
        return KI_OK; /* "()": a scalar */
    }
    while (start <= close) {
        size_t end = start;
        while (end < close && s[end] != ',') {
            end++;
        }
        if (shape->ndim == KI_MAX_DIMS) {
            return KI_FAIL(err, KI_ERR_LIMIT, "more than %d dimensions", KI_MAX_DIMS);
        }
        ki_status st =
            parse_dim(s + start, end - start, allow_unknown, &shape->d[shape->ndim], err);
        if (st != KI_OK) {
            return st;
        }
        shape->ndim++;
        start = end + 1;
    }
    return KI_OK;
}
