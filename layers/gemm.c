/* gemm.c - the tiled SGEMM driver, the plain C micro-kernel (reference and fallback) and the
 * run-time choice of micro-kernel. See gemm.h. */
#include "gemm.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#include "../core/bigbuf.h"
#include "../core/team.h"

/* The finishing step (scalar form of ki_gemm_fin) on mr rows of nr columns of a tile t (row
 * stride ldt): + bias, + the residual (row stride ldc), max(lo, v) then min(hi, v) (a NaN v
 * kept, as the vector max / min with v second keep it); no clamp pass when there is nothing to
 * clamp. The plain micro-kernel's epilogue, and that of partial tiles, where an epilogue call per
 * row of so few columns cost more than the row's products (mobilenet_v2's 96 -> 576 at 14x14:
 * 196 = 6 x 32 + 4). Out of line and in loops the compiler vectorises: inside tile() it slowed
 * the full tiles around it (vit_tiny's MLP 1.08x). */
static __attribute__((noinline)) void fin_tile(float *t, int64_t ldt, int64_t mr, int64_t nr,
                                               const ki_gemm_fin *fin, int64_t ldc)
{
    const bool clamp = fin->lo > -INFINITY || fin->hi < INFINITY;
    for (int64_t r = 0; r < mr; r++) {
        float *tr = t + r * ldt;
        if (fin->bias) {
            const float b = fin->bias[r];
            for (int64_t j = 0; j < nr; j++) {
                tr[j] += b;
            }
        }
        if (fin->res) {
            const float *rr = fin->res + r * ldc;
            for (int64_t j = 0; j < nr; j++) {
                tr[j] += rr[j];
            }
        }
        for (int64_t j = 0; clamp && j < nr; j++) {
            const float v = fin->lo > tr[j] ? fin->lo : tr[j];
            tr[j] = fin->hi < v ? fin->hi : v;
        }
    }
}

/* The tile in blocks of 4 rows x 8 columns over the whole k block, each block's 32 sums in
 * registers (a whole 8 x 32 tile does not fit them, and kept in memory it ran at half the speed:
 * 10.5 against 20.9 GFLOP/s in L1 on one core of the 2026-11-26 Xeon, built for plain x86-64);
 * every sum the same operations in the same order either way. */
void ki_gemm_ukernel_ref(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                         int64_t ldc, bool acc, const ki_gemm_fin *fin)
{
    float tile[KI_GEMM_MR][KI_GEMM_NR];
    for (int r0 = 0; r0 < KI_GEMM_MR; r0 += 4) {
        for (int j0 = 0; j0 < KI_GEMM_NR; j0 += 8) {
            float t[4][8];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++) {
#pragma GCC unroll 8
                for (int j = 0; j < 8; j++) {
                    t[r][j] = acc ? c[(r0 + r) * ldc + j0 + j] : 0.0f;
                }
            }
            for (int64_t k = 0; k < kc; k++) {
                const float *bk = b + k * ldb + j0;
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++) {
                    const float av = a[r0 + r][k];
#pragma GCC unroll 8
                    for (int j = 0; j < 8; j++) {
                        t[r][j] += av * bk[j];
                    }
                }
            }
            for (int r = 0; r < 4; r++) {
                memcpy(&tile[r0 + r][j0], t[r], sizeof t[r]);
            }
        }
    }
    if (fin) {
        fin_tile(&tile[0][0], KI_GEMM_NR, KI_GEMM_MR, KI_GEMM_NR, fin, ldc);
    }
    for (int r = 0; r < KI_GEMM_MR; r++) {
        memcpy(c + r * ldc, tile[r], sizeof tile[r]);
    }
}

void ki_cv_epilogue_ref(const ki_cv_epilogue *ep, const float *res, int64_t ch, float *p, size_t n)
{
    ki_cv_epilogue_plane_res(ep, res, ch, p, n);
}

ki_cv_epilogue_fn ki_cv_epilogue_for(ki_isa isa)
{
    return isa >= KI_ISA_AVX512 ? KI_X86(ki_cv_epilogue_avx512)
           : isa >= KI_ISA_AVX2 ? KI_X86(ki_cv_epilogue_avx2)
                                : ki_cv_epilogue_ref;
}

