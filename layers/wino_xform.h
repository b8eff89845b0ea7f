/* wino_xform.h - the input and output transforms of Winograd F(4x4, 3x3) and F(2x2, 3x3) (Lavin &
 * Gray), compiled three times: plainly in conv2d_wino.c (the reference, any x86-64: 16 tiles side
 * by side in lane loops), with AVX2 in conv2d_wino_avx2.c and with AVX-512 in
 * conv2d_wino_avx512.c. The vector builds transform by tile rows, in registers (wino_rows.h,
 * shared by both widths; the vector pieces of each are here): the same operations on the same
 * values as the reference, so the same bits. Included only by those three files; each defines
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

#define WL KI_WINO_LANES /* lanes: tiles transformed together */

#define WCAT2(a, b) a##b
#define WCAT(a, b)  WCAT2(a, b)
#define WNAME(n)    WCAT(n, KI_WINO_SUFFIX)

/* ki_wino_input: the input transform of tiles [tb, te) of one channel plane p (h x w; te at most
 * the tiles rounded up to NR): the t x t patch of each tile
 * (zero outside the plane) becomes t*t values u[pos], stored for tile tb + i at v[pos * pstride + i
 * / NR * pan + i % NR] (v already offset to the channel's row of the packed panels: pan floats per
 * panel). Lanes past the last tile get zeros. ki_wino_output: the output transform of tiles [tb,
 * te) of one channel: m[pos * pstride + i] (the t*t GEMM products of tile tb + i) becomes the
 * output tiles of plane q (clipped to oh x ow), each value + b, + res at the same place (res: the
 * channel's residual plane, or NULL), then min(hi, max(lo, .)). */

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#include <stdbool.h>

#ifdef __AVX512F__
#include "simd_avx512.h"

/* The vector pieces of wino_rows.h with 16 lanes: a run's patch column j picked by two-source
 * permutes (lane l reads column m * l + j of the run's up to five vectors); an output row's 16
 * columns from the m vectors of its run, shifted by the run's first lane. */
#define WV       16
#define WV_PLAIN 0
typedef __m512 wv;
typedef __mmask16 wm;

static inline wv v_add(wv a, wv b)
{
    return _mm512_add_ps(a, b);
}

static inline wv v_sub(wv a, wv b)
{
    return _mm512_sub_ps(a, b);
}

static inline wv v_mul(wv a, wv b)
{
    return _mm512_mul_ps(a, b);
}

static inline wv v_min(wv a, wv b)
{
    return _mm512_min_ps(a, b);
}

static inline wv v_max(wv a, wv b)
{
    return _mm512_max_ps(a, b);
}

static inline wv v_set1(float x)
{
    return _mm512_set1_ps(x);
}

static inline wv v_zero(void)
{
    return _mm512_setzero_ps();
}

static inline wv v_loadu(const float *p)
{
    return _mm512_loadu_ps(p);
}

static inline void v_storeu(float *p, wv v)
{
    _mm512_storeu_ps(p, v);
}

static inline wm m_lanes(int64_t lo, int64_t hi)
{
    lo = lo < 0 ? 0 : lo, hi = hi > 16 ? 16 : hi;
    return hi <= lo ? 0 : (wm)(((1u << hi) - 1u) & ~((1u << lo) - 1u));
}

static inline wv v_load_m(const float *p, wm m)
{
    return _mm512_maskz_loadu_ps(m, p);
}

static inline void v_store_first(float *p, int64_t n, wv v)
{
    _mm512_mask_storeu_ps(p, m_lanes(0, n), v);
}

/* Lanes lo..hi-1 of v to p + lo .. p + hi - 1, nothing else. */
static inline void v_store_range(float *p, int lo, int hi, wv v)
{
    _mm512_mask_storeu_ps(p, m_lanes(lo, hi), v);
}

typedef struct win_ctx {
    __m512i cj[6];           /* lane l: column m * l + j of the run */
    __mmask16 hi[6], top[6]; /* lanes of the third/fourth and of the fifth vector */
} win_ctx;

static inline __attribute__((always_inline)) win_ctx win_ctx_make(const int m)
{
    win_ctx c;
    const __m512i iota = ki_lane_idx();
    for (int j = 0; j < m + 2; j++) {
        c.cj[j] =
            _mm512_add_epi32(_mm512_mullo_epi32(iota, _mm512_set1_epi32(m)), _mm512_set1_epi32(j));
        c.hi[j] = _mm512_cmpge_epi32_mask(c.cj[j], _mm512_set1_epi32(32));
        c.top[j] = _mm512_cmpge_epi32_mask(c.cj[j], _mm512_set1_epi32(64));
    }
    return c;
}

