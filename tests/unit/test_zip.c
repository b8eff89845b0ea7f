/* test_zip.c - the stored-zip reader on archives written here in both pnnx variants (classic
 * and zip64), read back byte for byte, plus truncated and corrupted archives. */
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

#include "../../core/zip.h"

typedef struct buf {
    unsigned char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void u16(buf *b, unsigned v)
{
    unsigned char x[2] = { (unsigned char)v, (unsigned char)(v >> 8) };
    put(b, x, 2);
}

static void u32(buf *b, uint32_t v)
{
    u16(b, v & 0xffff);
    u16(b, v >> 16);
}

static void u64(buf *b, uint64_t v)
{
    u32(b, (uint32_t)v);
    u32(b, (uint32_t)(v >> 32));
}

typedef struct entry {
    const char *name;
    const unsigned char *data;
    size_t size;
} entry;

/* Writes a stored zip the way pnnx does; zip64 saturates the 32-bit fields. */
static buf write_zip(const entry *e, int n, int zip64)
{
    buf b = { NULL, 0, 0 };
    size_t *off = calloc((size_t)n, sizeof *off);
    for (int i = 0; i < n; i++) {
        uint32_t crc = ki_crc32(0, e[i].data, e[i].size);
        off[i] = b.n;
        u32(&b, 0x04034b50), u16(&b, 0), u16(&b, 0), u16(&b, 0), u16(&b, 0), u16(&b, 0);
        u32(&b, crc);
        u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)e[i].size);
        u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)e[i].size);
        u16(&b, (unsigned)strlen(e[i].name)), u16(&b, zip64 ? 32 : 0);
        put(&b, e[i].name, strlen(e[i].name));
        if (zip64) {
            u16(&b, 1), u16(&b, 28), u64(&b, e[i].size), u64(&b, e[i].size), u64(&b, 0), u32(&b, 0);
        }
        put(&b, e[i].data, e[i].size);
    }
    size_t cd = b.n;
    for (int i = 0; i < n; i++) {
        u32(&b, 0x02014b50), u16(&b, 0), u16(&b, 0), u16(&b, 0), u16(&b, 0), u16(&b, 0), u16(&b, 0);
        u32(&b, ki_crc32(0, e[i].data, e[i].size));
        u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)e[i].size);
        u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)e[i].size);
        u16(&b, (unsigned)strlen(e[i].name)), u16(&b, zip64 ? 32 : 0), u16(&b, 0);
        u16(&b, zip64 ? 0xFFFF : 0), u16(&b, 0), u32(&b, 0);
        u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)off[i]);
        put(&b, e[i].name, strlen(e[i].name));
        if (zip64) {
            u16(&b, 1), u16(&b, 28), u64(&b, e[i].size), u64(&b, e[i].size), u64(&b, off[i]),
                u32(&b, 0);
        }
    }
    size_t cd_size = b.n - cd;
    if (zip64) {
        size_t rec = b.n;
        u32(&b, 0x06064b50), u64(&b, 44), u16(&b, 0), u16(&b, 0), u32(&b, 0), u32(&b, 0);
        u64(&b, (uint64_t)n), u64(&b, (uint64_t)n), u64(&b, cd_size), u64(&b, cd);
        u32(&b, 0x07064b50), u32(&b, 0), u64(&b, rec), u32(&b, 1);
    }
    u32(&b, 0x06054b50), u16(&b, 0), u16(&b, 0);
    u16(&b, zip64 ? 0xFFFF : (unsigned)n), u16(&b, zip64 ? 0xFFFF : (unsigned)n);
    u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)cd_size), u32(&b, zip64 ? 0xFFFFFFFFu : (uint32_t)cd);
    u16(&b, 0);
    free(off);
    return b;
}

static unsigned char d1[] = { 1, 2, 3, 4, 5, 6, 7 }; /* odd length: unaligned offsets follow */
static unsigned char d2[1000];

static const entry entries[] = {
    { "conv1.weight", d1, sizeof d1 },
    { "24.m.0.bias", d2, sizeof d2 },
    { "/backbone/conv:0.w", d1, 3 },
    { "empty.data", d1, 0 },
};

