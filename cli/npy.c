/* npy.c - .npy reading and writing (format versions 1.0, 2.0 and 3.0). */
#include "npy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/ckd.h"
#include "../core/half.h"

#define NPY_MAX_FILE ((size_t)1 << 36)

ki_status ki_file_write_atomic(const char *path, const void *data, size_t len, ki_error *err)
{
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 16);
    if (!tmp) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    snprintf(tmp, plen + 16, "%s.tmp%05d", path, (int)(getpid() % 100000));
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        ki_status st = KI_FAIL(err, KI_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        free(tmp);
        return st;
    }
    bool ok = fwrite(data, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        ki_status st = KI_FAIL(err, KI_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    return KI_OK;
}

/* Finds 'key': in the header dict and returns a pointer just past the colon. */
static const char *dict_value(const char *h, size_t n, const char *key)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i + kl + 2 < n; i++) {
        if ((h[i] == '\'' || h[i] == '"') && memcmp(h + i + 1, key, kl) == 0 &&
            h[i + 1 + kl] == h[i]) {
            const char *p = h + i + kl + 2;
            while (p < h + n && (*p == ' ' || *p == ':')) {
                p++;
            }
            return p;
        }
    }
    return NULL;
}

static ki_status parse_shape(const char *p, const char *end, ki_shape *shape, const char *label,
                             ki_error *err)
{
    memset(shape, 0, sizeof *shape);
    if (p >= end || *p != '(') {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: header has no shape tuple", label);
    }
    p++;
    for (;;) {
        while (p < end && (*p == ' ' || *p == ',')) {
            p++;
        }
        if (p < end && *p == ')') {
            break;
        }
        if (p >= end || !isdigit((unsigned char)*p)) {
            return KI_FAIL(err, KI_ERR_FORMAT, "%s: bad shape in header", label);
        }
        if (shape->ndim == KI_MAX_DIMS) {
            return KI_FAIL(err, KI_ERR_LIMIT, "%s: more than %d dimensions", label, KI_MAX_DIMS);
        }
        int64_t v = 0;
        while (p < end && isdigit((unsigned char)*p)) {
            if (!ki_ckd_mul_i64(&v, v, 10) || !ki_ckd_add_i64(&v, v, *p - '0') || v > KI_MAX_DIM) {
                return KI_FAIL(err, KI_ERR_LIMIT, "%s: dimension too large", label);
            }
            p++;
        }
        shape->d[shape->ndim++] = v;
    }
    ki_status st = ki_shape_check(shape, err);
    if (st != KI_OK) {
        /* not KI_FAIL(err, .., err->msg): formatting a buffer into itself garbles it */
        ki_error_prefix(err, "%s", label);
    }
    return st;
}

/* Length of the quoted token at p ('<f4' with its quotes), bounded by end and 16 bytes, so a
 * message never reads past the header. */
static int quoted_len(const char *p, const char *end)
{
    if (p >= end) {
        return 0;
    }
    int n = 1;
    while (n < 16 && p + n < end && p[n] != p[0]) {
        n++;
    }
    return p + n < end && p[n] == p[0] ? n + 1 : n;
}

typedef struct npy_type {
    const char *descr;
    size_t size;
} npy_type;

static const npy_type types[] = { { "<f4", 4 }, { "<f8", 8 }, { "<f2", 2 },
                                  { "<i8", 8 }, { "<i4", 4 }, { "<i2", 2 },
                                  { "|i1", 1 }, { "|u1", 1 }, { "|b1", 1 } };

static float load_elem(const unsigned char *p, int t)
{
    float f;
    double d;
    int64_t q;
    int32_t i;
    int16_t s;
    uint16_t h;
    switch (t) {
    case 0:
        memcpy(&f, p, 4);
        return f;
    case 1:
        memcpy(&d, p, 8);
        return (float)d;
    case 2:
        memcpy(&h, p, 2);
        return ki_half_to_float(h);
    case 3:
        memcpy(&q, p, 8);
        return (float)q;
    case 4:
        memcpy(&i, p, 4);
        return (float)i;
    case 5:
        memcpy(&s, p, 2);
        return (float)s;
    case 6:
        return (float)(int8_t)p[0];
    default:
        return (float)p[0];
    }
}

