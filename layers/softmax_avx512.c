/* softmax_avx512.c - a softmax row with AVX-512 (softmax.h): sixteen lanes at a time, the last
 * partial vector masked (its missing lanes read as -inf: exp gives 0 there). */
#include <immintrin.h>
#include <math.h>

#include "softmax.h"
#include "vexp_avx512.h"

void ki_softmax_row_avx512(float *row, int64_t n)
{
    const int64_t full = n & ~(int64_t)15;
    const __mmask16 mt = (__mmask16)((1u << (n - full)) - 1u);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512 xt = _mm512_mask_loadu_ps(ninf, mt, row + full);
    __m512 vmax = xt;
    for (int64_t j = 0; j < full; j += 16) {
        vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(row + j));
    }
    const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t j = 0; j < full; j += 16) {
        const __m512 e = ki_vexp_avx512(_mm512_sub_ps(_mm512_loadu_ps(row + j), vm));
        _mm512_storeu_ps(row + j, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    const __m512 et = _mm512_maskz_mov_ps(mt, ki_vexp_avx512(_mm512_sub_ps(xt, vm)));
    vsum = _mm512_add_ps(vsum, et);
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
    for (int64_t j = 0; j < full; j += 16) {
        _mm512_storeu_ps(row + j, _mm512_mul_ps(_mm512_loadu_ps(row + j), inv));
    }
    _mm512_mask_storeu_ps(row + full, mt, _mm512_mul_ps(et, inv));
}
