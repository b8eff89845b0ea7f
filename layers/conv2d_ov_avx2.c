/* conv2d_ov_avx2.c - the OV micro-kernel (conv2d.h) with AVX2+FMA: the 32 output channels of a
 * pixel are four ymm vectors, so the main register tile is 4 vectors x 3 pixels (12 accumulators,
 * the pixels broadcast, the weights mostly folded into the FMAs as memory operands: 16 ymm
 * registers in all). The pw pixels are covered in such groups of 3, each over the whole k block,
 * which stays in L1 (16 KiB); a remainder joins the last group(s) so that every tile keeps at
 * least the 8 independent FMA chains two 4-cycle FMA ports need: 5 pixels as two halves of
 * 16 channels x 5 pixels (10 chains), 4 as two groups of 2 (8). Each tile shape is its own
 * non-inlined function with named accumulators (no arrays), so GCC keeps them in registers and
 * the k loop stores nothing to the stack. And the tile's transposing store: 8x8 blocks
 * transposed in registers, one masked store per channel. Compiled with -mavx2 -mfma; called only
 * when the CPU has both. */
#include <immintrin.h>

#include "conv2d.h"
#include "simd_avx2.h"

#define AI __attribute__((always_inline))

/* The 32 channels of one pixel of the tile. */
typedef struct px32 {
    __m256 v0, v1, v2, v3;
} px32;

static inline AI px32 px_load(const float *t, bool acc)
{
    if (!acc) {
        __m256 z = _mm256_setzero_ps();
        return (px32){ z, z, z, z };
    }
    return (px32){ _mm256_loadu_ps(t), _mm256_loadu_ps(t + 8), _mm256_loadu_ps(t + 16),
                   _mm256_loadu_ps(t + 24) };
}

/* c += a[0..31] * bv; a is 32-byte aligned (blocks of KI_OV_MV floats, 64-byte aligned). */
static inline AI px32 px_fma(px32 c, const float *a, __m256 bv)
{
    c.v0 = _mm256_fmadd_ps(_mm256_load_ps(a), bv, c.v0);
    c.v1 = _mm256_fmadd_ps(_mm256_load_ps(a + 8), bv, c.v1);
    c.v2 = _mm256_fmadd_ps(_mm256_load_ps(a + 16), bv, c.v2);
    c.v3 = _mm256_fmadd_ps(_mm256_load_ps(a + 24), bv, c.v3);
    return c;
}

/* max(lo, v) then min(hi, .): a NaN v is kept (second operand), as in the AVX-512 kernel. */
static inline AI __m256 fin(__m256 v, const float *bias, __m256 vlo, __m256 vhi)
{
    v = bias ? _mm256_add_ps(v, _mm256_loadu_ps(bias)) : v;
    return _mm256_min_ps(vhi, _mm256_max_ps(vlo, v));
}

static inline AI void px_store(float *t, px32 c, const float *bias, __m256 vlo, __m256 vhi)
{
    _mm256_storeu_ps(t, fin(c.v0, bias, vlo, vhi));
    _mm256_storeu_ps(t + 8, fin(c.v1, bias ? bias + 8 : NULL, vlo, vhi));
    _mm256_storeu_ps(t + 16, fin(c.v2, bias ? bias + 16 : NULL, vlo, vhi));
    _mm256_storeu_ps(t + 24, fin(c.v3, bias ? bias + 24 : NULL, vlo, vhi));
}

/* A tile shape's loop over the k block, STEP(o) a step reading b + o (+ a pixel's offset), on b's
 * layout ps (a constant): planes, or eight-channel groups (a group's steps, then the next group).
 */
#define OV_K_LOOPS(STEP)                                                                           \
    do {                                                                                           \
        if (ps == 1) {                                                                             \
            KI_OV_K_LOOP(pf, k, {                                                                  \
                STEP(0);                                                                           \
                b += ldb;                                                                          \
            });                                                                                    \
        } else {                                                                                   \
            KI_OV_K_LOOP8(pf, k, STEP, b += ldb);                                                  \
        }                                                                                          \
    } while (0)

/* Pixels 0..np-1 (np 1..3, a constant in each copy) of b and t over the whole k block; ps (a
 * constant) 1: b's rows k, ldb apart (planes), 8: b in eight-channel groups ldb apart, a pixel's
 * eight channels together (ki_ov_ukernel8_avx2). The same products in the same order either way. */
