/* conv2d_s2d.c - a 6x6 stride-2 layer with padding 2 (YOLOv5's stem: 3 -> 32 channels at 640x640)
 * as space-to-depth and Winograd F(4x4) (see conv2d.h). With z[(ic, py, px)][Y][X] =
 * x[ic][2Y + py][2X + px] the layer is the 3x3 stride-1 layer with padding 1 over z whose weight
 * at tap (ty, tx) is w[o][ic][2ty + py][2tx + px]: output (oy, ox) reads x rows 2oy - 2 + ky,
 * ky = 2ty + py, which are z rows oy - 1 + ty. That layer (c->s2d, built at create) takes Winograd
 * F(4x4): 36 products per 16 outputs and input channel against the direct path's 144, which on
 * this path's 12 channels leaves the transforms a large share but is still faster
 * (docs/performance.md).
 *
 * Output rows go in runs of KI_S2D_RUN (two rows of tiles) starting at multiples of it: for each
 * run the z rows it reads (KI_S2D_RUN + 2, zero outside the image) are copied into the thread's
 * scratch, one parity of a row at a time (ki_conv2d_tap_row), and the hidden layer runs on them as
 * an image padded only left, its tiles a panel at a time (ki_conv2d_wino_alone); then the
 * activation, row by row. Every output is thus computed by the same operations whether the layer
 * runs alone or band by band with the next one (conv2d_pwdw.c): the same bits. Compiled without ISA
 * flags; thread-safe. */
#include <stdlib.h>
#include <string.h>

#include "../core/team.h"
#include "conv2d.h"

bool ki_conv2d_s2d_shape_ok(const ki_conv2d *c)
{
    return c->kh == 6 && c->kw == 6 && c->sh == 2 && c->sw == 2 && c->dh == 1 && c->dw == 1 &&
           c->pt == 2 && c->pb == 2 && c->pl == 2 && c->pr == 2 && c->groups == 1 &&
           c->pad_mode == KI_CONV_PAD_ZEROS && c->in_ch <= KI_DIRECT_MAX_IN;
}

ki_status ki_conv2d_s2d_prepare(ki_conv2d *c, ki_error *err)
{
    const int64_t ic = c->in_ch, zc = 4 * ic, oc = c->out_ch;
    if (!c->weight || !ki_conv2d_s2d_shape_ok(c)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "not a 6x6 stride-2 convolution with weights");
    }
    ki_conv2d *h = calloc(1, sizeof *h);
    if (!h) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    *h = (ki_conv2d){ .in_ch = zc,
                      .out_ch = oc,
                      .groups = 1,
                      .kh = 3,
                      .kw = 3,
                      .sh = 1,
                      .sw = 1,
                      .dh = 1,
                      .dw = 1,
                      .pl = 1,
                      .pad_mode = KI_CONV_PAD_ZEROS };
    h->ep.bias = c->ep.bias;
    ki_conv2d_set_isa(h, c->isa);
    float *w;
    size_t bytes;
    ki_status st = ki_conv2d_alloc_weights((size_t)oc, (size_t)zc, 9, "space-to-depth weights", &w,
                                           &bytes, err);
    if (st != KI_OK) {
        free(h);
        return st;
    }
    for (int64_t o = 0; o < oc; o++) {
        for (int64_t i = 0; i < ic; i++) {
            for (int64_t q = 0; q < 4; q++) { /* z channel 4i + q: py = q / 2, px = q % 2 */
                for (int64_t t = 0; t < 9; t++) {
                    const int64_t ky = 2 * (t / 3) + q / 2, kx = 2 * (t % 3) + q % 2;
                    w[(o * zc + 4 * i + q) * 9 + t] = c->weight[((o * ic + i) * 6 + ky) * 6 + kx];
                }
            }
        }
    }
    h->weight = w;
    st = ki_conv2d_wino_prepare(h, 4, false, err);
    h->weight = NULL; /* the layer reads only its Winograd weights */
    free(w);
    if (st != KI_OK) {
        free(h);
        return st;
    }
    c->s2d = h;
    return KI_OK;
}

bool ki_conv2d_s2d_on(const ki_conv2d *c, int64_t ow)
{
    /* a copy whose kernels were changed after create (a test's) runs the direct rows of its level;
     * the transforms index a run's z planes (KI_S2D_RUN + 2 rows of ow + 1) with 32-bit lanes */
    return c->s2d && c->s2d->isa == c->isa && c->direct && !c->residual && !c->pool &&
           ow < INT32_MAX / 16 / (KI_S2D_RUN + 2);
}

/* Floats rounded up to a cache line's 16. */
static bool line_floats(size_t *n)
{
    if (!ki_ckd_add(n, *n, 15)) {
        return false;
    }
    *n &= ~(size_t)15;
    return true;
}

/* The scratch's parts for outputs ow wide: the hidden layer's V and M, the z rows of a run, and a
 * run's output rows (a run only partly wanted), each in floats from a cache line. */
