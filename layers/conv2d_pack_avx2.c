/* conv2d_pack_avx2.c - im2col of 3-wide, stride-2 kernels (zero padding, no column dilation)
 * with AVX2: conv2d_pack_avx512.c's algorithm on eight-lane vectors. The three column-matrix rows
 * of an input row (kx = 0, 1, 2) for eight output pixels come from its columns b .. b + 16:
 * kx = 0 and kx = 1 are the even and odd floats of b .. b + 15, kx = 2 the even floats of
 * b + 2 .. b + 17; four loads and three deinterleaves, where the generic packing made three
 * strided gathers with their call and bounds work per run. Loads are masked to the columns
 * inside the row (the padding reads as zero and is never touched), stores to the pixels of the
 * run; the loops around are conv2d_pack3s2_loops.h's. Compiled with -mavx2 -mfma; called only
 * when the CPU has them (ki_conv2d_set_isa). */
#include <immintrin.h>

#include "conv2d.h"
#include "simd_avx2.h"

/* Columns b .. b + 7 of row r (w columns), zero outside it. */
static inline __m256 cols(const float *r, int64_t b, int64_t w)
{
    if (b >= 0 && b + 8 <= w) {
        return _mm256_loadu_ps(r + b);
    }
    const __m256i m = ki_lanes_in8(b, w);
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
    ki_store_first8(d, k0, len), ki_store_first8(d + pw, k1, len);
    ki_store_first8(d + 2 * pw, k2, len);
}

/* The three rows for n output pixels (a multiple of 8) whose input columns p[0 .. 2n + 1] all lie
 * inside the row: the same values as run3, without its per-step bounds work. */
static inline void run3_inner(const float *p, int64_t n, int64_t pw, float *d)
{
    for (int64_t j = 0; j < n; j += 8, p += 16) {
        const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
        const __m256 c = _mm256_loadu_ps(p + 2), e = _mm256_loadu_ps(p + 10);
        _mm256_storeu_ps(d + j, ki_deint8(a, b, 0));
        _mm256_storeu_ps(d + pw + j, ki_deint8(a, b, 1));
        _mm256_storeu_ps(d + 2 * pw + j, ki_deint8(c, e, 0));
    }
}

#define PACK3_STEP  8
#define PACK3_INNER run3_inner
#include "conv2d_pack3s2_loops.h"

void ki_conv2d_pack3s2_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const ki_conv2d_rows *src,
                            int64_t j0, int64_t nr, int64_t k, int64_t pw, float *restrict dst)
{
    pack3s2(c, g, src, j0, nr, k, pw, dst);
}

/* Columns j0 .. j0 + nr - 1 of the even / odd order (ki_conv2d_pack_eo_ref) of k planes at x, each
 * plane's groups of eight of all the panels in a row (one run along its rows, where panel by
 * panel went plane by plane 32 columns at a time): eight that lie in one half of one row are the
 * even or odd floats of sixteen in that row (two loads, ki_deint8: the odd ones from the float
 * before, so no load reaches past the row), listed once with their places in the panels; eight
 * that start in a row's even half and end in its odd half (mobilenet_v2's 56-wide rows: one group
 * in seven) are the last even floats of the row's last sixteen and the first odd ones of its first
 * sixteen, rotated into place and blended (rows of at least sixteen); other groups go float by
 * float, and the last panel's columns past nr are zeros. */
void ki_conv2d_pack_eo_avx2(const float *x, int64_t ldb, int64_t w, int64_t j0, int64_t nr,
                            int64_t k, float *restrict dst)
{
    enum { G = KI_GEMM_NR / 8, MAXG = KI_PACK_EO_PANELS * G };
    /* [0] even, [1] odd, [2] across the halves (src: the row's start); the others */
    int64_t src[3][MAXG], to[3][MAXG], rest[MAXG];
    int n[3] = { 0, 0, 0 }, nrest = 0;
    /* a group across the halves with e even lanes: lane i is lane rot[i] = (i + 8 - e) % 8 of the
     * row's last eight even floats (i < e) or of its first eight odd ones (i >= e: odd[i] set) */
    __m256i rot[MAXG], odd[MAXG];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const int64_t half = w / 2, np = (nr + KI_GEMM_NR - 1) / KI_GEMM_NR, ng = np * G;
    for (int64_t g = 0; g < ng; g++) {
        const int64_t j = j0 + 8 * g, row = j / w, q = j % w,
                      d = g / G * k * KI_GEMM_NR + g % G * 8;
        int kind = 3;
        if (8 * g + 8 <= nr && q + 8 <= w) {
            kind = q + 8 <= half ? 0 : q >= half ? 1 : w >= 16 ? 2 : 3;
        }
        if (kind < 2) {
            src[kind][n[kind]] = row * w + (q < half ? 2 * q : 2 * (q - half));
            to[kind][n[kind]++] = d;
        } else if (kind == 2) {
            const __m256i e = _mm256_set1_epi32((int)(half - q));
            rot[n[2]] =
                _mm256_and_si256(_mm256_sub_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(8)), e),
                                 _mm256_set1_epi32(7));
            odd[n[2]] = _mm256_cmpgt_epi32(_mm256_add_epi32(lane, _mm256_set1_epi32(1)), e);
            src[2][n[2]] = row * w;
            to[2][n[2]++] = d;
        } else {
            rest[nrest++] = g;
        }
    }
    for (int64_t r = 0; r < k; r++, x += ldb, dst += KI_GEMM_NR) {
        for (int i = 0; i < n[0]; i++) {
            const float *p = x + src[0][i];
            _mm256_storeu_ps(dst + to[0][i],
                             ki_deint8(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 0));
        }
        for (int i = 0; i < n[1]; i++) {
            const float *p = x + src[1][i];
            _mm256_storeu_ps(dst + to[1][i],
                             ki_deint8(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 1));
        }
        for (int i = 0; i < n[2]; i++) {
            const float *p = x + src[2][i];
            const __m256 ev = ki_deint8(_mm256_loadu_ps(p + w - 16), _mm256_loadu_ps(p + w - 8), 0);
            const __m256 od = ki_deint8(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), 1);
            _mm256_storeu_ps(dst + to[2][i], _mm256_blendv_ps(_mm256_permutevar8x32_ps(ev, rot[i]),
                                                              _mm256_permutevar8x32_ps(od, rot[i]),
                                                              _mm256_castsi256_ps(odd[i])));
        }
        for (int i = 0; i < nrest; i++) {
            const int64_t g = rest[i];
            float *d = dst + g / G * k * KI_GEMM_NR + g % G * 8;
            for (int64_t l = 0; l < 8; l++) {
                d[l] = 8 * g + l < nr ? x[ki_conv2d_eo_src(j0 + 8 * g + l, w)] : 0.0f;
            }
        }
    }
}