static inline AI void ov_group(int64_t k, const float *a, const float *b, int64_t ldb, bool acc,
                               const float *bias, float lo, float hi, float *restrict t,
                               ki_ov_pf pf, const int np, const int ps)
{
    px32 c0 = px_load(t, acc);
    px32 c1 = np > 1 ? px_load(t + KI_OV_MV, acc) : c0;
    px32 c2 = np > 2 ? px_load(t + 2 * KI_OV_MV, acc) : c0;
#define GROUP_STEP(o)                                                                              \
    do {                                                                                           \
        c0 = px_fma(c0, a, _mm256_broadcast_ss(b + (o)));                                          \
        if (np > 1) {                                                                              \
            c1 = px_fma(c1, a, _mm256_broadcast_ss(b + (o) + ps));                                 \
        }                                                                                          \
        if (np > 2) {                                                                              \
            c2 = px_fma(c2, a, _mm256_broadcast_ss(b + (o) + 2 * ps));                             \
        }                                                                                          \
        a += KI_OV_MV;                                                                             \
    } while (0)
    OV_K_LOOPS(GROUP_STEP);
#undef GROUP_STEP
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    px_store(t, c0, bias, vlo, vhi);
    if (np > 1) {
        px_store(t + KI_OV_MV, c1, bias, vlo, vhi);
    }
    if (np > 2) {
        px_store(t + 2 * KI_OV_MV, c2, bias, vlo, vhi);
    }
}

/* 16 channels of one pixel of the tile. */
typedef struct px16 {
    __m256 v0, v1;
} px16;

static inline AI px16 px16_load(const float *t, bool acc)
{
    return acc ? (px16){ _mm256_loadu_ps(t), _mm256_loadu_ps(t + 8) }
               : (px16){ _mm256_setzero_ps(), _mm256_setzero_ps() };
}

static inline AI px16 px16_fma(px16 c, __m256 a0, __m256 a1, const float *b)
{
    __m256 bv = _mm256_broadcast_ss(b);
    c.v0 = _mm256_fmadd_ps(a0, bv, c.v0);
    c.v1 = _mm256_fmadd_ps(a1, bv, c.v1);
    return c;
}

static inline AI void px16_store(float *t, px16 c, const float *bias, __m256 vlo, __m256 vhi)
{
    _mm256_storeu_ps(t, fin(c.v0, bias, vlo, vhi));
    _mm256_storeu_ps(t + 8, fin(c.v1, bias ? bias + 8 : NULL, vlo, vhi));
}

/* np pixels (5 or 6, a constant in each copy) of b and t, channels h..h+15 (h 0 or 16: a, bias
 * and t offset by the caller), the two weight vectors loaded once per k step and np broadcasts.
 * Five pixels: 10 accumulators, one more chain than 4 x 2 for the FMA latency, where a pixel count
 * leaves 2 or 4 after the groups of 3 (pw 5, 8, 10, 11). Six: 12 accumulators, so 8 loads feed
 * 12 FMAs where the 3-pixel group needs 15 (its weights are memory operands of every FMA); in L1,
 * k 128, 12 pixels, one thread: 103 -> 106-110 GFLOP/s of 113 (docs/performance.md). */
