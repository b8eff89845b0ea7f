/* wino_rows.h - the Winograd transforms of wino_xform.h by tile rows, in registers, for any vector
 * width: the loops over runs of tiles, the columns and rows steps and the stores, shared by its
 * AVX-512 (16 lanes) and AVX2 (8 lanes) branches, which define first their vector pieces:
 *   WV                    lanes of a vector;
 *   WV_PLAIN              1: unmasked loads of input rows whose lanes are all inside, and whole
 *                         stores of input runs with room in their panel (AVX2, whose masked loads
 *                         and stores cost more); 0: masked ones (AVX-512: the whole stores and
 *                         the branch made its input transform 5-15 % slower, one thread);
 *   wv, wm                a vector of WV floats, a mask of its lanes;
 *   v_add, v_sub, v_mul, v_set1, v_zero, v_min, v_max, v_loadu, v_storeu;
 *   m_lanes(lo, hi)       lanes i with lo <= i < hi;
 *   v_load_m              masked load (zeros elsewhere), never touching masked-off lanes;
 *   v_store_first(p, n, v) lanes 0..n-1 of v (n < WV) to p, nothing past them;
 *   v_store_range(p, lo, hi, v) lanes lo..hi-1 of v to p + lo .. p + hi - 1, nothing else;
 *   win_ctx, win_ctx_make(m), win_pick(c, row, nv, m, pj): pj[j] lane l = column m * l + j of a
 *                         run's row of t (row: its nv vectors), for j < m + 2;
 *   wout_ctx, wout_ctx_make(m), wout_pick(c, o, k, l0, m): columns WV * k .. WV * k + WV - 1 of the
 *                         output row of the run whose first tile is lane l0 (column c: value c mod
 * m of lane l0 + c / m of o[0..m-1]). The same operations on the same values as the lane-loop
 * reference of wino_xform.h, so the same bits. Everything is static inline and always inlined into
 * the ISA file's two entries, so m is a constant in each copy. Thread-safe: a call writes only its
 * own tiles' values. */
#ifndef KI_WINO_ROWS_H
#define KI_WINO_ROWS_H

/* Small fixed loops, unrolled so their vectors stay in registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define WINO_UNROLL _Pragma("GCC unroll 6")
#else
#define WINO_UNROLL
#endif

#define WINO_AI static inline __attribute__((always_inline))

/* Most WV-column vectors a run of WV tiles' patches spans: WV * 4 + 2 columns (F(4x4)). */
#define WINO_ROW_VECS 5

/* The reference's wino_bt6 / wino_bt4 / wino_at6 / wino_at4 on vectors: the same operations in the
 * same order, so the same bits. */
WINO_AI void wino_bt6v(const wv *d, wv *o)
{
    const wv c4 = v_set1(4.0f), c5 = v_set1(5.0f), c2 = v_set1(2.0f);
    const wv a = v_sub(d[4], v_mul(c4, d[2]));
    const wv b = v_sub(d[3], v_mul(c4, d[1]));
    const wv c = v_sub(d[4], d[2]);
    const wv e = v_mul(c2, v_sub(d[3], d[1]));
    o[0] = v_add(v_sub(v_mul(c4, d[0]), v_mul(c5, d[2])), d[4]);
    o[1] = v_add(a, b);
    o[2] = v_sub(a, b);
    o[3] = v_add(c, e);
    o[4] = v_sub(c, e);
    o[5] = v_add(v_sub(v_mul(c4, d[1]), v_mul(c5, d[3])), d[5]);
}

WINO_AI void wino_bt4v(const wv *d, wv *o)
{
    o[0] = v_sub(d[0], d[2]);
    o[1] = v_add(d[1], d[2]);
    o[2] = v_sub(d[2], d[1]);
    o[3] = v_sub(d[1], d[3]);
}

WINO_AI void wino_at6v(const wv *m, wv *o)
{
    const wv p12 = v_add(m[1], m[2]), n12 = v_sub(m[1], m[2]);
    const wv p34 = v_add(m[3], m[4]), n34 = v_sub(m[3], m[4]);
    o[0] = v_add(v_add(m[0], p12), p34);
    o[1] = v_add(n12, v_mul(v_set1(2.0f), n34));
    o[2] = v_add(p12, v_mul(v_set1(4.0f), p34));
    o[3] = v_add(v_add(n12, v_mul(v_set1(8.0f), n34)), m[5]);
}

WINO_AI void wino_at4v(const wv *m, wv *o)
{
    o[0] = v_add(v_add(m[0], m[1]), m[2]);
    o[1] = v_sub(v_sub(m[1], m[2]), m[3]);
}

