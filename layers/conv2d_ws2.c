/* conv2d_ws2.c - 3x3 stride-2 layers with padding 1 as a Winograd form over the input's two
 * phases (KI_CONV2D_WS2).
 *
 * Along one dimension, output j of a tile of 4 (output 4t + j) reads the input columns 8t + 2j - 1
 * (tap 0), 8t + 2j (tap 1) and 8t + 2j + 1 (tap 2). With c_i = x[8t - 1 + i], i = 0..8, taps 0
 * and 2 see the odd-phase values d_k = c_2k (k = 0..4) as a 2-tap correlation y_j = g0 d_j +
 * g1 d_j+1, which Winograd F(4,2) computes in 5 products instead of 8 (points 0, 1, -1, 2):
 *   B^T = [2 -1 -2 1 0; 0 -2 -1 1 0; 0 2 -3 1 0; 0 -1 0 1 0; 0 2 -1 -2 1],
 *   G = [1/2 0; -1/2 -1/2; -1/6 1/6; 1/6 1/3; 0 1],
 *   A^T = [1 1 1 1 0; 0 1 -1 2 0; 0 1 1 4 0; 0 1 -1 8 1];
 * tap 1 sees the even-phase values e_j = c_2j+1 one product each. So 9 positions per dimension:
 * the 5 of F(4,2) and the 4 even values, and in two dimensions (the tensor product) 81 products
 * per 4x4 output tile and channel pair instead of the direct 144. Of the 81 transformed weights
 * only 36 differ (the even positions of a dimension share the centre tap): U keeps those 36, so
 * 4 floats per weight, as F(4x4, 3x3).
 *
 * Work goes by items of up to KI_GEMM_NR tiles (in raster order over an image's tile grid, so a
 * GEMM panel is full whatever the width), handed out as threads come free (ki_share). Per item a
 * thread transforms its input patches into V (81 packed panels of in_ch rows), then per block of
 * output channels (ws2_block: the block's 81 products stay in L2) runs the GEMM micro-kernel on
 * each position and the output transform, writes the raw sums and applies the bias, activation
 * and residual (c->epf) on the rows it wrote. Every item is computed the same way whatever the
 * thread count, so results do not depend on it. State is read-only; thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/cpu.h"
#include "../core/team.h"
#include "conv2d.h"

#define KI_WS2_SUFFIX _ref
#include "ws2_xform.h"

#define WS2_NP (WX_T * WX_T) /* positions of a tile (WX_T along one dimension) */
#define WS2_UD 6 /* distinct transformed taps along one dimension: 5 of F(4,2), the centre */

bool ki_conv2d_ws2_shape_ok(const ki_conv2d *c)
{
    return c->groups == 1 && c->kh == 3 && c->kw == 3 && c->sh == 2 && c->sw == 2 && c->dh == 1 &&
           c->dw == 1 && c->pt == 1 && c->pb == 1 && c->pl == 1 && c->pr == 1 &&
           c->pad_mode == KI_CONV_PAD_ZEROS;
}

/* Output channels rounded up to the micro-kernel's rows (U's rows past out_ch are zeros). */
static int64_t ws2_rows(const ki_conv2d *c)
{
    return (c->out_ch + KI_GEMM_MR - 1) / KI_GEMM_MR * KI_GEMM_MR;
}

