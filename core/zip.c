/* zip.c - stored ZIP reader (pnnx-format.md §2). Fields are decoded byte by byte. */
#include "zip.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckd.h"
#include "hash.h"

struct ki_zip {
    const unsigned char *data;
    size_t size;
    void *map; /* non-NULL when we mapped the file */
    char *label;
    int n;
    ki_zip_entry *entries;
    char *names; /* all names, NUL-separated */
    int *index;  /* hash table of entry indices, -1 empty */
    size_t index_cap;
};

#define SIG_LOCAL   0x04034b50u
#define SIG_CENTRAL 0x02014b50u
#define SIG_EOCD    0x06054b50u
#define SIG_EOCD64  0x06064b50u
#define SIG_LOC64   0x07064b50u

static uint16_t rd16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t rd64(const unsigned char *p)
{
    return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32);
}

/* true when [off, off+len) lies inside the archive */
static bool in_file(const ki_zip *z, uint64_t off, uint64_t len)
{
    return off <= z->size && len <= z->size - off;
}

uint32_t ki_crc32(uint32_t crc, const unsigned char *p, size_t n)
{
    static uint32_t table[256];
    static int ready; /* benign: every thread computes the same table */
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) {
                c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            }
            table[i] = c;
        }
        ready = 1;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
    }
    return ~crc;
}

typedef struct cdir {
    uint64_t count, offset, size;
} cdir;

static ki_status find_eocd(const ki_zip *z, cdir *cd, ki_error *err)
{
    if (z->size < 22) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: %zu bytes is too small for a zip archive", z->label,
                       z->size);
    }
    /* The EOCD is 22 bytes plus a comment of at most 65535 bytes from the end. */
    size_t lo = z->size > 22 + 65535 ? z->size - 22 - 65535 : 0, pos = z->size - 22;
    while (rd32(z->data + pos) != SIG_EOCD ||
           22 + (size_t)rd16(z->data + pos + 20) != z->size - pos) {
        if (pos == lo) {
            return KI_FAIL(
                err, KI_ERR_FORMAT,
                "%s: no end-of-central-directory record (not a zip archive, or truncated)",
                z->label);
        }
        pos--;
    }
    const unsigned char *e = z->data + pos;
    cd->count = rd16(e + 10);
    cd->size = rd32(e + 12);
    cd->offset = rd32(e + 16);
    if (cd->count != 0xFFFF && cd->size != 0xFFFFFFFFu && cd->offset != 0xFFFFFFFFu) {
        return KI_OK;
    }
    /* zip64: the locator sits just before the EOCD and points at the zip64 EOCD record */
    if (pos < 20 || rd32(z->data + pos - 20) != SIG_LOC64) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: saturated end record without a zip64 locator",
                       z->label);
    }
    uint64_t off64 = rd64(z->data + pos - 20 + 8);
    if (!in_file(z, off64, 56) || rd32(z->data + off64) != SIG_EOCD64) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: zip64 end record offset %llu is invalid", z->label,
                       (unsigned long long)off64);
    }
    cd->count = rd64(z->data + off64 + 32);
    cd->size = rd64(z->data + off64 + 40);
    cd->offset = rd64(z->data + off64 + 48);
    return KI_OK;
}

/* Applies the zip64 extra block (id 1) to the saturated fields, in the standard order. */
static bool apply_zip64(const unsigned char *x, size_t xlen, uint64_t *usize, uint64_t *csize,
                        uint64_t *offset)
{
    size_t p = 0;
    while (p + 4 <= xlen) {
        uint16_t id = rd16(x + p), len = rd16(x + p + 2);
        if (p + 4 + len > xlen) {
            return false;
        }
        if (id == 1) {
            const unsigned char *b = x + p + 4;
            size_t q = 0;
            uint64_t *fields[3] = { usize, csize, offset };
            for (int k = 0; k < 3; k++) {
                if (*fields[k] == 0xFFFFFFFFu) {
                    if (q + 8 > len) {
                        return false;
                    }
                    *fields[k] = rd64(b + q);
                    q += 8;
                }
            }
            return true;
        }
        p += 4 + (size_t)len;
    }
    return *usize != 0xFFFFFFFFu && *csize != 0xFFFFFFFFu && *offset != 0xFFFFFFFFu;
}

static ki_status read_entry(ki_zip *z, uint64_t *pos, uint64_t cd_end, int i, char **name_out,
                            ki_error *err)
{
    const unsigned char *h = z->data + *pos;
    if (*pos + 46 > cd_end || rd32(h) != SIG_CENTRAL) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "%s: central directory entry %d at offset %llu is invalid", z->label, i,
                       (unsigned long long)*pos);
    }
    uint16_t flags = rd16(h + 8), method = rd16(h + 10), nlen = rd16(h + 28), xlen = rd16(h + 30),
             clen = rd16(h + 32);
    uint64_t csize = rd32(h + 20), usize = rd32(h + 24), loc = rd32(h + 42);
    if (*pos + 46 + nlen + xlen + clen > cd_end) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: central directory entry %d runs past the directory",
                       z->label, i);
    }
    memcpy(*name_out, h + 46, nlen);
    (*name_out)[nlen] = '\0';
    const char *name = *name_out;
    *name_out += nlen + 1;
    if (!apply_zip64(h + 46 + nlen, xlen, &usize, &csize, &loc)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: entry '%s' has a bad zip64 extra field", z->label,
                       name);
    }
    if (method != 0 || (flags & 8) || csize != usize) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "%s: entry '%s' is compressed or uses a data descriptor (only stored "
                       "entries are supported)",
                       z->label, name);
    }
    if (!in_file(z, loc, 30) || rd32(z->data + loc) != SIG_LOCAL) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "%s: entry '%s' points at offset %llu, which holds no local header",
                       z->label, name, (unsigned long long)loc);
    }
    uint64_t data = loc + 30 + rd16(z->data + loc + 26) + rd16(z->data + loc + 28);
    if (!in_file(z, data, usize)) {
        return KI_FAIL(
            err, KI_ERR_FORMAT,
            "%s: entry '%s' (%llu bytes at offset %llu) runs past the end of the file (%zu bytes)",
            z->label, name, (unsigned long long)usize, (unsigned long long)data, z->size);
    }
    z->entries[i] = (ki_zip_entry){ name, data, usize, rd32(h + 16) };
    *pos += 46 + (uint64_t)nlen + xlen + clen;
    return KI_OK;
}

