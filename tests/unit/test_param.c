/* test_param.c - .param parsing: every value kind, shapes, real files, malformed input; and
 * ki_file_read's size bound, which the loaders read through. */
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

#include "../../core/graph.h"
#include "../../core/io.h"

static ki_param value(ki_arena *a, const char *text)
{
    ki_param p;
    ki_error err;
    memset(&p, 0, sizeof p);
    assert_int_equal(ki_param_value_parse(a, text, strlen(text), &p, &err), KI_OK);
    assert_string_equal(p.raw, text);
    return p;
}

static void test_value_scalars(void **state)
{
    (void)state;
    ki_arena *a = ki_arena_create();
    assert_int_equal(value(a, "None").kind, KI_PARAM_NONE);
    assert_int_equal(value(a, "").kind, KI_PARAM_NONE);
    assert_int_equal(value(a, "()").kind, KI_PARAM_NONE);
    assert_int_equal(value(a, "[]").kind, KI_PARAM_NONE);
    ki_param p = value(a, "True");
    assert_int_equal(p.kind, KI_PARAM_BOOL);
    assert_int_equal(p.i, 1);
    assert_int_equal(value(a, "False").i, 0);
    p = value(a, "-1");
    assert_int_equal(p.kind, KI_PARAM_INT);
    assert_int_equal(p.i, -1);
    assert_int_equal(value(a, "2147483647").i, 2147483647);
    assert_int_equal(value(a, "-2147483648").i, -2147483648LL);
    /* every float spelling of both writer generations */
    const char *floats[] = { "1.000000e-05", "1.000000e-5", "0.0",          "-0.5",
                             "123456.703",   "3.14159274",  "1.67772160e7", "2.000000e+00",
                             "0.500000",     "1e-3" };
    const double want[] = { 1e-5,       1e-5,       0.0, -0.5, 123456.703,
                            3.14159274, 16777216.0, 2.0, 0.5,  1e-3 };
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        p = value(a, floats[i]);
        assert_int_equal(p.kind, KI_PARAM_FLOAT);
        assert_float_equal(p.f, (double)(float)want[i], fabs(want[i]) * 1e-7);
    }
    /* strings: words, non-finite spellings, a '%', malformed numbers */
    const char *strings[] = { "bilinear", "zeros", "torch.float", "ij,jk->ik", "inf",   "-inf",
                              "nan.0",    "nan",   "-nan",        "%x",        "1.2.3", "same" };
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++) {
        assert_int_equal(value(a, strings[i]).kind, KI_PARAM_STRING);
    }
    p = value(a, "1.000000e+00+-2.000000e+00j");
    assert_int_equal(p.kind, KI_PARAM_COMPLEX);
    assert_float_equal(p.f, 1.0, 1e-12);
    assert_float_equal(p.fi, -2.0, 1e-12);
    p = value(a, "2.5-3.0j");
    assert_int_equal(p.kind, KI_PARAM_COMPLEX);
    assert_float_equal(p.fi, -3.0, 1e-12);
    ki_arena_destroy(a);
}

static void test_value_lists(void **state)
{
    (void)state;
    ki_arena *a = ki_arena_create();
    ki_param p = value(a, "(1,-1)");
    assert_int_equal(p.kind, KI_PARAM_INTS);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.ints[1], -1);
    assert_float_equal(p.floats[1], -1.0, 0);
    p = value(a, "[3,3]");
    assert_int_equal(p.kind, KI_PARAM_INTS);
    p = value(a, "(2.0,2.0)");
    assert_int_equal(p.kind, KI_PARAM_FLOATS);
    assert_float_equal(p.floats[0], 2.0, 0);
    p = value(a, "(2.000000e+00,2)"); /* mixed: numbers with one float */
    assert_int_equal(p.kind, KI_PARAM_FLOATS);
    assert_float_equal(p.floats[1], 2.0, 0);
    p = value(a, "(nearest,bilinear)");
    assert_int_equal(p.kind, KI_PARAM_STRINGS);
    assert_string_equal(p.strs[1], "bilinear");
    p = value(a, "(1,foo)");
    assert_int_equal(p.kind, KI_PARAM_STRINGS);
    p = value(a, "(1.0+2.0j,3.0-1.0j)");
    assert_int_equal(p.kind, KI_PARAM_COMPLEXES);
    assert_float_equal(p.floats[3], -1.0, 0);
    p = value(a, "(7)");
    assert_int_equal(p.kind, KI_PARAM_INTS);
    assert_int_equal(p.n, 1);
    ki_arena_destroy(a);
}

