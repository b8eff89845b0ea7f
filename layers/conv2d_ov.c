/* conv2d_ov.c - the OV path of nn.Conv2d (see conv2d.h): weights repacked once into blocks of
 * KI_OV_MV output channels, column blocks of the pixels packed per run, and a micro-kernel that
 * keeps a KI_OV_MV x pw output tile in registers over one k block. k blocks are outermost: the
 * team's packed columns of one k block stay in cache while each thread streams its share of the
 * weights once, and each thread's partial tiles wait in its own slice of the workspace. Every
 * tile is computed by the same operations whatever the thread count, so results do not depend
 * on it. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "conv2d.h"

bool ki_conv2d_ov_shape_ok(const ki_conv2d *c)
{
    return c->groups == 1;
}

int64_t ki_conv2d_ov_pw(int64_t n)
{
    if (n <= 1) {
        return 1;
    }
    int64_t blocks = (n + KI_OV_PW_MAX - 1) / KI_OV_PW_MAX;
    return (n + blocks - 1) / blocks;
}

ki_status ki_conv2d_ov_prepare(ki_conv2d *c, ki_error *err)
{
    int64_t k = c->in_ch * c->kh * c->kw, oc = c->out_ch, nob = (oc + KI_OV_MV - 1) / KI_OV_MV;
    size_t bytes;
    float *a;
    if (!c->weight || !ki_conv2d_ov_shape_ok(c)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a one-group convolution with weights");
    }
    ki_status st = ki_conv2d_alloc_weights((size_t)nob, KI_OV_MV, (size_t)k, "repacked weights", &a,
                                           &bytes, err);
    if (st != KI_OK) {
        return st;
    }
    for (int64_t k0 = 0; k0 < k; k0 += KI_OV_KC) {
        int64_t kc = k - k0 < KI_OV_KC ? k - k0 : KI_OV_KC;
        for (int64_t ob = 0; ob < nob; ob++) {
            float *blk = a + (k0 * nob + ob * kc) * KI_OV_MV;
            for (int64_t r = 0; r < KI_OV_MV; r++) {
                int64_t o = ob * KI_OV_MV + r;
                for (int64_t q = 0; q < kc; q++) {
                    blk[q * KI_OV_MV + r] = o < oc ? c->weight[o * k + k0 + q] : 0.0f;
                }
            }
        }
    }
    free(c->ov_a);
    c->ov_a = a;
    return KI_OK;
}

/* Whether the column blocks are packed: a 1x1 stride-1 unpadded layer reads them in place (the
 * input's planes are the rows of its column matrix). */
static bool ov_packs(const ki_conv2d *c)
{
    return !ki_conv2d_is_pointwise(c);
}

/* Bytes of the packed column blocks of one image (shared by the team; 0 when not packed) and of
 * one thread's partial tiles; false on overflow. */
static bool ov_sizes(const ki_conv2d *c, const ki_conv2d_geom *g, int nt, size_t *cols,
                     size_t *part)
{
    int64_t k = c->in_ch * c->kh * c->kw, n = g->oh * g->ow, pw = ki_conv2d_ov_pw(n);
    int64_t nb = (n + pw - 1) / pw, nob = (c->out_ch + KI_OV_MV - 1) / KI_OV_MV;
    int64_t mine = (nob * nb + nt - 1) / nt;
    return ki_ckd_mul(cols, ov_packs(c) ? (size_t)nb : 0, (size_t)pw) &&
           ki_ckd_mul(cols, *cols, (size_t)k) && ki_ckd_mul(cols, *cols, sizeof(float)) &&
           *cols < SIZE_MAX / 2 &&
           ki_ckd_mul(part, (size_t)mine, (size_t)pw * KI_OV_MV * sizeof(float)) &&
           *part < SIZE_MAX / 2 / (size_t)nt;
}

/* Per thread: its share of the packed columns (which span the slices one after another) and
 * its partial tiles. */