ki_status ki_conv2d_ws2_prepare(ki_conv2d *c, ki_error *err)
{
    /* G2[q] = the weights of taps 0, 1, 2 in transformed position q of one dimension */
    static const double g2[WS2_UD][3] = {
        { 0.5, 0, 0 },           { -0.5, 0, -0.5 }, { -1.0 / 6, 0, 1.0 / 6 },
        { 1.0 / 6, 0, 1.0 / 3 }, { 0, 0, 1 },       { 0, 1, 0 }
    };
    const int64_t rows = ws2_rows(c), ic = c->in_ch;
    size_t bytes;
    float *u;
    if (!c->weight || !ki_conv2d_ws2_shape_ok(c)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a 3x3 stride-2 layer with weights");
    }
    ki_status st = ki_conv2d_alloc_weights((size_t)WS2_UD * WS2_UD, (size_t)rows, (size_t)ic,
                                           "stride-2 Winograd weights", &u, &bytes, err);
    if (st != KI_OK) {
        return st;
    }
    memset(u, 0, bytes);
    for (int64_t o = 0; o < c->out_ch; o++) {
        for (int64_t i = 0; i < ic; i++) {
            const float *w = c->weight + (o * ic + i) * 9;
            for (int qy = 0; qy < WS2_UD; qy++) {
                for (int qx = 0; qx < WS2_UD; qx++) {
                    double s = 0;
                    for (int ky = 0; ky < 3; ky++) {
                        for (int kx = 0; kx < 3; kx++) {
                            s += g2[qy][ky] * g2[qx][kx] * w[ky * 3 + kx];
                        }
                    }
                    u[((int64_t)(qy * WS2_UD + qx) * rows + o) * ic + i] = (float)s;
                }
            }
        }
    }
    free(c->ws2_u);
    c->ws2_u = u;
    return KI_OK;
}

int64_t ki_conv2d_ws2_tiles(const ki_conv2d_geom *g)
{
    return ((g->oh + 3) / 4) * ((g->ow + 3) / 4);
}

/* Output channels per block: the block's 81 products (81 x rows x KI_WS2_NT floats) take at most
 * a quarter of L2, in whole micro-kernel rows. */
static int64_t ws2_block(const ki_conv2d *c)
{
    const size_t per_row = (size_t)WS2_NP * KI_WS2_NT * sizeof(float);
    int64_t b = (int64_t)(ki_cpu_get()->l2 / 4 / per_row) / KI_GEMM_MR * KI_GEMM_MR;
    b = b < KI_GEMM_MR ? KI_GEMM_MR : b;
    return b < ws2_rows(c) ? b : ws2_rows(c);
}

/* Floats of one thread's scratch: V (81 panels of in_ch x KI_WS2_NT) and one block's products M
 * (81 x block x KI_WS2_NT); false on overflow. */
static bool ws2_floats(const ki_conv2d *c, int64_t *v, int64_t *m)
{
    return ki_ckd_mul_i64(v, c->in_ch, (int64_t)WS2_NP * KI_WS2_NT) &&
           ki_ckd_mul_i64(m, ws2_block(c), (int64_t)WS2_NP * KI_WS2_NT) && *v < INT64_MAX / 8 &&
           *m < INT64_MAX / 8;
}

size_t ki_conv2d_ws2_workspace(const ki_conv2d *c, const ki_conv2d_geom *g)
{
    int64_t v, m;
    (void)g;
    if (!ws2_floats(c, &v, &m) || (uint64_t)(v + m) > SIZE_MAX / sizeof(float) / 2) {
        return 0;
    }
    return ((size_t)(v + m) * sizeof(float) + 63) / 64 * 64;
}

/* The products of output channels [r0, r0 + rows) (whole micro-kernel rows) at every position
 * for the item's nt tiles: m[p][r - r0][l] (the narrowest micro-kernel that covers nt columns). */
static void ws2_products(const ki_conv2d *c, const float *v, int64_t r0, int64_t rows, int64_t nt,
                         float *restrict m)
{
    const int64_t ic = c->in_ch, urows = ws2_rows(c), nl = KI_WS2_NT;
    for (int p = 0; p < WS2_NP; p++) {
        const int py = p / WX_T, px = p % WX_T;
        const int ui = (py < 5 ? py : 5) * WS2_UD + (px < 5 ? px : 5);
        const float *u = c->ws2_u + (int64_t)ui * urows * ic;
        const float *vp = v + (int64_t)p * ic * nl;
        float *mp = m + (int64_t)p * rows * nl;
        for (int64_t r = 0; r < rows; r += KI_GEMM_MR) {
            const float *a[KI_GEMM_MR];
            for (int64_t k0 = 0; k0 < ic; k0 += KI_GEMM_KC) {
                const int64_t kc = ic - k0 < KI_GEMM_KC ? ic - k0 : KI_GEMM_KC;
                for (int i = 0; i < KI_GEMM_MR; i++) {
                    a[i] = u + (r0 + r + i) * ic + k0;
                }
                ki_gemm_cols(c->uk, nt, kc, a, vp + k0 * nl, nl, mp + r * nl, nl, k0 > 0);
            }
        }
    }
}

