/* test_jpeg.c - the JPEG decoder (cli/jpeg.c) against Pillow's pixels, which are libjpeg-turbo's
 * (tests/data/jpeg/make_cases.py): every sampling layout, odd sizes, restart intervals, multiple
 * scans, 16-bit quantisers, RGB files, the gray output, damaged files against djpeg, and the two
 * sample photos; then the kinds it leaves to stb_image, and truncated, bit-flipped and crafted
 * files, which must fail cleanly or decode without reading out of bounds (ASan in `make asan`). */
/* cmocka needs these first, in this order */
/* clang-format off */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
/* clang-format on */

#include <dirent.h>
#include <stb_image.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../cli/detect.h"
#include "../../cli/image.h"
#include "../../cli/jpeg.h"
#include "../../core/io.h"

#define DIR_JPEG "tests/data/jpeg/"

/* The file's bytes in an exact-size heap block, so a read past the end is an ASan report. */
static unsigned char *read_all(const char *path, size_t *len)
{
    unsigned char *buf;
    ki_error err;
    if (ki_file_read(path, 1 << 24, &buf, len, &err) != KI_OK) {
        fail_msg("%s", err.msg);
    }
    unsigned char *exact = malloc(*len ? *len : 1);
    assert_non_null(exact);
    memcpy(exact, buf, *len);
    free(buf);
    return exact;
}

/* Decodes jpg to `channels` and requires exactly the pixels of png read as `channels`. */
static void check_exact(const char *jpg, const char *png, int channels)
{
    size_t len;
    unsigned char *buf = read_all(jpg, &len);
    ki_jpeg_image im;
    ki_error err;
    ki_status st = ki_jpeg_decode(buf, len, channels, &im, &err);
    free(buf);
    if (st != KI_OK) {
        fail_msg("%s: %s", jpg, err.msg);
    }
    int w, h, c;
    unsigned char *ref = stbi_load(png, &w, &h, &c, channels);
    assert_non_null(ref);
    if (w != im.w || h != im.h || im.channels != channels) {
        fail_msg("%s: %dx%d, Pillow %dx%d", jpg, im.w, im.h, w, h);
    }
    size_t n = (size_t)w * (size_t)h * (size_t)channels, differ = 0;
    int worst = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)im.px[i] - (int)ref[i]);
        differ += d != 0;
        worst = d > worst ? d : worst;
    }
    if (worst != 0) {
        fail_msg("%s (%d channels): %zu of %zu values differ from %s, by up to %d", jpg, channels,
                 differ, n, png, worst);
    }
    free(im.px);
    stbi_image_free(ref);
}

/* Two PNG files hold the same RGB pixels. */
static void check_exact_png(const char *a, const char *b)
{
    int wa, ha, wb, hb, c;
    unsigned char *pa = stbi_load(a, &wa, &ha, &c, 3), *pb = stbi_load(b, &wb, &hb, &c, 3);
    assert_true(pa && pb && wa == wb && ha == hb);
    assert_memory_equal(pa, pb, (size_t)wa * (size_t)ha * 3);
    stbi_image_free(pa);
    stbi_image_free(pb);
}

static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* Every NAME.jpg with a NAME.png: exact in the PNG's channel count and, for a gray file, as RGB
 * too (Pillow's convert("RGB") repeats the value); NAME_y.png is the gray output of a colour
 * file. */
static void test_matches_pillow(void **state)
{
    (void)state;
    DIR *dir = opendir(DIR_JPEG);
    assert_non_null(dir);
    int cases = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        char jpg[512], png[512], y[512];
        if (!ends_with(e->d_name, ".jpg") || strncmp(e->d_name, "unsupported_", 12) == 0) {
            continue;
        }
        snprintf(jpg, sizeof jpg, DIR_JPEG "%s", e->d_name);
        snprintf(png, sizeof png, DIR_JPEG "%.*s.png", (int)strlen(e->d_name) - 4, e->d_name);
        snprintf(y, sizeof y, DIR_JPEG "%.*s_y.png", (int)strlen(e->d_name) - 4, e->d_name);
        int w, h, c;
        if (!stbi_info(png, &w, &h, &c)) {
            fail_msg("%s: no reference %s", jpg, png);
        }
        check_exact(jpg, png, c);
        if (c == 1) {
            check_exact(jpg, png, 3);
        }
        if (stbi_info(y, &w, &h, &c)) {
            check_exact(jpg, y, 1);
        }
        cases++;
    }
    closedir(dir);
    assert_true(cases >= 66); /* make_cases.py writes 66 */
}