/* The columns step (t = B^T d) of a run on whole vectors of its ts input rows from (ys, xs): nv
 * vectors of columns, each column once for the run; rows and columns outside the plane are
 * zeros. */
WINO_AI void wino_in_cols(const float *p, int64_t h, int64_t w, int64_t ys, int64_t xs, int nv,
                          float (*tc)[WINO_ROW_VECS][WV], const int m)
{
    const int ts = m + 2;
    for (int k = 0; k < nv; k++) {
        const int64_t x = xs + (int64_t)WV * k;
        const bool inside = x >= 0 && x + WV <= w && WV_PLAIN;
        const wm cm = m_lanes(-x, w - x);
        wv d[6], o[6];
        WINO_UNROLL
        for (int i = 0; i < ts; i++) {
            const int64_t y = ys + i;
            d[i] = y < 0 || y >= h ? v_zero()
                   : inside        ? v_loadu(p + y * w + x)
                                   : v_load_m(p + y * w + x, cm);
        }
        m == 4 ? wino_bt6v(d, o) : wino_bt4v(d, o);
        WINO_UNROLL
        for (int r = 0; r < ts; r++) {
            v_storeu(tc[r][k], o[r]);
        }
    }
}

/* The rows step (u = t B) of a run of n tiles, the first at rel tiles past tb: for each row of t,
 * column j of every lane's patch (win_pick), then the ts values of each lane to its panel (lanes
 * past the panel's end to the next panel). With room for WV lanes in the panel, the lanes past
 * the run are stored too: they are later tiles of [tb, te), written after this run (by the runs
 * that follow or the zeros of wino_input_rows_m). */
WINO_AI void wino_in_rows(const win_ctx *pc, float (*tc)[WINO_ROW_VECS][WV], int nv, int n,
                          int64_t rel, float *restrict v, int64_t pan, int64_t pstride, const int m)
{
    const int ts = m + 2, off = (int)(rel % KI_GEMM_NR);
    const int first = KI_GEMM_NR - off < n ? KI_GEMM_NR - off : n;
    const bool whole = KI_GEMM_NR - off >= WV && WV_PLAIN;
    float *dst0 = v + rel / KI_GEMM_NR * pan + off;
    float *dst1 = v + (rel / KI_GEMM_NR + 1) * pan - first;
    WINO_UNROLL
    for (int r = 0; r < ts; r++) {
        wv pj[6], u[6];
        win_pick(pc, (const float(*)[WV])tc[r], nv, m, pj);
        m == 4 ? wino_bt6v(pj, u) : wino_bt4v(pj, u);
        WINO_UNROLL
        for (int s = 0; s < ts; s++) {
            const int64_t at = (r * ts + s) * pstride;
            if (whole) {
                v_storeu(dst0 + at, u[s]);
            } else {
                v_store_range(dst0 + at, 0, first, u[s]);
                if (first < n) {
                    v_store_range(dst1 + at, first, n, u[s]);
                }
            }
        }
    }
}

/* The input transform of F(m x m, 3x3) by runs of up to WV tiles along a tile row: the columns
 * step on whole vectors of the run's input rows, then the rows step; zeros for the tiles past the
 * last one, up to te. */
WINO_AI void wino_input_rows_m(const float *p, int64_t h, int64_t w, const ki_wino_tiles *tg,
                               int64_t tb, int64_t te, float *restrict v, int64_t pan,
                               int64_t pstride, const int m)
{
    const int ts = m + 2;
    _Alignas(64) float tc[6][WINO_ROW_VECS][WV];
    const win_ctx pc = win_ctx_make(m);
    const int64_t tend = te < tg->tiles ? te : tg->tiles;
    for (int64_t t0 = tb; t0 < tend;) {
        const int64_t ty = t0 / tg->ntx, tx0 = t0 % tg->ntx;
        const int64_t rowend = (ty + 1) * tg->ntx < tend ? (ty + 1) * tg->ntx : tend;
        const int n = rowend - t0 < WV ? (int)(rowend - t0) : WV;
        const int nv = (m * n + 2 + WV - 1) / WV; /* column vectors the run's patches span */
        wino_in_cols(p, h, w, ty * m - tg->pt, tx0 * m - tg->pl, nv, tc, m);
        wino_in_rows(&pc, tc, nv, n, t0 - tb, v, pan, pstride, m);
        t0 += n;
    }
    for (int64_t t0 = tend > tb ? tend : tb; t0 < te;) {
        const int64_t rel = t0 - tb;
        const int off = (int)(rel % KI_GEMM_NR), lane = off % WV;
        const int cnt = te - t0 < WV - lane ? (int)(te - t0) : WV - lane;
        float *dst = v + rel / KI_GEMM_NR * pan + off;
        for (int pos = 0; pos < ts * ts; pos++) {
            v_store_range(dst, 0, cnt, v_zero());
            dst += pstride;
        }
        t0 += cnt;
    }
}

