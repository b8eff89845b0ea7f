/* conv2d_avx2.c - AVX2+FMA pieces of nn.Conv2d: the output epilogue (bias + the vectorised
 * activations, eight values at a time, SiLU and Sigmoid sixteen) and the depthwise kernel for
 * strides 1 and 2. Compiled with -mavx2 -mfma; conv2d.c installs them only when the CPU has both.
 * The formulas are the scalar ones of activation.h, operation for operation (max(0, v) keeps a
 * NaN as torch does), except SiLU and Sigmoid, whose exp is vexp_avx2.h's (within 3e-7 relative of
 * the scalar), and GELU, whose erf is vexp_avx2.h's (within ~4e-7 absolute). */
#include <immintrin.h>
#include <string.h>

#include "conv2d.h"
#include "vexp_avx2.h"

static bool act_vectorised(ki_act_kind k)
{
    return k == KI_ACT_NONE || k == KI_ACT_RELU || k == KI_ACT_RELU6 || k == KI_ACT_HARDTANH ||
           k == KI_ACT_LEAKY_RELU || k == KI_ACT_HARDSWISH || k == KI_ACT_HARDSIGMOID ||
           k == KI_ACT_SILU || k == KI_ACT_SIGMOID || k == KI_ACT_GELU;
}

/* The vector loop of ki_cv_epilogue_avx2 for one activation expression ACT(v): the switch on
 * the kind stays outside the loop, so the constants of each formula are hoisted. */
#define EPI_LOOP(ACT)                                                                              \
    for (; i + 8 <= n; i += 8) {                                                                   \
        __m256 v = _mm256_add_ps(_mm256_loadu_ps(p + i), bv);                                      \
        v = pre ? _mm256_add_ps(v, _mm256_loadu_ps(res + i)) : v;                                  \
        v = ACT;                                                                                   \
        _mm256_storeu_ps(p + i, post ? _mm256_add_ps(v, _mm256_loadu_ps(res + i)) : v);            \
    }

/* EPI_LOOP of ki_vact_avx2 for kind K (its parameters those of act), then break. */
#define EPI_KIND(K)                                                                                \
    do {                                                                                           \
        const ki_act k_ = { K, act.a, act.b };                                                     \
        EPI_LOOP(ki_vact_avx2(&k_, v));                                                            \
    } while (0);                                                                                   \
    break

/* EPI_LOOP for SiLU and Sigmoid, sixteen values a step (ki_vsig_mul2_avx2 of NUM and x). */
#define EPI_LOOP2(NUM)                                                                             \
    for (; i + 16 <= n; i += 16) {                                                                 \
        ki_v2x8 x = { _mm256_add_ps(_mm256_loadu_ps(p + i), bv),                                   \
                      _mm256_add_ps(_mm256_loadu_ps(p + i + 8), bv) };                             \
        if (pre) {                                                                                 \
            x.a = _mm256_add_ps(x.a, _mm256_loadu_ps(res + i));                                    \
            x.b = _mm256_add_ps(x.b, _mm256_loadu_ps(res + i + 8));                                \
        }                                                                                          \
        ki_v2x8 y = ki_vsig_mul2_avx2(NUM, x);                                                     \
        if (post) {                                                                                \
            y.a = _mm256_add_ps(y.a, _mm256_loadu_ps(res + i));                                    \
            y.b = _mm256_add_ps(y.b, _mm256_loadu_ps(res + i + 8));                                \
        }                                                                                          \
        _mm256_storeu_ps(p + i, y.a);                                                              \
        _mm256_storeu_ps(p + i + 8, y.b);                                                          \
    }

