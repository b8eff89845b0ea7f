/* pool2d_avx2.c - the AVX2 row kernel of max pooling (see ki_pool_rowmax_ref in conv_common.h)
 * and the stride-2 plane kernel (ki_pool_max_s2_avx2: nn.MaxPool2d and the direct path's fused
 * pool).
 * Compiled with -mavx2 -mfma; pool2d.c calls it only when the CPU has AVX2. */
#include <immintrin.h>

#include "conv_common.h"
#include "simd_avx2.h"

/* Eight values s[0], s[sw], ..., s[7*sw] for sw 1 or 2; reads s[0 .. 7*sw] only (for sw 2 the
 * second load starts at s[7], its odd lanes holding s[8], s[10], ...). */
static inline __m256 load8(const float *s, int64_t sw)
{
    if (sw == 1) {
        return _mm256_loadu_ps(s);
    }
    __m256 lo = _mm256_loadu_ps(s), hi = _mm256_loadu_ps(s + 7);
    __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* d[i..i+7] = max(v, d) for the eight values at s[i*sw]; NaN lanes or-ed into *nan. */
static inline void step8(const float *s, int64_t sw, float *restrict d, int64_t i, __m256 *nan)
{
    __m256 v = load8(s + i * sw, sw);
    *nan = _mm256_or_ps(*nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    /* max_ps(v, d) is v > d ? v : d */
    _mm256_storeu_ps(d + i, _mm256_max_ps(v, _mm256_loadu_ps(d + i)));
}

int ki_pool_rowmax_avx2(const float *s, int64_t sw, float *restrict d, int64_t n)
{
    __m256 nan = _mm256_setzero_ps();
    if (n < 8) {
        return ki_pool_rowmax_ref(s, sw, d, n);
    }
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        step8(s, sw, d, i, &nan);
    }
    if (n % 8 != 0) {
        /* the tail as one vector overlapping the last: max(v, max(v, d)) == max(v, d) */
        step8(s, sw, d, n - 8, &nan);
    }
    return _mm256_movemask_ps(nan);
}

/* Eight columns of row r from column b, -inf outside [0, w) (never the maximum): one load inside
 * the row, a masked load and a blend at its ends. */
static inline __m256 load_cols(const float *r, int64_t b, int64_t w)
{
    if (b >= 0 && b + 8 <= w) {
        return _mm256_loadu_ps(r + b);
    }
    const __m256i m = ki_lanes_in8(b, w);
    if (_mm256_testz_si256(m, m)) {
        return _mm256_set1_ps(-__builtin_inff());
    }
    return _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), _mm256_maskload_ps(r + b, m),
                            _mm256_castsi256_ps(m));
}

/* The window maxima of eight output columns from the input columns r[b .. b + kw + 13] they read
 * (taps in order: d = v > d ? v : d, so max(tap 1, tap 0), then max(tap 2, that)). Output columns
 * 0..3 are the even lanes of the vectors loaded at b, b + 1 (and b + 2); columns 4..7 the odd
 * lanes of those loaded at b + 7, b + 8 (and b + 9), so no load reads past the last window. With
 * `inside` (a constant where inlined) every column lies inside the row (w columns) and is loaded
 * as it lies; else each load goes through load_cols, -inf outside [0, w), which never wins. NaN
 * lanes of columns b .. b + 15 or-ed into *nan, and with `tail` (the last vector of a row's
 * chunk) of b + kw + 13 too: the vectors before it stand 16 columns apart, so those columns
 * cover every one a chunk reads. */
