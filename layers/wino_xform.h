/* wino_xform.h - the input and output transforms of Winograd F(4x4, 3x3) and F(2x2, 3x3) (Lavin &
 * Gray), compiled twice: plainly in conv2d_wino.c (the reference, any x86-64: 16 tiles side by
 * side in lane loops) and with AVX-512 in conv2d_wino_avx512.c (by tile rows, in registers; the
 * same operations on the same values, so the same bits). Included only by those two files; each
 * defines KI_WINO_SUFFIX first.
 *
 * With d a t x t input patch (t = m + 2), g a 3x3 kernel and the matrices below, one m x m output
 * tile is  Y = A^T [ (G g G^T) .* (B^T d B) ] A  (t*t multiplies instead of 9*m*m).
 * F(4x4,3x3), t = 6:
 * B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
 * A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
 * F(2x2,3x3), t = 4:  B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  A^T = [1 1 1 0; 0 1 -1 -1]
 * (G is in conv2d_wino.c, applied once to the weights.) */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "conv2d.h"

#define WL 16 /* lanes: tiles transformed together */

#define WCAT2(a, b) a##b
#define WCAT(a, b)  WCAT2(a, b)
#define WNAME(n)    WCAT(n, KI_WINO_SUFFIX)

/* ki_wino_input: the input transform of tiles [tb, te) of one channel plane p (h x w; tb and te
 * multiples of NR, te at most the tiles rounded up to NR): the t x t patch of each tile (zero
 * outside the plane) becomes t*t values u[pos], stored for tile tb + i at
 * v[pos * pstride + i / NR * pan + i % NR] (v already offset to the channel's row of the packed
 * panels: pan floats per panel). Lanes past the last tile get zeros.
 * ki_wino_output: the output transform of tiles [tb, te) of one channel: m[pos * pstride + i]
 * (the t*t GEMM products of tile tb + i) becomes the output tiles of plane q (clipped to oh x ow),
 * each value + b, + res at the same place (res: the channel's residual plane, or NULL), then
 * min(hi, max(lo, .)). */

#ifdef __AVX512F__
#include <immintrin.h>

#include "simd_avx512.h"

/* Small fixed loops of the AVX-512 transforms, unrolled so their vectors stay in registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define WINO_UNROLL _Pragma("GCC unroll 6")
#else
#define WINO_UNROLL
#endif

/* The reference's wino_bt6 / wino_bt4 (after #else) on registers: the same operations in the same
 * order, so the same bits. */
static inline __attribute__((always_inline)) void wino_bt6v(const __m512 *d, __m512 *o)
{
    const __m512 c4 = _mm512_set1_ps(4.0f), c5 = _mm512_set1_ps(5.0f), c2 = _mm512_set1_ps(2.0f);
    const __m512 a = _mm512_sub_ps(d[4], _mm512_mul_ps(c4, d[2]));
    const __m512 b = _mm512_sub_ps(d[3], _mm512_mul_ps(c4, d[1]));
    const __m512 c = _mm512_sub_ps(d[4], d[2]);
    const __m512 e = _mm512_mul_ps(c2, _mm512_sub_ps(d[3], d[1]));
    o[0] = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(c4, d[0]), _mm512_mul_ps(c5, d[2])), d[4]);
    o[1] = _mm512_add_ps(a, b);
    o[2] = _mm512_sub_ps(a, b);
    o[3] = _mm512_add_ps(c, e);
    o[4] = _mm512_sub_ps(c, e);
    o[5] = _mm512_add_ps(_mm512_sub_ps(_mm512_mul_ps(c4, d[1]), _mm512_mul_ps(c5, d[3])), d[5]);
}

static inline __attribute__((always_inline)) void wino_bt4v(const __m512 *d, __m512 *o)
{
    o[0] = _mm512_sub_ps(d[0], d[2]);
    o[1] = _mm512_add_ps(d[1], d[2]);
    o[2] = _mm512_sub_ps(d[2], d[1]);
    o[3] = _mm512_sub_ps(d[1], d[3]);
}

/* Most 16-column vectors a run of 16 tiles' patches spans: 16 * 4 + 2 columns (F(4x4)). */
#define WINO_ROW_VECS 5

