/* test_expr_layer.c - the pnnx.Expression layer: broadcasting against a naive reference, shape-
 * time scalars and lists, in-place runs, thread-count independence, and the error paths. */
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

#include "../../core/layer.h"
#include "../../layers/binop.h"
#include "../../layers/registry.h"

#define MAX_IN 4

typedef struct run_ctx {
    const ki_layer_ops *ops;
    ki_op_desc op;
    ki_param param;
    void *state;
    ki_error err;
} run_ctx;

static ki_status create(run_ctx *c, const char *expr, int n_in)
{
    memset(c, 0, sizeof *c);
    c->ops = ki_registry_find("pnnx.Expression");
    assert_non_null(c->ops);
    c->param.key = "expr";
    c->param.raw = expr;
    c->param.kind = KI_PARAM_STRING;
    c->param.s = expr;
    c->op.type = "pnnx.Expression";
    c->op.name = "e";
    c->op.n_inputs = n_in;
    c->op.n_outputs = 1;
    c->op.params = expr ? &c->param : NULL;
    c->op.n_params = expr ? 1 : 0;
    return c->ops->create(&c->op, &c->state, &c->err);
}

static void destroy(run_ctx *c)
{
    c->ops->destroy(c->state);
}

static ki_shape tshape(int ndim, const int64_t *d)
{
    return ki_shape_make(ndim, d);
}

static ki_shape scalar_shape(double v, bool known)
{
    ki_shape s;
    memset(&s, 0, sizeof s);
    s.kind = KI_KIND_SCALAR;
    s.has_values = known;
    s.values[0] = v;
    return s;
}

/* Runs shape, workspace and forward; out->data must be large enough (checked). */
static ki_status run(run_ctx *c, const ki_tensor *in, int n_in, ki_tensor *out, size_t out_cap,
                     int threads)
{
    ki_shape in_s[MAX_IN];
    for (int i = 0; i < n_in; i++) {
        in_s[i] = in[i].shape;
    }
    ki_status st = c->ops->shape(c->state, in_s, n_in, &out->shape, 1, &c->err);
    if (st != KI_OK) {
        return st;
    }
    int64_t numel = 1;
    assert_true(ki_shape_numel(&out->shape, &numel));
    assert_true((size_t)numel <= out_cap);
    size_t ws = c->ops->workspace(c->state, in_s, n_in, &out->shape, 1, threads);
    size_t per = (ws + 63) / 64 * 64;
    void *buf = per ? aligned_alloc(64, per * (size_t)threads) : NULL;
    ki_exec ex = { threads, buf, per, NULL };
    st = c->ops->forward(c->state, in, n_in, out, 1, &ex);
    free(buf);
    return st;
}

/* Offset of out-index idx (of rank nd) in a broadcast input of shape s. */
static int64_t bcast_offset(const ki_shape *s, const int64_t *idx, int nd)
{
    int64_t off = 0;
    for (int k = 0; k < s->ndim; k++) {
        int64_t i = s->d[k] == 1 ? 0 : idx[nd - s->ndim + k];
        off = off * s->d[k] + i;
    }
    return off;
}

/* The reference for add(add(mul(@0,@1),@2),mul(@0,0.5)) by explicit index arithmetic. */
static void reference(const ki_tensor *in, const ki_shape *out, float *ref)
{
    int64_t n = ki_shape_count(out), idx[KI_MAX_DIMS];
    for (int64_t t = 0; t < n; t++) {
        int64_t r = t;
        for (int k = out->ndim - 1; k >= 0; k--) {
            idx[k] = r % out->d[k];
            r /= out->d[k];
        }
        float v[3];
        for (int i = 0; i < 3; i++) {
            bool scalar = in[i].shape.kind == KI_KIND_SCALAR;
            v[i] = in[i].data[scalar ? 0 : bcast_offset(&in[i].shape, idx, out->ndim)];
        }
        ref[t] = v[0] * v[1] + v[2] + v[0] * 0.5f;
    }
}

static float *random_data(int64_t n, unsigned seed)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (float)((seed >> 8) % 2001) / 250.0f - 4.0f;
    }
    return p;
}

typedef struct bcase {
    int nd[3];
    int64_t d[3][KI_MAX_DIMS]; /* nd -1: a SCALAR input */
    int out_nd;
    int64_t out[KI_MAX_DIMS];
} bcase;

