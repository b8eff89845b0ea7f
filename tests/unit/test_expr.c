/* test_expr.c - the expression module (parser/): tokens, tree, RPN, both evaluators, errors. */
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

/* ---- helpers ---- */

static ki_expr *compile_ok(const char *text)
{
    ki_expr *e = NULL;
    ki_error err = { 0 };
    ki_status st = ki_expr_compile(text, &e, NULL, &err);
    if (st != KI_OK) {
        fail_msg("compile '%.80s' failed: %s", text, err.msg);
    }
    return e;
}

/* Compiles text expecting failure with `code`, a message containing `needle` and the error at
 * byte offset `pos` (pos < 0: not checked). */
static void compile_bad(const char *text, ki_status code, const char *needle, long pos)
{
    ki_expr *e = NULL;
    ki_error err = { 0 };
    size_t at = 0;
    ki_status st = ki_expr_compile(text, &e, &at, &err);
    if (st != code || !strstr(err.msg, needle) || (pos >= 0 && (long)at != pos)) {
        fail_msg("'%.60s': got status %d at %zu '%s', expected %d at %ld containing '%s'", text, st,
                 at, err.msg, code, pos, needle);
    }
    assert_null(e);
}

/* Rebuilds the text from the tree without recursion: label, "(" children ")" with ",". */
static void serialize(const ki_expr *e, char *buf, size_t size)
{
    size_t p = 0;
    int n = e->root;
    buf[0] = '\0';
    for (;;) {
        const ki_expr_node *nd = &e->nodes[n];
        const ki_expr_token *t = &e->tokens[nd->tok];
        if (nd->kind != KI_NODE_LIST) {
            p += (size_t)snprintf(buf + p, size - p, "%.*s", (int)(t->end - t->start),
                                  e->text + t->start);
        }
        if (nd->first_child >= 0 || nd->kind == KI_NODE_LIST) {
            p += (size_t)snprintf(buf + p, size - p, nd->kind == KI_NODE_LIST ? "[" : "(");
            if (nd->first_child >= 0) {
                n = nd->first_child;
                continue;
            }
        }
        while (n != e->root && e->nodes[n].next_sibling < 0) {
            n = e->nodes[n].parent;
            p += (size_t)snprintf(buf + p, size - p, e->nodes[n].kind == KI_NODE_LIST ? "]" : ")");
        }
        if (n == e->root) {
            if (e->nodes[n].kind == KI_NODE_LIST && e->nodes[n].first_child < 0) {
                p += (size_t)snprintf(buf + p, size - p, "]");
            }
            break;
        }
        p += (size_t)snprintf(buf + p, size - p, ",");
        n = e->nodes[n].next_sibling;
    }
}

static void rpn_string(const ki_expr *e, char *buf, size_t size)
{
    size_t p = 0;
    buf[0] = '\0';
    for (int k = 0; k < e->n_code && p < size; k++) {
        const ki_expr_ins *c = &e->code[k];
        const char *sep = k ? " " : "";
        if (c->op == KI_EOP_REF) {
            p += (size_t)snprintf(buf + p, size - p, "%s@%d", sep, c->ref);
        } else if (c->op == KI_EOP_CONST) {
            p += (size_t)snprintf(buf + p, size - p, "%s%g", sep, c->value);
        } else if (c->op == KI_EOP_SIZE) {
            p += (size_t)snprintf(buf + p, size - p, "%ssize@%d/%lld", sep, c->ref,
                                  (long long)c->dim);
        } else if (c->op == KI_EOP_LIST) {
            p += (size_t)snprintf(buf + p, size - p, "%slist%d", sep, c->n);
        } else {
            p += (size_t)snprintf(buf + p, size - p, "%s%s", sep, ki_expr_op_name(c->op));
        }
    }
}

/* ---- tokens and trees ---- */

