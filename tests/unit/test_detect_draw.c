/* test_detect_draw.c - drawing boxes onto a small image (pixels checked), writing the picture
 * atomically, and the letterbox round trip: a bright rectangle found in the network input maps
 * back onto its place in the original image. */
/* cmocka needs these first, in this order */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <stb_image.h>
#include <stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../cli/detect.h"

#define W 60
#define H 40

static const unsigned char *px(const unsigned char *img, int w, int x, int y)
{
    return img + ((size_t)y * (size_t)w + (size_t)x) * 3;
}

static void assert_color(const unsigned char *p, const unsigned char *c)
{
    assert_int_equal(p[0], c[0]);
    assert_int_equal(p[1], c[1]);
    assert_int_equal(p[2], c[2]);
}

static void test_draw_pixels(void **state)
{
    (void)state;
    static const unsigned char black[3] = { 0, 0, 0 }, white[3] = { 255, 255, 255 };
    unsigned char *img = calloc(W * H * 3, 1);
    assert_non_null(img);
    ki_det d = { 20, 20, 50, 35, 0.9f, 3, 0 };
    assert_int_equal(ki_detect_line_width(W, H), 2);
    ki_detect_draw(img, W, H, &d, 1, NULL, 0);
    const unsigned char *c = ki_detect_color(3);
    /* the outline: two pixels inside each edge */
    assert_color(px(img, W, 20, 30), c);
    assert_color(px(img, W, 21, 30), c);
    assert_color(px(img, W, 22, 30), black);
    assert_color(px(img, W, 49, 30), c);
    assert_color(px(img, W, 48, 30), c);
    assert_color(px(img, W, 47, 30), black);
    assert_color(px(img, W, 35, 34), c);
    assert_color(px(img, W, 35, 33), c);
    assert_color(px(img, W, 35, 32), black);
    assert_color(px(img, W, 50, 30), black); /* outside the box */
    assert_color(px(img, W, 19, 30), black);
    /* the tag "3 0.90" sits above the box: 9 rows, filled, white glyphs; its left column is
     * background and the top row of '3' (0x1F) starts one pixel in */
    assert_color(px(img, W, 20, 11), c);
    assert_color(px(img, W, 20, 19), c);
    assert_color(px(img, W, 21, 12), white);
    assert_color(px(img, W, 25, 12), white);
    assert_color(px(img, W, 20, 10), black);
    free(img);
}

static void test_draw_clipped(void **state)
{
    (void)state;
    unsigned char *img = calloc(W * H * 3, 1);
    assert_non_null(img);
    /* touching every border, with a name too long for the image: nothing is written outside */
    ki_det d = { 0, 0, W, H, 0.5f, 0, 0 };
    const char *names[1] = { "a very long class name that runs off the picture" };
    ki_detect_draw(img, W, H, &d, 1, names, 1);
    assert_color(px(img, W, 0, H - 1), ki_detect_color(0));
    assert_color(px(img, W, W - 1, H - 1), ki_detect_color(0));
    free(img);
}

static void test_draw_file(void **state)
{
    (void)state;
    char src[64], dst[64];
    snprintf(src, sizeof src, "/tmp/kinfer_draw_%d_src.png", (int)getpid());
    snprintf(dst, sizeof dst, "/tmp/kinfer_draw_%d_dst.png", (int)getpid());
    unsigned char *img = calloc(W * H * 3, 1);
    assert_non_null(img);
    assert_true(stbi_write_png(src, W, H, 3, img, W * 3));
    ki_det d = { 10, 15, 40, 35, 0.75f, 1, 0 };
    ki_error err;
    assert_int_equal(ki_detect_draw_file(src, dst, &d, 1, NULL, 0, &err), KI_OK);
    int w, h, comp;
    unsigned char *out = stbi_load(dst, &w, &h, &comp, 3);
    assert_non_null(out);
    assert_int_equal(w, W);
    assert_int_equal(h, H);
    ki_detect_draw(img, W, H, &d, 1, NULL, 0);
    assert_memory_equal(out, img, W * H * 3); /* PNG is lossless */
    stbi_image_free(out);
    assert_int_equal(ki_detect_draw_file("/nonexistent.png", dst, &d, 1, NULL, 0, &err),
                     KI_ERR_IO);
    assert_non_null(strstr(err.msg, "/nonexistent.png: cannot open"));
    assert_int_equal(ki_detect_draw_file(src, "/nonexistent/dir/x.png", &d, 1, NULL, 0, &err),
                     KI_ERR_IO);
    remove(src);
    remove(dst);
    free(img);
}

/* Finds the bounding box of network pixels brighter than 0.5 in channel 0. */
static void bright_bounds(const float *plane, int w, int h, int *b)
{
    b[0] = w, b[1] = h, b[2] = -1, b[3] = -1;
    for (int y = 0; y < h; y++) {
        for (int x = 0; x < w; x++) {
            if (plane[y * w + x] > 0.5f) {
                b[0] = x < b[0] ? x : b[0];
                b[1] = y < b[1] ? y : b[1];
                b[2] = x > b[2] ? x : b[2];
                b[3] = y > b[3] ? y : b[3];
            }
        }
    }
}

static void letterbox_round_trip(int iw, int ih, int nw, int nh)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/kinfer_lb_%d_%dx%d.png", (int)getpid(), iw, ih);
    unsigned char *img = calloc((size_t)iw * ih * 3, 1);
    assert_non_null(img);
    int r[4] = { iw / 4, ih / 3, iw * 3 / 4, ih * 2 / 3 }; /* white in [x1, x2) x [y1, y2) */
    for (int y = r[1]; y < r[3]; y++) {
        memset(img + ((size_t)y * iw + r[0]) * 3, 255, (size_t)(r[2] - r[0]) * 3);
    }
    assert_true(stbi_write_png(path, iw, ih, 3, img, iw * 3));
    ki_image_prep p = {
        .channels = 3, .height = nh, .width = nw, .letterbox = true, .std = { 1, 1, 1 }
    };
    float *net = malloc((size_t)3 * nw * nh * sizeof *net);
    assert_non_null(net);
    ki_image_info info;
    ki_error err;
    assert_int_equal(ki_image_load(path, &p, net, &info, &err), KI_OK);
    int b[4];
    bright_bounds(net, nw, nh, b);
    ki_det d = { (float)b[0], (float)b[1], (float)b[2] + 1, (float)b[3] + 1, 1, 0, 0 };
    ki_detect_map map = ki_detect_map_image(&p, &info);
    ki_detect_unmap(&d, 1, &map);
    float tol = 1.5f / map.sx; /* a network pixel of resampling blur */
    assert_float_equal(d.x1, r[0], tol);
    assert_float_equal(d.y1, r[1], tol);
    assert_float_equal(d.x2, r[2], tol);
    assert_float_equal(d.y2, r[3], tol);
    remove(path);
    free(net);
    free(img);
}

static void test_letterbox_round_trip(void **state)
{
    (void)state;
    letterbox_round_trip(200, 100, 64, 64); /* wide: padded top and bottom */
    letterbox_round_trip(90, 170, 64, 64);  /* tall, odd padding */
    letterbox_round_trip(64, 64, 64, 64);   /* no resize at all */
    letterbox_round_trip(300, 200, 96, 64); /* non-square network */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_draw_pixels),
        cmocka_unit_test(test_draw_clipped),
        cmocka_unit_test(test_draw_file),
        cmocka_unit_test(test_letterbox_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