static const bcase bcases[] = {
    /* (N,C,H,W) with (N,C,1,1) and (N,1,H,W), batch 2: expr_residual3 */
    { { 4, 4, 4 }, { { 2, 16, 5, 6 }, { 2, 16, 1, 1 }, { 2, 1, 5, 6 } }, 4, { 2, 16, 5, 6 } },
    /* (1,1,H,W) and (C,1,1) */
    { { 4, 4, 3 }, { { 2, 3, 4, 5 }, { 1, 1, 4, 5 }, { 3, 1, 1 } }, 4, { 2, 3, 4, 5 } },
    /* the attribute case: (1,4,1,6) and (4,5,6) */
    { { 4, 4, 3 }, { { 1, 4, 5, 6 }, { 1, 4, 1, 6 }, { 4, 5, 6 } }, 4, { 1, 4, 5, 6 } },
    /* a scalar and a (1,) tensor */
    { { 3, -1, 1 }, { { 3, 4, 5 }, { 0 }, { 1 } }, 3, { 3, 4, 5 } },
    /* the output larger than every input; a rank-0 tensor */
    { { 2, 2, 0 }, { { 3, 1 }, { 1, 7 }, { 0 } }, 2, { 3, 7 } },
    /* six dims, broadcast on alternating axes */
    { { 6, 6, 1 }, { { 2, 1, 3, 1, 2, 3 }, { 1, 2, 1, 4, 1, 3 }, { 3 } }, 6, { 2, 2, 3, 4, 2, 3 } },
    /* long rows, so several chunks per row and many work items */
    { { 4, 3, 4 }, { { 2, 3, 40, 70 }, { 3, 1, 1 }, { 2, 1, 40, 70 } }, 4, { 2, 3, 40, 70 } },
    /* per-channel scalings large enough for add / mul to split their rows over two threads */
    { { 4, 4, 3 }, { { 2, 16, 40, 70 }, { 2, 16, 1, 1 }, { 16, 1, 1 } }, 4, { 2, 16, 40, 70 } },
    /* a 1-element everything */
    { { 2, -1, 1 }, { { 1, 1 }, { 0 }, { 1 } }, 2, { 1, 1 } },
    /* an empty tensor */
    { { 3, 1, -1 }, { { 2, 0, 3 }, { 3 }, { 0 } }, 3, { 2, 0, 3 } },
};

static void run_bcase(const bcase *b, int threads, float **result, int64_t *n_out)
{
    run_ctx c;
    ki_tensor in[3], out;
    float scal[3] = { 0 };
    assert_int_equal(create(&c, "add(add(mul(@0,@1),@2),mul(@0,0.5))", 3), KI_OK);
    for (int i = 0; i < 3; i++) {
        if (b->nd[i] < 0) {
            scal[i] = 1.75f;
            in[i].shape = scalar_shape(scal[i], true);
            in[i].data = &scal[i];
        } else {
            in[i].shape = tshape(b->nd[i], b->d[i]);
            in[i].data = random_data(ki_shape_count(&in[i].shape), 17u + (unsigned)i);
        }
    }
    ki_shape want = tshape(b->out_nd, b->out);
    int64_t n = ki_shape_count(&want);
    out.data = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (run(&c, in, 3, &out, (size_t)n, threads) != KI_OK) {
        fail_msg("%s", c.err.msg);
    }
    assert_int_equal(out.shape.kind, KI_KIND_TENSOR);
    assert_true(ki_shape_equal(&out.shape, &want));
    float *ref = malloc((size_t)(n ? n : 1) * sizeof(float));
    reference(in, &want, ref);
    for (int64_t t = 0; t < n; t++) {
        if (fabsf(out.data[t] - ref[t]) > 1e-5f * (1 + fabsf(ref[t]))) {
            fail_msg("case with out rank %d, element %lld: %g vs %g", b->out_nd, (long long)t,
                     out.data[t], ref[t]);
        }
    }
    free(ref);
    for (int i = 0; i < 3; i++) {
        if (b->nd[i] >= 0) {
            free((void *)in[i].data);
        }
    }
    destroy(&c);
    *result = out.data;
    *n_out = n;
}