static bool scratch_parts(const ki_conv2d *c, int64_t ow, size_t *v, size_t *z, size_t *y)
{
    *v = c->s2d ? ki_conv2d_wino_alone_floats(c->s2d) : 0;
    return *v > 0 && line_floats(v) &&
           ki_ckd_mul(z, (size_t)(4 * c->in_ch * (KI_S2D_RUN + 2)), (size_t)ow + 1) &&
           line_floats(z) && ki_ckd_mul(y, (size_t)(c->out_ch * KI_S2D_RUN), (size_t)ow) &&
           line_floats(y);
}

size_t ki_conv2d_s2d_scratch(const ki_conv2d *c, int64_t ow)
{
    size_t v, z, y, n;
    return scratch_parts(c, ow, &v, &z, &y) && ki_ckd_add(&n, v, z) && ki_ckd_add(&n, n, y) &&
                   ki_ckd_mul(&n, n, sizeof(float))
               ? n
               : 0;
}

/* The z rows [a - 1, a - 1 + zr) of image x (channels of h x w) into z, wz columns a row. */
static void z_rows(const ki_conv2d *c, const float *x, int64_t h, int64_t w, int64_t a, int64_t zr,
                   int64_t wz, float *restrict z)
{
    for (int64_t i = 0; i < c->in_ch; i++) {
        for (int64_t q = 0; q < 4; q++) {
            for (int64_t j = 0; j < zr; j++) {
                float *d = z + ((4 * i + q) * zr + j) * wz;
                const int64_t iy = 2 * (a - 1 + j) + q / 2;
                if (iy < 0 || iy >= h) {
                    memset(d, 0, (size_t)wz * sizeof *d);
                } else {
                    /* one parity of the row: the stem's stride is 2 */
                    ki_conv2d_tap_row(c, x + (i * h + iy) * w, w, q % 2, wz, d);
                }
            }
        }
    }
}

void ki_conv2d_s2d_rows(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in, int64_t n,
                        int64_t r0, int64_t r1, float *restrict dst, int64_t cstride,
                        float *scratch)
{
    const int64_t ih = g->in.h, iw = g->in.w, oh = g->oh, ow = g->ow, wz = ow + 1;
    const int64_t oc = c->out_ch;
    const float *x = in + n * c->in_ch * ih * iw;
    size_t nv, nz, ny;
    if (!scratch_parts(c, ow, &nv, &nz, &ny)) {
        return; /* the workspace was sized by the same call */
    }
    float *z = scratch + nv, *yt = z + nz;
    /* the bias is added by the output transform */
    const ki_cv_epilogue act_only = { NULL, c->ep.act, false };
    for (int64_t a = r0 / KI_S2D_RUN * KI_S2D_RUN; a < r1 && a < oh; a += KI_S2D_RUN) {
        const int64_t b = a + KI_S2D_RUN < oh ? a + KI_S2D_RUN : oh, rows = b - a;
        z_rows(c, x, ih, iw, a, rows + 2, wz, z);
        const ki_conv2d_geom zg = { { 1, 4 * c->in_ch, rows + 2, wz, false }, rows, ow };
        const bool whole = a >= r0 && b <= r1;
        ki_conv2d_wino_alone(c->s2d, &zg, z, whole ? dst + (a - r0) * ow : yt,
                             whole ? cstride : rows * ow, scratch);
        const int64_t q0 = a > r0 ? a : r0, q1 = b < r1 ? b : r1;
        for (int64_t ch = 0; ch < oc; ch++) {
            float *d = dst + ch * cstride + (q0 - r0) * ow;
            if (!whole) {
                memcpy(d, yt + (ch * rows + q0 - a) * ow, (size_t)((q1 - q0) * ow) * sizeof *d);
            }
            for (int64_t r = 0; c->ep.act.kind != KI_ACT_NONE && r < q1 - q0; r++) {
                c->epf(&act_only, NULL, ch, d + r * ow, (size_t)ow);
            }
        }
    }
}

/* The team's runs of rows (ki_share, as direct_body shares its rows), each thread through its own
 * slice of the workspace. */
static void s2d_body(void *arg, const ki_part *p)
{
    const ki_conv2d_job *j = arg;
    const ki_conv2d *c = j->c;
    const ki_conv2d_geom *g = j->g;
    const int64_t per = (g->oh + KI_S2D_RUN - 1) / KI_S2D_RUN, ohw = g->oh * g->ow;
    float *scratch = ki_exec_slice(j->ex, p->tid);
    ki_share_begin(p, g->in.n * per);
    for (int64_t r = ki_share_take(p->share, p->tid); r >= 0; r = ki_share_take(p->share, p->tid)) {
        const int64_t n = r / per, y0 = r % per * KI_S2D_RUN;
        const int64_t y1 = y0 + KI_S2D_RUN < g->oh ? y0 + KI_S2D_RUN : g->oh;
        ki_conv2d_s2d_rows(c, g, j->in, n, y0, y1, j->out + n * c->out_ch * ohw + y0 * g->ow, ohw,
                           scratch);
    }
}

void ki_conv2d_forward_s2d(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out, const ki_exec *ex)
{
    ki_conv2d_job j = { c, g, in, out, ex, false };
    ki_team_run(ex, s2d_body, &j);
}
