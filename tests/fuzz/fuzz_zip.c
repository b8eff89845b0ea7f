/* fuzz_zip.c - libFuzzer target for the stored-zip reader: ki_zip_open_memory on the input
 * bytes, then every entry is looked up by name, its data touched and its CRC checked. Built by
 * tests/fuzz/fuzz.mk (`make fuzz-zip`) with ASan and UBSan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/zip.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy, so ASan sees any read past the archive */
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) {
        return 0;
    }
    memcpy(copy, data, size);
    ki_zip *z = NULL;
    ki_error err;
    if (ki_zip_open_memory(copy, size, "fuzz.bin", &z, &err) == KI_OK) {
        unsigned sum = 0;
        for (int i = 0; i < ki_zip_count(z); i++) {
            const ki_zip_entry *e = ki_zip_entry_at(z, i);
            const ki_zip_entry *f = ki_zip_find(z, e->name);
            if (!f || strcmp(f->name, e->name) != 0) {
                abort();
            }
            const unsigned char *p = ki_zip_data(z, e);
            if (e->size > 0) {
                sum += p[0] + p[e->size - 1];
            }
            (void)ki_zip_verify(z, e, &err);
        }
        (void)sum;
        ki_zip_close(z);
    }
    free(copy);
    return 0;
}