static inline AI void ov_half(int64_t k, const float *a, const float *b, int64_t ldb, bool acc,
                              const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf,
                              const int np, const int ps)
{
    px16 c0 = px16_load(t, acc), c1 = px16_load(t + KI_OV_MV, acc);
    px16 c2 = px16_load(t + 2 * KI_OV_MV, acc), c3 = px16_load(t + 3 * KI_OV_MV, acc);
    px16 c4 = px16_load(t + 4 * KI_OV_MV, acc);
    px16 c5 = np > 5 ? px16_load(t + 5 * KI_OV_MV, acc) : c0;
#define HALF_STEP(o)                                                                               \
    do {                                                                                           \
        __m256 a0 = _mm256_load_ps(a), a1 = _mm256_load_ps(a + 8);                                 \
        c0 = px16_fma(c0, a0, a1, b + (o));                                                        \
        c1 = px16_fma(c1, a0, a1, b + (o) + ps);                                                   \
        c2 = px16_fma(c2, a0, a1, b + (o) + 2 * ps);                                               \
        c3 = px16_fma(c3, a0, a1, b + (o) + 3 * ps);                                               \
        c4 = px16_fma(c4, a0, a1, b + (o) + 4 * ps);                                               \
        if (np > 5) {                                                                              \
            c5 = px16_fma(c5, a0, a1, b + (o) + 5 * ps);                                           \
        }                                                                                          \
        a += KI_OV_MV;                                                                             \
    } while (0)
    OV_K_LOOPS(HALF_STEP);
#undef HALF_STEP
    const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
    px16_store(t, c0, bias, vlo, vhi);
    px16_store(t + KI_OV_MV, c1, bias, vlo, vhi);
    px16_store(t + 2 * KI_OV_MV, c2, bias, vlo, vhi);
    px16_store(t + 3 * KI_OV_MV, c3, bias, vlo, vhi);
    px16_store(t + 4 * KI_OV_MV, c4, bias, vlo, vhi);
    if (np > 5) {
        px16_store(t + 5 * KI_OV_MV, c5, bias, vlo, vhi);
    }
}

/* One function per kernel, pixel count and pixel stride (NAME##NP##_##PS calling NAME with NP
 * and PS constants): each register-allocated on its own, so nothing of the caller is kept live
 * (and spilled) around the k loop. */
#define OV_COPY(NAME, NP, PS)                                                                      \
    static __attribute__((noinline)) void NAME##NP##_##PS(                                         \
        int64_t k, const float *a, const float *b, int64_t ldb, bool acc, const float *bias,       \
        float lo, float hi, float *restrict t, ki_ov_pf pf)                                        \
    {                                                                                              \
        NAME(k, a, b, ldb, acc, bias, lo, hi, t, pf, NP, PS);                                      \
    }
OV_COPY(ov_group, 1, 1)
OV_COPY(ov_group, 2, 1)
OV_COPY(ov_group, 3, 1)
OV_COPY(ov_group, 1, 8)
OV_COPY(ov_group, 2, 8)
OV_COPY(ov_group, 3, 8)

/* Pixels j..j+NP-1 (5 or 6) as two halves of 16 channels, each an ov_halfNP_PS. */
#define OV_HALVES(NP, PS)                                                                          \
    OV_COPY(ov_half, NP, PS)                                                                       \
    static void ov_halves##NP##_##PS(int64_t k, const float *a, const float *b, int64_t ldb,       \
                                     bool acc, const float *bias, float lo, float hi,              \
                                     float *restrict t, ki_ov_pf pf)                               \
    {                                                                                              \
        ov_half##NP##_##PS(k, a, b, ldb, acc, bias, lo, hi, t, pf);                                \
        ov_half##NP##_##PS(k, a + 16, b, ldb, acc, bias ? bias + 16 : NULL, lo, hi, t + 16,        \
                           KI_OV_NO_PF);                                                           \
    }
OV_HALVES(5, 1)
OV_HALVES(6, 1)
OV_HALVES(5, 8)
OV_HALVES(6, 8)

/* One k loop of the kernel: a tile shape (ov_group1..3 on 1..3 pixels, ov_halves5/6 on 5 or 6;
 * 0 ends a plan) and its first pixel. */
typedef struct ov_step {
    int8_t kind, j;
} ov_step;

/* The shapes a tile of pw pixels runs as (ov_plans[pw], in order). Groups of 6 pixels
 * (ov_halves6) where what they leave is 0, 3 or 5 pixels or another 6 (pw 6, 9, 11, 12); 7, 8 and
 * 10 pixels go as 3 + 2 + 2, 3 + 5 and 5 + 5, which were faster than 6 + 1, 6 + 2 and 6 + 2 + 2.
 * Otherwise groups of 3 pixels, and what is left (1 or 2) joins the last groups so that every
 * group keeps at least 8 FMA chains: the last 5 pixels as ov_halves5 (5, 8), the last 10 as two of
 * them (10), or the last 4 as two groups of 2 (4, 7). The kernel runs these plans and
 * ki_ov_pw_avx2 counts their k loops. */