/* The input transform of F(m x m, 3x3) (ts = m + 2) by runs of up to 16 tiles along a tile row:
 * the columns step (t = B^T d, over each patch's rows) on whole 16-column vectors of the run's ts
 * input rows, each column once for the run instead of once per tile; then for each row of t, the
 * column j of every lane's patch picked by permutes (column m * l + j of the run's columns) and the
 * rows step (u = t B) into the ts * ts values. The same operations on the same values as the
 * tile-wise reference, so the same bits. */
static inline __attribute__((always_inline)) void
wino_input_rows_m(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                  int64_t te, float *restrict v, int64_t pan, int64_t pstride, const int m)
{
    const int ts = m + 2;
    _Alignas(64) float tc[6][WINO_ROW_VECS][WL];
    const __m512i iota = ki_lane_idx();
    __m512i cj[6];
    __mmask16 hi[6], top[6];
    WINO_UNROLL
    for (int j = 0; j < ts; j++) { /* lane l reads column m * l + j of the run */
        cj[j] =
            _mm512_add_epi32(_mm512_mullo_epi32(iota, _mm512_set1_epi32(m)), _mm512_set1_epi32(j));
        hi[j] = _mm512_cmpge_epi32_mask(cj[j], _mm512_set1_epi32(32));
        top[j] = _mm512_cmpge_epi32_mask(cj[j], _mm512_set1_epi32(64));
    }
    const int64_t tend = te < tg->tiles ? te : tg->tiles;
    for (int64_t t0 = tb; t0 < tend;) {
        const int64_t ty = t0 / tg->ntx, tx0 = t0 % tg->ntx;
        const int64_t rowend = (ty + 1) * tg->ntx < tend ? (ty + 1) * tg->ntx : tend;
        const int n = rowend - t0 < WL ? (int)(rowend - t0) : WL;
        const int64_t ys = ty * m - tg->pt, xs = tx0 * m - tg->pl;
        const int nv = (m * n + 2 + WL - 1) / WL; /* column vectors the run's patches span */
        for (int k = 0; k < nv; k++) {
            const int64_t x = xs + (int64_t)WL * k;
            const __mmask16 cm = (__mmask16)ki_lane_mask16(x, w);
            __m512 d[6], o[6];
            WINO_UNROLL
            for (int i = 0; i < ts; i++) {
                const int64_t y = ys + i;
                d[i] = y >= 0 && y < h && cm ? _mm512_maskz_loadu_ps(cm, p + y * w + x)
                                             : _mm512_setzero_ps();
            }
            m == 4 ? wino_bt6v(d, o) : wino_bt4v(d, o);
            WINO_UNROLL
            for (int r = 0; r < ts; r++) {
                _mm512_store_ps(tc[r][k], o[r]);
            }
        }
        const int64_t rel = t0 - tb;
        const int off = (int)(rel % KI_GEMM_NR);
        /* the run's lanes in this panel and, past its end, in the next */
        const int first = KI_GEMM_NR - off < n ? KI_GEMM_NR - off : n;
        const __mmask16 m0 = (__mmask16)((1u << first) - 1u);
        const __mmask16 m1 = (__mmask16)(((1u << n) - 1u) & ~((1u << first) - 1u));
        float *dst0 = v + rel / KI_GEMM_NR * pan + off;
        float *dst1 = v + (rel / KI_GEMM_NR + 1) * pan - first;
        WINO_UNROLL
        for (int r = 0; r < ts; r++) {
            const __m512 r0 = _mm512_load_ps(tc[r][0]);
            const __m512 r1 = nv > 1 ? _mm512_load_ps(tc[r][1]) : r0;
            const __m512 r2 = nv > 2 ? _mm512_load_ps(tc[r][2]) : r0;
            const __m512 r3 = nv > 3 ? _mm512_load_ps(tc[r][3]) : r2;
            const __m512 r4 = nv > 4 ? _mm512_load_ps(tc[r][4]) : r0;
            __m512 pj[6], u[6];
            WINO_UNROLL
            for (int j = 0; j < ts; j++) {
                __m512 x = _mm512_permutex2var_ps(r0, cj[j], r1);
                if (nv > 2) {
                    x = _mm512_mask_blend_ps(hi[j], x, _mm512_permutex2var_ps(r2, cj[j], r3));
                }
                if (nv > 4) {
                    x = _mm512_mask_permutexvar_ps(x, top[j], cj[j], r4);
                }
                pj[j] = x;
            }
            m == 4 ? wino_bt6v(pj, u) : wino_bt4v(pj, u);
            WINO_UNROLL
            for (int s = 0; s < ts; s++) {
                const int64_t pos = r * ts + s;
                _mm512_mask_storeu_ps(dst0 + pos * pstride, m0, u[s]);
                if (m1) {
                    _mm512_mask_storeu_ps(dst1 + pos * pstride, m1, u[s]);
                }
            }
        }
        t0 += n;
    }
    /* zeros for the tiles past the last one, up to te */
    for (int64_t t0 = tend > tb ? tend : tb; t0 < te;) {
        const int64_t rel = t0 - tb;
        const int off = (int)(rel % KI_GEMM_NR), lane = off % WL;
        const int cnt = te - t0 < WL - lane ? (int)(te - t0) : WL - lane;
        const __mmask16 zm = (__mmask16)((1u << cnt) - 1u);
        float *dst = v + rel / KI_GEMM_NR * pan + off;
        for (int pos = 0; pos < ts * ts; pos++) {
            _mm512_mask_storeu_ps(dst + pos * pstride, zm, _mm512_setzero_ps());
        }
        t0 += cnt;
    }
}

