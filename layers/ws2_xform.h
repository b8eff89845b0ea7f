/* ws2_xform.h - the transforms of the two-phase stride-2 Winograd (conv2d_ws2.c, which gives the
 * matrices), compiled twice: plainly in conv2d_ws2.c (the reference, ki_ws2_input_ref /
 * ki_ws2_output_ref) and with AVX2 in conv2d_ws2_avx2.c, each defining KI_WS2_SUFFIX first. Both
 * work on KI_WS2_NT lanes (the tiles of an item) as GCC vectors (four floats plain, eight with
 * AVX2). Per patch row the columns step takes eight tiles of one tile row at a time, from the row
 * in place or from a copy with the padding's zeros: the plain build gathers their columns into
 * lanes, the AVX2 one transposes eight row loads in registers; the AVX2 output transform stores
 * whole tiles' rows interleaved in registers. The same operations on the same values either way,
 * so the same bits. */
#include <string.h>

#include "conv2d.h"

#define WX_T  9
#define WX_NT KI_WS2_NT

#define WX_CAT2(a, b) a##b
#define WX_CAT(a, b)  WX_CAT2(a, b)
#define WX_NAME(n)    WX_CAT(n, KI_WS2_SUFFIX)
#define WX_AI         static inline __attribute__((always_inline))

/* Fixed loops over a tile's 9 rows or positions, unrolled so their vectors stay in registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define WX_UNROLL _Pragma("GCC unroll 9")
#else
#define WX_UNROLL
#endif

/* Lanes as one GCC vector: four in the plain build (an SSE register on x86-64), eight with AVX2. */
#ifdef __AVX2__
#define WX_VL 8
#else
#define WX_VL 4
#endif
typedef float wx_v __attribute__((vector_size(WX_VL * sizeof(float))));

WX_AI wx_v wx_ld(const float *p)
{
    wx_v v;
    memcpy(&v, p, sizeof v);
    return v;
}

WX_AI void wx_st(float *p, wx_v v)
{
    memcpy(p, &v, sizeof v);
}

/* One dimension's input transform on WX_VL lanes: o[q * os] from d[i] (i = 0..8). */
WX_AI void wx_bt8(const wx_v *d, float *o, int64_t os)
{
    const wx_v two = (wx_v){ 0 } + 2.0f, three = two + 1.0f;
    wx_st(o, two * d[0] - d[2] - two * d[4] + d[6]);
    wx_st(o + os, d[6] - two * d[2] - d[4]);
    wx_st(o + 2 * os, two * d[2] - three * d[4] + d[6]);
    wx_st(o + 3 * os, d[6] - d[2]);
    wx_st(o + 4 * os, two * d[2] - d[4] - two * d[6] + d[8]);
    wx_st(o + 5 * os, d[1]);
    wx_st(o + 6 * os, d[3]);
    wx_st(o + 7 * os, d[5]);
    wx_st(o + 8 * os, d[7]);
}

/* One dimension's output transform on WX_VL lanes: y[j * ys] from m[q] (q = 0..8). */
WX_AI void wx_at8(const wx_v *m, float *y, int64_t ys)
{
    const wx_v two = (wx_v){ 0 } + 2.0f, four = two + two, eight = four + four;
    const wx_v p12 = m[1] + m[2], n12 = m[1] - m[2];
    wx_st(y, m[0] + p12 + m[3] + m[5]);
    wx_st(y + ys, n12 + two * m[3] + m[6]);
    wx_st(y + 2 * ys, p12 + four * m[3] + m[7]);
    wx_st(y + 3 * ys, n12 + eight * m[3] + m[4] + m[8]);
}

#ifdef __AVX2__
#include <immintrin.h>

#include "simd_avx2.h"

/* Lanes l0..l0+7 of patch row i: eight tiles of one tile row, inside the plane, patches 8
 * columns apart from r (the first one's row): the 8x8 block r[8k + j] (k, j < 8) transposed in
 * registers gives columns 0..7, column 8 of tile k is column 0 of tile k + 1 (r[64] for the
 * last). */
WX_AI void wx_cols8(const float *r, wx_v *d)
{
    __m256 a0 = _mm256_loadu_ps(r), a1 = _mm256_loadu_ps(r + 8), a2 = _mm256_loadu_ps(r + 16);
    __m256 a3 = _mm256_loadu_ps(r + 24), a4 = _mm256_loadu_ps(r + 32);
    __m256 a5 = _mm256_loadu_ps(r + 40), a6 = _mm256_loadu_ps(r + 48);
    __m256 a7 = _mm256_loadu_ps(r + 56);
    ki_tr8(&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7);
    __m256 c[9] = { a0, a1, a2, a3, a4, a5, a6, a7 };
    const __m256i next = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7);
    c[8] = _mm256_blend_ps(_mm256_permutevar8x32_ps(c[0], next), _mm256_broadcast_ss(r + 64), 0x80);
    WX_UNROLL
    for (int j = 0; j < WX_T; j++) {
        memcpy(&d[j], &c[j], sizeof d[j]);
    }
}
#endif