static inline __attribute__((always_inline)) void win_pick(const win_ctx *c, const float (*row)[16],
                                                           int nv, const int m, wv *pj)
{
    const __m512 r0 = _mm512_loadu_ps(row[0]);
    const __m512 r1 = nv > 1 ? _mm512_loadu_ps(row[1]) : r0;
    const __m512 r2 = nv > 2 ? _mm512_loadu_ps(row[2]) : r0;
    const __m512 r3 = nv > 3 ? _mm512_loadu_ps(row[3]) : r2;
    const __m512 r4 = nv > 4 ? _mm512_loadu_ps(row[4]) : r0;
#pragma GCC unroll 6
    for (int j = 0; j < m + 2; j++) {
        __m512 x = _mm512_permutex2var_ps(r0, c->cj[j], r1);
        if (nv > 2) {
            x = _mm512_mask_blend_ps(c->hi[j], x, _mm512_permutex2var_ps(r2, c->cj[j], r3));
        }
        if (nv > 4) {
            x = _mm512_mask_permutexvar_ps(x, c->top[j], c->cj[j], r4);
        }
        pj[j] = x;
    }
}

typedef struct wout_ctx {
    __m512i idx[4]; /* column 16 k + l of a run: value c mod m of lane c / m */
    __mmask16 upper[4];
} wout_ctx;

static inline __attribute__((always_inline)) wout_ctx wout_ctx_make(const int mo)
{
    wout_ctx c;
    const int sh = mo == 4 ? 2 : 1;
    const __m512i iota = ki_lane_idx();
    for (int k = 0; k < mo; k++) {
        const __m512i f = _mm512_add_epi32(iota, _mm512_set1_epi32(16 * k));
        const __m512i jj = _mm512_and_si512(f, _mm512_set1_epi32(mo - 1));
        c.idx[k] =
            _mm512_add_epi32(_mm512_srli_epi32(f, (unsigned)sh),
                             _mm512_slli_epi32(_mm512_and_si512(jj, _mm512_set1_epi32(1)), 4));
        c.upper[k] = _mm512_cmpge_epi32_mask(jj, _mm512_set1_epi32(2));
    }
    return c;
}

static inline __attribute__((always_inline)) wv wout_pick(const wout_ctx *c, const wv *o, int k,
                                                          int l0, const int mo)
{
    const __m512i ix = _mm512_add_epi32(c->idx[k], _mm512_set1_epi32(l0));
    __m512 v = _mm512_permutex2var_ps(o[0], ix, o[1]);
    if (mo == 4) {
        v = _mm512_mask_mov_ps(v, c->upper[k], _mm512_permutex2var_ps(o[2], ix, o[3]));
    }
    return v;
}
#else /* AVX2 */
#include "simd_avx2.h"

/* The vector pieces of wino_rows.h with 8 lanes (AVX2 has no two-source permute). A run's patch
 * columns j < 4 of F(4x4) are a transpose: 128-bit halves of the run's first four vectors paired
 * (tiles l and l + 4), then an in-lane 4 x 4 transpose; those of F(2x2) the even and odd floats of
 * the first two vectors. The last two columns are the first two moved down a lane, the run's last
 * column vector supplying lane 7. An output row's 8 columns: the m vectors of the run each
 * permuted to the two (F(4x4)) or four (F(2x2)) lanes the columns come from, then blended. */
#define WV       8
#define WV_PLAIN 1
typedef __m256 wv;
typedef __m256i wm;

static inline wv v_add(wv a, wv b)
{
    return _mm256_add_ps(a, b);
}

static inline wv v_sub(wv a, wv b)
{
    return _mm256_sub_ps(a, b);
}

static inline wv v_mul(wv a, wv b)
{
    return _mm256_mul_ps(a, b);
}

static inline wv v_min(wv a, wv b)
{
    return _mm256_min_ps(a, b);
}

static inline wv v_max(wv a, wv b)
{
    return _mm256_max_ps(a, b);
}

static inline wv v_set1(float x)
{
    return _mm256_set1_ps(x);
}

static inline wv v_zero(void)
{
    return _mm256_setzero_ps();
}

static inline wv v_loadu(const float *p)
{
    return _mm256_loadu_ps(p);
}

static inline void v_storeu(float *p, wv v)
{
    _mm256_storeu_ps(p, v);
}

static inline wm m_lanes(int64_t lo, int64_t hi)
{
    lo = lo < 0 ? 0 : lo > 8 ? 8 : lo;
    hi = hi < 0 ? 0 : hi > 8 ? 8 : hi;
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_andnot_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32((int)lo), iota),
                               _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), iota));
}

static inline wv v_load_m(const float *p, wm m)
{
    return _mm256_maskload_ps(p, m);
}

/* Plain 16-, 8- and 4-byte stores: a vmaskmovps store is microcode on AMD's cores. */
static inline void v_store_first(float *p, int64_t n, wv v)
{
    ki_store_first8(p, v, n);
}