/* The reference's wino_at6 / wino_at4 on registers, the same operations in the same order. */
static inline __attribute__((always_inline)) void wino_at6v(const __m512 *m, __m512 *o)
{
    const __m512 p12 = _mm512_add_ps(m[1], m[2]), n12 = _mm512_sub_ps(m[1], m[2]);
    const __m512 p34 = _mm512_add_ps(m[3], m[4]), n34 = _mm512_sub_ps(m[3], m[4]);
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], p12), p34);
    o[1] = _mm512_add_ps(n12, _mm512_mul_ps(_mm512_set1_ps(2.0f), n34));
    o[2] = _mm512_add_ps(p12, _mm512_mul_ps(_mm512_set1_ps(4.0f), p34));
    o[3] = _mm512_add_ps(_mm512_add_ps(n12, _mm512_mul_ps(_mm512_set1_ps(8.0f), n34)), m[5]);
}

static inline __attribute__((always_inline)) void wino_at4v(const __m512 *m, __m512 *o)
{
    o[0] = _mm512_add_ps(_mm512_add_ps(m[0], m[1]), m[2]);
    o[1] = _mm512_sub_ps(_mm512_sub_ps(m[1], m[2]), m[3]);
}

/* The output transform of F(m x m, 3x3) for 16 consecutive tiles at a time, in registers: their
 * t*t products, the columns step (A^T a) and the rows step (t A); then each run of them along a
 * tile row writes its output rows whole: column c of a run's row is value c mod m of its lane
 * c / m, picked from the m vectors by two-source permutes, 16 columns per masked store after
 * + b, + res and the clamp. The same operations as the reference, so the same bits. */
