/* test_shape.c - cat, stack, chunk, split, unbind, reshape/view, squeeze/unsqueeze, permute,
 * transpose, expand, slice, select and the shuffles, against hand-computed results on iota
 * tensors (x[i] = i). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <stdlib.h>
#include <string.h>

#include "../../layers/registry.h"
#include "../../layers/shape_common.h"
#include "shape_test_util.h"

/* ---- cat / stack ---- */

static void test_cat_dim1_and_negative(void **state)
{
    op_builder b;
    ki_shape in[3] = { shp(2, 2, 2, 0, 0), shp(2, 2, 1, 0, 0), shp(2, 2, 2, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "torch.cat", 3, 1);
    p_int(&b, "dim", -1);
    assert_int_equal(run(&b.op, in, 3, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 5 });
    float want[] = { 0, 1, 100, 200, 201, 2, 3, 101, 202, 203 };
    expect_vals(g_out[0], want, 10);
}

static void test_cat_dim0_batch(void **state)
{
    op_builder b;
    ki_shape in[2] = { shp(3, 2, 1, 2, 0), shp(3, 1, 1, 2, 0) }, out[1];
    (void)state;
    op_init(&b, "torch.cat", 2, 1);
    p_int(&b, "dim", 0);
    assert_int_equal(run(&b.op, in, 2, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 3, 1, 2 });
    float want[] = { 0, 1, 2, 3, 100, 101 };
    expect_vals(g_out[0], want, 6);
}

static void test_cat_errors(void **state)
{
    op_builder b;
    ki_shape in[2] = { shp(2, 2, 3, 0, 0), shp(2, 3, 3, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "torch.cat", 2, 1);
    p_int(&b, "dim", 1);
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_SHAPE); /* dim 0 differs */
    in[1] = shp(3, 2, 3, 1, 0);
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_SHAPE); /* rank differs */
    b.params[0].i = 2;
    in[1] = shp(2, 2, 3, 0, 0);
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_SHAPE); /* dim out of range */
}

static void test_stack(void **state)
{
    op_builder b;
    ki_shape in[2] = { shp(2, 2, 2, 0, 0), shp(2, 2, 2, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "torch.stack", 2, 1);
    p_int(&b, "dim", -1);
    assert_int_equal(run(&b.op, in, 2, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 2, 2, 2 });
    float want[] = { 0, 100, 1, 101, 2, 102, 3, 103 };
    expect_vals(g_out[0], want, 8);
    b.params[0].i = 1;
    assert_int_equal(run(&b.op, in, 2, out), KI_OK);
    float want1[] = { 0, 1, 100, 101, 2, 3, 102, 103 };
    expect_vals(g_out[0], want1, 8);
    in[1] = shp(2, 2, 3, 0, 0);
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_SHAPE);
}

/* ---- chunk / split / unbind ---- */

static void test_chunk_last_smaller(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 5, 0, 0) }, out[8];
    (void)state;
    op_init(&b, "torch.chunk", 1, 3);
    p_int(&b, "chunks", 3);
    p_int(&b, "dim", 1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 2 });
    expect_shape(&out[2], 2, (int64_t[]){ 2, 1 });
    expect_vals(g_out[0], (float[]){ 0, 1, 5, 6 }, 4);
    expect_vals(g_out[1], (float[]){ 2, 3, 7, 8 }, 4);
    expect_vals(g_out[2], (float[]){ 4, 9 }, 2);
    /* 6 along dim 1 in 4 chunks gives 3 pieces of 2 (PyTorch): 4 outputs do not fit */
    in[0] = shp(2, 1, 6, 0, 0);
    b.params[0].i = 4;
    b.op.n_outputs = 4;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

