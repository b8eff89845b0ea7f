/* conv2d_pack_avx512.c - im2col of 3-wide, stride-2 kernels (zero padding, no column dilation)
 * with AVX-512: the three column-matrix rows of an input row (kx = 0, 1, 2) come from one window
 * of 65 floats, loaded once: kx = 0 and kx = 2 are its even lanes (the second one shifted by
 * one), kx = 1 its odd lanes. Per 32 output pixels that is five loads, four permutes, two
 * shifts and six stores, where the generic packing made three strided gathers with their call
 * and bounds work (about a third of yolov5s's stride-2 layers went to packing). Loads are masked
 * to the columns inside the row (the padding reads as zero and is never touched), stores to the
 * pixels of the run; the loops around are conv2d_pack3s2_loops.h's, shared with the AVX2
 * packing. Compiled with -mavx512f; called only when the CPU has it (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "simd_avx512.h"

/* The three rows d[0], d[0] + pw, d[0] + 2 * pw at columns j.. for len <= 32 output pixels from
 * output column ox of input row `row` (NULL: a row in the padding). */
static inline void run3(const float *row, int64_t w, int64_t base, int64_t len, int64_t pw,
                        float *d)
{
    const __mmask16 s0 = (__mmask16)ki_lane_mask16(0, len), s1 = (__mmask16)ki_lane_mask16(16, len);
    __m512 k0l, k0h, k1l, k1h, k2l, k2h;
    if (!row) {
        k0l = k0h = k1l = k1h = k2l = k2h = _mm512_setzero_ps();
    } else {
        const __m512i even = ki_even_idx(), odd = ki_odd_idx();
        const float *p = row + base;
        __m512 w0 = _mm512_maskz_loadu_ps((__mmask16)ki_lane_mask16(base, w), p);
        __m512 w1 = _mm512_maskz_loadu_ps((__mmask16)ki_lane_mask16(base + 16, w), p + 16);
        __m512 w2 = _mm512_maskz_loadu_ps((__mmask16)ki_lane_mask16(base + 32, w), p + 32);
        __m512 w3 = _mm512_maskz_loadu_ps((__mmask16)ki_lane_mask16(base + 48, w), p + 48);
        __m512 w4 = _mm512_maskz_loadu_ps((__mmask16)(ki_lane_mask16(base + 64, w) & 1u), p + 64);
        k0l = _mm512_permutex2var_ps(w0, even, w1), k0h = _mm512_permutex2var_ps(w2, even, w3);
        k1l = _mm512_permutex2var_ps(w0, odd, w1), k1h = _mm512_permutex2var_ps(w2, odd, w3);
        k2l = _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(k0h), _mm512_castps_si512(k0l), 1));
        k2h = _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(w4), _mm512_castps_si512(k0h), 1));
    }
    _mm512_mask_storeu_ps(d, s0, k0l), _mm512_mask_storeu_ps(d + 16, s1, k0h);
    _mm512_mask_storeu_ps(d + pw, s0, k1l), _mm512_mask_storeu_ps(d + pw + 16, s1, k1h);
    _mm512_mask_storeu_ps(d + 2 * pw, s0, k2l), _mm512_mask_storeu_ps(d + 2 * pw + 16, s1, k2h);
}

#define PACK3_STEP 32
#include "conv2d_pack3s2_loops.h"

void ki_conv2d_pack3s2_avx512(const ki_conv2d *c, const ki_conv2d_geom *g,
                              const ki_conv2d_rows *src, int64_t j0, int64_t nr, int64_t k,
                              int64_t pw, float *restrict dst)
{
    pack3s2(c, g, src, j0, nr, k, pw, dst);
}