static void test_tokens_exact(void **state)
{
    (void)state;
    ki_expr *e = compile_ok("add(@0,mul(@1,@2))");
    static const ki_expr_tok_kind kinds[] = { KI_TOK_NAME,   KI_TOK_LPAREN, KI_TOK_REF,
                                              KI_TOK_COMMA,  KI_TOK_NAME,   KI_TOK_LPAREN,
                                              KI_TOK_REF,    KI_TOK_COMMA,  KI_TOK_REF,
                                              KI_TOK_RPAREN, KI_TOK_RPAREN, KI_TOK_END };
    static const size_t starts[] = { 0, 3, 4, 6, 7, 10, 11, 13, 14, 16, 17, 18 };
    static const size_t ends[] = { 3, 4, 6, 7, 10, 11, 13, 14, 16, 17, 18, 18 };
    assert_int_equal(e->n_tokens, 12);
    for (int i = 0; i < 12; i++) {
        assert_int_equal(e->tokens[i].kind, kinds[i]);
        assert_int_equal(e->tokens[i].start, starts[i]);
        assert_int_equal(e->tokens[i].end, ends[i]);
    }
    assert_int_equal(e->tokens[0].op, KI_EOP_ADD);
    assert_int_equal(e->tokens[4].op, KI_EOP_MUL);
    assert_int_equal(e->tokens[6].ival, 1);
    ki_expr_destroy(e);

    e = compile_ok("sin(@1)");
    assert_int_equal(e->n_tokens, 5);
    assert_int_equal(e->tokens[0].kind, KI_TOK_NAME);
    assert_int_equal(e->tokens[0].op, KI_EOP_SIN);
    assert_int_equal(e->tokens[2].kind, KI_TOK_REF);
    assert_int_equal(e->tokens[2].ival, 1);
    assert_int_equal(e->tokens[2].start, 4);
    assert_int_equal(e->tokens[2].end, 6);
    assert_int_equal(e->n_refs, 2);
    assert_int_equal(e->n_nodes, 2);
    assert_int_equal(e->nodes[e->root].n_children, 1);
    ki_expr_destroy(e);
}

static void test_literal_tokens(void **state)
{
    (void)state;
    ki_expr *e = compile_ok(" [ -1 , 2.5e-3,1.000000e-05 ,True,False,-inf,nan.0,@12345 ,0.500000]");
    const ki_expr_token *t = e->tokens;
    assert_int_equal(t[1].kind, KI_TOK_INT);
    assert_int_equal(t[1].ival, -1);
    assert_int_equal(t[1].start, 3);
    assert_int_equal(t[3].kind, KI_TOK_FLOAT);
    assert_true(t[3].fval == 2.5e-3);
    assert_true(t[5].fval == 1e-5);
    assert_int_equal(t[7].kind, KI_TOK_BOOL);
    assert_int_equal(t[7].ival, 1);
    assert_int_equal(t[9].ival, 0);
    assert_true(isinf(t[11].fval) && t[11].fval < 0);
    assert_true(isnan(t[13].fval));
    assert_int_equal(t[15].kind, KI_TOK_REF);
    assert_int_equal(t[15].ival, 12345);
    assert_true(t[17].fval == 0.5);
    ki_expr_destroy(e);

    /* complex literals tokenize, but evaluation is unsupported */
    ki_expr tmp = { 0 };
    ki_error err = { 0 };
    tmp.text = (char *)"2.000000e+00-3.000000e+00j";
    tmp.len = strlen(tmp.text);
    assert_int_equal(ki_expr_lex(&tmp, NULL, &err), KI_OK);
    assert_int_equal(tmp.tokens[0].kind, KI_TOK_COMPLEX);
    assert_true(tmp.tokens[0].fval == 2.0 && tmp.tokens[0].fimag == -3.0);
    free(tmp.tokens);
    compile_bad("add(@0,1.0+-2.0j)", KI_ERR_UNSUPPORTED, "complex", 7);
    compile_bad("[None,1]", KI_ERR_UNSUPPORTED, "None", 1);
    compile_bad("torch.complex64(@0)", KI_ERR_UNSUPPORTED, "complex", 0);
}

static void expect_tree(const char *text, const char *rpn)
{
    char buf[512];
    ki_expr *e = compile_ok(text);
    serialize(e, buf, sizeof buf);
    assert_string_equal(buf, text);
    rpn_string(e, buf, sizeof buf);
    assert_string_equal(buf, rpn);
    ki_expr_destroy(e);
}

static void test_trees_and_rpn(void **state)
{
    (void)state;
    expect_tree("add(@0,mul(@1,@2))", "@0 @1 @2 mul add");
    expect_tree("mul(@2,add(@0,@1))", "@2 @0 @1 add mul");
    expect_tree("add(add(mul(@0,@1),mul(@2,add(add(add(@0,@2),@3),@4))),@5)",
                "@0 @1 mul @2 @0 @2 add @3 add @4 add mul add @5 add");
    expect_tree("sin(@1)", "@1 sin");
    expect_tree("[size(@0,0),3,85,size(@0,2),40]", "size@0/0 3 85 size@0/2 40 list5");
    expect_tree("[]", "list0");
    expect_tree("sqrt(div(abs(add(mul(@0,2),@1)),12))", "@0 2 mul @1 add abs 12 div sqrt");
    expect_tree("torch.float(@0)", "@0 torch.float");

    ki_expr *e = compile_ok("add(add(mul(@0,@1),mul(@2,add(add(add(@0,@2),@3),@4))),@5)");
    assert_int_equal(e->max_stack, 4);
    assert_int_equal(e->n_refs, 6);
    const ki_expr_node *root = &e->nodes[e->root];
    assert_int_equal(root->kind, KI_NODE_CALL);
    assert_int_equal(root->op, KI_EOP_ADD);
    assert_int_equal(root->n_children, 2);
    assert_int_equal(e->nodes[root->first_child].op, KI_EOP_ADD);
    assert_int_equal(e->nodes[e->nodes[root->first_child].next_sibling].kind, KI_NODE_REF);
    ki_expr_destroy(e);

    /* empty arguments are skipped, as pnnx does; whitespace is ignored */
    e = compile_ok(" add( @0 ,, mul(@1 ,2) ) ");
    char buf[128];
    rpn_string(e, buf, sizeof buf);
    assert_string_equal(buf, "@0 @1 2 mul add");
    ki_expr_destroy(e);

    e = compile_ok("ij");
    assert_true(e->is_string);
    assert_int_equal(e->n_code, 0);
    ki_expr_destroy(e);
}

