/* test_hard_cli.c - regression tests for the findings of fuzzing and of the malformed corpus in
 * the CLI readers (cli/npy.c, cli/image.c). Each test names the input that once misbehaved. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka needs the headers above first */
// clang-format off
#include <cmocka.h>
// clang-format on

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/image.h"
#include "../../cli/npy.h"

/* An exact-size heap copy, so a read one byte past the end is an ASan report. */
static unsigned char *exact_copy(const void *p, size_t n)
{
    unsigned char *b = malloc(n ? n : 1);
    assert_non_null(b);
    memcpy(b, p, n);
    return b;
}

static ki_status parse_text(const char *header, size_t data_bytes, ki_error *err, float **out)
{
    size_t hl = strlen(header), n = 10 + hl + data_bytes;
    unsigned char *b = calloc(1, n);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (unsigned char)(hl & 0xff);
    b[9] = (unsigned char)(hl >> 8);
    memcpy(b + 10, header, hl);
    unsigned char *copy = exact_copy(b, n);
    free(b);
    ki_shape sh;
    *out = NULL;
    ki_status st = ki_npy_parse(copy, n, "t.npy", &sh, out, err);
    free(copy);
    return st;
}

/* fuzz-npy finding: the unsupported-descr message printed 8 bytes with %.8s even when the
 * descr value sat at the end of the buffer (heap-buffer-overflow in printf). */
static void test_npy_descr_at_end_of_file(void **state)
{
    (void)state;
    FILE *f = fopen("tests/malformed/crashes/npy_descr_at_end.npy", "rb");
    assert_non_null(f);
    unsigned char buf[512];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    unsigned char *copy = exact_copy(buf, n);
    ki_shape sh;
    float *out = NULL;
    ki_error err;
    assert_int_equal(ki_npy_parse(copy, n, "c.npy", &sh, &out, &err), KI_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "is not supported"));
    free(copy);
}

static void test_npy_descr_last_bytes(void **state)
{
    (void)state;
    ki_error err;
    float *out;
    assert_int_equal(
        parse_text("{'fortran_order': False, 'shape': (1,), 'descr': 'q", 0, &err, &out),
        KI_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "t.npy: element type 'q is not supported (float32 expected)");
}

/* A header that ends right after "'descr':" leaves nothing to show. */
static void test_npy_descr_empty_at_end(void **state)
{
    (void)state;
    ki_error err;
    float *out;
    assert_int_equal(parse_text("{'fortran_order': False, 'shape': (1,), 'descr': ", 0, &err, &out),
                     KI_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "t.npy: element type  is not supported (float32 expected)");
}

/* The unsupported type is shown as its quoted token, not 8 raw bytes. */
static void test_npy_descr_message_quoted(void **state)
{
    (void)state;
    ki_error err;
    float *out;
    assert_int_equal(
        parse_text("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, &err, &out),
        KI_ERR_UNSUPPORTED);
    assert_string_equal(err.msg, "t.npy: element type '>f4' is not supported (float32 expected)");
}

/* Malformed corpus finding: a shape over KI_MAX_NUMEL was reported through
 * KI_FAIL(err, .., err->msg), formatting the message into itself (garbled text, UB). */
static void test_npy_shape_limit_message(void **state)
{
    (void)state;
    ki_error err;
    float *out;
    assert_int_equal(parse_text("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, "
                                "1000000), }",
                                4, &err, &out),
                     KI_ERR_LIMIT);
    assert_string_equal(err.msg,
                        "t.npy: shape (1000000,1000000) has more than 17179869184 elements");
}

/* Malformed corpus finding: a zero or negative image size was reported as "more than kinfer
 * accepts". */
static void test_image_zero_width(void **state)
{
    (void)state;
    ki_image_prep p = { .channels = 1, .height = 28, .width = 28, .std = { 1, 1, 1 } };
    float dst[28 * 28];
    ki_image_info info;
    ki_error err;
    const char *path = "tests/malformed/i_zero_width.pgm";
    assert_int_equal(ki_image_load(path, &p, dst, &info, &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "invalid image size 0x28"));
    path = "tests/malformed/i_bad_dims.bmp";
    assert_int_not_equal(ki_image_load(path, &p, dst, &info, &err), KI_OK);
    assert_non_null(strstr(err.msg, "invalid image size"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npy_descr_at_end_of_file),
        cmocka_unit_test(test_npy_descr_last_bytes),
        cmocka_unit_test(test_npy_descr_empty_at_end),
        cmocka_unit_test(test_npy_descr_message_quoted),
        cmocka_unit_test(test_npy_shape_limit_message),
        cmocka_unit_test(test_image_zero_width),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
