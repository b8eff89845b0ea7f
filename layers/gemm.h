/* gemm.h - the SGEMM micro-kernels and the tiled driver under nn.Conv2d.
 *
 * C[m x n] = A[m x k] * B[k x n] (+ the conv epilogue), for convolution: A is the weight, used
 * as it lies in the model (row-major, row stride lda: the micro-kernel broadcasts from eight row
 * pointers, so no repacked copy of the weights is needed), B is packed by the caller into panels
 * of KI_GEMM_NR columns (panel p holds k rows of NR floats at bp + p*k*NR, zero-padded past n) or,
 * for ki_gemm_panels' full panels, read in place (bin, row stride ldb), C is row-major with row
 * stride ldc.
 *
 * The driver splits the C tiles (MR x NR) into one contiguous range per thread; every tile is
 * computed by the same sequence of operations whatever the thread count, so results do not
 * depend on it. Micro-kernels: plain C (gemm.c), AVX2+FMA (gemm_avx2.c), AVX-512 (gemm_avx512.c),
 * picked at run time from the CPU. Only declarations and static inline functions here. */
#ifndef KI_GEMM_H
#define KI_GEMM_H

#include "conv_common.h"

#define KI_GEMM_MR 8   /* rows of a C tile */
#define KI_GEMM_NR 32  /* columns of a C tile and of a B panel */
#define KI_GEMM_KC 128 /* k block: a B sub-panel (KC x NR floats, 16 KiB) stays in L1 */

/* What a micro-kernel applies in registers before its final store: the bias of each row (MR
 * values, or NULL for none), then the residual (an MR x NR tile with C's row stride, or NULL),
 * then min(hi, max(lo, v)): ReLU (0, inf), ReLU6 (0, 6), Hardtanh, or nothing (-inf, inf).
 * Same operations as the scalar epilogue, so the results are equal. */
typedef struct ki_gemm_fin {
    const float *bias;
    float lo, hi;
    const float *res;
} ki_gemm_fin;

/* c[MR x NR] (+)= sum over kc of a[r][k] * b[k][0..NR): a holds MR row pointers (already offset
 * to the k block), b the k block of one panel with row stride ldb (KI_GEMM_NR when packed, the
 * plane size when a 1x1 convolution's input is read in place), c has row stride ldc. acc: add to
 * c instead of overwriting it. fin: the finishing step, or NULL. */
typedef void (*ki_gemm_ukernel)(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                                float *c, int64_t ldc, bool acc, const ki_gemm_fin *fin);

/* The in-register finishing step for epilogue ep at rows from channel ch (residual tile res or
 * NULL); false for activations the micro-kernels do not apply themselves (then lo/hi are
 * unclamped and the caller applies the activation after the store). */
bool ki_gemm_fin_of(const ki_cv_epilogue *ep, int64_t ch, const float *res, ki_gemm_fin *fin);

/* The kernel for isa (core/cpu.h), or NULL if this CPU cannot run it. */
ki_gemm_ukernel ki_gemm_ukernel_for(ki_isa isa);

void ki_gemm_ukernel_ref(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                         int64_t ldc, bool acc, const ki_gemm_fin *fin);
void ki_gemm_ukernel_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                          int64_t ldc, bool acc, const ki_gemm_fin *fin);
void ki_gemm_ukernel_avx512(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                            float *c, int64_t ldc, bool acc, const ki_gemm_fin *fin);
/* The low 16 columns of an AVX-512 tile (c, row stride ldc), no epilogue: a partial tile of at
 * most 16 columns at half the cost, the same operations per value as the full kernel. */
void ki_gemm_ukernel16_avx512(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                              float *c, int64_t ldc, bool acc);
/* The same for the AVX2 kernel's tile. */
void ki_gemm_ukernel16_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb,
                            float *c, int64_t ldc, bool acc);
/* The low 8 columns of the AVX2 kernel's tile, at a quarter of its cost (AVX-512 gains nothing
 * from it: its 16-column kernel takes as many FMAs per k step). */