static void test_shapes(void **state)
{
    (void)state;
    ki_shape s;
    ki_dtype t;
    ki_error err;
    assert_int_equal(ki_param_shape_parse("(1,3,?,?)f32", 12, true, &s, &t, &err), KI_OK);
    assert_int_equal(s.ndim, 4);
    assert_int_equal(s.d[2], -1);
    assert_int_equal(t, KI_DT_F32);
    assert_int_equal(ki_param_shape_parse("(64,3,7,7)f16", 13, false, &s, &t, &err), KI_OK);
    assert_int_equal(t, KI_DT_F16);
    assert_int_equal(ki_param_shape_parse("()f32", 5, false, &s, &t, &err), KI_OK);
    assert_int_equal(s.ndim, 0);
    assert_int_equal(ki_param_shape_parse("(1,?)f32", 8, false, &s, &t, &err), KI_ERR_FORMAT);
    assert_int_equal(ki_param_shape_parse("(1,2)f31", 8, true, &s, &t, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "f31"));
    assert_int_equal(ki_param_shape_parse("(1,2,3,4,5,6,7)f32", 18, true, &s, &t, &err),
                     KI_ERR_LIMIT);
    assert_int_equal(ki_param_shape_parse("(-1)f32", 7, true, &s, &t, &err), KI_ERR_FORMAT);
    assert_int_equal(ki_param_shape_parse("(99999999999)f32", 16, true, &s, &t, &err),
                     KI_ERR_LIMIT);
    assert_int_equal(ki_param_shape_parse("1,2f32", 6, true, &s, &t, &err), KI_ERR_FORMAT);
}

static const char *seed =
    "7767517\n"
    "4 3\n"
    "pnnx.Input               in0                      0 1 0 #0=(1,3,4,4)f32\n"
    "nn.Conv2d                conv                     1 1 0 1 bias=True kernel_size=(3,3) "
    "padding=(1,1) @bias=(2)f32 @weight=(2,3,3,3)f32 $input=0 #0=(1,3,4,4)f32 #1=(1,2,4,4)f32\n"
    "pnnx.Expression          ex                       2 1 1 1 2 expr=add(@0,@1) $a=1 $b=1\n"
    "pnnx.Output              out0                     1 0 2\n";

static ki_status parse(const char *text, ki_graph **g, ki_error *err)
{
    ki_status st = ki_param_parse("m.param", text, strlen(text), g, err);
    if (st == KI_OK) {
        st = ki_graph_build(*g, err);
        if (st != KI_OK) {
            ki_graph_destroy(*g);
            *g = NULL;
        }
    }
    return st;
}

static void test_seed_file(void **state)
{
    (void)state;
    ki_graph *g;
    ki_error err;
    assert_int_equal(parse(seed, &g, &err), KI_OK);
    assert_int_equal(g->n_nodes, 4);
    assert_int_equal(g->n_operands, 3);
    const ki_op_desc *c = &g->nodes[1].desc;
    assert_string_equal(c->type, "nn.Conv2d");
    assert_int_equal(c->n_params, 3);
    assert_int_equal(c->n_attrs, 2);
    assert_string_equal(c->attrs[1].key, "weight");
    assert_int_equal(c->attrs[1].numel, 54);
    assert_string_equal(c->input_keys[0], "input");
    assert_int_equal(c->output_decl[0].d[1], 2);
    assert_int_equal(c->line, 4);
    /* the same operand twice: each $ binds the first still-unnamed slot */
    const ki_op_desc *e = &g->nodes[2].desc;
    assert_string_equal(e->input_keys[0], "a");
    assert_string_equal(e->input_keys[1], "b");
    assert_string_equal(ki_op_param(e, "expr")->raw, "add(@0,@1)");
    assert_int_equal(g->n_inputs, 1);
    assert_int_equal(g->n_outputs, 1);
    assert_int_equal(ki_graph_build(g, &err), KI_OK); /* building twice is harmless */
    ki_graph_destroy(g);
}