size_t ki_conv2d_ov_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads)
{
    int nt = n_threads > 0 ? n_threads : 1;
    size_t cols, part;
    if (!ov_sizes(c, g, nt, &cols, &part)) {
        return 0;
    }
    return ((cols + (size_t)nt - 1) / (size_t)nt + 63) / 64 * 64 + (part + 63) / 64 * 64;
}

void ki_ov_ukernel_ref(int64_t k, const float *a, const float *b, int pw, int64_t ldb, bool acc,
                       const float *bias, float lo, float hi, float *restrict t)
{
    if (!acc) {
        memset(t, 0, (size_t)pw * KI_OV_MV * sizeof *t);
    }
    for (int64_t q = 0; q < k; q++) {
        for (int j = 0; j < pw; j++) {
            float bv = b[q * ldb + j];
            for (int r = 0; r < KI_OV_MV; r++) {
                t[j * KI_OV_MV + r] += a[q * KI_OV_MV + r] * bv;
            }
        }
    }
    for (int i = 0; i < pw * KI_OV_MV; i++) {
        float v = bias ? t[i] + bias[i % KI_OV_MV] : t[i];
        v = lo > v ? lo : v; /* NaN kept, as the vector max/min keep it */
        t[i] = hi < v ? hi : v;
    }
}

/* How a tile is finished: clamp-type activations (none, ReLU, ReLU6, Hardtanh) take the bias
 * and, without a residual, the clamp in the micro-kernel; the residual and its clamp are added
 * at the transposing store. Other activations: raw sums stored, then the row epilogue. */
typedef struct ov_fin {
    bool clamp;
    float lo, hi;
} ov_fin;

void ki_ov_tile_store(const float *t, int64_t rows, int64_t nr, float *d, int64_t ld,
                      const float *res, float lo, float hi)
{
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < nr; j++) {
            float v = res ? t[j * KI_OV_MV + r] + res[r * ld + j] : t[j * KI_OV_MV + r];
            v = lo > v ? lo : v; /* NaN kept, as the vector max/min keep it */
            d[r * ld + j] = hi < v ? hi : v;
        }
    }
}

/* Writes tile t ([pw][MV], rows oc0..oc0+rows-1 of the output, pixels j0..j0+nr-1) into y
 * (row stride n) with the rest of the epilogue. */
static void ov_store(const ki_conv2d *c, const ov_fin *f, const float *t, int64_t oc0, int64_t rows,
                     int64_t j0, int64_t nr, int64_t n, float *y, const float *res)
{
    float *d = y + oc0 * n + j0;
    const float *rr = res ? res + oc0 * n + j0 : NULL;
    if (f->clamp) { /* the bias is in t; the clamp too unless there is a residual */
        c->ov_st(t, rows, nr, d, n, rr, rr ? f->lo : -INFINITY, rr ? f->hi : INFINITY);
        return;
    }
    c->ov_st(t, rows, nr, d, n, NULL, -INFINITY, INFINITY); /* the rest: ov_epilogue */
}

/* The epilogue of the other activations over tiles [i0, i1) of image y, once they are all
 * stored: per channel one call over the tiles' pixel span (not one per tile and channel). */
static void ov_epilogue(const ki_conv2d *c, int64_t i0, int64_t i1, int64_t nb, int64_t pw,
                        int64_t n, float *y, const float *res)
{
    for (int64_t ob = i0 / nb; ob * nb < i1; ob++) {
        int64_t p0, p1;
        ki_row_span(i0, i1, ob, nb, &p0, &p1);
        int64_t j0 = p0 * pw, j1 = p1 * pw < n ? p1 * pw : n;
        for (int64_t oc = ob * KI_OV_MV; oc < (ob + 1) * KI_OV_MV && oc < c->out_ch; oc++) {
            c->epf(&c->ep, res ? res + oc * n + j0 : NULL, oc, y + oc * n + j0, (size_t)(j1 - j0));
        }
    }
}

