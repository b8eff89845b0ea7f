/* fuzz_model.c - libFuzzer target for a whole model: load, plan a session and run it once.
 *
 * The input is the param text, a NUL byte, then the bin bytes (no NUL: no bin file). Both parts
 * are written to memfd files so ki_model_load reads them through its normal path. Unknown input
 * dims become 3; a small memory_limit makes absurd shapes fail instead of allocating. Built by
 * tests/fuzz/fuzz.mk (`make fuzz-model`) with ASan and UBSan. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../core/kinfer.h"

#define FUZZ_MEMORY_LIMIT ((size_t)32 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A memfd holding the bytes; its /proc path goes to path. -1 on failure. */
static int mem_file(const char *name, const uint8_t *p, size_t n, char *path, size_t path_size)
{
    int fd = memfd_create(name, 0);
    if (fd < 0) {
        return -1;
    }
    if (n > 0 && write(fd, p, n) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    snprintf(path, path_size, "/proc/self/fd/%d", fd);
    return fd;
}

static void run_once(const ki_model *m)
{
    ki_shape shapes[8];
    int n_in = ki_model_n_inputs(m);
    if (n_in > 8) {
        return;
    }
    for (int i = 0; i < n_in; i++) {
        shapes[i] = ki_model_input_decl(m, i);
        if (shapes[i].ndim < 0) {
            int64_t d[2] = { 1, 4 };
            shapes[i] = ki_shape_make(2, d);
        }
        for (int k = 0; k < shapes[i].ndim; k++) {
            shapes[i].d[k] = shapes[i].d[k] < 0 ? 3 : shapes[i].d[k];
        }
    }
    ki_session_options so = { 1, FUZZ_MEMORY_LIMIT };
    ki_session *s = NULL;
    ki_error err;
    if (ki_session_create(m, shapes, n_in, &so, &s, &err) != KI_OK) {
        return;
    }
    for (int i = 0; i < n_in; i++) {
        ki_tensor t = ki_session_input(s, i);
        int64_t n = ki_shape_count(&t.shape);
        for (int64_t k = 0; k < n; k++) {
            t.data[k] = (float)((k * 37) % 19) / 7.0f - 1.0f;
        }
    }
    if (ki_session_run(s, &err) == KI_OK) {
        for (int i = 0; i < ki_model_n_outputs(m); i++) {
            ki_tensor t = ki_session_output(s, i);
            volatile float sum = 0;
            for (int64_t k = 0; k < ki_shape_count(&t.shape); k++) {
                sum += t.data[k];
            }
        }
    }
    ki_session_destroy(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    size_t param_len = nul ? (size_t)(nul - data) : size;
    char param_path[64], bin_path[64];
    int pfd = mem_file("param", data, param_len, param_path, sizeof param_path);
    int bfd = -1;
    if (nul) {
        bfd = mem_file("bin", nul + 1, size - param_len - 1, bin_path, sizeof bin_path);
    }
    if (pfd >= 0 && (!nul || bfd >= 0)) {
        ki_model *m = NULL;
        ki_error err;
        ki_load_options lo = { false, true, false };
        if (ki_model_load(param_path, nul ? bin_path : NULL, &lo, &m, &err) == KI_OK) {
            run_once(m);
            ki_model_destroy(m);
        }
    }
    if (pfd >= 0) {
        close(pfd);
    }
    if (bfd >= 0) {
        close(bfd);
    }
    return 0;
}
