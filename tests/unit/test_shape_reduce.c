/* test_shape_reduce.c - reductions (sum, mean, prod, amax, amin, max, min), padding (F.pad and
 * the nn pad modules) and pnnx.Attribute, against hand-computed results on iota tensors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../layers/registry.h"
#include "shape_test_util.h"

/* ---- reductions on x[i][j][k] = 12i + 4j + k, shape (2,3,4) ---- */

static void test_sum_mean(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 2, 3, 4, 0) }, out[1];
    (void)state;
    op_init(&b, "torch.sum", 1, 1);
    p_ints(&b, "dim", 1, (int64_t[]){ 1 });
    p_bool(&b, "keepdim", false);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 4 });
    expect_vals(g_out[0], (float[]){ 12, 15, 18, 21, 48, 51, 54, 57 }, 8);
    b.op.n_params = 0; /* no dim: everything, 0-d result */
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    assert_int_equal(out[0].ndim, 0);
    expect_vals(g_out[0], (float[]){ 276 }, 1);

    op_init(&b, "torch.mean", 1, 1);
    p_ints(&b, "dim", 2, (int64_t[]){ -1, 0 });
    p_bool(&b, "keepdim", true);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 1, 3, 1 });
    expect_vals(g_out[0], (float[]){ 7.5f, 11.5f, 15.5f }, 3);
    b.ints[0][1] = 2; /* dims (-1, 2) name the same dim */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
    b.ints[0][1] = 3;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);

    /* found by fuzz-model: folds of no elements read the input's first element, past an empty
     * input; torch.sum of none is 0, torch.mean NaN, torch.prod 1 */
    in[0] = shp(3, 2, 0, 4, 0);
    op_init(&b, "torch.sum", 1, 1);
    p_ints(&b, "dim", 1, (int64_t[]){ 1 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 4 });
    expect_vals(g_out[0], (float[]){ 0, 0, 0, 0, 0, 0, 0, 0 }, 8);
    op_init(&b, "torch.prod", 1, 1);
    p_int(&b, "dim", 1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 1, 1, 1, 1, 1, 1, 1, 1 }, 8);
    op_init(&b, "torch.mean", 1, 1);
    p_ints(&b, "dim", 1, (int64_t[]){ 1 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    for (int i = 0; i < 8; i++) {
        assert_true(isnan(g_out[0][i]));
    }
}

static void test_prod_amax_amin(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 3, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "torch.prod", 1, 1);
    p_int(&b, "dim", 1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 0, 60 }, 2);

    in[0] = shp(3, 2, 3, 4, 0);
    op_init(&b, "torch.amax", 1, 1);
    p_ints(&b, "dim", 2, (int64_t[]){ 0, 2 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 1, (int64_t[]){ 3 });
    expect_vals(g_out[0], (float[]){ 15, 19, 23 }, 3);

    op_init(&b, "torch.amin", 1, 1);
    p_int(&b, "dim", -2);
    p_bool(&b, "keepdim", true);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 2, 1, 4 });
    expect_vals(g_out[0], (float[]){ 0, 1, 2, 3, 12, 13, 14, 15 }, 8);
    in[0] = shp(3, 2, 0, 4, 0); /* no elements to take the minimum of */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

static void test_max_min_indices(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 3, 0, 0) }, out[2];
    (void)state;
    op_init(&b, "torch.max", 1, 2);
    p_int(&b, "dim", 1);
    p_bool(&b, "keepdim", false);
    const float x[6] = { 1, 5, 5, NAN, 2, 0 };
    memcpy(g_in[0], x, sizeof x);
    g_keep_input = true;
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[1], 1, (int64_t[]){ 2 });
    assert_true(g_out[0][0] == 5 && isnan(g_out[0][1]));
    expect_vals(g_out[1], (float[]){ 1, 0 }, 2); /* first maximum; NaN wins */

    op_init(&b, "torch.min", 1, 2);
    p_int(&b, "dim", 0);
    p_bool(&b, "keepdim", true);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 1, 3 });
    assert_true(isnan(g_out[0][0]));
    expect_vals(g_out[0] + 1, (float[]){ 2, 0 }, 2);
    expect_vals(g_out[1], (float[]){ 1, 1, 1 }, 3);
    g_keep_input = false;

    op_init(&b, "torch.max", 1, 1); /* no dim: one 0-d output */
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    assert_int_equal(out[0].ndim, 0);
    expect_vals(g_out[0], (float[]){ 5 }, 1);
    b.op.n_outputs = 2;
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
    op_init(&b, "torch.max", 1, 1);
    p_ints(&b, "dim", 2, (int64_t[]){ 0, 1 });
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

/* ---- padding on x = 0, 1, 2, ... ---- */

static void test_fpad_constant(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 3, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "F.pad", 1, 1);
    p_ints(&b, "pad", 2, (int64_t[]){ 1, 2 });
    p_str(&b, "mode", "constant");
    p_float(&b, "value", 0.5);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 6 });
    expect_vals(g_out[0], (float[]){ .5f, 0, 1, 2, .5f, .5f, .5f, 3, 4, 5, .5f, .5f }, 12);

    op_init(&b, "F.pad", 1, 1);
    p_ints(&b, "pad", 4, (int64_t[]){ 1, 0, 0, 1 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 3, 4 });
    expect_vals(g_out[0], (float[]){ 0, 0, 1, 2, 0, 3, 4, 5, 0, 0, 0, 0 }, 12);

    b.ints[0][0] = -1; /* negative constant padding crops */
    b.ints[0][3] = 0;
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 2 });
    expect_vals(g_out[0], (float[]){ 1, 2, 4, 5 }, 4);
    b.ints[0][0] = -2;
    b.ints[0][1] = -2;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