/* The sample photos (4:2:0 baseline) against Pillow's decoding of them, the PNGs that the
 * torchvision references were made from (tests/data/preprocess/make_refs.py). */
static void test_photos(void **state)
{
    (void)state;
    check_exact("tests/data/preprocess/bus.jpg", "tests/data/preprocess/bus.png", 3);
    check_exact("tests/data/preprocess/zidane.jpg", "tests/data/preprocess/zidane.png", 3);
}

/* One channel from an RGB (Adobe transform 0) file: stb_image's weights, as kinfer had them. */
static void test_rgb_file_gray(void **state)
{
    (void)state;
    size_t len;
    unsigned char *buf = read_all(DIR_JPEG "rgb_37x29.jpg", &len);
    ki_jpeg_image rgb, gray;
    ki_error err;
    assert_int_equal(ki_jpeg_decode(buf, len, 3, &rgb, &err), KI_OK);
    assert_int_equal(ki_jpeg_decode(buf, len, 1, &gray, &err), KI_OK);
    for (int i = 0; i < rgb.w * rgb.h; i++) {
        const unsigned char *p = rgb.px + 3 * i;
        assert_int_equal(gray.px[i], (p[0] * 77 + p[1] * 150 + p[2] * 29) >> 8);
    }
    free(rgb.px);
    free(gray.px);
    free(buf);
}

/* Progressive, 4:1:1, CMYK and arithmetic coding are KI_ERR_UNSUPPORTED here, and
 * ki_image_decode hands them to stb_image, which decodes all but the last. */
static void test_unsupported_falls_back(void **state)
{
    (void)state;
    static const char *const names[] = { "progressive", "c411", "cmyk", "arith" };
    for (int i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, DIR_JPEG "unsupported_%s_37x29.jpg", names[i]);
        size_t len;
        unsigned char *buf = read_all(path, &len);
        ki_jpeg_image im = { NULL, 0, 0, 0 };
        ki_error err;
        assert_int_equal(ki_jpeg_decode(buf, len, 3, &im, &err), KI_ERR_UNSUPPORTED);
        assert_null(im.px);
        free(buf);
        ki_image_pixels px;
        ki_status st = ki_image_decode(path, 3, &px, &err);
        if (i < 3) {
            assert_int_equal(st, KI_OK);
            assert_true(px.stb && px.w == 37 && px.h == 29);
            ki_image_pixels_free(&px);
        } else {
            assert_int_equal(st, KI_ERR_FORMAT);
            assert_non_null(strstr(err.msg, "unsupported_arith_37x29.jpg: cannot decode image"));
        }
    }
    /* and a baseline file takes kinfer's decoder */
    ki_image_pixels px;
    ki_error err;
    assert_int_equal(ki_image_decode(DIR_JPEG "c420_37x29.jpg", 3, &px, &err), KI_OK);
    assert_false(px.stb);
    ki_image_pixels_free(&px);
}

static void leave_as_is(unsigned char *rgb, int w, int h, void *ctx)
{
    (void)rgb;
    (void)w;
    (void)h;
    (void)ctx;
}

/* --draw and --mask overlays repaint the source image: a JPEG source is decoded by cli/jpeg.c
 * too, so an untouched repaint to PNG gives Pillow's pixels. */