/* The epilogue of channel o on the output rows the item wrote (each tile row's span). */
static void ws2_finish(const ki_conv2d *c, const ki_conv2d_geom *g, const ki_ws2_item *it,
                       int64_t o, float *y, const float *res)
{
    const int64_t ow = g->ow, ohw = g->oh * ow;
    for (int64_t t = it->t0; t < it->t0 + it->nt;) {
        const int64_t ty = t / it->tw, tx = t % it->tw;
        const int64_t end =
            (ty + 1) * it->tw < it->t0 + it->nt ? (ty + 1) * it->tw : it->t0 + it->nt;
        const int64_t x0 = 4 * tx, x1 = 4 * (tx + end - t) < ow ? 4 * (tx + end - t) : ow;
        for (int64_t oy = 4 * ty; oy < 4 * ty + 4 && oy < g->oh; oy++) {
            const int64_t at = o * ohw + oy * ow + x0;
            c->epf(&c->ep, res ? res + at : NULL, o, y + at, (size_t)(x1 - x0));
        }
        t = end;
    }
}

static void ws2_body(void *arg, const ki_part *pt)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    const int64_t ic = c->in_ch, oc = c->out_ch, hw = g->in.h * g->in.w, ohw = g->oh * g->ow;
    const int64_t block = ws2_block(c), urows = ws2_rows(c);
    int64_t vf, mf;
    if (!ws2_floats(c, &vf, &mf)) {
        return; /* the workspace check at plan time refused such a layer */
    }
    float *v = ki_exec_slice(j->ex, pt->tid), *m = v + vf;
    const int64_t tiles = ki_conv2d_ws2_tiles(g), per_image = (tiles + KI_WS2_NT - 1) / KI_WS2_NT;
    ki_share_begin(pt, (long long)(g->in.n * per_image));
    for (long long k = ki_share_take(pt->share, pt->tid); k >= 0;
         k = ki_share_take(pt->share, pt->tid)) {
        const int64_t n = k / per_image;
        ki_ws2_item it = { (k % per_image) * KI_WS2_NT, 0, (g->ow + 3) / 4, { 0 }, { 0 } };
        it.nt = tiles - it.t0 < KI_WS2_NT ? tiles - it.t0 : KI_WS2_NT;
        for (int l = 0; l < it.nt; l++) {
            it.y0[l] = 8 * ((it.t0 + l) / it.tw) - 1;
            it.x0[l] = 8 * ((it.t0 + l) % it.tw) - 1;
        }
        c->ws2_in(g, &it, j->in + n * ic * hw, ic, v);
        float *y = j->out + n * oc * ohw;
        const float *res = c->res ? c->res + n * oc * ohw : NULL;
        for (int64_t r0 = 0; r0 < urows; r0 += block) {
            const int64_t rows = urows - r0 < block ? urows - r0 : block;
            ws2_products(c, v, r0, rows, it.nt, m);
            for (int64_t o = r0; o < r0 + rows && o < oc; o++) {
                c->ws2_out(g, &it, m, rows, o - r0, y + o * ohw);
                ws2_finish(c, g, &it, o, y, res);
            }
        }
    }
}

void ki_conv2d_forward_ws2(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out, const ki_exec *ex)
{
    const int64_t tiles = ki_conv2d_ws2_tiles(g);
    if (tiles == 0 || c->out_ch == 0 || g->in.n == 0) {
        return;
    }
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, ws2_body, &j);
}
