/* transpose_avx512.c - the matrix transpose of transpose.h in 16 x 16 blocks: sixteen rows of
 * sixteen columns loaded (masked at the matrix's edges), transposed in registers (ki_tr16),
 * stored as sixteen rows of the destination (masked likewise). A scattered scalar store per
 * element made the YOLO head's decoding 4 ms of yolov5s on one thread. Compiled with
 * -mavx512f; called only when the CPU has it (ki_transpose_best). */
#include <immintrin.h>

#include "conv2d.h"
#include "simd_avx512.h"
#include "transpose.h"

void ki_transpose_avx512(const float *src, int64_t lds, int64_t rows, int64_t cols,
                         float *restrict dst, int64_t ldd)
{
    for (int64_t i0 = 0; i0 < rows; i0 += 16) {
        const int64_t ni = rows - i0 < 16 ? rows - i0 : 16;
        const __mmask16 mi = (__mmask16)ki_lane_mask16(0, ni);
        for (int64_t j0 = 0; j0 < cols; j0 += 16) {
            const int64_t nj = cols - j0 < 16 ? cols - j0 : 16;
            const __mmask16 mj = (__mmask16)ki_lane_mask16(0, nj);
            __m512 r[16];
            for (int64_t i = 0; i < 16; i++) {
                r[i] = i < ni ? _mm512_maskz_loadu_ps(mj, src + (i0 + i) * lds + j0)
                              : _mm512_setzero_ps();
            }
            ki_tr16(r);
            for (int64_t j = 0; j < nj; j++) {
                _mm512_mask_storeu_ps(dst + (j0 + j) * ldd + i0, mi, r[j]);
            }
        }
    }
}