static inline __attribute__((always_inline)) __m256 row_max(const float *r, int64_t b, int64_t w,
                                                            const int64_t kw, const bool inside,
                                                            const bool tail, __m256 *nan)
{
#define LOAD(o) (inside ? _mm256_loadu_ps(r + b + (o)) : load_cols(r, b + (o), w))
    const __m256 a0 = LOAD(0), a1 = LOAD(7), b1 = LOAD(8);
    __m256 lo = _mm256_max_ps(LOAD(1), a0), hi = _mm256_max_ps(b1, a1);
    __m256 n = _mm256_cmp_ps(a0, b1, _CMP_UNORD_Q); /* columns 0..15 */
    if (kw == 3) {                                  /* tap 2 */
        const __m256 c1 = LOAD(9);
        lo = _mm256_max_ps(LOAD(2), lo);
        hi = _mm256_max_ps(c1, hi);
        if (tail) {
            n = _mm256_or_ps(n, _mm256_cmp_ps(c1, c1, _CMP_UNORD_Q)); /* 9..16 */
        }
    }
#undef LOAD
    *nan = _mm256_or_ps(*nan, n);
    const __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Floats of the rows' maxima a plane keeps (kh rows of a column chunk), and the widest chunk. */
#define S2_ROWS_FLOATS 4096
#define S2_CHUNK_MAX   256

/* row_max of the vector from column b of row r, its columns loaded as they lie when the row
 * holds them all (kw + 14 from b), else through load_cols. */
static inline __attribute__((always_inline)) __m256 row_at(const float *r, int64_t b, int64_t w,
                                                           const int64_t kw, bool tail, __m256 *nan)
{
    if (b >= 0 && b + kw + 14 <= w) {
        return tail ? row_max(r, b, w, kw, true, true, nan)
                    : row_max(r, b, w, kw, true, false, nan);
    }
    return row_max(r, b, w, kw, false, true, nan);
}

/* ki_pool_max_s2_avx2's loops. A column chunk walks down the plane. Each input row a window
 * reads is reduced once over its kw taps (row_at) into hr, a ring of kh rows on the stack (row iy
 * at slot iy % kh), where the output rows after it find it; an output row's last input row is
 * reduced in the same pass that takes the rows' maxima in ky order (m = row y0, then max(row, m)
 * down to it) and stores the output. A tie thereby goes to the first row holding the maximum and,
 * within it, to the first column (row_max's order): the value the reference's ky-major scan
 * keeps. Vectors stand 8 columns apart; when the chunk holds at least 8 columns the last one
 * starts at its end - 8, recomputing some columns of the one before (the same values) rather
 * than storing part of a vector. (The kernel before kept the rows' maxima in arrays of vectors
 * and worked out each row's edge runs anew; docs/performance.md.) With the window and the row
 * stride as constants where inlined; cw: the chunk's columns, a multiple of 8 with kh * cw <=
 * S2_ROWS_FLOATS. */
static inline __attribute__((always_inline)) int
s2_plane(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh, int64_t ow,
         const int64_t kh, const int64_t kw, const int64_t sh, int64_t ph, int64_t pw, int64_t cw)
{
    float hr[S2_ROWS_FLOATS];
    const float *rows[S2_ROWS_FLOATS / 8]; /* an output row's slots in ky order */
    __m256 nan = _mm256_setzero_ps();
    for (int64_t ox0 = 0; ox0 < ow; ox0 += cw) {
        const int64_t n = ow - ox0 < cw ? ow - ox0 : cw;
        const int64_t ld = (n + 7) / 8 * 8;
        /* ql: the last vector's first column in the chunk */
        const int64_t ql = n >= 8 ? n - 8 : 0, b0 = 2 * ox0 - pw;
        int64_t done = 0; /* the input rows below it are reduced (the last kh of them in hr) */
        for (int64_t oy = 0; oy < oh; oy++) {
            int64_t y0 = oy * sh - ph, y1 = y0 + kh;
            y0 = y0 < 0 ? 0 : y0;
            y1 = y1 > h ? h : y1;
            if (y1 <= y0) {
                return 1; /* a window all padding: the reference's answer */
            }
            if (kh == 3 && sh == 2 && y1 - y0 == 3 && done == y0 + 1 && n >= 8) {
                /* a whole window below the first: row y0 reduced for the row before, rows y0 + 1
                 * and y0 + 2 here in one pass (only the last kept, for the next), the maxima in
                 * ky order as below */
                const float *r1 = src + (y0 + 1) * w, *r2 = r1 + w, *m0 = hr + y0 % 3 * ld;
                float *keep = hr + (y0 + 2) % 3 * ld, *o = dst + oy * ow + ox0;
                for (int64_t q = 0;; q += 8) {
                    const int64_t qq = q < ql ? q : ql;
                    const bool t = qq == ql;
                    const __m256 a = row_at(r1, b0 + 2 * qq, w, kw, t, &nan);
                    const __m256 c = row_at(r2, b0 + 2 * qq, w, kw, t, &nan);
                    _mm256_storeu_ps(keep + qq, c);
                    _mm256_storeu_ps(o + qq,
                                     _mm256_max_ps(c, _mm256_max_ps(a, _mm256_loadu_ps(m0 + qq))));
                    if (t) {
                        break;
                    }
                }
                done = y1;
                continue;
            }
            for (int64_t iy = done > y0 ? done : y0; iy < y1 - 1; iy++) {
                const float *r = src + iy * w;
                float *d = hr + iy % kh * ld;
                for (int64_t q = 0;; q += 8) {
                    const int64_t qq = q < ql ? q : ql;
                    _mm256_storeu_ps(d + qq, row_at(r, b0 + 2 * qq, w, kw, qq == ql, &nan));
                    if (qq == ql) {
                        break;
                    }
                }
            }
            const int64_t nr = y1 - y0;
            for (int64_t i = 0; i < nr - 1; i++) {
                rows[i] = hr + (y0 + i) % kh * ld;
            }
            const bool fresh = y1 - 1 >= done; /* else the last row is in hr already */
            done = y1;
            const float *r = src + (y1 - 1) * w;
            float *last = hr + (y1 - 1) % kh * ld, *o = dst + oy * ow + ox0;
            for (int64_t q = 0;; q += 8) {
                const int64_t qq = q < ql ? q : ql;
                __m256 v;
                if (fresh) {
                    v = row_at(r, b0 + 2 * qq, w, kw, qq == ql, &nan);
                    _mm256_storeu_ps(last + qq, v);
                } else {
                    v = _mm256_loadu_ps(last + qq);
                }
                if (nr > 1) {
                    __m256 m = _mm256_loadu_ps(rows[0] + qq);
                    for (int64_t i = 1; i < nr - 1; i++) {
                        m = _mm256_max_ps(_mm256_loadu_ps(rows[i] + qq), m);
                    }
                    v = _mm256_max_ps(v, m);
                }
                if (n >= 8) {
                    _mm256_storeu_ps(o + qq, v);
                } else {
                    ki_store_first8(o, v, n);
                }
                if (qq == ql) {
                    break;
                }
            }
        }
    }
    return _mm256_movemask_ps(nan) != 0;
}

/* Windows of more than S2_ROWS_FLOATS / 8 rows are left to the reference (returns nonzero); the
 * common windows get their loops unrolled. */
int ki_pool_max_s2_avx2(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                        int64_t ow, int64_t kh, int64_t kw, int64_t sh, int64_t ph, int64_t pw)
{
    if (kh < 1 || kh > S2_ROWS_FLOATS / 8) {
        return 1;
    }
    int64_t cw = S2_ROWS_FLOATS / kh / 8 * 8;
    cw = cw > S2_CHUNK_MAX ? S2_CHUNK_MAX : cw;
    if (kh == 3 && kw == 3 && sh == 2) {
        return s2_plane(src, h, w, dst, oh, ow, 3, 3, 2, ph, pw, cw);
    }
    if (kh == 2 && kw == 2 && sh == 2) {
        return s2_plane(src, h, w, dst, oh, ow, 2, 2, 2, ph, pw, cw);
    }
    return s2_plane(src, h, w, dst, oh, ow, kh, kw, sh, ph, pw, cw);
}

int ki_pool_max_s1_avx2(const float *src, int64_t h, int64_t w, float *restrict dst, int64_t oh,
                        int64_t ow, int64_t kh, int64_t kw, int64_t ph, int64_t pw,
                        float *restrict ws)
{
    int64_t owr, rn;
    ki_pool_max_s1_widths(ow, kw, &owr, &rn);
    float *const row = ws, *const hm = ws + rn;
    __m256 nan = _mm256_setzero_ps();
    const __m256 ninf = _mm256_set1_ps(-__builtin_inff());
    for (int64_t iy = 0; iy < h; iy++) {
        /* row[c] = input column c - pw, -inf outside the row (pw + w <= rn) */
        const float *r = src + iy * w;
        if (w >= 8) { /* -inf, then the row by whole vectors, the last one ending at its end */
            for (int64_t c = 0; c < rn; c += 8) {
                _mm256_storeu_ps(row + c, ninf);
            }
            for (int64_t c = 0;; c += 8) {
                const int64_t cc = c + 8 < w ? c : w - 8;
                const __m256 v = _mm256_loadu_ps(r + cc);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                _mm256_storeu_ps(row + pw + cc, v);
                if (cc == w - 8) {
                    break;
                }
            }
        } else {
            for (int64_t c = 0; c < rn; c += 8) {
                const __m256 v = load_cols(r, c - pw, w);
                nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
                _mm256_storeu_ps(row + c, v);
            }
        }
        /* hm row iy: each output column's maximum over the kw taps, kx ascending */
        for (int64_t j = 0; j < owr; j += 8) {
            __m256 m = _mm256_loadu_ps(row + j);
            for (int64_t kx = 1; kx < kw; kx++) {
                m = _mm256_max_ps(_mm256_loadu_ps(row + j + kx), m); /* a tie keeps m */
            }
            _mm256_storeu_ps(hm + iy * owr + j, m);
        }
    }
    for (int64_t oy = 0; oy < oh; oy++) {
        const int64_t y0 = oy - ph < 0 ? 0 : oy - ph;
        const int64_t y1 = oy - ph + kh < h ? oy - ph + kh : h;
        if (y1 <= y0) {
            return 1; /* a window all padding: the reference's answer */
        }
        for (int64_t j = 0; j < owr; j += 8) {
            __m256 m = _mm256_loadu_ps(hm + y0 * owr + j);
            for (int64_t iy = y0 + 1; iy < y1; iy++) {
                m = _mm256_max_ps(_mm256_loadu_ps(hm + iy * owr + j), m); /* ky ascending */
            }
            ki_store_first8(dst + oy * ow + j, m, ow - j);
        }
    }
    return _mm256_movemask_ps(nan);
}

/* The eight partial sums of acc combined in the reference's order. */
static inline float sums8(__m256 acc)
{
    float s[8];
    _mm256_storeu_ps(s, acc);
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void ki_plane_sums_avx2(const float *x, int64_t stride, int64_t n, int64_t planes, float *sums)
{
    const int64_t body = n / 8 * 8;
    /* the tail's lanes hold floats body .. n - 1, the others +0.0, which leaves a sum as it is
     * (a sum that starts at +0.0 is never -0.0) */
    const __m256i tail = ki_lanes_in8(0, n - body);
    int64_t p = 0;
    for (; p + 4 <= planes; p += 4) {
        const float *x0 = x + p * stride, *x1 = x0 + stride, *x2 = x1 + stride, *x3 = x2 + stride;
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < body; i += 8) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x0 + i));
            a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x1 + i));
            a2 = _mm256_add_ps(a2, _mm256_loadu_ps(x2 + i));
            a3 = _mm256_add_ps(a3, _mm256_loadu_ps(x3 + i));
        }
        if (body < n) {
            a0 = _mm256_add_ps(a0, _mm256_maskload_ps(x0 + body, tail));
            a1 = _mm256_add_ps(a1, _mm256_maskload_ps(x1 + body, tail));
            a2 = _mm256_add_ps(a2, _mm256_maskload_ps(x2 + body, tail));
            a3 = _mm256_add_ps(a3, _mm256_maskload_ps(x3 + body, tail));
        }
        sums[p] = sums8(a0), sums[p + 1] = sums8(a1), sums[p + 2] = sums8(a2);
        sums[p + 3] = sums8(a3);
    }
    for (; p < planes; p++) {
        const float *x0 = x + p * stride;
        __m256 a0 = _mm256_setzero_ps();
        for (int64_t i = 0; i < body; i += 8) {
            a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x0 + i));
        }
        if (body < n) {
            a0 = _mm256_add_ps(a0, _mm256_maskload_ps(x0 + body, tail));
        }
        sums[p] = sums8(a0);
    }
}