ki_status ki_npy_parse(const unsigned char *buf, size_t len, const char *label, ki_shape *shape,
                       float **data, ki_error *err)
{
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: not a .npy file (bad magic)", label);
    }
    int major = buf[6];
    size_t hl, start;
    if (major == 1) {
        hl = (size_t)buf[8] | ((size_t)buf[9] << 8);
        start = 10;
    } else if ((major == 2 || major == 3) && len >= 12) {
        hl = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) |
             ((size_t)buf[11] << 24);
        start = 12;
    } else {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: unsupported .npy version %d", label, major);
    }
    if (hl > len - start) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: header length %zu runs past the file", label, hl);
    }
    const char *h = (const char *)buf + start, *end = h + hl;
    const char *descr = dict_value(h, hl, "descr"), *fo = dict_value(h, hl, "fortran_order");
    const char *sh = dict_value(h, hl, "shape");
    if (!descr || !fo || !sh) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: header lacks descr, fortran_order or shape", label);
    }
    if (end - fo < 5 || memcmp(fo, "False", 5) != 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "%s: Fortran-order arrays are not supported",
                       label);
    }
    int t = -1;
    for (int k = 0; k < (int)(sizeof types / sizeof types[0]) && t < 0; k++) {
        if (end - descr >= 5 && descr[4] == descr[0] && memcmp(descr + 1, types[k].descr, 3) == 0) {
            t = k;
        }
    }
    if (t < 0) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                       "%s: element type %.*s is not supported (float32 expected)", label,
                       quoted_len(descr, end), descr);
    }
    ki_status st = parse_shape(sh, end, shape, label, err);
    if (st != KI_OK) {
        return st;
    }
    size_t n = (size_t)ki_shape_count(shape), bytes;
    if (!ki_ckd_mul(&bytes, n, types[t].size) || bytes != len - start - hl) {
        return KI_FAIL(err, KI_ERR_FORMAT, "%s: shape %s needs %zu data bytes, the file has %zu",
                       label, ki_shape_str(shape, (char[128]){ 0 }, 128), n * types[t].size,
                       len - start - hl);
    }
    float *out = malloc(n ? n * sizeof(float) : 1);
    if (!out) {
        return KI_FAIL(err, KI_ERR_NOMEM, "%s: out of memory", label);
    }
    const unsigned char *p = buf + start + hl;
    for (size_t i = 0; i < n; i++) {
        out[i] = load_elem(p + i * types[t].size, t);
    }
    *data = out;
    return KI_OK;
}

ki_status ki_npy_read(const char *path, ki_shape *shape, float **data, ki_error *err)
{
    unsigned char *buf;
    size_t len;
    ki_status st = ki_file_read(path, NPY_MAX_FILE, &buf, &len, err);
    if (st != KI_OK) {
        return st;
    }
    st = ki_npy_parse(buf, len, path, shape, data, err);
    free(buf);
    return st;
}

ki_status ki_npy_write(const char *path, const ki_shape *shape, const float *data, ki_error *err)
{
    char dims[256] = "";
    size_t pos = 0;
    for (int i = 0; i < shape->ndim; i++) {
        pos += (size_t)snprintf(dims + pos, sizeof dims - pos, "%lld,%s", (long long)shape->d[i],
                                (shape->ndim > 1 && i < shape->ndim - 1) ? " " : "");
    }
    if (shape->ndim > 1) {
        dims[pos - 1] = '\0'; /* (2, 3) not (2, 3,) */
    }
    char header[512];
    int hl = snprintf(header, sizeof header,
                      "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    int total = 10 + hl + 1;
    int pad = (64 - total % 64) % 64;
    size_t n = (size_t)ki_shape_count(shape), bytes = 10 + (size_t)hl + (size_t)pad + 1 + n * 4;
    unsigned char *buf = malloc(bytes);
    if (!buf) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t h = (size_t)hl + (size_t)pad + 1;
    buf[8] = (unsigned char)(h & 0xff);
    buf[9] = (unsigned char)(h >> 8);
    memcpy(buf + 10, header, (size_t)hl);
    memset(buf + 10 + hl, ' ', (size_t)pad);
    buf[10 + hl + pad] = '\n';
    memcpy(buf + 10 + h, data, n * 4);
    ki_status st = ki_file_write_atomic(path, buf, bytes, err);
    free(buf);
    return st;
}
