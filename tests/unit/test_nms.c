/* test_nms.c - confidence filter, IoU and class-aware NMS (cli/detect.c) against hand-computed
 * cases, and the way back to original pixels with clipping at the image border. */
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

#include "../../cli/detect.h"

static ki_det box(float x1, float y1, float x2, float y2, float score, int cls, int64_t index)
{
    ki_det d = { x1, y1, x2, y2, score, cls, index };
    return d;
}

static void test_iou(void **state)
{
    (void)state;
    ki_det a = box(0, 0, 2, 2, 1, 0, 0), b = box(1, 0, 3, 2, 1, 0, 1);
    assert_float_equal(ki_detect_iou(&a, &b), 2.0f / 6.0f, 1e-6);
    ki_det touch = box(2, 0, 4, 2, 1, 0, 2); /* shares an edge: no overlap */
    assert_float_equal(ki_detect_iou(&a, &touch), 0.0f, 0);
    ki_det empty = box(1, 1, 1, 1, 1, 0, 3); /* zero area: union of two empties is 0 */
    assert_float_equal(ki_detect_iou(&empty, &empty), 0.0f, 0);
    assert_float_equal(ki_detect_iou(&a, &a), 1.0f, 0);
}

static void test_no_boxes(void **state)
{
    (void)state;
    ki_det d[1];
    assert_int_equal(ki_detect_nms(d, 0, 0.45f, 300), 0);
    assert_int_equal(ki_detect_nms(NULL, 0, 0.45f, 300), 0);
    float rows[2][6] = { { 5, 5, 2, 2, 0.2f, 1.0f }, { 5, 5, 2, 2, 0.9f, 0.1f } };
    assert_int_equal(ki_detect_candidates(&rows[0][0], 2, 6, 0.25f, d, 1), 0);
}

static void test_one_box(void **state)
{
    (void)state;
    ki_det d[1] = { box(1, 2, 3, 4, 0.5f, 7, 0) };
    assert_int_equal(ki_detect_nms(d, 1, 0.45f, 300), 1);
    assert_int_equal(d[0].cls, 7);
    assert_float_equal(d[0].x1, 1, 0);
    assert_int_equal(ki_detect_nms(d, 1, 0.45f, 0), 0); /* max_det 0 keeps nothing */
}

static void test_identical_boxes(void **state)
{
    (void)state;
    ki_det d[3] = { box(0, 0, 10, 10, 0.6f, 0, 0), box(0, 0, 10, 10, 0.9f, 0, 1),
                    box(0, 0, 10, 10, 0.7f, 0, 2) };
    assert_int_equal(ki_detect_nms(d, 3, 0.45f, 300), 1);
    assert_int_equal(d[0].index, 1);
    /* even at iou 0.99 an identical box (IoU 1) goes */
    ki_det e[2] = { box(0, 0, 10, 10, 0.6f, 0, 0), box(0, 0, 10, 10, 0.5f, 0, 1) };
    assert_int_equal(ki_detect_nms(e, 2, 0.99f, 300), 1);
}

static void test_ties_in_score(void **state)
{
    (void)state;
    /* equal scores: the lower row index wins, whatever the input order */
    ki_det d[3] = { box(1, 0, 11, 10, 0.8f, 0, 5), box(0, 0, 10, 10, 0.8f, 0, 2),
                    box(50, 50, 60, 60, 0.8f, 0, 9) };
    assert_int_equal(ki_detect_nms(d, 3, 0.45f, 300), 2);
    assert_int_equal(d[0].index, 2);
    assert_int_equal(d[1].index, 9);
}

static void test_per_class(void **state)
{
    (void)state;
    ki_det d[4] = { box(0, 0, 10, 10, 0.9f, 0, 0), box(0, 0, 10, 10, 0.8f, 1, 1),
                    box(1, 1, 10, 10, 0.7f, 0, 2), box(1, 1, 10, 10, 0.6f, 1, 3) };
    assert_int_equal(ki_detect_nms(d, 4, 0.45f, 300), 2);
    assert_int_equal(d[0].index, 0);
    assert_int_equal(d[1].index, 1);
}

static void test_threshold_is_strict(void **state)
{
    (void)state;
    /* IoU exactly 0.5: suppressed only above the threshold */
    ki_det d[2] = { box(0, 0, 2, 2, 0.9f, 0, 0), box(0, 0, 2, 1, 0.8f, 0, 1) };
    assert_int_equal(ki_detect_nms(d, 2, 0.5f, 300), 2);
    ki_det e[2] = { box(0, 0, 2, 2, 0.9f, 0, 0), box(0, 0, 2, 1, 0.8f, 0, 1) };
    assert_int_equal(ki_detect_nms(e, 2, 0.49f, 300), 1);
}