static const ov_step ov_plans[KI_OV_PW_MAX + 1][4] = {
    [1] = { { 1, 0 } },
    [2] = { { 2, 0 } },
    [3] = { { 3, 0 } },
    [4] = { { 2, 0 }, { 2, 2 } },
    [5] = { { 5, 0 } },
    [6] = { { 6, 0 } },
    [7] = { { 3, 0 }, { 2, 3 }, { 2, 5 } },
    [8] = { { 3, 0 }, { 5, 3 } },
    [9] = { { 6, 0 }, { 3, 6 } },
    [10] = { { 5, 0 }, { 5, 5 } },
    [11] = { { 6, 0 }, { 5, 6 } },
    [12] = { { 6, 0 }, { 6, 6 } },
};

typedef void (*shape_fn)(int64_t, const float *, const float *, int64_t, bool, const float *, float,
                         float, float *restrict, ki_ov_pf);

/* Tile shapes by kind (ov_step), pixels ps floats apart in b */
static const shape_fn ov_shapes1[7] = {
    [1] = ov_group1_1, [2] = ov_group2_1, [3] = ov_group3_1, [5] = ov_halves5_1, [6] = ov_halves6_1
};
static const shape_fn ov_shapes8[7] = {
    [1] = ov_group1_8, [2] = ov_group2_8, [3] = ov_group3_8, [5] = ov_halves5_8, [6] = ov_halves6_8
};

/* The plan of a tile of pw pixels (1..KI_OV_PW_MAX) on the shapes of pixel stride ps; pf's lines
 * are asked for in the first step's k loop. */
static inline AI void ov_run_plan(const shape_fn *shapes, int ps, int64_t k, const float *a,
                                  const float *b, int pw, int64_t ldb, bool acc, const float *bias,
                                  float lo, float hi, float *restrict t, ki_ov_pf pf)
{
    for (const ov_step *s = ov_plans[pw]; s->kind; s++) {
        shapes[s->kind](k, a, b + s->j * ps, ldb, acc, bias, lo, hi, t + s->j * KI_OV_MV, pf);
        pf = KI_OV_NO_PF;
    }
}

void ki_ov_ukernel_avx2(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                        const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf)
{
    if (pw < 1 || pw > KI_OV_PW_MAX) {
        ki_ov_ukernel_ref(k, a, b, pw, ldb, acc, bias, lo, hi, t, pf);
        return;
    }
    ov_run_plan(ov_shapes1, 1, k, a, b, pw, ldb, acc, bias, lo, hi, t, pf);
}

void ki_ov_ukernel8_avx2(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                         const float *bias, float lo, float hi, float *restrict t, ki_ov_pf pf)
{
    if (pw < 1 || pw > KI_OV_PW_MAX || k % 8 != 0) {
        ki_ov_ukernel8_ref(k, a, b, pw, ldb, acc, bias, lo, hi, t, pf);
        return;
    }
    ov_run_plan(ov_shapes8, 8, k, a, b, pw, ldb, acc, bias, lo, hi, t, pf);
}

/* The k loops a tile of pw pixels runs (an ov_halves two, a group one). Each takes about the same
 * time per k step, a little under the 12 FMAs of the widest: fewer chains than 12 wait on the FMA
 * latency (one thread, in L1, k 128: 1 to 3 pixels 3.7, 5.3 and 6.1 cycles a step, a half of 5 or
 * 6 pixels 5.3 and 6.0; docs/performance.md). */
static int ov_loops(int pw)
{
    int loops = 0;
    for (const ov_step *s = ov_plans[pw]; s->kind; s++) {
        loops += s->kind >= 5 ? 2 : 1;
    }
    return loops;
}

/* Of the two ways to cut n pixels into the fewest blocks, equal blocks (ki_conv2d_ov_pw_equal) or
 * blocks of KI_OV_PW_MAX and the rest, the one whose tiles run fewer k loops (ov_loops), equal
 * blocks on a tie: 49 pixels (7x7) as 4 x 12 + 1 in 17 loops instead of 4 x 10 + 9 in 19
 * (mobilenet_v2's 7x7 layers 1-3.5 % faster); 16 stays 8 + 8 (6 loops, as 12 + 4), which is faster.
 */