static inline __attribute__((always_inline)) void
wino_output_rows_m(const float *mm, int64_t pstride, float *q, const float *res,
                   const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo, float hi,
                   const int mo)
{
    const int ts = mo + 2, sh = mo == 4 ? 2 : 1;
    const __m512 vb = _mm512_set1_ps(b), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    const __m512i iota = ki_lane_idx();
    __m512i idx[4];
    __mmask16 upper[4];
    for (int k = 0; k < mo; k++) { /* column 16 k + l of a run: value c mod m of lane c / m */
        const __m512i f = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * k));
        const __m512i jj = _mm512_and_si512(f, _mm512_set1_epi32(mo - 1));
        idx[k] = _mm512_add_epi32(_mm512_srli_epi32(f, (unsigned)sh),
                                  _mm512_slli_epi32(_mm512_and_si512(jj, _mm512_set1_epi32(1)), 4));
        upper[k] = _mm512_cmpge_epi32_mask(jj, _mm512_set1_epi32(2));
    }
    const int64_t tend = te < tg->tiles ? te : tg->tiles;
    for (int64_t t0 = tb; t0 < tend; t0 += WL) {
        const int n = tend - t0 < WL ? (int)(tend - t0) : WL;
        const __mmask16 lm = (__mmask16)((1u << n) - 1u);
        const float *a0 = mm + (t0 - tb);
        __m512 t[4][6], o[4][4];
        WINO_UNROLL
        for (int j = 0; j < ts; j++) { /* columns: t = A^T a */
            __m512 a[6], c[4];
            WINO_UNROLL
            for (int i = 0; i < ts; i++) {
                a[i] = _mm512_maskz_loadu_ps(lm, a0 + (i * ts + j) * pstride);
            }
            mo == 4 ? wino_at6v(a, c) : wino_at4v(a, c);
            WINO_UNROLL
            for (int r = 0; r < mo; r++) {
                t[r][j] = c[r];
            }
        }
        WINO_UNROLL
        for (int i = 0; i < mo; i++) { /* rows: o = t A */
            mo == 4 ? wino_at6v(t[i], o[i]) : wino_at4v(t[i], o[i]);
        }
        for (int l0 = 0, l1; l0 < n; l0 = l1) { /* the runs along a tile row */
            const int64_t ty = (t0 + l0) / tg->ntx, tx = (t0 + l0) % tg->ntx;
            l1 = tg->ntx - tx < n - l0 ? l0 + (int)(tg->ntx - tx) : n;
            const int64_t cx = tx * mo;
            const int64_t cols = tg->ow - cx < mo * (l1 - l0) ? tg->ow - cx : mo * (l1 - l0);
            const __m512i shift = _mm512_set1_epi32(l0);
            WINO_UNROLL
            for (int i = 0; i < mo; i++) {
                if (ty * mo + i >= tg->oh) {
                    break;
                }
                WINO_UNROLL
                for (int k = 0; k < mo; k++) {
                    if (16 * k >= cols) {
                        break;
                    }
                    const int64_t at = (ty * mo + i) * tg->ow + cx + 16 * k;
                    const __mmask16 cm = (__mmask16)ki_lane_mask16(0, cols - 16 * k);
                    const __m512i ix = _mm512_add_epi32(idx[k], shift);
                    __m512 v = _mm512_permutex2var_ps(o[i][0], ix, o[i][1]);
                    if (mo == 4) {
                        v = _mm512_mask_mov_ps(v, upper[k],
                                               _mm512_permutex2var_ps(o[i][2], ix, o[i][3]));
                    }
                    v = _mm512_add_ps(v, vb);
                    if (res) {
                        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(cm, res + at));
                    }
                    /* max(lo, v) with v second: a NaN v stays NaN, as the scalar comparisons
                     * keep it */
                    v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
                    _mm512_mask_storeu_ps(q + at, cm, v);
                }
            }
        }
    }
}

void WNAME(ki_wino_input)(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                          int64_t te, float *restrict v, int64_t pan, int64_t pstride)
{
    if (tg->m == 4) {
        wino_input_rows_m(p, h, w, tg, tb, te, v, pan, pstride, 4);
    } else {
        wino_input_rows_m(p, h, w, tg, tb, te, v, pan, pstride, 2);
    }
}

void WNAME(ki_wino_output)(const float *m, int64_t pstride, float *q, const float *res,
                           const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                           float hi)
{
    if (tg->m == 4) {
        wino_output_rows_m(m, pstride, q, res, tg, tb, te, b, lo, hi, 4);
    } else {
        wino_output_rows_m(m, pstride, q, res, tg, tb, te, b, lo, hi, 2);
    }
}
#else
/* Lane loops are vectorised by GCC on request; clang (the fuzzing and sanitizer builds) vectorises
 * them on its own when optimising and would warn about an unmet request at -O1. */
#if defined(__GNUC__) && !defined(__clang__)
#define WINO_SIMD _Pragma("omp simd")
#else
#define WINO_SIMD
#endif