static void test_split_int_and_list(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 2, 1, 3, 0) }, out[2];
    (void)state;
    op_init(&b, "torch.split", 1, 2);
    p_int(&b, "dim", -1);
    p_int(&b, "split_size_or_sections", 2);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 2, 1, 2 });
    expect_shape(&out[1], 3, (int64_t[]){ 2, 1, 1 });
    expect_vals(g_out[0], (float[]){ 0, 1, 3, 4 }, 4);
    expect_vals(g_out[1], (float[]){ 2, 5 }, 2);

    op_init(&b, "torch.split", 1, 2);
    p_int(&b, "dim", 2);
    p_ints(&b, "split_size_or_sections", 2, (int64_t[]){ 1, 2 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 0, 3 }, 2);
    expect_vals(g_out[1], (float[]){ 1, 2, 4, 5 }, 4);
    b.ints[1][1] = 3; /* sections no longer sum to 3 */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
    b.op.n_outputs = 3; /* list length differs from the output count */
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

static void test_unbind(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 3, 0, 0) }, out[8];
    (void)state;
    op_init(&b, "torch.unbind", 1, 3);
    p_int(&b, "dim", 1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[1], 1, (int64_t[]){ 2 });
    expect_vals(g_out[0], (float[]){ 0, 3 }, 2);
    expect_vals(g_out[2], (float[]){ 2, 5 }, 2);
    b.params[0].i = 0; /* 2 slices but 3 outputs */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

/* ---- reshape / squeeze / unsqueeze ---- */

static void test_reshape_param(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 2, 3, 4, 0) }, out[1];
    (void)state;
    op_init(&b, "Tensor.reshape", 1, 1);
    p_ints(&b, "shape", 3, (int64_t[]){ 4, -1, 2 });
    assert_int_equal(ki_registry_find("Tensor.reshape")->flags & KI_LAYER_VIEW, KI_LAYER_VIEW);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 4, 3, 2 });
    expect_vals(g_out[0], (float[]){ 0, 1, 2, 3, 4, 5 }, 6); /* the view copies when not aliased */
    b.ints[0][0] = 5; /* 24 elements do not split into 5 * k * 2 */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
    b.ints[0][0] = -1; /* two -1 */
    assert_int_equal(create_err(&b.op), KI_ERR_SHAPE);
}

static void test_view_shape_input(void **state)
{
    op_builder b;
    ki_shape in[2] = { shp(3, 2, 3, 4, 0), shp(1, 2, 0, 0, 0) }, out[1];
    (void)state;
    in[1].kind = KI_KIND_LIST;
    in[1].has_values = true;
    in[1].values[0] = 2;
    in[1].values[1] = -1;
    op_init(&b, "Tensor.view", 2, 1);
    b.keys[0] = "input";
    b.keys[1] = "shape";
    assert_int_equal(run(&b.op, in, 2, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 12 });
    in[1].values[1] = 7;
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_SHAPE);
    in[1].has_values = false;
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_UNSUPPORTED);
}

static void test_squeeze_unsqueeze(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(4, 1, 3, 1, 2) }, out[1];
    (void)state;
    op_init(&b, "torch.squeeze", 1, 1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 3, 2 });
    p_int(&b, "dim", -2);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 1, 3, 2 });
    b.params[0].i = 1; /* size 3: squeeze does nothing */
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 4, (int64_t[]){ 1, 3, 1, 2 });
    b.params[0].i = 4;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);

    op_init(&b, "torch.unsqueeze", 1, 1);
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT); /* dim is required */
    p_int(&b, "dim", -1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 5, (int64_t[]){ 1, 3, 1, 2, 1 });
    b.params[0].i = 1;
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 5, (int64_t[]){ 1, 1, 3, 1, 2 });
    b.params[0].i = 6;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

/* ---- permute / transpose / expand ---- */