/* Lanes lo..hi-1 of v to p + lo .. p + hi - 1, nothing else: moved down to lane 0 and stored as
 * v_store_first does (as masked stores, the input transform's runs that end or cross a panel took
 * a third to half of its time; docs/performance.md). */
static inline void v_store_range(float *p, int lo, int hi, wv v)
{
    if (lo > 0) {
        const __m256i idx =
            _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(lo));
        v = _mm256_permutevar8x32_ps(v, idx);
    }
    ki_store_first8(p + lo, v, hi - lo);
}

typedef struct win_ctx {
    __m256i next0, next1; /* lanes 1..7 to 0..6; lane 7 takes element 0 / 1 */
} win_ctx;

static inline win_ctx win_ctx_make(const int m)
{
    (void)m;
    return (win_ctx){ _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 0),
                      _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 1) };
}

/* x moved down a lane, lane 7 from element 0 (idx next0) or 1 (next1) of last */
static inline __m256 wino_next_lane(__m256 x, __m256 last, __m256i idx)
{
    return _mm256_blend_ps(_mm256_permutevar8x32_ps(x, idx), _mm256_permutevar8x32_ps(last, idx),
                           0x80);
}

static inline __attribute__((always_inline)) void win_pick(const win_ctx *c, const float (*row)[8],
                                                           int nv, const int m, wv *pj)
{
    const __m256 r0 = _mm256_load_ps(row[0]);
    const __m256 r1 = nv > 1 ? _mm256_load_ps(row[1]) : r0;
    if (m == 2) { /* columns 2 l + j of r0 r1 (r2: columns 16, 17) */
        const __m256 r2 = nv > 2 ? _mm256_load_ps(row[2]) : r0;
        pj[0] = ki_deint8(r0, r1, 0);
        pj[1] = ki_deint8(r0, r1, 1);
        pj[2] = wino_next_lane(pj[0], r2, c->next0);
        pj[3] = wino_next_lane(pj[1], r2, c->next1);
        return;
    }
    const __m256 r2 = nv > 2 ? _mm256_load_ps(row[2]) : r0;
    const __m256 r3 = nv > 3 ? _mm256_load_ps(row[3]) : r0;
    const __m256 r4 = nv > 4 ? _mm256_load_ps(row[4]) : r0;
    /* tiles l | l + 4 for l = 0..3: columns 4 l .. 4 l + 3 | 4 l + 16 .. 4 l + 19 */
    const __m256 a = _mm256_permute2f128_ps(r0, r2, 0x20), b = _mm256_permute2f128_ps(r0, r2, 0x31);
    const __m256 d = _mm256_permute2f128_ps(r1, r3, 0x20), e = _mm256_permute2f128_ps(r1, r3, 0x31);
    const __m256 t0 = _mm256_unpacklo_ps(a, b), t1 = _mm256_unpackhi_ps(a, b);
    const __m256 t2 = _mm256_unpacklo_ps(d, e), t3 = _mm256_unpackhi_ps(d, e);
    pj[0] = _mm256_shuffle_ps(t0, t2, 0x44);
    pj[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
    pj[2] = _mm256_shuffle_ps(t1, t3, 0x44);
    pj[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
    pj[4] = wino_next_lane(pj[0], r4, c->next0);
    pj[5] = wino_next_lane(pj[1], r4, c->next1);
}

typedef struct wout_ctx {
    __m256i base; /* the lane each column of a vector comes from, for a run from lane 0 */
} wout_ctx;

static inline wout_ctx wout_ctx_make(const int mo)
{
    return (wout_ctx){ mo == 4 ? _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1)
                               : _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3) };
}

static inline __attribute__((always_inline)) wv wout_pick(const wout_ctx *c, const wv *o, int k,
                                                          int l0, const int mo)
{
    const __m256i ix = _mm256_add_epi32(c->base, _mm256_set1_epi32(l0 + k * (8 / mo)));
    const __m256 s0 = _mm256_permutevar8x32_ps(o[0], ix), s1 = _mm256_permutevar8x32_ps(o[1], ix);
    if (mo == 2) {
        return _mm256_blend_ps(s0, s1, 0xAA);
    }
    const __m256 s2 = _mm256_permutevar8x32_ps(o[2], ix), s3 = _mm256_permutevar8x32_ps(o[3], ix);
    return _mm256_blend_ps(_mm256_blend_ps(s0, s1, 0x22), _mm256_blend_ps(s2, s3, 0x88), 0xCC);
}
#endif

#include "wino_rows.h"
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
        n = te - t0 < n ? (int)(te - t0) : n; /* none of another run's tiles */
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
        n = te - t0 < n ? (int)(te - t0) : n; /* none of another run's tiles */
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