/* 64 x 64 cells of 10 px, each with a strong box and a weaker shifted copy: the copies go. */
static void test_thousands(void **state)
{
    (void)state;
    const int n = 64 * 64 * 2;
    ki_det *d = malloc((size_t)n * sizeof *d);
    assert_non_null(d);
    for (int i = 0; i < 64 * 64; i++) {
        float x = (float)(i % 64) * 10, y = (float)(i / 64) * 10;
        float s = 0.5f + (float)(i % 97) / 200.0f;
        d[2 * i] = box(x, y, x + 8, y + 8, s, i % 3, 2 * i);
        d[2 * i + 1] = box(x + 1, y, x + 9, y + 8, s - 0.01f, i % 3, 2 * i + 1);
    }
    assert_int_equal(ki_detect_nms(d, n, 0.45f, n), 64 * 64);
    for (int i = 0; i < 64 * 64; i++) {
        assert_int_equal(d[i].index % 2, 0);
        assert_true(i == 0 || d[i].score <= d[i - 1].score);
    }
    /* max_det caps the result, best first */
    for (int i = 0; i < n; i++) {
        d[i] = box((float)(i % 200) * 10, (float)(i / 200) * 10, (float)(i % 200) * 10 + 5,
                   (float)(i / 200) * 10 + 5, (float)i / (float)n, 0, i);
    }
    assert_int_equal(ki_detect_nms(d, n, 0.45f, 300), 300);
    assert_int_equal(d[0].index, n - 1);
    assert_int_equal(d[299].index, n - 300);
    free(d);
}

static void test_candidates(void **state)
{
    (void)state;
    float rows[4][7] = {
        { 10, 20, 4, 6, 0.9f, 0.5f, 0.5f },  /* tie between classes: the first */
        { 10, 20, 4, 6, 0.3f, 0.9f, 0.1f },  /* 0.27 >= 0.25 */
        { 10, 20, 4, 6, 0.24f, 1.0f, 1.0f }, /* objectness below conf */
        { 10, 20, 4, 6, 0.5f, 0.1f, 0.4f },  /* 0.2 < 0.25 */
    };
    ki_det d[4];
    assert_int_equal(ki_detect_candidates(&rows[0][0], 4, 7, 0.25f, d, 4), 2);
    assert_int_equal(d[0].cls, 0);
    assert_float_equal(d[0].score, 0.45f, 1e-6);
    assert_float_equal(d[0].x1, 8, 0);
    assert_float_equal(d[0].y1, 17, 0);
    assert_float_equal(d[0].x2, 12, 0);
    assert_float_equal(d[0].y2, 23, 0);
    assert_int_equal(d[1].index, 1);
    assert_int_equal(ki_detect_candidates(&rows[0][0], 4, 7, 0.25f, d, 1), 1); /* room for 1 */
}

static void test_border(void **state)
{
    (void)state;
    /* a 100 x 50 image letterboxed into 64 x 64: scale 0.64, 32 rows, 16 rows of padding */
    ki_detect_map map = { 0.64f, 0.64f, 0.0f, 16.0f, 100, 50 };
    ki_det d[3] = { box(-5, 10, 70, 70, 0.9f, 0, 0), /* beyond every border: clipped */
                    box(0, 16, 64, 48, 0.8f, 1, 1),  /* exactly the picture */
                    box(32, 32, 32, 32, 0.7f, 2, 2) };
    ki_detect_unmap(d, 3, &map);
    assert_float_equal(d[0].x1, 0, 0);
    assert_float_equal(d[0].y1, 0, 0);
    assert_float_equal(d[0].x2, 100, 0);
    assert_float_equal(d[0].y2, 50, 0);
    assert_float_equal(d[1].x1, 0, 1e-4);
    assert_float_equal(d[1].y1, 0, 1e-4);
    assert_float_equal(d[1].x2, 100, 1e-4);
    assert_float_equal(d[1].y2, 50, 1e-4);
    assert_float_equal(d[2].x1, 50, 1e-4);
    assert_float_equal(d[2].y1, 25, 1e-4);
}

/* Boxes left without area after clipping go; the others keep their order. */
static void test_drop_empty(void **state)
{
    (void)state;
    ki_det d[5] = { { 0, 0, 10, 10, 0.9f, 1, 0 },  { 5, 5, 5, 9, 0.8f, 2, 1 },
                    { 3, 3, 4, 4, 0.7f, 0, 2 },    { 7, 9, 8, 8, 0.6f, 0, 3 },
                    { 1, 1, NAN, 2, 0.5f, 0, 4 } };
    assert_int_equal(ki_detect_drop_empty(d, 5), 2);
    assert_int_equal(d[0].index, 0);
    assert_int_equal(d[1].index, 2);
}

/* The bundled names are COCO's 80 in YOLOv5's order (samples/coco.names). */
static void test_coco_names(void **state)
{
    (void)state;
    assert_string_equal(ki_coco_names[0], "person");
    assert_string_equal(ki_coco_names[2], "car");
    assert_string_equal(ki_coco_names[79], "toothbrush");
    FILE *f = fopen("samples/coco.names", "r");
    char line[64];
    for (int i = 0; f && fgets(line, sizeof line, f) && i < KI_COCO_CLASSES; i++) {
        line[strcspn(line, "\n")] = '\0';
        assert_string_equal(ki_coco_names[i], line);
    }
    if (f) {
        fclose(f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_iou),
        cmocka_unit_test(test_no_boxes),
        cmocka_unit_test(test_one_box),
        cmocka_unit_test(test_identical_boxes),
        cmocka_unit_test(test_ties_in_score),
        cmocka_unit_test(test_per_class),
        cmocka_unit_test(test_threshold_is_strict),
        cmocka_unit_test(test_thousands),
        cmocka_unit_test(test_candidates),
        cmocka_unit_test(test_border), cmocka_unit_test(test_drop_empty),
        cmocka_unit_test(test_coco_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