void ki_cv_epilogue_avx2(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p, size_t n)
{
    const ki_act act = ep->act;
    if (!act_vectorised(act.kind)) {
        ki_cv_epilogue_plane_res(ep, res, ch, p, n);
        return;
    }
    float b = ep->bias ? ep->bias[ch] : 0.0f;
    __m256 bv = _mm256_set1_ps(b);
    const bool pre = res && !ep->res_after, post = res && ep->res_after; /* residual before/after */
    size_t i = 0;
    switch (act.kind) {
    case KI_ACT_SILU:
        EPI_LOOP2(x);
        EPI_LOOP(ki_vsilu_avx2(v));
        break;
    case KI_ACT_SIGMOID:
        EPI_LOOP2(ki_v2_set1(1.0f));
        EPI_LOOP(ki_vsigmoid_avx2(v));
        break;
    /* the other kinds with the kind a constant in each loop (through ki_vact_avx2 with a run-time
     * kind, GCC at -O2 left its switch inside the loop: Hardswish 1.56 -> 1.32 ns a vector) */
    case KI_ACT_RELU:
        EPI_KIND(KI_ACT_RELU);
    case KI_ACT_RELU6:
        EPI_KIND(KI_ACT_RELU6);
    case KI_ACT_HARDTANH:
        EPI_KIND(KI_ACT_HARDTANH);
    case KI_ACT_LEAKY_RELU:
        EPI_KIND(KI_ACT_LEAKY_RELU);
    case KI_ACT_HARDSWISH:
        EPI_KIND(KI_ACT_HARDSWISH);
    case KI_ACT_HARDSIGMOID:
        EPI_KIND(KI_ACT_HARDSIGMOID);
    case KI_ACT_GELU:
        EPI_KIND(KI_ACT_GELU);
    default: /* KI_ACT_NONE: bias and residual */
        EPI_LOOP(v);
        break;
    }
    if (i < n) {
        /* the tail through the same vector formula (SiLU's vector exp is not expf), so a value
         * does not depend on where a caller's span starts or ends (e.g. the thread split) */
        float tp[8] = { 0 }, tr[8] = { 0 };
        memcpy(tp, p + i, (n - i) * sizeof *tp);
        if (res) {
            memcpy(tr, res + i, (n - i) * sizeof *tr);
        }
        ki_cv_epilogue_avx2(ep, res ? tr : NULL, ch, tp, 8); /* n = 8: no tail, no deeper call */
        memcpy(p + i, tp, (n - i) * sizeof *tp);
    }
}

/* Eight inputs at columns base, base+s, ..., base+7s of a row (s = 1 or 2), all in bounds. */
static inline __m256 load8(const float *row, int64_t base, int64_t s)
{
    if (s == 1) {
        return _mm256_loadu_ps(row + base);
    }
    __m256 lo = _mm256_loadu_ps(row + base), hi = _mm256_loadu_ps(row + base + 8);
    __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Column indices and lane mask of tap kx for output columns ox..ox+7: lanes past ow or reading
 * the zero padding are off. */
static inline __m256i tap_mask(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t ox, int64_t kx,
                               __m256i *ix)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t base = ox * c->sw - c->pl + kx * c->dw;
    __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(g->ow - ox)), lane);
    *ix = _mm256_add_epi32(_mm256_set1_epi32((int)base),
                           _mm256_mullo_epi32(lane, _mm256_set1_epi32((int)c->sw)));
    __m256i ok = _mm256_and_si256(live, _mm256_cmpgt_epi32(*ix, _mm256_set1_epi32(-1)));
    return _mm256_and_si256(ok, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)g->in.w), *ix));
}

/* Stride 2 at the borders: the sixteen columns base..base+15 through two masked loads (lanes in
 * the padding or past ow are never touched), then the even ones. */
static inline __m256 load8_s2_masked(const float *r, int64_t base, int64_t w, int64_t left)
{
    const __m256i j = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i half = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    __m256i m[2];
    for (int h = 0; h < 2; h++) {
        __m256i col = _mm256_add_epi32(_mm256_set1_epi32((int)base + 8 * h), j);
        __m256i out = _mm256_add_epi32(half, _mm256_set1_epi32(4 * h));
        __m256i ok = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left), out);
        ok = _mm256_and_si256(ok, _mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1)));
        m[h] = _mm256_and_si256(ok, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)w), col));
    }
    __m256 lo = _mm256_maskload_ps(r + base, m[0]), hi = _mm256_maskload_ps(r + base + 8, m[1]);
    __m256 t = _mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(t), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Eight inputs of tap (row r, column base) in one of the load modes: 0 plain stride 1, 1 plain
 * stride 2, 2 masked stride 1 (masked lanes' addresses are never touched), 3 masked stride 2,
 * 4 masked gather (larger strides). */
static inline __attribute__((always_inline)) __m256 tap_load(const ki_conv2d_geom *g,
                                                             const float *r, int64_t base,
                                                             int64_t ox, int mode, __m256i ok,
                                                             __m256i ix)
{
    switch (mode) {
    case 0:
        return _mm256_loadu_ps(r + base);
    case 1:
        return load8(r, base, 2);
    case 2:
        return _mm256_maskload_ps(r + base, ok);
    case 3:
        return load8_s2_masked(r, base, g->in.w, g->ow - ox);
    default:
        return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), r, ix, _mm256_castsi256_ps(ok), 4);
    }
}