int64_t ki_ov_pw_avx2(int64_t n)
{
    const int64_t eq = ki_conv2d_ov_pw_equal(n);
    if (n <= KI_OV_PW_MAX || eq == KI_OV_PW_MAX) {
        return eq;
    }
    const int64_t full = n / KI_OV_PW_MAX, fr = n % KI_OV_PW_MAX, ne = n / eq, er = n % eq;
    const int64_t loops_full = full * ov_loops(KI_OV_PW_MAX) + (fr ? ov_loops((int)fr) : 0);
    const int64_t loops_eq = ne * ov_loops((int)eq) + (er ? ov_loops((int)er) : 0);
    return loops_full < loops_eq ? KI_OV_PW_MAX : eq;
}

/* What a block's rows share: the clamp, the pixel mask and count (nr, all eight lanes or fewer),
 * the row stride of d and res. */
typedef struct fin8 {
    __m256 lo, hi;
    __m256i m;
    int64_t nr;
    int64_t ld;
} fin8;

/* Channel o of a block (its pixels in v, masked) + res when not NULL, clamped, into d: eight
 * pixels by a plain store, fewer by 16-, 8- and 4-byte stores (ki_store_first8; a masked store is
 * microcode on AMD's Zen 1 to 4, and Intel's cores do not forward its data to later loads). */
static inline AI void store_row(const fin8 *f, float *d, const float *res, int64_t o, __m256 v)
{
    if (res) {
        v = _mm256_add_ps(v, f->nr == 8 ? _mm256_loadu_ps(res + o * f->ld)
                                        : _mm256_maskload_ps(res + o * f->ld, f->m));
    }
    v = _mm256_min_ps(f->hi, _mm256_max_ps(f->lo, v));
    ki_store_first8(d + o * f->ld, v, f->nr);
}

/* Pixel row j of the tile at channel h, or zeros past the nr pixels (nothing read there). */
static inline AI __m256 tile_row(const float *t, int64_t j, int64_t nr, int64_t h)
{
    return j < nr ? _mm256_loadu_ps(t + j * KI_OV_MV + h) : _mm256_setzero_ps();
}

/* Channels h..h+7 (rows of them, >= 1) and pixels j0..j0+7 (nr of them, 1..8) of the tile. */
static void store_block(const float *t, int64_t h, int64_t rows, int64_t j0, int64_t nr, float *d,
                        const float *res, fin8 f)
{
    const float *tj = t + j0 * KI_OV_MV;
    __m256 r0 = tile_row(tj, 0, nr, h), r1 = tile_row(tj, 1, nr, h), r2 = tile_row(tj, 2, nr, h);
    __m256 r3 = tile_row(tj, 3, nr, h), r4 = tile_row(tj, 4, nr, h), r5 = tile_row(tj, 5, nr, h);
    __m256 r6 = tile_row(tj, 6, nr, h), r7 = tile_row(tj, 7, nr, h);
    ki_tr8(&r0, &r1, &r2, &r3, &r4, &r5, &r6, &r7); /* r[o] lane j: pixel j0 + j of channel h + o */
    f.m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    f.nr = nr;
    d += h * f.ld + j0;
    res = res ? res + h * f.ld + j0 : NULL;
    store_row(&f, d, res, 0, r0);
    if (rows > 1) {
        store_row(&f, d, res, 1, r1);
    }
    if (rows > 2) {
        store_row(&f, d, res, 2, r2);
    }
    if (rows > 3) {
        store_row(&f, d, res, 3, r3);
    }
    if (rows > 4) {
        store_row(&f, d, res, 4, r4);
    }
    if (rows > 5) {
        store_row(&f, d, res, 5, r5);
    }
    if (rows > 6) {
        store_row(&f, d, res, 6, r6);
    }
    if (rows > 7) {
        store_row(&f, d, res, 7, r7);
    }
}

void ki_ov_tile_store_avx2(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                           const float *res, float lo, float hi)
{
    if (nr < 1 || nr > KI_OV_PW_MAX || rows > KI_OV_MV) {
        ki_ov_tile_store(t, rows, nr, d, ld, res, lo, hi);
        return;
    }
    fin8 f = { _mm256_set1_ps(lo), _mm256_set1_ps(hi), _mm256_setzero_si256(), 0, ld };
    for (int64_t h = 0; h < rows; h += 8) {
        for (int64_t j0 = 0; j0 < nr; j0 += 8) {
            store_block(t, h, rows - h, j0, nr - j0 < 8 ? nr - j0 : 8, d, res, f);
        }
    }
}