/* o[r] = (B^T d)[r] for the six values d[0..5] (stride s in units of WL lanes). */
static inline void wino_bt6(float (*restrict d)[WL], int s, float (*restrict o)[WL], int os)
{
    WINO_SIMD
    for (int l = 0; l < WL; l++) {
        float d0 = d[0][l], d1 = d[s][l], d2 = d[2 * s][l], d3 = d[3 * s][l], d4 = d[4 * s][l],
              d5 = d[5 * s][l];
        float a = d4 - 4.0f * d2, b = d3 - 4.0f * d1, c = d4 - d2, e = 2.0f * (d3 - d1);
        o[0][l] = 4.0f * d0 - 5.0f * d2 + d4;
        o[os][l] = a + b;
        o[2 * os][l] = a - b;
        o[3 * os][l] = c + e;
        o[4 * os][l] = c - e;
        o[5 * os][l] = 4.0f * d1 - 5.0f * d3 + d5;
    }
}

/* o[r] = (A^T m)[r], r < 4, for the six values m[0..5] (stride s). */
static inline void wino_at6(float (*restrict m)[WL], int s, float (*restrict o)[WL], int os)
{
    WINO_SIMD
    for (int l = 0; l < WL; l++) {
        float m0 = m[0][l], m1 = m[s][l], m2 = m[2 * s][l], m3 = m[3 * s][l], m4 = m[4 * s][l],
              m5 = m[5 * s][l];
        float p12 = m1 + m2, n12 = m1 - m2, p34 = m3 + m4, n34 = m3 - m4;
        o[0][l] = m0 + p12 + p34;
        o[os][l] = n12 + 2.0f * n34;
        o[2 * os][l] = p12 + 4.0f * p34;
        o[3 * os][l] = n12 + 8.0f * n34 + m5;
    }
}

/* F(2x2,3x3): o[r] = (B^T d)[r] for the four values d[0..3] (stride s). */
static inline void wino_bt4(float (*restrict d)[WL], int s, float (*restrict o)[WL], int os)
{
    WINO_SIMD
    for (int l = 0; l < WL; l++) {
        float d0 = d[0][l], d1 = d[s][l], d2 = d[2 * s][l], d3 = d[3 * s][l];
        o[0][l] = d0 - d2;
        o[os][l] = d1 + d2;
        o[2 * os][l] = d2 - d1;
        o[3 * os][l] = d1 - d3;
    }
}

/* F(2x2,3x3): o[r] = (A^T m)[r], r < 2, for the four values m[0..3] (stride s). */
static inline void wino_at4(float (*restrict m)[WL], int s, float (*restrict o)[WL], int os)
{
    WINO_SIMD
    for (int l = 0; l < WL; l++) {
        float m0 = m[0][l], m1 = m[s][l], m2 = m[2 * s][l], m3 = m[3 * s][l];
        o[0][l] = m0 + m1 + m2;
        o[os][l] = m1 - m2 - m3;
    }
}

/* d[i*t+j][l] = the plane at the lanes' t x t patch positions, zero outside it or past n: a
 * patch inside the plane takes t*t unconditional loads. */
static inline void wino_gather(const float *p, int64_t h, int64_t w, const int64_t *y0,
                               const int64_t *x0, int n, int t, float (*restrict d)[WL])
{
    for (int l = 0; l < WL; l++) {
        int64_t ya = l < n ? y0[l] : -8, xa = l < n ? x0[l] : -8; /* lanes past n: all zeros */
        if (ya >= 0 && xa >= 0 && ya + t <= h && xa + t <= w) {
            const float *s = p + ya * w + xa;
            for (int i = 0; i < t; i++) {
                for (int j = 0; j < t; j++) {
                    d[i * t + j][l] = s[i * w + j];
                }
            }
            continue;
        }
        for (int i = 0; i < t; i++) {
            int64_t y = ya + i;
            for (int j = 0; j < t; j++) {
                int64_t x = xa + j;
                d[i * t + j][l] = y >= 0 && y < h && x >= 0 && x < w ? p[y * w + x] : 0.0f;
            }
        }
    }
}

