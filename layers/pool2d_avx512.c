/* pool2d_avx512.c - max pooling of stride-2 columns with 2- or 3-wide windows (resnet's 3x3
 * stride 2, unet's 2x2) with AVX-512: sixteen output columns a vector, every tap of the window
 * in registers (the taps of a row are the even / odd lanes of a 32-column window and the even
 * lanes moved down one), one store per vector instead of a pass over the output row per tap.
 * Taps are applied in the order of the reference (ky-major, then kx) as d = v > d ? v : d, so
 * the same value wins ties; columns outside the row read as -inf, which never wins. Compiled
 * with -mavx512f; pool2d.c calls it only when the CPU has it. */
#include <immintrin.h>

#include "conv2d.h"
#include "conv_common.h"
#include "simd_avx512.h"

static inline __m512 load_cols(const float *r, int64_t b, int64_t w, __m512 fill)
{
    const __mmask16 m = (__mmask16)ki_lane_mask16(b, w);
    return _mm512_mask_loadu_ps(fill, m, m ? r + b : r);
}

/* The maxima over the kw taps of input row r for the sixteen output columns from b / 2 (taps in
 * order: d = v > d ? v : d); NaN lanes read or-ed into *nan. */
static inline __attribute__((always_inline)) __m512 row_max(const float *r, int64_t b, int64_t w,
                                                            int64_t kw, __mmask16 *nan)
{
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    const __m512 lo = load_cols(r, b, w, ninf), hi = load_cols(r, b + 16, w, ninf);
    const __m512 t0 = _mm512_permutex2var_ps(lo, ki_even_idx(), hi);
    const __m512 t1 = _mm512_permutex2var_ps(lo, ki_odd_idx(), hi);
    __mmask16 m = _mm512_cmp_ps_mask(lo, hi, _CMP_UNORD_Q);
    __m512 d = _mm512_max_ps(t1, t0); /* t0 first: max(t0, -inf) is t0 */
    if (kw == 3) {
        const __m512 nx = load_cols(r, b + 32, w, ninf);
        const __m512 t2 = _mm512_castsi512_ps(
            _mm512_alignr_epi32(_mm512_castps_si512(nx), _mm512_castps_si512(t0), 1));
        m = _kor_mask16(m, _mm512_cmp_ps_mask(nx, nx, _CMP_UNORD_Q));
        d = _mm512_max_ps(t2, d);
    }
    *nan = _kor_mask16(*nan, m);
    return d;
}

/* Separable in registers: each input row's maximum over its taps first, then the rows' in ky
 * order; a tie then goes to the first row holding the maximum and its first column, the value
 * the reference's ky-major scan keeps. A column block walks down the plane, so the input row
 * two output rows share (stride 2) is reduced once. */
int ki_pool_max_s2_avx512(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                          int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw)
{
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    __mmask16 nan = 0;
    for (int64_t ox = 0; ox < ow; ox += 16) {
        const int64_t b = 2 * ox - pw;
        const __mmask16 mo = (__mmask16)ki_lane_mask16(ox, ow);
        int64_t last = -1;
        __m512 last_v = ninf;
        for (int64_t oy = 0; oy < oh; oy++) {
            __m512 d = ninf;
            for (int64_t ky = 0; ky < kh; ky++) {
                const int64_t iy = oy * sh - ph + ky;
                if (iy < 0 || iy >= h) {
                    continue;
                }
                __m512 v = iy == last ? last_v : row_max(src + iy * w, b, w, kw, &nan);
                d = _mm512_max_ps(v, d);
                if (ky == kh - 1) {
                    last = iy, last_v = v;
                }
            }
            _mm512_mask_storeu_ps(dst + oy * ow + ox, mo, d);
        }
    }
    return nan != 0;
}