/* Eight columns from ox of four output rows oy..oy+3 whose kernel rows all lie inside the
 * input: four independent FMA chains hide the latency a single chain would expose. */
static inline __attribute__((always_inline)) void rows4(const ki_conv2d *c, const ki_conv2d_geom *g,
                                                        const float *x, const float *w, int64_t oy,
                                                        int64_t ox, int mode, __m256 acc[4])
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t step = c->sh * g->in.w;
    for (int64_t ky = 0; ky < c->kh; ky++) {
        const float *r0 = x + (oy * c->sh - c->pt + ky * c->dh) * g->in.w;
        for (int64_t kx = 0; kx < c->kw; kx++) {
            __m256i ix,
                ok = mode == 2 || mode == 4 ? tap_mask(c, g, ox, kx, &ix) : _mm256_setzero_si256();
            ix = mode == 4 ? ix : _mm256_setzero_si256();
            int64_t base = ox * c->sw - c->pl + kx * c->dw;
            __m256 wv = _mm256_set1_ps(w[ky * c->kw + kx]);
            a0 = _mm256_fmadd_ps(wv, tap_load(g, r0, base, ox, mode, ok, ix), a0);
            a1 = _mm256_fmadd_ps(wv, tap_load(g, r0 + step, base, ox, mode, ok, ix), a1);
            a2 = _mm256_fmadd_ps(wv, tap_load(g, r0 + 2 * step, base, ox, mode, ok, ix), a2);
            a3 = _mm256_fmadd_ps(wv, tap_load(g, r0 + 3 * step, base, ox, mode, ok, ix), a3);
        }
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* One output row's eight columns from ox, kernel rows in the padding skipped (the top and
 * bottom borders). */
static __m256 row1(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, const float *w,
                   int64_t oy, int64_t ox, int mode)
{
    __m256 acc = _mm256_setzero_ps();
    for (int64_t ky = 0; ky < c->kh; ky++) {
        int64_t iy = oy * c->sh - c->pt + ky * c->dh;
        if (iy < 0 || iy >= g->in.h) {
            continue;
        }
        for (int64_t kx = 0; kx < c->kw; kx++) {
            __m256i ix, ok = tap_mask(c, g, ox, kx, &ix);
            int64_t base = ox * c->sw - c->pl + kx * c->dw;
            __m256 v = tap_load(g, x + iy * g->in.w, base, ox, mode, ok, ix);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(w[ky * c->kw + kx]), v, acc);
        }
    }
    return acc;
}

/* Load mode of the eight columns from ox (see tap_load). */
static int col_mode(const ki_conv2d *c, const ki_conv2d_geom *g, int64_t ox)
{
    int64_t reach = (c->kw - 1) * c->dw + c->sw - 1;
    bool inside = c->sw <= 2 && ox + 8 <= g->ow && ox * c->sw - c->pl >= 0 &&
                  (ox + 7) * c->sw - c->pl + reach <= g->in.w - 1;
    if (inside) {
        return (int)c->sw - 1;
    }
    return c->sw == 1 ? 2 : (c->sw == 2 ? 3 : 4);
}