static void test_broadcast(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof bcases / sizeof bcases[0]; k++) {
        float *one, *two;
        int64_t n;
        run_bcase(&bcases[k], 1, &one, &n);
        run_bcase(&bcases[k], 2, &two, &n);
        assert_true(n == 0 || memcmp(one, two, (size_t)n * sizeof(float)) == 0);
        free(one);
        free(two);
    }
}

/* Runs expr on inputs 0 and 1 of case b into out (capacity cap), in place when inplace and
 * input 0 has the output's size. */
static void run_pair(const bcase *b, const char *expr, int threads, bool inplace, float *out,
                     int64_t cap, int64_t *n_out)
{
    run_ctx c;
    ki_tensor in[2], o;
    static float scal = 1.75f;
    for (int i = 0; i < 2; i++) {
        in[i].shape = b->nd[i] < 0 ? scalar_shape(scal, true) : tshape(b->nd[i], b->d[i]);
        in[i].data = b->nd[i] < 0 ? &scal : random_data(ki_shape_count(&in[i].shape), 3u + i);
    }
    assert_int_equal(create(&c, expr, 2), KI_OK);
    o.data = out;
    if (inplace && b->nd[0] >= 0) {
        ki_shape sh[2] = { in[0].shape, in[1].shape };
        assert_int_equal(c.ops->shape(c.state, sh, 2, &o.shape, 1, &c.err), KI_OK);
        o.data =
            ki_shape_count(&o.shape) == ki_shape_count(&in[0].shape) ? (float *)in[0].data : out;
    }
    assert_int_equal(run(&c, in, 2, &o, (size_t)cap, threads), KI_OK);
    int64_t n = ki_shape_count(&o.shape);
    memmove(out, o.data, (size_t)n * sizeof(float));
    *n_out = n;
    for (int i = 0; i < 2; i++) {
        if (b->nd[i] >= 0) {
            free((void *)in[i].data);
        }
    }
    destroy(&c);
}

/* add(@0,@1) and mul(@0,@1) take a direct loop: equal, bit for bit, to the general evaluator
 * running the same operation with the operands swapped, broadcast, in place and threaded. */
static void test_binop_direct(void **state)
{
    (void)state;
    static const char *const fast[2] = { "add(@0,@1)", "mul(@0,@1)" };
    static const char *const slow[2] = { "add(@1,@0)", "mul(@1,@0)" };
    enum { CAP = 2 * 16 * 40 * 70 };
    float *a = malloc(CAP * sizeof(float)), *b = malloc(CAP * sizeof(float));
    for (size_t k = 0; k < sizeof bcases / sizeof bcases[0]; k++) {
        for (int f = 0; f < 4; f++) {
            int64_t n, m;
            run_pair(&bcases[k], fast[f % 2], 1 + f / 2, f / 2 == 1, a, CAP, &n);
            run_pair(&bcases[k], slow[f % 2], 1, false, b, CAP, &m);
            assert_int_equal(n, m);
            if (n > 0 && memcmp(a, b, (size_t)n * sizeof(float)) != 0) {
                fail_msg("case %zu %s: differs from the evaluator", k, fast[f % 2]);
            }
        }
    }
    free(a), free(b);
}

/* The add / mul loop of the CPU's level against the plain one, bit for bit: every pair of steps
 * (a run or one repeated float), lengths around the vector width, in place on either run. */
static void test_binop_kernels(void **state)
{
    (void)state;
    const ki_binop_fn f = ki_binop_for(ki_cpu_isa());
    float *a = random_data(40, 11), *b = random_data(40, 12), got[40], want[40], ia[40], ib[40];
    a[3] = NAN, b[5] = INFINITY, a[7] = -0.0f;
    for (int op = 0; op < 2; op++) {
        const char o = op ? '*' : '+';
        for (int st = 0; st < 4; st++) {
            const int sa = st & 1, sb = st >> 1;
            for (size_t n = 0; n <= 40; n++) {
                ki_binop_ref(o, a, sa, b, sb, n, want);
                f(o, a, sa, b, sb, n, got);
                assert_memory_equal(got, want, n * sizeof(float));
                memcpy(ia, a, sizeof ia), memcpy(ib, b, sizeof ib);
                if (sa) { /* in place on a's run, then on b's */
                    f(o, ia, sa, b, sb, n, ia);
                    assert_memory_equal(ia, want, n * sizeof(float));
                }
                if (sb) {
                    f(o, a, sa, ib, sb, n, ib);
                    assert_memory_equal(ib, want, n * sizeof(float));
                }
            }
        }
    }
    free(a), free(b);
}

