/* io.c - reading whole files with a size bound. */
#include "io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ki_status ki_file_read(const char *path, size_t max, unsigned char **buf, size_t *len,
                       ki_error *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        return KI_FAIL(err, KI_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    }
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;
    ki_status st = KI_OK;
    for (;;) {
        if (n == cap) {
            if (cap >= max) {
                st = KI_FAIL(err, KI_ERR_LIMIT, "%s: larger than %zu bytes", path, max);
                break;
            }
            cap = cap ? cap * 2 : 1 << 16;
            unsigned char *nb = realloc(b, cap);
            if (!nb) {
                st = KI_FAIL(err, KI_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f)) {
                st = KI_FAIL(err, KI_ERR_IO, "%s: read error", path);
            }
            break;
        }
    }
    fclose(f);
    /* the last doubling may have let more than max bytes in */
    if (st == KI_OK && n > max) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "%s: larger than %zu bytes", path, max);
    }
    if (st != KI_OK) {
        free(b);
        return st;
    }
    *buf = b;
    *len = n;
    return KI_OK;
}