/* Four interior rows: one copy of rows4 per load mode, so each inner loop is branch-free. */
static void block4(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x, const float *w,
                   int64_t oy, int64_t ox, __m256 acc[4])
{
    switch (col_mode(c, g, ox)) {
    case 0:
        rows4(c, g, x, w, oy, ox, 0, acc);
        break;
    case 1:
        rows4(c, g, x, w, oy, ox, 1, acc);
        break;
    case 2:
        rows4(c, g, x, w, oy, ox, 2, acc);
        break;
    case 3:
        rows4(c, g, x, w, oy, ox, 3, acc);
        break;
    default:
        rows4(c, g, x, w, oy, ox, 4, acc);
        break;
    }
}

/* Stores the first min(n, 8) lanes. A masked store is microcoded on some CPUs (AMD Zen) and
 * costs tens of cycles, so only the row's tail goes through a copy. */
static inline void store_cols(float *d, __m256 v, int64_t n)
{
    if (n >= 8) {
        _mm256_storeu_ps(d, v);
        return;
    }
    float t[8];
    _mm256_storeu_ps(t, v);
    for (int64_t i = 0; i < n; i++) {
        d[i] = t[i];
    }
}

/* Depthwise plane (zero padding): blocks of four output rows by eight columns where the kernel
 * rows stay inside the input, single rows at the top and bottom borders. Planes are small (a few
 * thousand values), so everything stays in L1. */
void ki_conv2d_dw_plane_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *x,
                             const float *w, float *restrict o)
{
    for (int64_t oy = 0; oy < g->oh;) {
        bool four = oy + 4 <= g->oh && oy * c->sh - c->pt >= 0 &&
                    (oy + 3) * c->sh - c->pt + (c->kh - 1) * c->dh <= g->in.h - 1;
        for (int64_t ox = 0; ox < g->ow; ox += 8) {
            __m256 acc[4];
            if (four) {
                block4(c, g, x, w, oy, ox, acc);
            } else {
                acc[0] = row1(c, g, x, w, oy, ox, col_mode(c, g, ox));
            }
            for (int q = 0; q < (four ? 4 : 1); q++) {
                store_cols(o + (oy + q) * g->ow + ox, acc[q], g->ow - ox);
            }
        }
        oy += four ? 4 : 1;
    }
}

/* acc += the three taps of kernel row ky (weights wk[3*ky..]) over input vectors v0..v2. */
#define DW3_ROW(acc, ky, v0, v1, v2)                                                               \
    acc = _mm256_fmadd_ps(wk[3 * (ky)], v0, acc);                                                  \
    acc = _mm256_fmadd_ps(wk[3 * (ky) + 1], v1, acc);                                              \
    acc = _mm256_fmadd_ps(wk[3 * (ky) + 2], v2, acc)

/* 3x3, stride 1, dilation 1, four output rows by eight columns of the padded plane: each of the
 * six input rows is loaded once (three shifted vectors) and feeds the up to three output rows
 * it reaches; the nine weights stay in registers. Per output row the taps are summed in the
 * order ky, kx, as rows4 does. */
static inline void dw3_s1_block(const float *xp, int64_t wp, const __m256 wk[9], int64_t oy,
                                int64_t ox, __m256 acc[4])
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, v0, v1, v2;
    const float *r = xp + oy * wp + ox;
#define DW3_LOAD(i)                                                                                \
    v0 = _mm256_loadu_ps(r + (i)*wp), v1 = _mm256_loadu_ps(r + (i)*wp + 1),                        \
    v2 = _mm256_loadu_ps(r + (i)*wp + 2)
    DW3_LOAD(0);
    DW3_ROW(a0, 0, v0, v1, v2);
    DW3_LOAD(1);
    DW3_ROW(a0, 1, v0, v1, v2);
    DW3_ROW(a1, 0, v0, v1, v2);
    DW3_LOAD(2);
    DW3_ROW(a0, 2, v0, v1, v2);
    DW3_ROW(a1, 1, v0, v1, v2);
    DW3_ROW(a2, 0, v0, v1, v2);
    DW3_LOAD(3);
    DW3_ROW(a1, 2, v0, v1, v2);
    DW3_ROW(a2, 1, v0, v1, v2);
    DW3_ROW(a3, 0, v0, v1, v2);
    DW3_LOAD(4);
    DW3_ROW(a2, 2, v0, v1, v2);
    DW3_ROW(a3, 1, v0, v1, v2);
    DW3_LOAD(5);
    DW3_ROW(a3, 2, v0, v1, v2);