/* Every expr string in the zoo round-trips through the tree. */
static void test_zoo_strings(void **state)
{
    (void)state;
    static const char *const zoo[] = {
        "[1,3,size(@0,2),40,2]",
        "[@0,@1]",
        "[size(@0,0),mul(120,size(@0,2)),85]",
        "add(@0,mul(@1,2))",
        "add(add(mul(@0,@1),@2),mul(@0,0.5))",
        "add(sub(add(floor(mul(@0,3)),ceil(mul(@1,3))),round(mul(@0,5))),trunc(mul(@1,4)))",
        "add(sub(add(rsqrt(add(abs(@0),0.5)),reciprocal(add(abs(@1),1))),@2),sign(@1))",
        "add(sub(exp(@0),mul(log(add(abs(@1),1)),sin(@0))),cos(@1))",
        "add(sub(mul(maximum(@0,@1),minimum(@0,@1)),pow(abs(@1),1.5)),atan2(@0,@1))",
        "mul(add(mul(@0,2),sub(@1,0.5)),16.0)",
        "mul(pow(mul(@0,2),2),@1)",
        "size(@0,2)",
        "sub(add(add(add(square(@0),sqrt(abs(@1))),log10(add(abs(@1),1))),exp(neg(abs(@0)))),"
        "mul(exp(@0),0.5))",
        "sub(add(sub(add(add(add(asin(mul(@0,0.9)),acos(mul(@1,0.9))),atan(@0)),tan(mul(@1,0.5))),"
        "neg(@0)),mul(@1,0.0015)),2)",
        "sub(sub(add(floor_divide(mul(@0,10),3),remainder(mul(@1,10),3)),fmod(mul(@0,10),3)),"
        "div(@0,add(abs(@1),0.1)))",
    };
    char buf[512];
    for (size_t i = 0; i < sizeof zoo / sizeof zoo[0]; i++) {
        ki_expr *e = compile_ok(zoo[i]);
        serialize(e, buf, sizeof buf);
        assert_string_equal(buf, zoo[i]);
        ki_expr_destroy(e);
    }
}

/* ---- malformed input ---- */

