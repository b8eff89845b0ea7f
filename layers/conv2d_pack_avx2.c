/* conv2d_pack_avx2.c - im2col of 3-wide, stride-2 kernels (zero padding, no column dilation)
 * with AVX2: conv2d_pack_avx512.c's algorithm on eight-lane vectors. The three column-matrix rows
 * of an input row (kx = 0, 1, 2) for eight output pixels come from its columns b .. b + 16:
 * kx = 0 and kx = 1 are the even and odd floats of b .. b + 15, kx = 2 the even floats of
 * b + 2 .. b + 17; four loads and three deinterleaves, where the generic packing made three
 * strided gathers with their call and bounds work per run. Loads are masked to the columns
 * inside the row (the padding reads as zero and is never touched), stores to the pixels of the
 * run. Compiled with -mavx2 -mfma; called only when the CPU has them (ki_conv2d_set_isa). */
#include <immintrin.h>
#include <string.h>

#include "conv2d.h"
#include "simd_avx2.h"

/* Lanes i with 0 <= b + i < w. */
static inline __m256i lanes_in(int64_t b, int64_t w)
{
    int64_t lo = b < 0 ? -b : 0, hi = w - b < 8 ? w - b : 8;
    lo = lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi;
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), idx),
                            _mm256_cmpgt_epi32(idx, _mm256_set1_epi32((int)lo - 1)));
}

/* Columns b .. b + 7 of row r (w columns), zero outside it. */
static inline __m256 cols(const float *r, int64_t b, int64_t w)
{
    if (b >= 0 && b + 8 <= w) {
        return _mm256_loadu_ps(r + b);
    }
    const __m256i m = lanes_in(b, w);
    return _mm256_testz_si256(m, m) ? _mm256_setzero_ps() : _mm256_maskload_ps(r + b, m);
}

/* The three rows d, d + pw, d + 2 * pw at the run's columns for len <= 8 output pixels from
 * input column base of row `row` (NULL: a row in the padding). */
static inline void run3(const float *row, int64_t w, int64_t base, int64_t len, int64_t pw,
                        float *d)
{
    __m256 k0, k1, k2;
    if (!row) {
        k0 = k1 = k2 = _mm256_setzero_ps();
    } else {
        const __m256 a = cols(row, base, w), b = cols(row, base + 8, w);
        k0 = ki_deint8(a, b, 0);
        k1 = ki_deint8(a, b, 1);
        k2 = ki_deint8(cols(row, base + 2, w), cols(row, base + 10, w), 0);
    }
    if (len == 8) {
        _mm256_storeu_ps(d, k0), _mm256_storeu_ps(d + pw, k1), _mm256_storeu_ps(d + 2 * pw, k2);
    } else {
        const __m256i m = lanes_in(0, len);
        _mm256_maskstore_ps(d, m, k0), _mm256_maskstore_ps(d + pw, m, k1);
        _mm256_maskstore_ps(d + 2 * pw, m, k2);
    }
}

void ki_conv2d_pack3s2_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                            int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst)
{
    const int64_t h = g->in.h, w = g->in.w, hw = h * w, ow = g->ow;
    int64_t r = 0;
    for (int64_t ch = 0; r < k; ch++) {
        const float *plane = x + ch * hw;
        for (int64_t ky = 0; ky < c->kh; ky++, r += 3) {
            float *d = dst + r * pw;
            for (int64_t j = 0, oy = j0 / ow, ox = j0 % ow; j < nr; oy++, ox = 0) {
                const int64_t iy = oy * c->sh - c->pt + ky * c->dh;
                const float *row = iy >= 0 && iy < h ? plane + iy * w : NULL;
                int64_t len = nr - j < ow - ox ? nr - j : ow - ox;
                if (row) { /* the next panel's columns of this row (4 lines), a panel ahead */
                    const float *nx = row + (ox + len) * 2 - c->pl;
                    for (int64_t b = 0; b < 64; b += 16) {
                        __builtin_prefetch(nx + b, 0, 3);
                    }
                }
                for (int64_t q = 0; q < len; q += 8) {
                    run3(row, w, (ox + q) * 2 - c->pl, len - q < 8 ? len - q : 8, pw, d + j + q);
                }
                j += len;
            }
            for (int kx = 0; kx < 3; kx++) {
                memset(d + kx * pw + nr, 0, (size_t)(pw - nr) * sizeof *d);
            }
        }
    }
}