static void test_permute_transpose(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 2, 3, 4, 0) }, out[1];
    (void)state;
    op_init(&b, "Tensor.permute", 1, 1);
    p_ints(&b, "dims", 3, (int64_t[]){ 2, 0, -2 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 4, 2, 3 });
    /* out[k][i][j] = x[i][j][k] = 12i + 4j + k */
    expect_vals(g_out[0], (float[]){ 0, 4, 8, 12, 16, 20, 1, 5, 9 }, 9);
    b.ints[0][2] = 0; /* repeated dim */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);

    op_init(&b, "torch.transpose", 1, 1);
    p_int(&b, "dim0", -1);
    p_int(&b, "dim1", 0);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 4, 3, 2 });
    /* out[k][j][i] = 12i + 4j + k */
    expect_vals(g_out[0], (float[]){ 0, 12, 4, 16, 8, 20, 1, 13 }, 8);
    b.params[0].i = 3;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

static void test_expand(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 1, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "Tensor.expand", 1, 1);
    p_ints(&b, "sizes", 3, (int64_t[]){ 2, -1, 3 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 2, 2, 3 });
    expect_vals(g_out[0], (float[]){ 0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1 }, 12);
    b.ints[0][1] = 3; /* size 2 cannot become 3 */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

/* ---- slice / select ---- */

static void test_slice_single(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(2, 2, 8, 0, 0) }, out[1];
    (void)state;
    op_init(&b, "Tensor.slice", 1, 1);
    p_int(&b, "dim", -1);
    p_int(&b, "start", -6);
    p_int(&b, "end", 2147483647);
    p_int(&b, "step", 3);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 2 });
    expect_vals(g_out[0], (float[]){ 2, 5, 10, 13 }, 4);
    b.params[3].i = INT64_MAX; /* found by fuzz-model: step x stride overflowed; x[:, -6::huge] */
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 1 });
    expect_vals(g_out[0], (float[]){ 2, 10 }, 2);
    b.params[1].i = 5; /* start 5, end -1 → 5..7 */
    b.params[2].i = -1;
    b.params[3].i = 1;
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 2 });
    expect_vals(g_out[0], (float[]){ 5, 6, 13, 14 }, 4);
    b.params[1].i = 7; /* empty */
    b.params[2].i = 3;
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 0 });
    b.params[3].i = 0;
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

static void test_slice_multi_selects(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 2, 3, 4, 0) }, out[1];
    (void)state;
    op_init(&b, "Tensor.slice", 1, 1);
    p_ints(&b, "dims", 2, (int64_t[]){ 0, 2 });
    p_ints(&b, "starts", 2, (int64_t[]){ 0, 1 });
    p_ints(&b, "ends", 2, (int64_t[]){ 0, 2147483647 });
    p_ints(&b, "steps", 2, (int64_t[]){ 0, 2 });
    p_ints(&b, "selects", 2, (int64_t[]){ -1, 2147483647 });
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 3, 2 });
    /* x[-1, :, 1::2] = 12 + 4j + {1, 3} */
    expect_vals(g_out[0], (float[]){ 13, 15, 17, 19, 21, 23 }, 6);
    b.ints[4][0] = 2; /* index 2 of a dim of size 2 */
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
    b.op.n_params = 4; /* no selects: plain slices; steps 0 are invalid */
    assert_int_equal(create_err(&b.op), KI_ERR_FORMAT);
}

static void test_slice_bound_inputs(void **state)
{
    op_builder b;
    ki_shape in[2] = { shp(2, 2, 8, 0, 0), shp(0, 0, 0, 0, 0) }, out[1];
    (void)state;
    in[1].kind = KI_KIND_SCALAR;
    in[1].has_values = true;
    in[1].values[0] = 3;
    op_init(&b, "Tensor.slice", 2, 1);
    b.keys[0] = "input";
    b.keys[1] = "end";
    p_int(&b, "dim", 1);
    p_int(&b, "start", 1);
    assert_int_equal(run(&b.op, in, 2, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 2 });
    expect_vals(g_out[0], (float[]){ 1, 2, 9, 10 }, 4);
    b.keys[1] = "stop"; /* an input that is no bound */
    assert_int_equal(create_err(&b.op), KI_ERR_UNSUPPORTED);

    in[0] = shp(3, 2, 3, 4, 0);
    in[1] = shp(1, 2, 0, 0, 0);
    in[1].kind = KI_KIND_LIST;
    in[1].has_values = true;
    in[1].values[0] = 1;
    in[1].values[1] = -3;
    op_init(&b, "Tensor.slice", 2, 1);
    b.keys[0] = "input";
    b.keys[1] = "starts";
    p_ints(&b, "dims", 2, (int64_t[]){ 0, 1 });
    p_ints(&b, "ends", 2, (int64_t[]){ 2147483647, 2147483647 });
    p_ints(&b, "steps", 2, (int64_t[]){ 1, 2 });
    assert_int_equal(run(&b.op, in, 2, out), KI_OK);
    expect_shape(&out[0], 3, (int64_t[]){ 1, 2, 4 });
    expect_vals(g_out[0], (float[]){ 12, 13, 14, 15, 20, 21, 22, 23 }, 8);
    in[1].d[0] = 1; /* one start for two dims */
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_SHAPE);
    in[1].d[0] = 2;
    in[1].has_values = false;
    assert_int_equal(run(&b.op, in, 2, out), KI_ERR_UNSUPPORTED);
}