static void test_repaint_source(void **state)
{
    (void)state;
    char dst[] = "/tmp/kinfer-jpeg-XXXXXX.png";
    int fd = mkstemps(dst, 4);
    assert_true(fd >= 0);
    close(fd);
    ki_error err;
    assert_int_equal(ki_image_repaint_file(DIR_JPEG "c422_37x29.jpg", dst, leave_as_is, NULL, &err),
                     KI_OK);
    check_exact_png(dst, DIR_JPEG "c422_37x29.png");
    unlink(dst);
}

/* Decodes len bytes of data (copied to an exact-size block) both ways; anything but success
 * must be a clean format, support or size failure. */
static void decode_any(const unsigned char *data, size_t len)
{
    unsigned char *buf = malloc(len ? len : 1);
    assert_non_null(buf);
    memcpy(buf, data, len);
    for (int channels = 1; channels <= 3; channels += 2) {
        ki_jpeg_image im;
        ki_error err;
        ki_status st = ki_jpeg_decode(buf, len, channels, &im, &err);
        if (st == KI_OK) {
            assert_true(im.w > 0 && im.h > 0 && im.channels == channels);
            volatile unsigned sum = 0;
            for (size_t i = 0; i < (size_t)im.w * im.h * channels; i++) {
                sum += im.px[i];
            }
            free(im.px);
        } else {
            assert_true(st == KI_ERR_FORMAT || st == KI_ERR_UNSUPPORTED || st == KI_ERR_LIMIT);
            assert_true(strlen(err.msg) > 0);
        }
    }
    free(buf);
}

static const char *const robust_files[] = {
    DIR_JPEG "c420_37x29.jpg",           DIR_JPEG "restart_3b_c422_53x35.jpg",
    DIR_JPEG "scans_1_2_c422_53x35.jpg", DIR_JPEG "y21_c12_c11_37x29.jpg",
    DIR_JPEG "sof1_q1_37x29.jpg",        DIR_JPEG "gray_37x29.jpg",
};

/* Every prefix of a few files: a truncated header fails, truncated entropy data decodes. */
static void test_truncated(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof robust_files / sizeof robust_files[0]; f++) {
        size_t len;
        unsigned char *buf = read_all(robust_files[f], &len);
        for (size_t n = 0; n <= len; n++) {
            decode_any(buf, n);
        }
        free(buf);
    }
}

/* Each bit of each byte flipped in turn, then random bytes overwritten (a fixed LCG). */
static void test_flipped(void **state)
{
    (void)state;
    uint32_t rng = 12345;
    for (size_t f = 0; f < sizeof robust_files / sizeof robust_files[0]; f++) {
        size_t len;
        unsigned char *buf = read_all(robust_files[f], &len);
        for (size_t i = 0; i < len && f < 2; i++) {
            for (int bit = 0; bit < 8; bit++) {
                buf[i] ^= (unsigned char)(1 << bit);
                decode_any(buf, len);
                buf[i] ^= (unsigned char)(1 << bit);
            }
        }
        for (int k = 0; k < 400; k++) {
            unsigned char *copy = malloc(len);
            assert_non_null(copy);
            memcpy(copy, buf, len);
            for (int j = 0; j < 4; j++) {
                rng = rng * 1664525u + 1013904223u;
                copy[(rng >> 8) % len] = (unsigned char)(rng >> 24);
            }
            decode_any(copy, len);
            free(copy);
        }
        free(buf);
    }
}

/* The offset of the first marker m in buf (its FF). */
static size_t find_marker(const unsigned char *buf, size_t len, unsigned char m)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] == 0xFF && buf[i + 1] == m) {
            return i;
        }
    }
    fail_msg("marker %02X not found", m);
    return 0;
}

/* c420_37x29.jpg with one byte of its frame header (offset from the SOF0 marker) changed. */
static ki_status patched_sof(size_t at, unsigned char v, ki_error *err)
{
    size_t len;
    unsigned char *buf = read_all(DIR_JPEG "c420_37x29.jpg", &len);
    buf[find_marker(buf, len, 0xC0) + at] = v;
    ki_jpeg_image im;
    ki_status st = ki_jpeg_decode(buf, len, 3, &im, err);
    if (st == KI_OK) {
        free(im.px);
    }
    free(buf);
    return st;
}