ki_gemm_ukernel ki_gemm_ukernel_for(ki_isa isa)
{
    if (isa > ki_cpu_get()->isa) {
        return NULL;
    }
    switch (isa) {
    case KI_ISA_AVX512:
        return KI_X86(ki_gemm_ukernel_avx512);
    case KI_ISA_AVX2:
        return KI_X86(ki_gemm_ukernel_avx2);
    case KI_ISA_GENERIC:
        break;
    }
    return ki_gemm_ukernel_ref;
}

bool ki_gemm_fin_of(const ki_cv_epilogue *ep, int64_t ch, const float *res, ki_gemm_fin *fin)
{
    fin->bias = ep->bias ? ep->bias + ch : NULL;
    fin->res = res;
    fin->lo = -INFINITY, fin->hi = INFINITY;
    if (ep->res_after) {
        return false; /* the residual after the activation: the epilogue function's order */
    }
    switch (ep->act.kind) {
    case KI_ACT_NONE:
        return true;
    case KI_ACT_RELU:
        fin->lo = 0.0f;
        return true;
    case KI_ACT_RELU6:
        fin->lo = 0.0f, fin->hi = 6.0f;
        return true;
    case KI_ACT_HARDTANH:
        fin->lo = ep->act.a, fin->hi = ep->act.b;
        return true;
    default:
        return false;
    }
}

void ki_gemm_cols(ki_gemm_ukernel uk, int64_t nr, int64_t kc, const float *const *a, const float *b,
                  int64_t ldb, float *c, int64_t ldc, bool acc)
{
    /* up to 16 columns (the last panel of resnet18's 56x56 Winograd layers has 4 tiles, and
     * the thread that gets it does one GEMM more): half the FMAs of a full tile */
#if KI_HAVE_X86
    if (nr <= 16 && uk == ki_gemm_ukernel_avx512) {
        ki_gemm_ukernel16_avx512(kc, a, b, ldb, c, ldc, acc);
        return;
    }
    if (nr <= 8 && uk == ki_gemm_ukernel_avx2) {
        ki_gemm_ukernel8_avx2(kc, a, b, ldb, c, ldc, acc);
        return;
    }
    if (nr <= 16 && uk == ki_gemm_ukernel_avx2) {
        ki_gemm_ukernel16_avx2(kc, a, b, ldb, c, ldc, acc);
        return;
    }
    if (nr <= 24 && uk == ki_gemm_ukernel_avx2) {
        /* 17 to 24 columns (the second panel of 49 Winograd tiles, squeezenet's 27x27 and
         * 13x13 layers): 12 cycles a k step where the full tile takes 16 */
        ki_gemm_ukernel16_avx2(kc, a, b, ldb, c, ldc, acc);
        ki_gemm_ukernel8_avx2(kc, a, b + 16, ldb, c + 16, ldc, acc);
        return;
    }
#endif
    (void)nr;
    uk(kc, a, b, ldb, c, ldc, acc, NULL);
}

/* What the tiles of row block mi share in k block k0 (set once per block, not per tile: with a
 * short k, a 1x1 layer of 16 input channels, the row pointers and the epilogue's bounds took a
 * tenth of the time; docs/performance.md): A's row pointers (rows past m repeat the block's
 * first: valid memory, results dropped), the block's rows, whether k0 is after the first (acc)
 * or the last k block, and then the epilogue the micro-kernel applies in registers (in_regs; fin
 * without its residual). */
typedef struct row_block {
    const float *rows[KI_GEMM_MR];
    int64_t m0, mr;
    bool acc, last, in_regs;
    ki_gemm_fin fin;
} row_block;

static void row_block_at(const ki_gemm_args *g, int64_t mi, int64_t k0, int64_t kc, row_block *rb)
{
    rb->m0 = mi * KI_GEMM_MR;
    rb->mr = g->m - rb->m0 < KI_GEMM_MR ? g->m - rb->m0 : KI_GEMM_MR;
    for (int64_t r = 0; r < KI_GEMM_MR; r++) {
        rb->rows[r] = g->a + (rb->m0 + (r < rb->mr ? r : 0)) * g->lda + k0;
    }
    rb->acc = k0 > 0;
    rb->last = k0 + kc >= g->k;
    rb->fin = (ki_gemm_fin){ NULL, 0.0f, 0.0f, NULL }; /* unused unless in_regs */
    rb->in_regs = rb->last && g->ep && ki_gemm_fin_of(g->ep, g->ch0 + rb->m0, NULL, &rb->fin);
}