/* The lanes' m x m tiles o[i*m+j] (+ b, + res, clamped to [lo, hi]) into q, inside the plane. */
static inline void wino_scatter(float (*restrict o)[WL], int m, float *q, const float *res,
                                int64_t oh, int64_t ow, const int64_t *y0, const int64_t *x0, int n,
                                float b, float lo, float hi)
{
    for (int l = 0; l < n && l < WL; l++) {
        for (int i = 0; i < m && y0[l] + i < oh; i++) {
            for (int j = 0; j < m && x0[l] + j < ow; j++) {
                int64_t at = (y0[l] + i) * ow + x0[l] + j;
                float v = o[i * m + j][l] + b;
                v = res ? v + res[at] : v;
                v = v < lo ? lo : v;
                q[at] = v > hi ? hi : v;
            }
        }
    }
}

/* The lanes' tile origins for tiles t0.. of the plane, moved by (-dy, -dx): the output tile with
 * (0, 0), the input patch with the padding (pt, pl); returns how many of the WL lanes are tiles. */
static inline int wino_lanes(const ki_wino_tiles *tg, int64_t t0, int64_t dy, int64_t dx,
                             int64_t *y0, int64_t *x0)
{
    int n = tg->tiles - t0 < WL ? (int)(tg->tiles - t0) : WL;
    int64_t ty = t0 / tg->ntx, tx = t0 % tg->ntx;
    for (int l = 0; l < n; l++) {
        y0[l] = ty * tg->m - dy, x0[l] = tx * tg->m - dx;
        if (++tx == tg->ntx) {
            tx = 0, ty++;
        }
    }
    return n;
}

void WNAME(ki_wino_input)(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg, int64_t tb,
                          int64_t te, float *restrict v, int64_t pan, int64_t pstride)
{
    _Alignas(64) float d[36][WL], t[36][WL], u[36][WL];
    int64_t iy0[WL], ix0[WL];
    const int ts = tg->m + 2, npos = ts * ts;
    for (int64_t t0 = tb; t0 < te; t0 += WL) {
        int n = t0 < tg->tiles ? wino_lanes(tg, t0, tg->pt, tg->pl, iy0, ix0) : 0;
        wino_gather(p, h, w, iy0, ix0, n, ts, d);
        for (int j = 0; j < ts; j++) { /* columns: t = B^T d, then rows: u = t B */
            ts == 6 ? wino_bt6(&d[j], 6, &t[j], 6) : wino_bt4(&d[j], 4, &t[j], 4);
        }
        for (int i = 0; i < ts; i++) {
            ts == 6 ? wino_bt6(&t[i * 6], 1, &u[i * 6], 1) : wino_bt4(&t[i * 4], 1, &u[i * 4], 1);
        }
        float *dst = v + (t0 - tb) / KI_GEMM_NR * pan + (t0 - tb) % KI_GEMM_NR;
        for (int pos = 0; pos < npos; pos++) {
            memcpy(dst + pos * pstride, u[pos], sizeof u[pos]);
        }
    }
}

void WNAME(ki_wino_output)(const float *m, int64_t pstride, float *q, const float *res,
                           const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                           float hi)
{
    _Alignas(64) float a[36][WL], t[24][WL], o[16][WL];
    int64_t oy0[WL], ox0[WL];
    const int mo = tg->m, ts = mo + 2, npos = ts * ts;
    te = te < tg->tiles ? te : tg->tiles;
    for (int64_t t0 = tb; t0 < te; t0 += WL) {
        int n = wino_lanes(tg, t0, 0, 0, oy0, ox0);
        for (int pos = 0; pos < npos; pos++) {
            memcpy(a[pos], m + pos * pstride + (t0 - tb), sizeof a[pos]);
        }
        for (int j = 0; j < ts; j++) { /* columns: t = A^T a (m x t), then rows: o = t A */
            ts == 6 ? wino_at6(&a[j], 6, &t[j], 6) : wino_at4(&a[j], 4, &t[j], 4);
        }
        for (int i = 0; i < mo; i++) {
            ts == 6 ? wino_at6(&t[i * 6], 1, &o[i * 4], 1) : wino_at4(&t[i * 4], 1, &o[i * 2], 1);
        }
        wino_scatter(o, mo, q, res, tg->oh, tg->ow, oy0, ox0, n, b, lo, hi);
    }
}
#endif