/* Crafted headers: sizes, precision, sampling factors, marker kinds, tables, limits. The SOF0
 * segment: FF C0, length (2), precision, height (2), width (2), count, then id, HV, Tq each. */
static void test_crafted(void **state)
{
    (void)state;
    ki_error err;
    assert_int_equal(patched_sof(4, 12, &err), KI_ERR_UNSUPPORTED); /* 12-bit */
    assert_int_equal(patched_sof(6, 0, &err), KI_ERR_FORMAT);       /* height 0 */
    assert_non_null(strstr(err.msg, "invalid image size 37x0"));
    assert_int_equal(patched_sof(5, 0x40, &err), KI_OK); /* 37 x 16413: data for the top only */
    /* 0x401D rows of 0x4025 pixels: more than 2^28 */
    size_t len;
    unsigned char *buf = read_all(DIR_JPEG "c420_37x29.jpg", &len);
    size_t sof = find_marker(buf, len, 0xC0);
    ki_jpeg_image im;
    buf[sof + 5] = 0x40;
    buf[sof + 7] = 0x40;
    assert_int_equal(ki_jpeg_decode(buf, len, 3, &im, &err), KI_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "pixels is more than kinfer accepts"));
    free(buf);
    assert_int_equal(patched_sof(11, 0x31, &err), KI_ERR_UNSUPPORTED); /* Y 3x1 */
    assert_int_equal(patched_sof(11, 0x50, &err), KI_ERR_FORMAT);      /* Y 5x0 */
    assert_int_equal(patched_sof(12, 4, &err), KI_ERR_FORMAT);         /* table 4 */
    assert_int_equal(patched_sof(13, 1, &err), KI_ERR_FORMAT);         /* Cb has Y's id */
    assert_int_equal(patched_sof(1, 0xC2, &err), KI_ERR_UNSUPPORTED);  /* progressive */
    assert_int_equal(patched_sof(1, 0xC9, &err), KI_ERR_UNSUPPORTED);  /* arithmetic */
    assert_int_equal(patched_sof(1, 0xC3, &err), KI_ERR_UNSUPPORTED);  /* lossless */
    assert_int_equal(patched_sof(1, 0xFE, &err), KI_ERR_FORMAT);       /* a comment: no frame */
    assert_non_null(strstr(err.msg, "scan before the frame header"));
}

/* Huffman tables whose codes do not fit, and a DC symbol over 15 bits. */
static void test_bad_tables(void **state)
{
    (void)state;
    size_t len;
    unsigned char *buf = read_all(DIR_JPEG "c420_37x29.jpg", &len);
    size_t dht = find_marker(buf, len, 0xC4);
    ki_jpeg_image im;
    ki_error err;
    buf[dht + 5] = 2; /* two 1-bit codes: the second is all ones */
    assert_int_equal(ki_jpeg_decode(buf, len, 3, &im, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "bad Huffman table"));
    free(buf);
    buf = read_all(DIR_JPEG "c420_37x29.jpg", &len);
    assert_int_equal(buf[dht + 4], 0x00); /* the first table: DC 0 */
    buf[dht + 5 + 16] = 16;               /* its first symbol */
    assert_int_equal(ki_jpeg_decode(buf, len, 3, &im, &err), KI_ERR_FORMAT);
    free(buf);
    unsigned char not_jpeg[4] = { 0x89, 'P', 'N', 'G' };
    assert_int_equal(ki_jpeg_decode(not_jpeg, 4, 3, &im, &err), KI_ERR_FORMAT);
    unsigned char soi_only[2] = { 0xFF, 0xD8 };
    assert_int_equal(ki_jpeg_decode(soi_only, 2, 3, &im, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "no image data"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pillow),
        cmocka_unit_test(test_photos),
        cmocka_unit_test(test_rgb_file_gray),
        cmocka_unit_test(test_unsupported_falls_back),
        cmocka_unit_test(test_repaint_source),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_flipped),
        cmocka_unit_test(test_crafted),
        cmocka_unit_test(test_bad_tables),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
