/* test_yolo_detect.c - models.yolo.Detect on a tiny hand-made head (2 levels, 2 anchors,
 * 1 class, batch 2) against a direct evaluation of the models/yolo.py formulas, and the
 * identification of captured constants by shape and content, never by name. */
/* cmocka needs these first, in this order */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../layers/registry.h"

#define NL    2
#define NA    2
#define NO    6
#define BATCH 2
#define MAXA  12

static const int64_t chans[NL] = { 3, 2 }, hs[NL] = { 2, 1 }, ws[NL] = { 3, 2 };
static const float strides[NL] = { 4, 8 };
static const float anchors[NL * NA * 2] = { 1.25f, 1.625f, 2.0f, 3.75f, 4.0f, 2.8f, 3.3f, 1.1f };

typedef struct head {
    ki_op_desc op;
    ki_attr attrs[MAXA];
    char keys[MAXA][24];
    float w[NL][NA * NO * 3], b[NL][NA * NO];
    float x[NL][BATCH * 3 * 2 * 3];
    float extra[3][NA * 2 * 3 * 2];
} head;

static float rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static void add_attr(head *h, const char *key, int ndim, const int64_t *d, const float *data)
{
    ki_attr *a = &h->attrs[h->op.n_attrs];
    snprintf(h->keys[h->op.n_attrs], sizeof h->keys[0], "%s", key);
    a->key = h->keys[h->op.n_attrs++];
    a->shape = ki_shape_make(ndim, d);
    a->dtype = KI_DT_F32;
    a->data = data;
    a->numel = ki_shape_count(&a->shape);
}

/* The head with weights, anchors and the strides under a pnnx-style name. */
static void head_init(head *h, int n_out, bool with_strides)
{
    memset(h, 0, sizeof *h);
    h->op.type = "models.yolo.Detect";
    h->op.n_inputs = NL;
    h->op.n_outputs = n_out;
    h->op.attrs = h->attrs;
    uint32_t seed = 12345;
    int64_t ad[3] = { NL, NA, 2 }, sd[1] = { NL };
    add_attr(h, "anchors", 3, ad, anchors);
    for (int i = 0; i < NL; i++) {
        char k[24];
        int64_t wd[4] = { NA * NO, chans[i], 1, 1 }, bd[1] = { NA * NO };
        for (int j = 0; j < NA * NO * chans[i]; j++) {
            h->w[i][j] = rnd(&seed);
        }
        for (int j = 0; j < NA * NO; j++) {
            h->b[i][j] = rnd(&seed);
        }
        for (int64_t j = 0; j < BATCH * chans[i] * hs[i] * ws[i]; j++) {
            h->x[i][j] = 2.0f * rnd(&seed);
        }
        snprintf(k, sizeof k, "m.%d.weight", i);
        add_attr(h, k, 4, wd, h->w[i]);
        snprintf(k, sizeof k, "m.%d.bias", i);
        add_attr(h, k, 1, bd, h->b[i]);
    }
    if (with_strides) {
        add_attr(h, "pnnx_17", 1, sd, strides);
    }
}

/* Runs the head; y gets output 0 (BATCH, rows, NO), raw (if not NULL) output 1. */
static ki_status head_run(head *h, float *y, float *raw, ki_error *err)
{
    const ki_layer_ops *ops = ki_registry_find("models.yolo.Detect");
    assert_non_null(ops);
    void *st = NULL;
    ki_status rc = ops->create(&h->op, &st, err);
    if (rc != KI_OK) {
        return rc;
    }
    ki_shape in[NL], out[1 + NL];
    ki_tensor ti[NL], to[1 + NL];
    float scratch[BATCH * NA * 2 * 2 * NO];
    for (int i = 0; i < NL; i++) {
        int64_t d[4] = { BATCH, chans[i], hs[i], ws[i] };
        in[i] = ki_shape_make(4, d);
        ti[i].shape = in[i];
        ti[i].data = h->x[i];
    }
    assert_int_equal(ops->shape(st, in, NL, out, h->op.n_outputs, err), KI_OK);
    assert_int_equal(out[0].ndim, 3);
    assert_int_equal(out[0].d[0], BATCH);
    assert_int_equal(out[0].d[1], NA * (2 * 3 + 1 * 2));
    assert_int_equal(out[0].d[2], NO);
    for (int i = 0; i < h->op.n_outputs; i++) {
        to[i].shape = out[i];
        to[i].data = i == 0 ? y : i == 1 && raw ? raw : scratch;
    }
    size_t wsb = ops->workspace ? ops->workspace(st, in, NL, out, h->op.n_outputs, 1) : 0;
    /* the convolution's scratch and the largest level's convolution output */
    assert_true(wsb >= NA * NO * 2 * 3 * sizeof(float));
    ki_exec ex = { 1, malloc(wsb), wsb, NULL };
    assert_non_null(ex.workspace);
    assert_int_equal(ops->forward(st, ti, NL, to, h->op.n_outputs, &ex), KI_OK);
    free(ex.workspace);
    ops->destroy(st);
    return KI_OK;
}