/* Output 0 may share input 0's buffer. */
static void test_inplace(void **state)
{
    (void)state;
    run_ctx c;
    const int64_t d[4] = { 2, 3, 4, 5 }, d1[3] = { 3, 1, 1 };
    float *x = random_data(120, 5), *y = random_data(3, 6), *copy = malloc(120 * sizeof(float));
    memcpy(copy, x, 120 * sizeof(float));
    assert_int_equal(create(&c, "sub(1.0,mul(@0,@1))", 2), KI_OK);
    assert_true(c.ops->flags & KI_LAYER_INPLACE);
    ki_tensor in[2] = { { tshape(4, d), x }, { tshape(3, d1), y } };
    ki_tensor out = { tshape(4, d), x };
    assert_int_equal(run(&c, in, 2, &out, 120, 2), KI_OK);
    for (int i = 0; i < 120; i++) {
        assert_true(x[i] == 1.0f - copy[i] * y[(i / 20) % 3]);
    }
    destroy(&c);
    free(x);
    free(y);
    free(copy);
}

/* Runs expr over the given input shapes (tensor data is not read for size()); checks the kind,
 * the values at shape time (when known) and the floats forward() writes. */
static void expect_values(const char *expr, const ki_shape *shapes, int n_in, ki_kind kind,
                          bool known, const double *want, int n)
{
    run_ctx c;
    ki_tensor in[MAX_IN], out;
    float buf[MAX_IN][64] = { { 0 } }, res[64];
    assert_int_equal(create(&c, expr, n_in), KI_OK);
    for (int i = 0; i < n_in; i++) {
        in[i].shape = shapes[i];
        in[i].data = buf[i];
        buf[i][0] = (float)shapes[i].values[0];
    }
    out.data = res;
    if (run(&c, in, n_in, &out, 64, 1) != KI_OK) {
        fail_msg("%s: %s", expr, c.err.msg);
    }
    assert_int_equal(out.shape.kind, kind);
    assert_int_equal(out.shape.has_values, known);
    assert_int_equal(out.shape.ndim, kind == KI_KIND_LIST ? 1 : 0);
    if (kind == KI_KIND_LIST) {
        assert_int_equal(out.shape.d[0], n);
    }
    for (int i = 0; i < n; i++) {
        if (known && out.shape.values[i] != want[i]) {
            fail_msg("%s: value %d is %g, want %g", expr, i, out.shape.values[i], want[i]);
        }
        if (res[i] != (float)want[i]) {
            fail_msg("%s: forward value %d is %g, want %g", expr, i, res[i], want[i]);
        }
    }
    destroy(&c);
}

static void test_shape_values(void **state)
{
    (void)state;
    const int64_t d[4] = { 2, 255, 20, 40 };
    ki_shape t = tshape(4, d);
    ki_shape two[2] = { scalar_shape(3, true), scalar_shape(40, true) };
    expect_values("[size(@0,0),3,85,size(@0,2),40]", &t, 1, KI_KIND_LIST, true,
                  (const double[]){ 2, 3, 85, 20, 40 }, 5);
    expect_values("[size(@0,0),mul(120,size(@0,-2)),85]", &t, 1, KI_KIND_LIST, true,
                  (const double[]){ 2, 2400, 85 }, 3);
    expect_values("[size(@0,0),3,int(mul(size(@0,2),1.5)),int(mul(size(@0,3),1.5))]", &t, 1,
                  KI_KIND_LIST, true, (const double[]){ 2, 3, 30, 60 }, 4);
    expect_values("size(@0,2)", &t, 1, KI_KIND_SCALAR, true, (const double[]){ 20 }, 1);
    expect_values("size(@0)", &t, 1, KI_KIND_LIST, true, (const double[]){ 2, 255, 20, 40 }, 4);
    expect_values("[@0,@1]", two, 2, KI_KIND_LIST, true, (const double[]){ 3, 40 }, 2);
    expect_values("div(@0,2)", two, 1, KI_KIND_SCALAR, true, (const double[]){ 1.5 }, 1);
    expect_values("[1,3,-1]", NULL, 0, KI_KIND_LIST, true, (const double[]){ 1, 3, -1 }, 3);
    expect_values("[]", NULL, 0, KI_KIND_LIST, true, NULL, 0);
    /* more values than ki_shape holds: computed by forward */
    expect_values("[1,2,3,4,5,6,7,8,9,size(@0,1)]", &t, 1, KI_KIND_LIST, false,
                  (const double[]){ 1, 2, 3, 4, 5, 6, 7, 8, 9, 255 }, 10);
    /* a scalar input whose value is known only at run time */
    ki_shape unknown = scalar_shape(7, false);
    expect_values("mul(@0,2)", &unknown, 1, KI_KIND_SCALAR, false, (const double[]){ 14 }, 1);
    /* meshgrid's indexing="ij" */
    run_ctx c;
    ki_shape out;
    assert_int_equal(create(&c, "ij", 0), KI_OK);
    assert_int_equal(c.ops->shape(c.state, NULL, 0, &out, 1, &c.err), KI_OK);
    assert_int_equal(out.kind, KI_KIND_OPAQUE);
    assert_int_equal(out.ndim, 0);
    destroy(&c);
}

