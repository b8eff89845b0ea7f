/* fuzz_jpeg.c - libFuzzer target for the JPEG decoder (ki_jpeg_decode, cli/jpeg.c). Built by
 * tests/fuzz/fuzz.mk (`make fuzz-jpeg`) with ASan and UBSan and a pixel limit of 2^20, so that a
 * header alone cannot make a run slow. Each input is decoded to 3 channels and to 1. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/jpeg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = malloc(size ? size : 1); /* exact size: a read past it is a report */
    if (!copy) {
        return 0;
    }
    memcpy(copy, data, size);
    for (int channels = 3; channels >= 1; channels -= 2) {
        ki_jpeg_image im;
        ki_error err;
        if (ki_jpeg_decode(copy, size, channels, &im, &err) == KI_OK) {
            if (im.w <= 0 || im.h <= 0 || im.channels != channels) {
                abort();
            }
            volatile unsigned s = 0;
            for (size_t i = 0; i < (size_t)im.w * (size_t)im.h * (size_t)channels; i++) {
                s += im.px[i];
            }
            free(im.px);
        } else if (err.msg[0] == '\0') {
            abort(); /* every failure says why */
        }
    }
    free(copy);
    return 0;
}