/* The 1x1 convolution's value for (image n, level i, anchor a, cell, channel k). */
static double conv(const head *h, int n, int i, int a, int64_t cell, int k)
{
    int64_t hw = hs[i] * ws[i];
    double z = h->b[i][a * NO + k];
    for (int64_t c = 0; c < chans[i]; c++) {
        z += (double)h->w[i][(a * NO + k) * chans[i] + c] * h->x[i][(n * chans[i] + c) * hw + cell];
    }
    return z;
}

static void test_detect_decode(void **state)
{
    (void)state;
    head *h = malloc(sizeof *h);
    assert_non_null(h);
    head_init(h, 1, true);
    float y[BATCH * 16 * NO];
    ki_error err;
    assert_int_equal(head_run(h, y, NULL, &err), KI_OK);
    for (int n = 0; n < BATCH; n++) {
        int64_t row = 0;
        for (int i = 0; i < NL; i++) {
            for (int a = 0; a < NA; a++) {
                for (int64_t cell = 0; cell < hs[i] * ws[i]; cell++, row++) {
                    const float *r = y + (n * 16 + row) * NO;
                    double v[NO];
                    for (int k = 0; k < NO; k++) {
                        v[k] = 1.0 / (1.0 + exp(-conv(h, n, i, a, cell, k)));
                    }
                    double gx = (double)(cell % ws[i]), gy = (double)(cell / ws[i]);
                    const float *anc = anchors + (i * NA + a) * 2;
                    assert_float_equal(r[0], (2 * v[0] - 0.5 + gx) * strides[i], 1e-4);
                    assert_float_equal(r[1], (2 * v[1] - 0.5 + gy) * strides[i], 1e-4);
                    assert_float_equal(r[2], 4 * v[2] * v[2] * anc[0] * strides[i], 1e-4);
                    assert_float_equal(r[3], 4 * v[3] * v[3] * anc[1] * strides[i], 1e-4);
                    assert_float_equal(r[4], v[4], 1e-6);
                    assert_float_equal(r[5], v[5], 1e-6);
                }
            }
        }
    }
    free(h);
}

static void test_detect_raw_outputs(void **state)
{
    (void)state;
    head *h = malloc(sizeof *h);
    assert_non_null(h);
    head_init(h, 1 + NL, true);
    float y[BATCH * 16 * NO], raw[BATCH * NA * 2 * 3 * NO];
    ki_error err;
    assert_int_equal(head_run(h, y, raw, &err), KI_OK);
    /* output 1 is level 0 before the sigmoid, (N, na, H, W, no) */
    for (int n = 0; n < BATCH; n++) {
        for (int a = 0; a < NA; a++) {
            for (int64_t cell = 0; cell < 6; cell++) {
                for (int k = 0; k < NO; k++) {
                    assert_float_equal(raw[((n * NA + a) * 6 + cell) * NO + k],
                                       conv(h, n, 0, a, cell, k), 1e-5);
                }
            }
        }
    }
    free(h);
}

/* Grids of other YOLOv5 versions are accepted (checked, then recomputed); strangers are not. */
static void test_detect_constants(void **state)
{
    (void)state;
    head *h = malloc(sizeof *h);
    assert_non_null(h);
    float y[BATCH * 16 * NO];
    ki_error err;
    int64_t gd[5] = { 1, NA, 2, 3, 2 }, agd[5] = { 1, NA, 1, 2, 2 };
    head_init(h, 1, true);
    for (int j = 0; j < NA * 6; j++) { /* level 0 grid: (x, y) - 0.5 */
        h->extra[0][2 * j] = (float)(j % 6 % 3) - 0.5f;
        h->extra[0][2 * j + 1] = (float)(j % 6 / 3) - 0.5f;
    }
    for (int j = 0; j < NA * 2; j++) { /* level 1 anchor grid: anchors * stride */
        h->extra[1][2 * j] = anchors[(NA + j / 2) * 2] * strides[1];
        h->extra[1][2 * j + 1] = anchors[(NA + j / 2) * 2 + 1] * strides[1];
    }
    add_attr(h, "pnnx_3", 5, gd, h->extra[0]);
    add_attr(h, "pnnx_4", 5, agd, h->extra[1]);
    assert_int_equal(head_run(h, y, NULL, &err), KI_OK);
    h->extra[2][5] = 42.0f; /* a (1, na, ny, nx, 2) constant that is neither */
    add_attr(h, "pnnx_25", 5, gd, h->extra[2]);
    assert_int_equal(head_run(h, y, NULL, &err), KI_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "@pnnx_25"));
    head_init(h, 1, false); /* no strides */
    assert_int_equal(head_run(h, y, NULL, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "strides"));
    head_init(h, 1, true);
    h->attrs[0].shape.d[1] = 3; /* anchors that do not fit */
    assert_int_equal(head_run(h, y, NULL, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "anchors"));
    head_init(h, 1, true);
    h->op.n_attrs--; /* the strides (last) gone, and a stray vector in their place */
    add_attr(h, "pnnx_00", 1, (int64_t[]){ 3 }, strides);
    assert_int_equal(head_run(h, y, NULL, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "@pnnx_00"));
    free(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_detect_decode),
        cmocka_unit_test(test_detect_raw_outputs),
        cmocka_unit_test(test_detect_constants),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