/* One MR x NR tile of row block rb for one k block. Edge tiles go through a local tile (or, with
 * room for the whole panel in C's rows, straight into C): columns past n multiply the panel's
 * zero padding. */
static void tile(const ki_gemm_args *g, const row_block *rb, int64_t pi, int64_t kc, const float *b,
                 int64_t ldb, bool late)
{
    const int64_t m0 = rb->m0, n0 = pi * KI_GEMM_NR, mr = rb->mr;
    const int64_t nr = g->n - n0 < KI_GEMM_NR ? g->n - n0 : KI_GEMM_NR;
    float *c = g->c + m0 * g->ldc + n0;
    const float *res = g->res ? g->res + m0 * g->ldc + n0 : NULL;
    const bool acc = rb->acc;
    ki_gemm_fin fin = rb->fin;
    fin.res = res;
    if (mr == KI_GEMM_MR && nr == KI_GEMM_NR) {
        /* the simple activations finish in registers; the others after the store */
        g->uk(kc, rb->rows, b, ldb, c, g->ldc, acc, rb->in_regs ? &fin : NULL);
    } else if (mr == KI_GEMM_MR && n0 + KI_GEMM_NR <= g->c_room) {
        /* room for the whole panel in C's rows: the narrow kernel straight into c (the local
         * tile's copies in and out took a tenth of squeezenet's 13x13 Winograd layers, whose 16
         * tiles are all a partial panel; docs/performance.md) */
        ki_gemm_cols(g->uk, nr, kc, rb->rows, b, ldb, c, g->ldc, acc);
        if (rb->in_regs) {
            fin_tile(c, g->ldc, mr, nr, &fin, g->ldc);
        }
    } else {
        /* the partial tile accumulates in t as a full one does in c (same operations) */
        _Alignas(64) float t[KI_GEMM_MR * KI_GEMM_NR];
        if (acc) {
            memset(t, 0, sizeof t);
            for (int64_t r = 0; r < mr; r++) {
                memcpy(t + r * KI_GEMM_NR, c + r * g->ldc, (size_t)nr * sizeof *t);
            }
        }
        ki_gemm_cols(g->uk, nr, kc, rb->rows, b, ldb, t, KI_GEMM_NR, acc);
        if (rb->in_regs) {
            fin_tile(t, KI_GEMM_NR, mr, nr, &fin, g->ldc);
        }
        for (int64_t r = 0; r < mr; r++) {
            memcpy(c + r * g->ldc, t + r * KI_GEMM_NR, (size_t)nr * sizeof *t);
        }
    }
    if (g->ep && rb->last && !rb->in_regs && !late) {
        for (int64_t r = 0; r < mr; r++) {
            g->epf(g->ep, res ? res + r * g->ldc : NULL, g->ch0 + m0 + r, c + r * g->ldc,
                   (size_t)nr);
        }
    }
}

/* Whether the epilogue's activation is one the micro-kernels do not apply in registers (SiLU,
 * sigmoid, ...): then the drivers run it once per row over all the columns they finished, after
 * the tiles (late), instead of once per tile row of NR floats. */
static bool late_epilogue(const ki_gemm_args *g)
{
    ki_gemm_fin f;
    return g->ep && !ki_gemm_fin_of(g->ep, 0, NULL, &f);
}

/* The late epilogue of rows [m0, m0 + MR) (clipped to m), columns [c0, c1). */
static void rows_epilogue(const ki_gemm_args *g, int64_t mi, int64_t c0, int64_t c1)
{
    for (int64_t r = mi * KI_GEMM_MR; r < (mi + 1) * KI_GEMM_MR && r < g->m; r++) {
        g->epf(g->ep, g->res ? g->res + r * g->ldc + c0 : NULL, g->ch0 + r, g->c + r * g->ldc + c0,
               (size_t)(c1 - c0));
    }
}

/* Asks for A's block of m tile mi at k0 (8 rows x kc floats, one cache line per 16): A is
 * usually the weight, read once per run from memory in 512-byte pieces of rows far apart, which
 * the hardware prefetchers do not follow; fetching the next tile's block while the current one
 * is multiplied hides that latency. */