static void test_fpad_modes(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 1, 4, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "F.pad", 1, 1);
    p_ints(&b, "pad", 2, (int64_t[]){ 2, 1 });
    p_str(&b, "mode", "reflect");
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 2, 1, 0, 1, 2, 3, 2 }, 7);
    b.params[1].raw = "replicate";
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 0, 0, 0, 1, 2, 3, 3 }, 7);
    b.params[1].raw = "circular";
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 2, 3, 0, 1, 2, 3, 0 }, 7);
    b.params[1].raw = "reflect";
    b.ints[0][0] = 4; /* reflect padding must be below the size */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
    in[0] = shp(1, 4, 0, 0, 0); /* non-constant modes need a leading dim */
    b.ints[0][0] = 1;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
    b.params[1].raw = "mirror";
    assert_int_equal(create_err(&b.op), KI_ERR_UNSUPPORTED);
    b.params[1].raw = "constant";
    b.params[0].n = 3;
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

static void test_pad_modules(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 1, 2, 3, 0) }, out[1];
    (void)state;
    op_init(&b, "nn.ReflectionPad2d", 1, 1);
    p_ints(&b, "padding", 4, (int64_t[]){ 1, 1, 1, 0 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 1, 3, 5 });
    expect_vals(g_out[0], (float[]){ 4, 3, 4, 5, 4, 1, 0, 1, 2, 1, 4, 3, 4, 5, 4 }, 15);

    op_init(&b, "nn.ZeroPad2d", 1, 1);
    p_int(&b, "padding", 1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 1, 4, 5 });
    expect_vals(g_out[0] + 5, (float[]){ 0, 0, 1, 2, 0, 0, 3, 4, 5, 0 }, 10);

    in[0] = shp(4, 2, 1, 1, 2); /* batch 2 */
    op_init(&b, "nn.ConstantPad2d", 1, 1);
    p_ints(&b, "padding", 4, (int64_t[]){ 0, 1, 1, 0 });
    p_float(&b, "value", 9);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 4, (int64_t[]){ 2, 1, 2, 3 });
    expect_vals(g_out[0], (float[]){ 9, 9, 9, 0, 1, 9, 9, 9, 9, 2, 3, 9 }, 12);
    op_init(&b, "nn.ReplicationPad2d", 1, 1);
    p_ints(&b, "padding", 3, (int64_t[]){ 0, 1, 1 });
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

/* ---- pnnx.Attribute ---- */

static void test_attribute(void **state)
{
    static const float data[6] = { 1, 2, 3, 4, 5, 6 };
    op_builder b;
    ki_attr attrs[2] = { { .key = "w", .data = data, .numel = 6, .dtype = KI_DT_F32 } };
    ki_shape out[1];
    (void)state;
    attrs[0].shape = shp(2, 2, 3, 0, 0);
    attrs[1] = attrs[0];
    op_init(&b, "pnnx.Attribute", 0, 1);
    b.op.attrs = attrs;
    b.op.n_attrs = 1;
    assert_int_equal(run(&b.op, NULL, 0, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 3 });
    expect_vals(g_out[0], data, 6);
    b.op.n_attrs = 2;
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
    b.op.n_attrs = 1;
    attrs[0].numel = 5;
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
    attrs[0].numel = 6;
    b.op.n_inputs = 1;
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

/* A reduction big enough to run on two threads matches a naive loop on 1 and 2 threads. */
static void test_sum_large_threads(void **state)
{
    enum { A = 8, B = 64, C = 80, N = A * B * C };
    op_builder b;
    ki_shape in = shp(3, A, B, C, 0), out;
    ki_error err;
    float *x = malloc(N * sizeof *x), y[A * C];
    (void)state;
    assert_non_null(x);
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i * 7919) % 1000) * 0.001f;
    }
    op_init(&b, "torch.sum", 1, 1);
    p_int(&b, "dim", 1);
    const ki_layer_ops *ops = ki_registry_find("torch.sum");
    void *st = create_ok(&b.op);
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_OK);
    for (int threads = 1; threads <= 2; threads++) {
        ki_tensor ti = { in, x }, to = { out, y };
        ki_exec ex = { .n_threads = threads };
        assert_int_equal(ops->forward(st, &ti, 1, &to, 1, &ex), KI_OK);
        for (int i = 0; i < A; i++) {
            for (int k = 0; k < C; k++) {
                double acc = 0;
                for (int j = 0; j < B; j++) {
                    acc += x[(i * B + j) * C + k];
                }
                assert_true(y[i * C + k] == (float)acc);
            }
        }
    }
    ops->destroy(st);
    free(x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_mean),        cmocka_unit_test(test_prod_amax_amin),
        cmocka_unit_test(test_max_min_indices), cmocka_unit_test(test_fpad_constant),
        cmocka_unit_test(test_fpad_modes),      cmocka_unit_test(test_pad_modules),
        cmocka_unit_test(test_attribute),       cmocka_unit_test(test_sum_large_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