static void test_crlf_tabs_blank(void **state)
{
    (void)state;
    const char *text =
        "7767517\r\n2 1\r\n\r\npnnx.Input\tin0 0 1 x\r\npnnx.Output  out0   1 0  x \r\n";
    ki_graph *g;
    ki_error err;
    assert_int_equal(parse(text, &g, &err), KI_OK);
    assert_string_equal(g->nodes[1].desc.input_names[0], "x");
    ki_graph_destroy(g);
}

/* Each malformed file fails with the right code and a message that names file and line. */
static void expect_fail(const char *text, ki_status code, const char *needle)
{
    ki_graph *g = NULL;
    ki_error err;
    ki_status st = parse(text, &g, &err);
    if (st != code || !strstr(err.msg, needle)) {
        fail_msg("got %d '%s', want %d containing '%s'", st, st ? err.msg : "", code, needle);
    }
    assert_null(g);
}

static void test_malformed(void **state)
{
    (void)state;
    expect_fail("", KI_ERR_FORMAT, "m.param:1: bad magic");
    expect_fail("7767518\n1 1\n", KI_ERR_FORMAT, "m.param:1: bad magic");
    expect_fail("7767517\n", KI_ERR_FORMAT, "m.param:2:");
    expect_fail("7767517\nx 1\n", KI_ERR_FORMAT, "m.param:2:");
    expect_fail("7767517\n3 1\npnnx.Input in0 0 1 x\n", KI_ERR_FORMAT, "only 1 lines follow");
    expect_fail("7767517\n2 1\npnnx.Input in0 0 1 x\n\n", KI_ERR_FORMAT, "ends after 1 of 2");
    expect_fail("7767517\n1000000000 1\n", KI_ERR_FORMAT, "m.param:2:");
    expect_fail("7767517\n2 5\npnnx.Input in0 0 1 x\npnnx.Output out 1 0 x\n", KI_ERR_FORMAT,
                "declares 5 operands");
    expect_fail("7767517\n1 1\npnnx.Input in0\n", KI_ERR_FORMAT, "m.param:3: expected");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 3 x\n", KI_ERR_FORMAT,
                "m.param:3: 0 inputs and 3 outputs");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 -1 x\n", KI_ERR_FORMAT, "bad input/output count");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x foo\n", KI_ERR_FORMAT, "has no '='");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x =3\n", KI_ERR_FORMAT, "empty key");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x a=1 a=2\n", KI_ERR_FORMAT,
                "duplicate parameter 'a'");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x @w=(1)f32 @w=(2)f32\n", KI_ERR_FORMAT,
                "duplicate attribute 'w'");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x #y=(1)f32\n", KI_ERR_FORMAT,
                "annotates an operand");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x #x=(1,a)f32\n", KI_ERR_FORMAT, "bad dimension");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x $in=y\n", KI_ERR_FORMAT, "not an input");
    expect_fail("7767517\n1 1\npnnx.Input in0 0 1 x @w=(4294967296,4294967296,4294967296)f32\n",
                KI_ERR_LIMIT, "m.param:3:");
    /* graph-level errors */
    expect_fail("7767517\n2 2\npnnx.Input in0 0 1 x\npnnx.Output out 1 0 y\n", KI_ERR_FORMAT,
                "reads operand 'y', which no operator produces");
    /* found by fuzz-model: an output's own output read by a view left its buffer unplanned */
    expect_fail("7767517\n4 3\npnnx.Input in0 0 1 0\npnnx.Output out0 1 1 0 1\n"
                "nn.Identity r 1 1 1 2\npnnx.Output out1 1 0 2\n",
                KI_ERR_FORMAT, "m.param:4: op 'out0' (pnnx.Output) has 1 output; it must have none");
    expect_fail("7767517\n2 2\npnnx.Input in0 1 1 a x\npnnx.Output out 1 0 x\n", KI_ERR_FORMAT,
                "op 'in0' (pnnx.Input) has 1 input; it must have none");
    expect_fail("7767517\n3 1\npnnx.Input in0 0 1 x\nnn.ReLU r 0 1 x\npnnx.Output o 1 0 x\n",
                KI_ERR_FORMAT, "operand 'x' is produced twice");
    expect_fail("7767517\n3 2\npnnx.Input a 0 1 x\nnn.ReLU a 1 1 x y\npnnx.Output o 1 0 y\n",
                KI_ERR_FORMAT, "m.param:4: duplicate operator name 'a' (first on line 3)");
    expect_fail("7767517\n4 3\npnnx.Input i 0 1 x\nnn.ReLU r1 1 1 z y\nnn.ReLU r2 1 1 y z\n"
                "pnnx.Output o 1 0 y\n",
                KI_ERR_FORMAT, "cycle through op 'r");
    expect_fail("7767517\n1 1\npnnx.Input i 0 1 x\n", KI_ERR_FORMAT, "no pnnx.Output");
}