void ki_gemm_ukernel8_avx2(int64_t kc, const float *const *a, const float *b, int64_t ldb, float *c,
                           int64_t ldc, bool acc);

/* The first nr (1..KI_GEMM_NR) columns of uk's tile, without a finishing step, on the narrowest
 * micro-kernel of its level that covers them (AVX2: 8, 16 or 16 + 8 columns; AVX-512: 16), else
 * on uk itself: columns of c past nr may be written, up to KI_GEMM_NR (the GEMM's partial tiles,
 * the two-phase stride-2 Winograd's last item). */
void ki_gemm_cols(ki_gemm_ukernel uk, int64_t nr, int64_t kc, const float *const *a, const float *b,
                  int64_t ldb, float *c, int64_t ldc, bool acc);

typedef struct ki_gemm_args {
    int64_t m, n, k;
    const float *a; /* m x k, row stride lda */
    int64_t lda;
    const float *bp; /* packed B */
    float *c;        /* m x n, row stride ldc */
    int64_t ldc;
    /* Columns of each C row that may be written (at least n; 0: n). With room for a last,
     * partial panel's whole NR columns (Winograd's products, whose rows are whole panels of
     * tiles), its tiles run straight into C instead of through a local tile: the columns past n
     * get values nobody reads. */
    int64_t c_room;
    const ki_cv_epilogue *ep; /* applied to each finished row segment; NULL for none */
    ki_cv_epilogue_fn epf;    /* how */
    int64_t ch0;              /* epilogue channel of row 0 */
    ki_gemm_ukernel uk;
    const float *res; /* residual added in the epilogue (m x n, row stride ldc), or NULL */
    /* B in place (k rows of n floats, row stride ldb) for ki_gemm_panels' full panels, or NULL:
     * then every panel is packed */
    const float *bin;
    int64_t ldb;
    /* ki_gemm_compute calls it once per row block on the thread's finished part of it (rows
     * m0.., mr of them, columns n0.., nr), after all its tiles and without a barrier: a
     * per-column finish (nn.Linear's bias, activation and residual); or NULL */
    void (*rows_done)(const void *ctx, float *c, int64_t ldc, int64_t m0, int64_t mr, int64_t n0,
                      int64_t nr);
    const void *done_ctx;
} ki_gemm_args;

/* The rows_done finish of a GEMM whose bias is per column (nn.Linear, the attention projections):
 * + bias[column], then the activation ep.act with the residual res (C's layout) in ep's order
 * through epf (a residual alone is added as it is). */
typedef struct ki_gemm_col_finish {
    const float *bias; /* one per column, or NULL */
    const float *res;  /* m x n with C's row stride, or NULL */
    ki_cv_epilogue ep; /* act and res_after; ep.bias unused */
    ki_cv_epilogue_fn epf;
} ki_gemm_col_finish;
void ki_gemm_finish_cols(const void *ctx, float *c, int64_t ldc, int64_t m0, int64_t mr, int64_t n0,
                         int64_t nr);

/* Computes thread tid's share of the tiles (call from inside a parallel region, every tid in
 * 0..nt-1 once). */
void ki_gemm_compute(const ki_gemm_args *g, int tid, int nt);
/* The same tiles, the same operations each (so the same bits), for a team: runs of whole row
 * tiles taken from a work share (ki_share), each thread its own runs first, then what is left of
 * the others' (a thread that runs slower, another process on its core, leaves its last runs to
 * them). Call from every thread of pt's team. */
struct ki_part;
void ki_gemm_compute_shared(const ki_gemm_args *g, const struct ki_part *pt);

/* All tiles of panels p0..p0+np-1, packed one after another at b (np * k * NR floats): for
 * callers that pack a few panels at a time. With g->bin the full panels are read from it in
 * place and only a last, partial panel from its slot in b (a full read of it would pass the end
 * of B). */
void ki_gemm_panels(const ki_gemm_args *g, int64_t p0, int64_t np, const float *b);

/* Tiles numbered row by row, per_row to a row: the part [*p0, *p1) of row `row` that the range
 * of tiles [t0, t1) covers (the late epilogues run over a thread's range row by row). */
