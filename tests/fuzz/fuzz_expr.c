/* fuzz_expr.c - libFuzzer target for the expression module: tokenize, parse, convert to RPN and
 * run both evaluators with scalar inputs derived from the input bytes. Built by
 * tests/fuzz/fuzz.mk (`make fuzz-expr`) with ASan and UBSan. Every crash becomes a unit test
 * in tests/unit/test_expr*.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../parser/expr.h"

#define FUZZ_MAX_INPUTS 16
#define FUZZ_CHUNK      4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Input values from the bytes: small ints, halves, and a few special values. */
static double value_for(const uint8_t *data, size_t size, int i)
{
    static const double special[] = { 0.0,       -0.0,       1e300,     -1e300,
                                      1.0 / 0.0, -1.0 / 0.0, 0.0 / 0.0, 9007199254740991.0 };
    uint8_t b = size ? data[(size_t)i * 7 % size] : 0;
    if (b >= 0xf8) {
        return special[b & 7];
    }
    return (b & 1) ? (double)((int)b - 128) / 2.0 : (double)((int)b - 128);
}

static void evaluate(const ki_expr *e, const uint8_t *data, size_t size)
{
    static const int64_t dims[4] = { 2, 3, 0, 5 };
    ki_expr_input in[FUZZ_MAX_INPUTS];
    float vals[FUZZ_MAX_INPUTS][FUZZ_CHUNK];
    double out[8];
    int n_out = 0;
    ki_error err;
    for (int i = 0; i < FUZZ_MAX_INPUTS; i++) {
        double v = value_for(data, size, i);
        for (int k = 0; k < FUZZ_CHUNK; k++) {
            vals[i][k] = (float)(v * (k + 1));
        }
        in[i] = (ki_expr_input){
            .data = vals[i], .step = i & 1, .value = v, .ndim = (i % 3 == 2) ? -1 : 4, .dims = dims
        };
    }
    ki_expr_scalar *stack = malloc((size_t)e->max_stack * sizeof *stack);
    float *fstack = malloc(ki_expr_chunk_stack_floats(e, FUZZ_CHUNK) * sizeof *fstack);
    if (stack && fstack) {
        ki_status st = ki_expr_eval_scalar(e, in, FUZZ_MAX_INPUTS, stack, out, 8, &n_out, &err);
        if (st == KI_OK && n_out < 0) {
            abort();
        }
        if (!e->is_list && !e->is_string &&
            ki_expr_check_sizes(e, in, FUZZ_MAX_INPUTS, &err) == KI_OK) {
            float res[FUZZ_CHUNK];
            ki_expr_eval_chunk(e, in, FUZZ_CHUNK, fstack, res);
        }
    }
    free(stack);
    free(fstack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    ki_expr *e = NULL;
    ki_error err;
    size_t pos = 0;
    if (!text) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    if (ki_expr_compile(text, &e, &pos, &err) != KI_OK) {
        /* the error position must lie inside the text (or at its end) */
        if (pos > strlen(text) || err.msg[0] == '\0') {
            abort();
        }
    } else {
        if (e->n_refs <= FUZZ_MAX_INPUTS) {
            evaluate(e, data, size);
        }
        ki_expr_destroy(e);
    }
    free(text);
    return 0;
}