static void check_archive(int zip64)
{
    for (size_t i = 0; i < sizeof d2; i++) {
        d2[i] = (unsigned char)(i * 7 + 3);
    }
    buf b = write_zip(entries, 4, zip64);
    ki_zip *z;
    ki_error err;
    assert_int_equal(ki_zip_open_memory(b.p, b.n, "t.bin", &z, &err), KI_OK);
    assert_int_equal(ki_zip_count(z), 4);
    for (int i = 0; i < 4; i++) {
        const ki_zip_entry *e = ki_zip_find(z, entries[i].name);
        assert_non_null(e);
        assert_int_equal(e->size, entries[i].size);
        assert_memory_equal(ki_zip_data(z, e), entries[i].data, entries[i].size);
        assert_int_equal(ki_zip_verify(z, e, &err), KI_OK);
    }
    assert_null(ki_zip_find(z, "conv1"));
    assert_null(ki_zip_find(z, "conv1.weight "));
    ki_zip_close(z);
    free(b.p);
}

static void test_classic(void **state)
{
    (void)state;
    check_archive(0);
}

static void test_zip64(void **state)
{
    (void)state;
    check_archive(1);
}

static void expect_bad(const unsigned char *p, size_t n, const char *needle)
{
    ki_zip *z = NULL;
    ki_error err;
    ki_status st = ki_zip_open_memory(p, n, "t.bin", &z, &err);
    if (st == KI_OK || !strstr(err.msg, needle) || !strstr(err.msg, "t.bin")) {
        fail_msg("status %d, message '%s', wanted '%s'", st, st ? err.msg : "", needle);
    }
    assert_null(z);
}

static void test_malformed(void **state)
{
    (void)state;
    buf b = write_zip(entries, 2, 0);
    expect_bad(b.p, 0, "too small");
    expect_bad(b.p, 10, "too small");
    /* truncations at every length shorter than the whole archive never read out of bounds */
    for (size_t n = 0; n < b.n; n++) {
        ki_zip *z = NULL;
        ki_error err;
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, b.p, n);
        assert_int_not_equal(ki_zip_open_memory(copy, n, "t.bin", &z, &err), KI_OK);
        free(copy);
    }
    /* the local-header offset of entry 1 pointed past the end */
    unsigned char *c = malloc(b.n);
    memcpy(c, b.p, b.n);
    size_t cd = b.n - 22 - (46 + 12) - (46 + 11);
    size_t off_field = cd + 46 + 12 + 42;
    c[off_field] = 0xff, c[off_field + 1] = 0xff, c[off_field + 2] = 0xff, c[off_field + 3] = 0x0f;
    expect_bad(c, b.n, "holds no local header");
    /* a compressed entry */
    memcpy(c, b.p, b.n);
    c[cd + 10] = 8;
    expect_bad(c, b.n, "compressed");
    /* an entry size running past the end */
    memcpy(c, b.p, b.n);
    c[cd + 20] = 0xff, c[cd + 21] = 0xff, c[cd + 24] = 0xff, c[cd + 25] = 0xff;
    expect_bad(c, b.n, "runs past the end");
    /* entry count larger than the directory could hold */
    memcpy(c, b.p, b.n);
    c[b.n - 22 + 10] = 0xff, c[b.n - 22 + 8] = 0xff;
    expect_bad(c, b.n, "does not fit");
    /* a corrupted byte of data fails the CRC check */
    memcpy(c, b.p, b.n);
    c[30 + 12] ^= 1;
    ki_zip *z;
    ki_error err;
    assert_int_equal(ki_zip_open_memory(c, b.n, "t.bin", &z, &err), KI_OK);
    assert_int_equal(ki_zip_verify(z, ki_zip_find(z, "conv1.weight"), &err), KI_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "CRC"));
    ki_zip_close(z);
    free(c);
    free(b.p);
}

static void test_file_and_real_bins(void **state)
{
    (void)state;
    ki_zip *z;
    ki_error err;
    assert_int_equal(ki_zip_open("tests/data/nets/mnist_cnn/model.pnnx.bin", &z, &err), KI_OK);
    const ki_zip_entry *e = ki_zip_find(z, "fc2.weight");
    assert_non_null(e);
    assert_int_equal(e->size, 10 * 64 * 4);
    for (int i = 0; i < ki_zip_count(z); i++) {
        assert_int_equal(ki_zip_verify(z, ki_zip_entry_at(z, i), &err), KI_OK);
    }
    ki_zip_close(z);
    assert_int_equal(ki_zip_open("tests/data/no-such.bin", &z, &err), KI_ERR_IO);
    assert_non_null(strstr(err.msg, "no-such.bin"));
    assert_int_equal(ki_zip_open("tests/data/nets/mnist_cnn/model.pnnx.param", &z, &err),
                     KI_ERR_FORMAT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classic),
        cmocka_unit_test(test_zip64),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_file_and_real_bins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