static inline void ki_row_span(int64_t t0, int64_t t1, int64_t row, int64_t per_row, int64_t *p0,
                               int64_t *p1)
{
    *p0 = t0 > row * per_row ? t0 - row * per_row : 0;
    *p1 = t1 < (row + 1) * per_row ? t1 - row * per_row : per_row;
}

/* A product of operands that change each run (torch.matmul, the RNNs' input and recurrent
 * products, ConvTranspose3d's column matrix): C (m x n, row stride ldc) = op(A) op(B), where op(A)
 * is A (m x k, row stride lda) or, with ta, the transpose of a stored k x m (row stride lda), and
 * op(B) is B (k x n, row stride ldb) or, with tb, the transpose of a stored n x k. */
typedef struct ki_sgemm_args {
    int64_t m, n, k;
    const float *a;
    int64_t lda;
    bool ta;
    const float *b;
    int64_t ldb;
    bool tb;
    float *c;
    int64_t ldc;
} ki_sgemm_args;

/* Multiply-adds below which a product runs on one thread: starting a team costs more. */
#define KI_GEMM_TEAM_MIN_MACS 65536

/* Floats of scratch ki_sgemm needs for an m x n x k product (B packed into panels, and a
 * transposed A into rows); false on overflow. */
bool ki_sgemm_ws_floats(int64_t m, int64_t n, int64_t k, bool ta, int64_t *floats);

/* s on the micro-kernel uk (ki_gemm_ukernel_for) with nt threads, ws holding
 * ki_sgemm_ws_floats: B is packed (and A transposed) into ws, then the team splits the tiles
 * (ki_gemm_compute), each computed by the same operations whatever nt, so the result does not
 * depend on the thread count as a threaded BLAS's does (products under KI_GEMM_TEAM_MIN_MACS on one
 * thread). k = 0 gives zeros. Call outside any parallel region. */
void ki_sgemm(const ki_sgemm_args *s, ki_gemm_ukernel uk, float *ws, int nt);

/* W^T of an n x k row-major weight (the B of x W^T) into panels at dst
 * (ki_gemm_packed_floats(k, n) floats); _new: into a new buffer (free()), or NULL when out of
 * memory or empty. */
void ki_gemm_pack_wt(const float *w, int64_t n, int64_t k, float *dst);
float *ki_gemm_pack_wt_new(const float *w, int64_t n, int64_t k);

/* a . b over n floats at a level: AVX2 and up in four 8-lane partial sums added in one fixed order
 * (linear_avx2.c), the plain one in order. For products of one or two rows (nn.Linear's
 * classifier, the RNNs' recurrent step at batch 1 or 2), where a GEMM tile of 8 rows would mostly
 * compute rows that are not there. */
typedef float (*ki_dot_fn)(const float *a, const float *b, int64_t n);
ki_dot_fn ki_dot_for(ki_isa isa);
float ki_linear_dot_avx2(const float *a, const float *b, int64_t n);

/* Floats of a packed B of k rows and n columns; false on overflow. */
static inline bool ki_gemm_packed_floats(int64_t k, int64_t n, int64_t *out)
{
    int64_t panels = (n + KI_GEMM_NR - 1) / KI_GEMM_NR;
    return ki_ckd_mul_i64(out, panels, KI_GEMM_NR) && ki_ckd_mul_i64(out, *out, k);
}

/* Scatters row r of B (n floats at src) into the packed panels, zero-padding the last one. */
static inline void ki_gemm_pack_row(const float *src, int64_t r, int64_t k, int64_t n, float *bp)
{
    for (int64_t j0 = 0; j0 < n; j0 += KI_GEMM_NR) {
        float *d = bp + j0 * k + r * KI_GEMM_NR;
        int64_t w = n - j0 < KI_GEMM_NR ? n - j0 : KI_GEMM_NR;
        for (int64_t j = 0; j < w; j++) {
            d[j] = src[j0 + j];
        }
        for (int64_t j = w; j < KI_GEMM_NR; j++) {
            d[j] = 0.0f;
        }
    }
}

#endif