static void test_select(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 2, 3, 4, 0) }, out[1];
    (void)state;
    op_init(&b, "Tensor.select", 1, 1);
    p_int(&b, "dim", 1);
    p_int(&b, "index", -1);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 2, (int64_t[]){ 2, 4 });
    expect_vals(g_out[0], (float[]){ 8, 9, 10, 11, 20, 21, 22, 23 }, 8);
    b.params[1].i = 3;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

/* ---- shuffles ---- */

static void test_pixel_shuffle_unshuffle(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(4, 2, 4, 1, 2) }, out[1];
    (void)state;
    op_init(&b, "nn.PixelShuffle", 1, 1);
    p_int(&b, "upscale_factor", 2);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 4, (int64_t[]){ 2, 1, 2, 4 });
    /* out[0][0][i][2w+j] = x[0][2i+j][0][w]: channels 0..3 hold 0,1 | 2,3 | 4,5 | 6,7 */
    expect_vals(g_out[0], (float[]){ 0, 2, 1, 3, 4, 6, 5, 7, 8, 10 }, 10);
    op_init(&b, "F.pixel_unshuffle", 1, 1);
    p_int(&b, "downscale_factor", 2);
    in[0] = out[0];
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_shape(&out[0], 4, (int64_t[]){ 2, 4, 1, 2 });
    /* out[n][2i+j][0][w] = x[n][0][i][2w+j] = 8n + 4i + 2w + j */
    expect_vals(g_out[0], (float[]){ 0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15 }, 16);
    in[0] = shp(4, 1, 3, 2, 2);
    op_init(&b, "nn.PixelShuffle", 1, 1);
    p_int(&b, "upscale_factor", 2);
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

static void test_channel_shuffle(void **state)
{
    op_builder b;
    ki_shape in[1] = { shp(3, 1, 6, 1, 0) }, out[1];
    (void)state;
    op_init(&b, "nn.ChannelShuffle", 1, 1);
    p_int(&b, "groups", 2);
    assert_int_equal(run(&b.op, in, 1, out), KI_OK);
    expect_vals(g_out[0], (float[]){ 0, 3, 1, 4, 2, 5 }, 6);
    b.params[0].i = 4;
    assert_int_equal(run(&b.op, in, 1, out), KI_ERR_SHAPE);
}

/* A copy big enough to run on two threads gives the same result as a naive loop. */
/* The broadcasting helpers shared by pnnx.Expression and the pointwise layers, on hand-worked
 * shapes: right-aligned merging, growth to the longer rank, the first conflict's index and the
 * dimension it met, an unknown dimension, and the walk's strides. */