static void expect_create_fail(const char *expr, int n_in, ki_status code, const char *needle)
{
    run_ctx c;
    ki_status st = create(&c, expr, n_in);
    if (st != code || !strstr(c.err.msg, needle)) {
        fail_msg("%s: got %d '%s', want %d with '%s'", expr ? expr : "(none)", st, c.err.msg, code,
                 needle);
    }
}

static void expect_shape_fail(const char *expr, const ki_shape *in, int n_in, ki_status code,
                              const char *needle)
{
    run_ctx c;
    ki_shape out;
    assert_int_equal(create(&c, expr, n_in), KI_OK);
    ki_status st = c.ops->shape(c.state, in, n_in, &out, 1, &c.err);
    if (st != code || !strstr(c.err.msg, needle)) {
        fail_msg("%s: got %d '%s', want %d with '%s'", expr, st, c.err.msg, code, needle);
    }
    destroy(&c);
}

static void test_errors(void **state)
{
    (void)state;
    expect_create_fail("add(@0,@2)", 2, KI_ERR_FORMAT,
                       "expr uses @2 but the operator has 2 inputs: add(@0,@2)");
    expect_create_fail("add(@0,expm1)", 2, KI_ERR_FORMAT,
                       "bad expr: expected '(' after 'expm1', got ')' at column 13: "
                       "add(@0,expm1)");
    expect_create_fail("add(@0,", 1, KI_ERR_FORMAT, "bad expr: ");
    expect_create_fail(NULL, 1, KI_ERR_FORMAT, "missing parameter expr");
    expect_create_fail("add(@0,None)", 1, KI_ERR_UNSUPPORTED, "None");

    const int64_t a[4] = { 1, 3, 4, 5 }, b[4] = { 1, 2, 4, 5 }, l[1] = { 2 };
    ki_shape ab[2] = { tshape(4, a), tshape(4, b) };
    expect_shape_fail("add(@0,@1)", ab, 2, KI_ERR_SHAPE,
                      "input @1: dimension 1 is 2, which does not broadcast with 3: add(@0,@1)");
    expect_shape_fail("mul(@0,size(@1,4))", ab, 2, KI_ERR_SHAPE, "size(@1,4) of a 4-d input");
    expect_shape_fail("[@0,@1]", ab, 2, KI_ERR_UNSUPPORTED, "a list of tensors");
    ki_shape lst[2] = { tshape(1, l), scalar_shape(1, true) };
    lst[0].kind = KI_KIND_LIST;
    expect_shape_fail("add(@0,@1)", lst, 2, KI_ERR_UNSUPPORTED, "input @0 is a list");
    expect_shape_fail("floor_divide(size(@0,0),0)", ab, 1, KI_ERR_LIMIT, "division by zero");
    ki_shape unknown = tshape(4, a);
    unknown.d[2] = -1;
    expect_shape_fail("neg(@0)", &unknown, 1, KI_ERR_SHAPE, "unknown dimension");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast),    cmocka_unit_test(test_inplace),
        cmocka_unit_test(test_binop_direct), cmocka_unit_test(test_binop_kernels),
        cmocka_unit_test(test_shape_values), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests_name("expr_layer", tests, NULL, NULL);
}