static void test_errors(void **state)
{
    (void)state;
    /* (empty arguments such as add(@0,@1,) are read as pnnx reads them: test_expr_eval.c) */
    compile_bad("add(@0 @1)", KI_ERR_FORMAT,
                "expected ',' or ')', got '@1' at column 7: add(@0 @1)", 6);
    compile_bad("add(@0,@1", KI_ERR_FORMAT, "expected ',' or ')', got the end at column 10", 9);
    compile_bad("add(@0,@1))", KI_ERR_FORMAT, "expected the end of the expression, got ')'", 10);
    compile_bad("add@0,@1)", KI_ERR_FORMAT, "expected '(' after 'add'", 3);
    compile_bad("[1,2", KI_ERR_FORMAT, "expected ',' or ']'", 4);
    compile_bad("1,2]", KI_ERR_FORMAT, "expected the end", 1);
    compile_bad("add(@,1)", KI_ERR_FORMAT, "expected digits after '@'", 5);
    compile_bad("@", KI_ERR_FORMAT, "expected digits after '@'", 1);
    compile_bad("@0x", KI_ERR_FORMAT, "unexpected character after an input reference", 2);
    compile_bad("@99999999999999999999999", KI_ERR_LIMIT, "input index too large", 0);
    compile_bad("foo(@0)", KI_ERR_FORMAT, "unknown function 'foo' at column 1", 0);
    compile_bad("add(@0,ij)", KI_ERR_FORMAT, "unknown function 'ij' at column 8", 7);
    compile_bad("add(@0)", KI_ERR_FORMAT, "'add' takes 2 arguments, got 1 at column 1", 0);
    compile_bad("mul(@0,sin(@0,@1))", KI_ERR_FORMAT, "'sin' takes 1 argument, got 2", 7);
    compile_bad("size(@0,1,2)", KI_ERR_FORMAT, "'size' takes 1 or 2 arguments, got 3", 0);
    compile_bad("neg()", KI_ERR_FORMAT, "'neg' takes 1 argument, got 0", 0);
    compile_bad("", KI_ERR_FORMAT, "empty expression at column 1", 0);
    compile_bad(" \t\n ", KI_ERR_FORMAT, "empty expression", 0);
    compile_bad("add(@0,$1)", KI_ERR_FORMAT, "unexpected character '$' at column 8", 7);
    compile_bad("add(@0,\x80)", KI_ERR_FORMAT, "unexpected byte 0x80", 7);
    compile_bad("mul(@0,1e5x)", KI_ERR_FORMAT, "unexpected character after a number", 10);
    compile_bad("mul(@0,99999999999999999999)", KI_ERR_FORMAT, "integer literal out of range", 7);
    compile_bad("mul(@0,-foo)", KI_ERR_FORMAT, "expected a number after the sign", 7);
    compile_bad("add([1],2)", KI_ERR_FORMAT, "a list '[...]' may only be the whole expression", 4);
    compile_bad("[[1]]", KI_ERR_FORMAT, "a list '[...]' may only be the whole expression", 1);
    compile_bad("add(size(@0),1)", KI_ERR_UNSUPPORTED, "size(@N) with one argument", 4);
    compile_bad("size(1,2)", KI_ERR_UNSUPPORTED, "size() needs an input", 0);
    compile_bad("size(@0,1.5)", KI_ERR_UNSUPPORTED, "integer dimension", 0);
    /* a bare unary function is read as pnnx reads it (test_expr_eval.c), unless it has no
     * operand left: then the grammar's error stands */
    compile_bad("add(@0,expm1)", KI_ERR_FORMAT,
                "expected '(' after 'expm1', got ')' at column 13: add(@0,expm1)", 12);
    compile_bad("add(add(@0,torch.expm1(@0)),@0)", KI_ERR_FORMAT, "unknown function 'torch.expm1'",
                11);
}

/* Builds a string of n copies of `unit` between head and tail. */
static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * n + tl + 1);
    assert_non_null(s);
    memcpy(s, head, hl);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + hl + i * ul, unit, ul);
    }
    memcpy(s + hl + ul * n, tail, tl + 1);
    return s;
}

static void test_limits(void **state)
{
    (void)state;
    /* 100,000 nested calls fail cleanly at the depth limit (no stack overflow) */
    char *s = repeat("", "neg(", 100000, "@0");
    compile_bad(s, KI_ERR_LIMIT, "nested deeper than 256 levels", 256 * 4);
    free(s);
    s = repeat("", "add(@0,", 100000, "@0");
    compile_bad(s, KI_ERR_LIMIT, "nested deeper than 256", 256 * 7);
    free(s);
    /* exactly at the limit is fine */
    s = repeat("", "neg(", 256, "@0");
    char *t = repeat(s, ")", 256, "");
    ki_expr *e = compile_ok(t);
    assert_int_equal(e->n_code, 257);
    assert_int_equal(e->max_stack, 1);
    ki_expr_destroy(e);
    free(s);
    free(t);
    s = repeat("", "neg(", 257, "@0");
    t = repeat(s, ")", 257, "");
    compile_bad(t, KI_ERR_LIMIT, "deeper", 256 * 4);
    free(s);
    free(t);
    /* a long flat list is fine: no depth, a deep stack */
    s = repeat("[0", ",1", 200000, "]");
    e = compile_ok(s);
    assert_int_equal(e->max_stack, 200001);
    assert_true(e->is_list);
    ki_expr_destroy(e);
    free(s);
    /* a very long literal and a long unknown word */
    s = repeat("mul(@0,0.", "1", 100000, ")");
    e = compile_ok(s);
    ki_expr_destroy(e);
    free(s);
    s = repeat("", "x", 100000, "(@0)");
    compile_bad(s, KI_ERR_FORMAT, "unknown function 'xxxxxxxx", 0);
    free(s);
    /* a long error quotes a window of the text */
    s = repeat("", "add(@0,", 200, "@0 @1");
    ki_error err = { 0 };
    assert_int_equal(ki_expr_compile(s, &e, NULL, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "at column 1403: ..."));
    assert_true(strlen(err.msg) < 300);
    free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokens_exact),  cmocka_unit_test(test_literal_tokens),
        cmocka_unit_test(test_trees_and_rpn), cmocka_unit_test(test_zoo_strings),
        cmocka_unit_test(test_errors),        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests_name("expr_parse", tests, NULL, NULL);
}
