/* fuzz_npy.c - libFuzzer target for the .npy reader (ki_npy_parse). Built by tests/fuzz/fuzz.mk
 * (`make fuzz-npy`) with ASan and UBSan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy) {
        return 0;
    }
    memcpy(copy, data, size);
    ki_shape shape;
    float *out = NULL;
    ki_error err;
    if (ki_npy_parse(copy, size, "fuzz.npy", &shape, &out, &err) == KI_OK) {
        int64_t n = 0;
        if (!ki_shape_numel(&shape, &n)) {
            abort();
        }
        volatile float s = 0;
        for (int64_t i = 0; i < n; i++) {
            s += out[i];
        }
        free(out);
    }
    free(copy);
    return 0;
}