/* Lanes l0..l0+7 of patch row i from r, the row's columns from the first lane's patch on (zero
 * padded): the plain build gathers each tile's 9 columns into lanes, WX_VL tiles a vector. */
WX_AI void wx_row8(const float *r, float *o, int64_t os)
{
#ifdef __AVX2__
    wx_v d[WX_T];
    wx_cols8(r, d);
    wx_bt8(d, o, os);
#else
    for (int k0 = 0; k0 < 8; k0 += WX_VL) {
        wx_v d[WX_T];
        for (int j = 0; j < WX_T; j++) {
            for (int k = 0; k < WX_VL; k++) {
                d[j][k] = r[8 * (k0 + k) + j];
            }
        }
        wx_bt8(d, o + k0, os);
    }
#endif
}

/* Columns a group of eight tiles reads from its first: 8 a tile and the last tile's ninth. */
#define WX_GROUP 65
/* Floats of the padded row a tile row's lanes read: 8 columns a tile and one more, and the
 * columns a last group of fewer than eight tiles reads past them. */
#define WX_ROW (8 * WX_NT + 1 + WX_GROUP)

#ifdef __AVX2__
/* Row i of eight tiles side by side: d[4k + j] = column j of tile k (a, b, c, e: columns 0..3 of
 * the eight tiles), interleaved in registers. */
WX_AI void wx_rows8(const float *a, const float *b, const float *c, const float *e, float *d)
{
    const __m256 va = _mm256_loadu_ps(a), vb = _mm256_loadu_ps(b), vc = _mm256_loadu_ps(c);
    const __m256 ve = _mm256_loadu_ps(e);
    const __m256 lab = _mm256_unpacklo_ps(va, vb), hab = _mm256_unpackhi_ps(va, vb);
    const __m256 lce = _mm256_unpacklo_ps(vc, ve), hce = _mm256_unpackhi_ps(vc, ve);
    const __m256 x0 = _mm256_shuffle_ps(lab, lce, 0x44), x1 = _mm256_shuffle_ps(lab, lce, 0xEE);
    const __m256 x2 = _mm256_shuffle_ps(hab, hce, 0x44), x3 = _mm256_shuffle_ps(hab, hce, 0xEE);
    _mm256_storeu_ps(d, _mm256_permute2f128_ps(x0, x1, 0x20));
    _mm256_storeu_ps(d + 8, _mm256_permute2f128_ps(x2, x3, 0x20));
    _mm256_storeu_ps(d + 16, _mm256_permute2f128_ps(x0, x1, 0x31));
    _mm256_storeu_ps(d + 24, _mm256_permute2f128_ps(x2, x3, 0x31));
}
#endif

/* V[p][ch][l] for every position p, channel ch and lane l (zeros past the item's tiles): per
 * channel, per run of the item's tiles in one tile row and per patch row, the row's columns
 * copied with the padding's zeros, then the columns step of eight tiles at a time (t[i][q][l]);
 * then the rows step on the lanes. */