static void prefetch_a(const ki_gemm_args *g, int64_t mi, int64_t k0, int64_t kc)
{
    int64_t m0 = mi * KI_GEMM_MR;
    for (int64_t r = 0; r < KI_GEMM_MR && m0 + r < g->m; r++) {
        const float *row = g->a + (m0 + r) * g->lda + k0;
        for (int64_t k = 0; k < kc; k += 16) {
            __builtin_prefetch(row + k, 0, 3);
        }
    }
}

void ki_gemm_finish_cols(const void *ctx, float *c, int64_t ldc, int64_t m0, int64_t mr, int64_t n0,
                         int64_t nr)
{
    const ki_gemm_col_finish *f = ctx;
    const float *restrict bias = f->bias ? f->bias + n0 : NULL;
    for (int64_t i = 0; i < mr; i++) {
        float *restrict p = c + i * ldc;
        const float *restrict r = f->res ? f->res + (m0 + i) * ldc + n0 : NULL;
        if (bias) {
            for (int64_t j = 0; j < nr; j++) {
                p[j] += bias[j];
            }
        }
        if (f->ep.act.kind != KI_ACT_NONE) {
            f->epf(&f->ep, r, 0, p, (size_t)nr);
        } else if (r) {
            for (int64_t j = 0; j < nr; j++) {
                p[j] += r[j];
            }
        }
    }
}

/* Tiles [t0, t1), numbered row-major over np panels, k blocks outermost; then each row's finish
 * (late epilogue, rows_done) on the part of it these tiles cover. */
static void tiles_run(const ki_gemm_args *g, int64_t np, int64_t t0, int64_t t1)
{
    const bool late = late_epilogue(g);
    for (int64_t k0 = 0; k0 < g->k; k0 += KI_GEMM_KC) {
        int64_t kc = g->k - k0 < KI_GEMM_KC ? g->k - k0 : KI_GEMM_KC;
        row_block rb;
        for (int64_t t = t0; t < t1; t++) {
            int64_t pi = t % np;
            if (pi == 0 || t == t0) {
                prefetch_a(g, t / np + 1, k0, kc);
                row_block_at(g, t / np, k0, kc, &rb);
            }
            tile(g, &rb, pi, kc, g->bp + pi * KI_GEMM_NR * g->k + k0 * KI_GEMM_NR, KI_GEMM_NR,
                 late);
        }
    }
    for (int64_t mi = t0 / np; (late || g->rows_done) && t0 < t1 && mi * np < t1; mi++) {
        int64_t p0, p1; /* its part of each row */
        ki_row_span(t0, t1, mi, np, &p0, &p1);
        const int64_t c0 = p0 * KI_GEMM_NR, c1 = p1 * KI_GEMM_NR < g->n ? p1 * KI_GEMM_NR : g->n;
        if (late) {
            rows_epilogue(g, mi, c0, c1);
        }
        if (g->rows_done) {
            const int64_t m0 = mi * KI_GEMM_MR;
            g->rows_done(g->done_ctx, g->c + m0 * g->ldc + c0, g->ldc, m0,
                         g->m - m0 < KI_GEMM_MR ? g->m - m0 : KI_GEMM_MR, c0, c1 - c0);
        }
    }
}

/* Used when there are few panels (small outputs, large weights): tiles are numbered row-major,
 * so each thread reads only its share of A (the weight, often megabytes streamed from memory),
 * while the few packed B panels stay in cache. */
void ki_gemm_compute(const ki_gemm_args *g, int tid, int nt)
{
    const int64_t np = (g->n + KI_GEMM_NR - 1) / KI_GEMM_NR,
                  mp = (g->m + KI_GEMM_MR - 1) / KI_GEMM_MR, tiles = np * mp;
    tiles_run(g, np, tiles * tid / nt, tiles * (tid + 1) / nt);
}

void ki_gemm_compute_shared(const ki_gemm_args *g, const ki_part *pt)
{
    const int64_t np = (g->n + KI_GEMM_NR - 1) / KI_GEMM_NR,
                  mp = (g->m + KI_GEMM_MR - 1) / KI_GEMM_MR;
    const int64_t runs = ki_share_begin_runs(pt, mp);
    for (int64_t m0, m1; ki_share_take_run(pt, mp, runs, &m0, &m1);) {
        tiles_run(g, np, m0 * np, m1 * np); /* whole rows */
    }
}