static void test_broadcast_helpers(void **state)
{
    (void)state;
    int64_t d[KI_MAX_DIMS];
    int nd = 0;
    const int64_t a[3] = { 2, 1, 5 }, b[2] = { 4, 1 }, c[4] = { 7, 2, 3, 5 }, u[1] = { -1 };
    ki_shape x = ki_shape_make(3, a);
    assert_int_equal(ki_shapeop_broadcast(d, &nd, &x), -1);
    x = ki_shape_make(2, b);
    assert_int_equal(ki_shapeop_broadcast(d, &nd, &x), -1);
    assert_int_equal(nd, 3);
    assert_true(d[0] == 2 && d[1] == 4 && d[2] == 5);
    x = ki_shape_make(4, c); /* grows to [1, 2, 4, 5]; 7 then 2 merge, 3 meets 4 */
    assert_int_equal(ki_shapeop_broadcast(d, &nd, &x), 2);
    assert_int_equal(nd, 4);
    assert_true(d[0] == 7 && d[1] == 2 && d[2] == 4 && d[3] == 5);
    nd = 0;
    x = ki_shape_make(1, u);
    assert_int_equal(ki_shapeop_broadcast(d, &nd, &x), 0);

    const int64_t o[3] = { 2, 3, 4 }, e[2] = { 3, 1 }, f[3] = { 2, 3, 4 };
    ki_shape out = ki_shape_make(3, o), in = ki_shape_make(2, e);
    int64_t st[KI_MAX_DIMS];
    ki_shapeop_broadcast_strides(&in, &out, st);
    assert_true(st[0] == 0 && st[1] == 1 && st[2] == 0);
    in = ki_shape_make(3, f);
    ki_shapeop_broadcast_strides(&in, &out, st);
    assert_true(st[0] == 12 && st[1] == 4 && st[2] == 1);
    in.kind = KI_KIND_SCALAR;
    ki_shapeop_broadcast_strides(&in, &out, st);
    assert_true(st[0] == 0 && st[1] == 0 && st[2] == 0);
}

static void test_permute_large_threads(void **state)
{
    enum { A = 64, B = 32, C = 17, N = A * B * C };
    op_builder b;
    ki_shape in = shp(3, A, B, C, 0), out;
    ki_error err;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    (void)state;
    assert_non_null(x);
    assert_non_null(y);
    iota(x, N, 0);
    op_init(&b, "torch.permute", 1, 1);
    p_ints(&b, "dims", 3, (int64_t[]){ 2, 0, 1 });
    const ki_layer_ops *ops = ki_registry_find("torch.permute");
    void *st = create_ok(&b.op);
    assert_int_equal(ops->shape(st, &in, 1, &out, 1, &err), KI_OK);
    for (int threads = 1; threads <= 2; threads++) {
        ki_tensor ti = { in, x }, to = { out, y };
        ki_exec ex = { .n_threads = threads };
        memset(y, 0, N * sizeof *y);
        assert_int_equal(ops->forward(st, &ti, 1, &to, 1, &ex), KI_OK);
        for (int k = 0; k < C; k++) {
            for (int i = 0; i < A; i++) {
                for (int j = 0; j < B; j++) {
                    assert_true(y[(k * A + i) * B + j] == x[(i * B + j) * C + k]);
                }
            }
        }
    }
    ops->destroy(st);
    free(x);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cat_dim1_and_negative),
        cmocka_unit_test(test_cat_dim0_batch),
        cmocka_unit_test(test_cat_errors),
        cmocka_unit_test(test_stack),
        cmocka_unit_test(test_chunk_last_smaller),
        cmocka_unit_test(test_split_int_and_list),
        cmocka_unit_test(test_unbind),
        cmocka_unit_test(test_reshape_param),
        cmocka_unit_test(test_view_shape_input),
        cmocka_unit_test(test_squeeze_unsqueeze),
        cmocka_unit_test(test_permute_transpose),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_broadcast_helpers),
        cmocka_unit_test(test_slice_single),
        cmocka_unit_test(test_slice_multi_selects),
        cmocka_unit_test(test_slice_bound_inputs),
        cmocka_unit_test(test_select),
        cmocka_unit_test(test_pixel_shuffle_unshuffle),
        cmocka_unit_test(test_channel_shuffle),
        cmocka_unit_test(test_permute_large_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