static ki_status build_index(ki_zip *z, ki_error *err)
{
    z->index_cap = 16;
    while (z->index_cap < 2 * (size_t)z->n + 1) {
        z->index_cap *= 2;
    }
    z->index = malloc(z->index_cap * sizeof *z->index);
    if (!z->index) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    memset(z->index, 0xff, z->index_cap * sizeof *z->index);
    for (int i = 0; i < z->n; i++) {
        size_t k = (size_t)ki_hash_str(z->entries[i].name) & (z->index_cap - 1);
        while (z->index[k] >= 0 && strcmp(z->entries[z->index[k]].name, z->entries[i].name) != 0) {
            k = (k + 1) & (z->index_cap - 1);
        }
        z->index[k] = i; /* a repeated name keeps the last entry, as pnnx does */
    }
    return KI_OK;
}

static ki_status parse(ki_zip *z, ki_error *err)
{
    cdir cd = { 0, 0, 0 };
    ki_status st = find_eocd(z, &cd, err);
    if (st != KI_OK) {
        return st;
    }
    if (!in_file(z, cd.offset, cd.size) || cd.count > cd.size / 46 ||
        cd.count > KI_ZIP_MAX_ENTRIES) {
        return KI_FAIL(
            err, KI_ERR_FORMAT,
            "%s: central directory (%llu entries, %llu bytes at offset %llu) does not fit the file",
            z->label, (unsigned long long)cd.count, (unsigned long long)cd.size,
            (unsigned long long)cd.offset);
    }
    z->n = (int)cd.count;
    z->entries = calloc((size_t)z->n + 1, sizeof *z->entries);
    z->names = malloc((size_t)cd.size + 1); /* names are shorter than their headers */
    if (!z->entries || !z->names) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    char *names = z->names;
    uint64_t pos = cd.offset, end = cd.offset + cd.size;
    for (int i = 0; i < z->n; i++) {
        st = read_entry(z, &pos, end, i, &names, err);
        if (st != KI_OK) {
            return st;
        }
    }
    return build_index(z, err);
}

ki_status ki_zip_open_memory(const void *data, size_t size, const char *label, ki_zip **out,
                             ki_error *err)
{
    ki_zip *z = calloc(1, sizeof *z);
    if (!z || !(z->label = strdup(label))) {
        free(z);
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    z->data = data;
    z->size = size;
    ki_status st = parse(z, err);
    if (st != KI_OK) {
        ki_zip_close(z);
        return st;
    }
    *out = z;
    return KI_OK;
}

ki_status ki_zip_open(const char *path, ki_zip **out, ki_error *err)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        return KI_FAIL(err, KI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return KI_FAIL(err, KI_ERR_IO, "%s: not a regular file", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = NULL;
    if (size > 0) {
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return KI_FAIL(err, KI_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
        }
    }
    close(fd);
    static const unsigned char empty[1];
    ki_zip *z = NULL;
    ki_status st = ki_zip_open_memory(map ? map : empty, size, path, &z, err);
    if (st != KI_OK) {
        if (map) {
            munmap(map, size);
        }
        return st;
    }
    z->map = map;
    *out = z;
    return KI_OK;
}

void ki_zip_close(ki_zip *z)
{
    if (!z) {
        return;
    }
    if (z->map) {
        munmap(z->map, z->size);
    }
    free(z->label);
    free(z->entries);
    free(z->names);
    free(z->index);
    free(z);
}

int ki_zip_count(const ki_zip *z)
{
    return z->n;
}

const ki_zip_entry *ki_zip_entry_at(const ki_zip *z, int i)
{
    return (i >= 0 && i < z->n) ? &z->entries[i] : NULL;
}

const ki_zip_entry *ki_zip_find(const ki_zip *z, const char *name)
{
    if (!z->index) {
        return NULL;
    }
    size_t k = (size_t)ki_hash_str(name) & (z->index_cap - 1);
    while (z->index[k] >= 0) {
        if (strcmp(z->entries[z->index[k]].name, name) == 0) {
            return &z->entries[z->index[k]];
        }
        k = (k + 1) & (z->index_cap - 1);
    }
    return NULL;
}

const unsigned char *ki_zip_data(const ki_zip *z, const ki_zip_entry *e)
{
    return z->data + e->data_offset;
}

ki_status ki_zip_verify(const ki_zip *z, const ki_zip_entry *e, ki_error *err)
{
    uint32_t c = ki_crc32(0, ki_zip_data(z, e), (size_t)e->size);
    if (c != e->crc32) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "%s: entry '%s' fails its CRC-32 check (%08x, expected %08x)", z->label,
                       e->name, c, e->crc32);
    }
    return KI_OK;
}