#undef DW3_LOAD
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3;
}

/* The padded plane has no borders: plain loads everywhere (the last vector of a row may read
 * past it into the slack; those lanes are not stored), four rows at a time. */
/* The first min(n, 8) floats of s, zeros after (reads nothing past them). */
static inline __m256 load_cols(const float *s, int64_t n)
{
    if (n >= 8) {
        return _mm256_loadu_ps(s);
    }
    float t[8] = { 0 };
    for (int64_t i = 0; i < n; i++) {
        t[i] = s[i];
    }
    return _mm256_loadu_ps(t);
}

/* Where a depthwise plane goes: o (row length ow), through the epilogue ep of channel ch with
 * the residual plane res (or NULL), or raw when ep is NULL. */
typedef struct dw_out {
    const ki_cv_epilogue *ep;
    const float *res;
    float *o;
    int64_t ch, ow;
} dw_out;

/* Stores four (or one) rows of eight columns at row y, column ox: v + bias, + the residual, then
 * the activation, as ki_cv_epilogue_avx2 computes them. */
static void store_rows(const dw_out *d, const __m256 acc[4], int rows, int64_t y, int64_t ox)
{
    const ki_cv_epilogue *ep = d->ep;
    __m256 bv = _mm256_set1_ps(ep && ep->bias ? ep->bias[d->ch] : 0.0f);
    for (int q = 0; q < rows; q++) {
        int64_t at = (y + q) * d->ow + ox;
        __m256 v = acc[q];
        if (ep) {
            v = _mm256_add_ps(v, bv);
            v = d->res ? _mm256_add_ps(v, load_cols(d->res + at, d->ow - ox)) : v;
            v = ki_vact_avx2(&ep->act, v);
        }
        store_cols(d->o + at, v, d->ow - ox);
    }
}

bool ki_conv2d_dw_plane_padded_avx2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *xp,
                                    int64_t ch, const float *res, float *restrict o)
{
    ki_conv2d cc = *c;
    ki_conv2d_geom gg = *g;
    const float *w = c->weight + ch * c->kh * c->kw;
    const ki_cv_epilogue *ep = act_vectorised(c->ep.act.kind) && !c->ep.res_after ? &c->ep : NULL;
    dw_out d = { ep, res, o, ch, g->ow };
    cc.pt = cc.pb = cc.pl = cc.pr = 0;
    gg.in.h = g->in.h + c->pt + c->pb;
    gg.in.w = g->in.w + c->pl + c->pr;
    bool k3 = c->kh == 3 && c->kw == 3 && c->sh == 1 && c->sw == 1 && c->dh == 1 && c->dw == 1;
    __m256 wk[9];
    for (int i = 0; i < 9 && k3; i++) {
        wk[i] = _mm256_set1_ps(w[i]);
    }
    for (int64_t oy = 0; oy < g->oh;) {
        /* the last rows as the four rows ending at the bottom: a row computed twice is stored
         * twice with the same value */
        int64_t y = oy + 4 <= g->oh ? oy : g->oh - 4;
        bool four = y >= 0;
        y = four ? y : oy;
        for (int64_t ox = 0; ox < g->ow; ox += 8) {
            __m256 acc[4];
            if (four && k3) {
                dw3_s1_block(xp, gg.in.w, wk, y, ox, acc);
            } else if (four && c->sw == 1) {
                rows4(&cc, &gg, xp, w, y, ox, 0, acc);
            } else if (four) {
                rows4(&cc, &gg, xp, w, y, ox, 1, acc);
            } else {
                acc[0] = row1(&cc, &gg, xp, w, y, ox, (int)c->sw - 1);
            }
            store_rows(&d, acc, four ? 4 : 1, y, ox);
        }
        oy = y + (four ? 4 : 1);
    }
    return ep != NULL;
}

void ki_conv2d_gather2_avx2(const float *src, float *restrict d, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(d + i, load8(src, 2 * i, 2));
    }
    for (; i < n; i++) {
        d[i] = src[2 * i];
    }
}