/* Whether ki_gemm_panels may run panels [p0, p0 + np) of g as bare products (bare_rows): one
 * (nonempty) k block, A's rows one after another (nothing far apart for prefetch_a to ask for), no
 * epilogue, residual or rows_done, packed panels, and a partial last panel only with room for the
 * whole panel in C's rows (Winograd's products). */
static bool bare_ok(const ki_gemm_args *g, int64_t p0, int64_t np)
{
    const int64_t end = (p0 + np) * KI_GEMM_NR;
    return g->k > 0 && g->k <= KI_GEMM_KC && g->lda == g->k && !g->ep && !g->res && !g->rows_done &&
           !g->bin && (end <= g->n || end <= g->c_room);
}

/* The whole row blocks of bare products (bare_ok): each block's row pointers (row_block_at), then
 * the micro-kernel (or the narrow one for a partial panel: ki_gemm_cols) straight into C, without
 * tile()'s steps for epilogues, residuals and edges or prefetch_a; the same operations per value.
 * Squeezenet's 13x13 Winograd products (16 tiles, one partial panel), avx2, one thread: 7-9 %
 * faster in a harness, the 64 -> 256 layer 6 % in the network (docs/performance.md). Returns the
 * row blocks done. */
static int64_t bare_rows(const ki_gemm_args *g, int64_t p0, int64_t np, const float *b)
{
    const int64_t full = g->m / KI_GEMM_MR;
    for (int64_t mi = 0; mi < full; mi++) {
        row_block rb; /* its rows; no epilogue to set up (bare_ok) */
        row_block_at(g, mi, 0, g->k, &rb);
        float *c = g->c + mi * KI_GEMM_MR * g->ldc;
        for (int64_t q = 0; q < np; q++) {
            const int64_t j = (p0 + q) * KI_GEMM_NR, nr = g->n - j;
            ki_gemm_cols(g->uk, nr < KI_GEMM_NR ? nr : KI_GEMM_NR, g->k, rb.rows,
                         b + q * KI_GEMM_NR * g->k, KI_GEMM_NR, c + j, g->ldc, false);
        }
    }
    return full;
}

/* Panels innermost: each C row is written np * NR floats at a time (few, long write streams
 * instead of one 128-byte piece per row and panel), and A's 8 x KC block is reused np times. */
void ki_gemm_panels(const ki_gemm_args *g, int64_t p0, int64_t np, const float *b)
{
    int64_t mp = (g->m + KI_GEMM_MR - 1) / KI_GEMM_MR, c0 = p0 * KI_GEMM_NR;
    int64_t c1 = (p0 + np) * KI_GEMM_NR < g->n ? (p0 + np) * KI_GEMM_NR : g->n;
    /* a large C of a short k (a 1x1 layer of few input channels) is bound by its stores */
    bool late = late_epilogue(g), big_c = g->m * g->n >= ki_cv_prefetch_out_min() && g->k <= 64;
    const int64_t m_done = bare_ok(g, p0, np) ? bare_rows(g, p0, np, b) : 0;
    for (int64_t k0 = 0; k0 < g->k && m_done < mp; k0 += KI_GEMM_KC) {
        int64_t kc = g->k - k0 < KI_GEMM_KC ? g->k - k0 : KI_GEMM_KC;
        for (int64_t mi = m_done; mi < mp; mi++) {
            prefetch_a(g, mi + 1, k0, kc);
            row_block rb;
            row_block_at(g, mi, k0, kc, &rb);
            /* such a C: each tile asks for the lines of the tile below it (the next row block's
             * first write), spread over the row block instead of all at once */
            const int64_t r1 = (mi + 2) * KI_GEMM_MR < g->m ? (mi + 2) * KI_GEMM_MR : g->m;
            const bool ahead = k0 == 0 && big_c;
            for (int64_t q = 0; q < np; q++) {
                const int64_t pq = p0 + q;
                const int64_t j = pq * KI_GEMM_NR,
                              nj = g->n - j < KI_GEMM_NR ? g->n - j : KI_GEMM_NR;
                for (int64_t r = (mi + 1) * KI_GEMM_MR; ahead && r < r1; r++) {
                    ki_cv_prefetch_out(g->c + r * g->ldc + j, nj);
                }
                if (g->bin && (pq + 1) * KI_GEMM_NR <= g->n) {
                    tile(g, &rb, pq, kc, g->bin + k0 * g->ldb + pq * KI_GEMM_NR, g->ldb, late);
                } else {
                    tile(g, &rb, pq, kc, b + q * KI_GEMM_NR * g->k + k0 * KI_GEMM_NR, KI_GEMM_NR,
                         late);
                }
            }
            if (late && k0 + kc >= g->k) {
                rows_epilogue(g, mi, c0, c1); /* while the rows are in cache */
            }
        }
    }
}