void WX_NAME(ki_ws2_input)(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *x,
                           int64_t ic, float *restrict v)
{
    const int64_t h = g->in.h, w = g->in.w, hw = h * w;
    float t[WX_T][WX_T][WX_NT + 8]; /* lanes past nt: zeros, or scratch of a last group */
    float row[WX_ROW];
    memset(t, 0, sizeof t);
    memset(row, 0, sizeof row);
    const int64_t ya = it->y0[0] > 0 ? it->y0[0] : 0, yb = it->y0[it->nt - 1] + WX_T;
    const int64_t pf0 = ya * w, pf1 = (yb < h ? yb : h) * w; /* the item's rows of a plane */
    for (int64_t ch = 0; ch < ic; ch++) {
        const float *p = x + ch * hw;
        if (ch + 1 < ic) { /* the next plane's rows, asked for while this one is transformed */
            for (int64_t at = pf0; at < pf1; at += 16) {
                __builtin_prefetch(p + hw + at);
            }
        }
        for (int la = 0; la < it->nt;) {
            int lb = la + 1;
            while (lb < it->nt && it->y0[lb] == it->y0[la]) {
                lb++;
            }
            const int64_t x0 = it->x0[la], span = 8 * (int64_t)(lb - la) + 1;
            const int64_t c0 = x0 < 0 ? -x0 : 0, c1 = x0 + span > w ? w - x0 : span;
            for (int i = 0; i < WX_T; i++) {
                const int64_t iy = it->y0[la] + i;
                const bool in_rows = iy >= 0 && iy < h;
                bool copied = false;
                for (int l = la; l < lb; l += 8) {
                    const int64_t xg = x0 + 8 * (int64_t)(l - la);
                    if (in_rows && l + 8 <= lb && xg >= 0 && xg + WX_GROUP <= w) {
                        wx_row8(p + iy * w + xg, &t[i][0][l], WX_NT + 8); /* in place */
                        continue;
                    }
                    if (!copied) { /* the row with the padding's zeros, and a last group's */
                        if (in_rows) {
                            memset(row, 0, (size_t)c0 * sizeof *row);
                            memcpy(row + c0, p + iy * w + x0 + c0, (size_t)(c1 - c0) * sizeof *row);
                            memset(row + c1, 0, (size_t)(span - c1) * sizeof *row);
                        } else {
                            memset(row, 0, (size_t)span * sizeof *row);
                        }
                        memset(row + span, 0, (size_t)WX_GROUP * sizeof *row);
                        copied = true;
                    }
                    wx_row8(row + 8 * (l - la), &t[i][0][l], WX_NT + 8);
                }
            }
            la = lb;
        }
        for (int q = 0; q < WX_T; q++) { /* rows: positions (qy, q) from column q of t */
            float *o = v + ((int64_t)q * ic + ch) * WX_NT;
            for (int l = 0; l < WX_NT; l += WX_VL) {
                wx_v d[WX_T];
                WX_UNROLL
                for (int i = 0; i < WX_T; i++) {
                    d[i] = wx_ld(&t[i][q][l]);
                }
                wx_bt8(d, o + l, WX_T * ic * WX_NT);
            }
        }
    }
}

/* Output channel ol of the block's products m (rows of them) for the item's tiles: the raw sums
 * into y (the channel's output plane). */
void WX_NAME(ki_ws2_output)(const struct ki_conv2d_geom *g, const ki_ws2_item *it, const float *m,
                            int64_t rows, int64_t ol, float *restrict y)
{
    const int64_t oh = g->oh, ow = g->ow, ps = rows * WX_NT;
    float t[WX_T][4][WX_NT];
    float o[4][4][WX_NT + 8]; /* [i][j][l]; a last group of fewer than eight reads past nt */
    for (int qy = 0; qy < WX_T; qy++) { /* columns: t[qy] from position row qy */
        const float *mq = m + ((int64_t)qy * WX_T * rows + ol) * WX_NT;
        for (int l = 0; l < WX_NT; l += WX_VL) {
            wx_v d[WX_T];
            WX_UNROLL
            for (int qx = 0; qx < WX_T; qx++) {
                d[qx] = wx_ld(mq + qx * ps + l);
            }
            wx_at8(d, &t[qy][0][l], WX_NT);
        }
    }
    for (int j = 0; j < 4; j++) { /* rows: output column j of every tile */
        for (int l = 0; l < WX_NT; l += WX_VL) {
            wx_v d[WX_T];
            WX_UNROLL
            for (int qy = 0; qy < WX_T; qy++) {
                d[qy] = wx_ld(&t[qy][j][l]);
            }
            wx_at8(d, &o[0][j][l], 4 * (WX_NT + 8));
        }
    }
    for (int l = 0; l < it->nt;) {
        const int64_t oy = (it->y0[l] + 1) / 2, ox = (it->x0[l] + 1) / 2;
#ifdef __AVX2__
        int n = 1; /* whole tiles of this tile row from lane l on, up to eight */
        while (n < 8 && l + n < it->nt && it->y0[l + n] == it->y0[l]) {
            n++;
        }
        n = ox + 4 * n <= ow ? n : (int)((ow - ox) / 4);
        if (n >= 2 && oy + 4 <= oh) {
            for (int i = 0; i < 4; i++) { /* their 4 n columns of row i */
                float *d = y + (oy + i) * ow + ox;
                if (n == 8) {
                    wx_rows8(o[i][0] + l, o[i][1] + l, o[i][2] + l, o[i][3] + l, d);
                } else {
                    float b[32];
                    wx_rows8(o[i][0] + l, o[i][1] + l, o[i][2] + l, o[i][3] + l, b);
                    memcpy(d, b, (size_t)(4 * n) * sizeof *d);
                }
            }
            l += n;
            continue;
        }
#endif
        const int ni = oh - oy < 4 ? (int)(oh - oy) : 4, nj = ow - ox < 4 ? (int)(ow - ox) : 4;
        for (int i = 0; i < ni; i++) {
            float *d = y + (oy + i) * ow + ox;
            for (int j = 0; j < nj; j++) {
                d[j] = o[i][j][l];
            }
        }
        l++;
    }
}