void ki_conv2d_forward_ov(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex)
{
    int64_t k = c->in_ch * c->kh * c->kw, hw = g->in.h * g->in.w, n = g->oh * g->ow;
    int64_t pw = ki_conv2d_ov_pw(n), nb = (n + pw - 1) / pw;
    int64_t nob = (c->out_ch + KI_OV_MV - 1) / KI_OV_MV, tiles = nob * nb;
    bool packs = ov_packs(c);
    ki_gemm_fin gf;
    ov_fin f = { ki_gemm_fin_of(&c->ep, 0, NULL, &gf), gf.lo, gf.hi };
    size_t cols, part;
    if (n == 0 || c->out_ch == 0 || !ov_sizes(c, g, ex->n_threads, &cols, &part)) {
        return;
    }
    float *bp = ex->workspace;
    /* the partial tiles after the columns: each thread's slice holds (cols / nt) + part */
    char *parts = (char *)ex->workspace + (cols + 63) / 64 * 64;
    size_t part_stride = (part + 63) / 64 * 64;
    for (int64_t img = 0; img < g->in.n; img++) {
        const float *x = in + img * c->in_ch * hw;
        float *y = out + img * c->out_ch * n;
        const float *res = c->res ? c->res + img * c->out_ch * n : NULL;
#pragma omp parallel num_threads(ex->n_threads)
        {
            if (packs) {
#pragma omp for schedule(static)
                for (int64_t pb = 0; pb < nb; pb++) {
                    int64_t j0 = pb * pw, nr = n - j0 < pw ? n - j0 : pw;
                    ki_conv2d_pack_cols(c, g, true, x, j0, nr, k, pw, bp + pb * k * pw);
                }
            }
            int tid = omp_get_thread_num(), nt = omp_get_num_threads();
            int64_t i0 = tiles * tid / nt, i1 = tiles * (tid + 1) / nt;
            float *tp = (float *)(parts + (size_t)tid * part_stride);
            float bias[KI_OV_MV];
            for (int64_t k0 = 0; k0 < k; k0 += KI_OV_KC) {
                int64_t kc = k - k0 < KI_OV_KC ? k - k0 : KI_OV_KC;
                bool last = k0 + kc >= k, kclamp = last && f.clamp && !res;
                for (int64_t i = i0; i < i1; i++) {
                    int64_t ob = i / nb, pb = i % nb, oc0 = ob * KI_OV_MV;
                    int64_t rows = c->out_ch - oc0 < KI_OV_MV ? c->out_ch - oc0 : KI_OV_MV;
                    float *t = tp + (i - i0) * pw * KI_OV_MV;
                    const float *bv = NULL;
                    if (last && f.clamp && c->ep.bias) {
                        for (int64_t r = 0; r < KI_OV_MV; r++) {
                            bias[r] = r < rows ? c->ep.bias[oc0 + r] : 0.0f;
                        }
                        bv = bias;
                    }
                    const float *a = c->ov_a + (k0 * nob + ob * kc) * KI_OV_MV;
                    /* the weights come from memory once per run, in blocks the hardware
                     * prefetchers do not follow: while this block serves its nb pixel blocks,
                     * fetch the next one (the next channel block's), a part per tile */
                    const char *nx = (const char *)(a + kc * KI_OV_MV);
                    for (int64_t l = pb * kc * 2 / nb, le = (pb + 1) * kc * 2 / nb; l < le; l++) {
                        __builtin_prefetch(nx + l * 64, 0, 2); /* to L2: L1 holds this block */
                    }
                    /* in place, the last block multiplies only its own pixels (the packed
                     * one's zero padding is not there to read) */
                    int64_t j0 = pb * pw, nr = n - j0 < pw ? n - j0 : pw;
                    const float *b = packs ? bp + (pb * k + k0) * pw : x + k0 * hw + j0;
                    c->ov_uk(kc, a, b, packs ? (int)pw : (int)nr, packs ? pw : hw, k0 > 0, bv,
                             kclamp ? f.lo : -INFINITY, kclamp ? f.hi : INFINITY, t);
                    if (last) {
                        ov_store(c, &f, t, oc0, rows, j0, nr, n, y, res);
                    }
                }
            }
            if (!f.clamp && i1 > i0) {
                ov_epilogue(c, i0, i1, nb, pw, n, y, res);
            }
        }
    }
}