/* v + b, + the residual at r (NULL: none), min(hi, max(lo, .)) to d: the first n lanes (all WV
 * when n >= WV). max(lo, v) with v second: a NaN v stays NaN, as the scalar comparisons keep it. */
WINO_AI void wino_out_put(float *d, const float *r, int64_t n, wv v, wv vb, wv vlo, wv vhi)
{
    const bool full = n >= WV;
    v = v_add(v, vb);
    if (r) {
        v = v_add(v, full ? v_loadu(r) : v_load_m(r, m_lanes(0, n)));
    }
    v = v_min(vhi, v_max(vlo, v));
    if (full) {
        v_storeu(d, v);
    } else {
        v_store_first(d, n, v);
    }
}

/* The output rows of the run of tiles [l0, l1) of the group (their rows step done: o), the first
 * at tile (ty, tx), written whole, WV columns per store, clipped to oh x ow. */
WINO_AI void wino_out_run(const wout_ctx *oc, const wv (*o)[4], int l0, int l1,
                          const ki_wino_tiles *tg, int64_t ty, int64_t tx, float *q,
                          const float *res, wv vb, wv vlo, wv vhi, const int mo)
{
    const int64_t cx = tx * mo;
    const int64_t cols = tg->ow - cx < mo * (l1 - l0) ? tg->ow - cx : mo * (l1 - l0);
    WINO_UNROLL
    for (int i = 0; i < mo; i++) {
        if (ty * mo + i >= tg->oh) {
            break;
        }
        WINO_UNROLL
        for (int k = 0; k < mo; k++) {
            if (WV * k >= cols) {
                break;
            }
            const int64_t at = (ty * mo + i) * tg->ow + cx + WV * k;
            wino_out_put(q + at, res ? res + at : NULL, cols - WV * k,
                         wout_pick(oc, o[i], k, l0, mo), vb, vlo, vhi);
        }
    }
}

/* The output transform of F(m x m, 3x3) for WV consecutive tiles at a time, in registers: their
 * t*t products (lanes up to the next multiple of WV of [tb, te), as the reference reads them), the
 * columns step (A^T a), then for each output row the rows step (t A) and its writes. */
WINO_AI void wino_output_rows_m(const float *mm, int64_t pstride, float *q, const float *res,
                                const ki_wino_tiles *tg, int64_t tb, int64_t te, float b, float lo,
                                float hi, const int mo)
{
    const int ts = mo + 2;
    const wv vb = v_set1(b), vlo = v_set1(lo), vhi = v_set1(hi);
    const wout_ctx oc = wout_ctx_make(mo);
    const int64_t tend = te < tg->tiles ? te : tg->tiles;
    for (int64_t t0 = tb; t0 < tend; t0 += WV) {
        const int n = tend - t0 < WV ? (int)(tend - t0) : WV;
        const float *a0 = mm + (t0 - tb);
        wv t[4][6];
        WINO_UNROLL
        for (int j = 0; j < ts; j++) { /* columns: t = A^T a */
            wv a[6], c[4];
            WINO_UNROLL
            for (int i = 0; i < ts; i++) {
                a[i] = v_loadu(a0 + (i * ts + j) * pstride);
            }
            mo == 4 ? wino_at6v(a, c) : wino_at4v(a, c);
            WINO_UNROLL
            for (int r = 0; r < mo; r++) {
                t[r][j] = c[r];
            }
        }
        wv o[4][4];
        WINO_UNROLL
        for (int i = 0; i < mo; i++) { /* rows: o = t A */
            mo == 4 ? wino_at6v(t[i], o[i]) : wino_at4v(t[i], o[i]);
        }
        int64_t ty = t0 / tg->ntx, tx = t0 % tg->ntx;
        for (int l0 = 0, l1; l0 < n; l0 = l1, ty++, tx = 0) { /* the runs along a tile row */
            l1 = tg->ntx - tx < n - l0 ? l0 + (int)(tg->ntx - tx) : n;
            wino_out_run(&oc, (const wv(*)[4])o, l0, l1, tg, ty, tx, q, res, vb, vlo, vhi, mo);
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

#endif
