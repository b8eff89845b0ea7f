/* transpose.c - the reference transpose of transpose.h and the choice of version. */
#include "transpose.h"

#include "gemm.h"

void ki_transpose_ref(const float *src, int64_t lds, int64_t rows, int64_t cols,
                      float *restrict dst, int64_t ldd)
{
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) {
            dst[j * ldd + i] = src[i * lds + j];
        }
    }
}

ki_transpose_fn ki_transpose_best(void)
{
    return ki_cpu_isa() >= KI_ISA_AVX512 ? KI_X86(ki_transpose_avx512)
           : ki_cpu_isa() >= KI_ISA_AVX2 ? KI_X86(ki_transpose_avx2)
                                         : ki_transpose_ref;
}