static float dot_ref(const float *a, const float *b, int64_t n)
{
    float r = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        r += a[i] * b[i];
    }
    return r;
}

ki_dot_fn ki_dot_for(ki_isa isa)
{
    return isa >= KI_ISA_AVX2 ? KI_X86(ki_linear_dot_avx2) : dot_ref;
}

bool ki_sgemm_ws_floats(int64_t m, int64_t n, int64_t k, bool ta, int64_t *floats)
{
    int64_t at = 0;
    return ki_gemm_packed_floats(k, n, floats) && (!ta || ki_ckd_mul_i64(&at, m, k)) &&
           ki_ckd_add_i64(floats, *floats, at);
}

/* Panel p (k rows of KI_GEMM_NR columns, zero past n) of B (k x n, row stride ldb) or, with tb,
 * of the transpose of a stored n x k, into d. */
static void pack_panel(const float *b, int64_t ldb, bool tb, int64_t k, int64_t n, int64_t p,
                       float *restrict d)
{
    const int64_t j0 = p * KI_GEMM_NR, w = n - j0 < KI_GEMM_NR ? n - j0 : KI_GEMM_NR;
    for (int64_t r = 0; r < k; r++, d += KI_GEMM_NR) {
        for (int64_t j = 0; j < w; j++) {
            d[j] = tb ? b[(j0 + j) * ldb + r] : b[r * ldb + j0 + j];
        }
        for (int64_t j = w; j < KI_GEMM_NR; j++) {
            d[j] = 0.0f;
        }
    }
}

void ki_gemm_pack_wt(const float *w, int64_t n, int64_t k, float *dst)
{
    for (int64_t p = 0; p < (n + KI_GEMM_NR - 1) / KI_GEMM_NR; p++) {
        pack_panel(w, k, true, k, n, p, dst + p * KI_GEMM_NR * k);
    }
}

float *ki_gemm_pack_wt_new(const float *w, int64_t n, int64_t k)
{
    int64_t floats;
    if (!ki_gemm_packed_floats(k, n, &floats) || floats == 0 ||
        (uint64_t)floats > SIZE_MAX / sizeof(float)) {
        return NULL;
    }
    float *b = ki_bigbuf_alloc((size_t)floats * sizeof(float));
    if (b) {
        ki_gemm_pack_wt(w, n, k, b);
    }
    return b;
}

void ki_sgemm(const ki_sgemm_args *s, ki_gemm_ukernel uk, float *ws, int nt)
{
    if (s->m <= 0 || s->n <= 0) {
        return;
    }
    if (s->k <= 0) {
        for (int64_t r = 0; r < s->m; r++) {
            memset(s->c + r * s->ldc, 0, (size_t)s->n * sizeof *s->c);
        }
        return;
    }
    const int64_t np = (s->n + KI_GEMM_NR - 1) / KI_GEMM_NR;
    float *bp = ws, *at = ws + np * KI_GEMM_NR * s->k;
    const ki_gemm_args g = { .m = s->m,
                             .n = s->n,
                             .k = s->k,
                             .a = s->ta ? at : s->a,
                             .lda = s->ta ? s->k : s->lda,
                             .bp = bp,
                             .c = s->c,
                             .ldc = s->ldc,
                             .uk = uk };
    const bool team = s->m * s->n >= KI_GEMM_TEAM_MIN_MACS / s->k;
#pragma omp parallel num_threads(nt) if (team)
    {
#pragma omp for schedule(static) nowait
        for (int64_t p = 0; p < np; p++) {
            pack_panel(s->b, s->ldb, s->tb, s->k, s->n, p, bp + p * KI_GEMM_NR * s->k);
        }
        if (s->ta) {
#pragma omp for schedule(static) nowait
            for (int64_t r = 0; r < s->m; r++) {
                for (int64_t q = 0; q < s->k; q++) {
                    at[r * s->k + q] = s->a[q * s->lda + r];
                }
            }
        }
#pragma omp barrier
        ki_gemm_compute(&g, omp_get_thread_num(), omp_get_num_threads());
    }
}