/* Operators out of file order are sorted; ties keep file order. */
static void test_unsorted_file(void **state)
{
    (void)state;
    const char *text = "7767517\n5 4\n"
                       "pnnx.Output o 1 0 c\n"
                       "nn.ReLU r2 1 1 b c\n"
                       "nn.ReLU r1 1 1 a b\n"
                       "nn.Identity id 1 1 a d\n"
                       "pnnx.Input i 0 1 a\n";
    ki_graph *g;
    ki_error err;
    assert_int_equal(parse(text, &g, &err), KI_OK);
    const char *want[] = { "i", "r1", "r2", "o", "id" };
    /* i first; then r1 (line 5) before id (line 6); r2 after r1; o after r2 */
    int pos[5];
    for (int k = 0; k < 5; k++) {
        for (int j = 0; j < 5; j++) {
            if (strcmp(g->nodes[g->order[j]].desc.name, want[k]) == 0) {
                pos[k] = j;
            }
        }
    }
    assert_true(pos[0] == 0 && pos[1] < pos[2] && pos[2] < pos[3]);
    assert_true(pos[1] < pos[4]);
    ki_graph_destroy(g);
}

/* ki_file_read takes a file of exactly max bytes and refuses one byte more (KI_ERR_LIMIT), also
 * below its first 64 KiB read, where a 100-byte file under a 64-byte bound used to get through. */
static void test_file_read_bound(void **unused)
{
    (void)unused;
    char path[] = "/tmp/kinfer_io_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    for (int i = 0; i < 100; i++) {
        fputc(i, f);
    }
    fclose(f);
    static const size_t maxes[4] = { 64, 99, 100, 1 << 20 };
    for (int i = 0; i < 4; i++) {
        unsigned char *buf = NULL;
        size_t len = 0;
        ki_error err = { 0 };
        ki_status st = ki_file_read(path, maxes[i], &buf, &len, &err);
        if (maxes[i] < 100) {
            assert_int_equal(st, KI_ERR_LIMIT);
            assert_non_null(strstr(err.msg, "larger than"));
        } else {
            assert_int_equal(st, KI_OK);
            assert_int_equal(len, 100);
            assert_int_equal(buf[99], 99);
            free(buf);
        }
    }
    remove(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_scalars),   cmocka_unit_test(test_value_lists),
        cmocka_unit_test(test_shapes),          cmocka_unit_test(test_seed_file),
        cmocka_unit_test(test_crlf_tabs_blank), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_unsorted_file),   cmocka_unit_test(test_file_read_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
