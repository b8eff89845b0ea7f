/* wino_xform.h - the input and output transforms of Winograd F(4x4, 3x3) and F(2x2, 3x3) (Lavin &
 * Gray), written once over 16 lanes (16 tiles side by side) and compiled twice: plainly in
 * conv2d_wino.c (the reference, any x86-64) and with AVX-512 in conv2d_wino_avx512.c, where
 * every lane loop is one zmm operation. Included only by those two files; each defines
 * KI_WINO_SUFFIX first.
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

#ifdef __AVX512F__
#include <immintrin.h>

#include "simd_avx512.h"

/* d[i*t+j][l] = the plane at the lanes' t x t patch positions, zero outside it or past n: each
 * lane's patch row is one masked load (no fault on the masked-out columns), then a transpose. */
static inline void wino_gather(const float *p, int64_t h, int64_t w, const int64_t *y0,
                               const int64_t *x0, int n, int t, float (*restrict d)[WL])
{
    __mmask16 cm[WL];
    for (int l = 0; l < WL; l++) {
        unsigned m = 0;
        for (int j = 0; j < t && l < n; j++) {
            m |= x0[l] + j >= 0 && x0[l] + j < w ? 1u << j : 0u;
        }
        cm[l] = (__mmask16)m;
    }
    for (int i = 0; i < t; i++) {
        __m512 r[16];
        for (int l = 0; l < WL; l++) {
            int64_t y = l < n ? y0[l] + i : -1;
            r[l] = y >= 0 && y < h ? _mm512_maskz_loadu_ps(cm[l], p + y * w + x0[l])
                                   : _mm512_setzero_ps();
        }
        ki_tr16(r);
        for (int j = 0; j < t; j++) {
            _mm512_store_ps(d[i * t + j], r[j]);
        }
    }
}

/* The lanes' m x m tiles o[i*m+j] (+ b, + res, clamped to [lo, hi]) into q, inside the plane:
 * transposed to one register per tile, then one masked m-float store per tile row. */
static inline void wino_scatter(float (*restrict o)[WL], int m, float *q, const float *res,
                                int64_t oh, int64_t ow, const int64_t *y0, const int64_t *x0, int n,
                                float b, float lo, float hi)
{
    _Alignas(64) float tt[WL][16];
    __m512 r[16];
    for (int k = 0; k < 16; k++) {
        r[k] = k < m * m ? _mm512_load_ps(o[k]) : _mm512_setzero_ps();
    }
    ki_tr16(r);
    for (int l = 0; l < WL; l++) {
        _mm512_store_ps(tt[l], r[l]);
    }
    const __m512 vb = _mm512_set1_ps(b), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    for (int l = 0; l < n && l < WL; l++) {
        int64_t cols = ow - x0[l] < m ? ow - x0[l] : m;
        __mmask16 cm = (__mmask16)((1u << cols) - 1u);
        for (int i = 0; i < m && y0[l] + i < oh; i++) {
            int64_t at = (y0[l] + i) * ow + x0[l];
            __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(cm, tt[l] + m * i), vb);
            if (res) {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(cm, res + at));
            }
            /* max(lo, v) with v second: a NaN v stays NaN, as the scalar comparisons keep it */
            v = _mm512_min_ps(vhi, _mm512_max_ps(vlo, v));
            _mm512_mask_storeu_ps(q + at, cm, v);
        }
    }
}
#else
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
#endif

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

/* Input transform of tiles [tb, te) of one channel plane p (h x w; tb and te multiples of NR, te
 * at most the tiles rounded up to NR): the t x t patch of each tile (zero outside the plane)
 * becomes t*t values u[pos], stored for tile tb + i at v[pos * pstride + i / NR * pan + i % NR]
 * (v already offset to the channel's row of the packed panels: pan floats per panel). Lanes past
 * the last tile get zeros. */
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

/* Output transform of tiles [tb, te) of one channel: m[pos * pstride + i] (the t*t GEMM products
 * of tile tb + i) becomes the output tiles of plane q (clipped to oh x ow), each value + b, + res
 * at the same place (res: the channel's residual plane, or NULL), then min(hi, max(lo, .)). */
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
