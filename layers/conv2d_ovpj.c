/* conv2d_ovpj.c - a step of a 1x1 layer (or a stem) and the depthwise layer after it (c->dwf) run
 * with the 1x1 layer after those two, the block's projection (c->pjf, absorbed by nn.Conv2d's
 * fuse_state: ki_conv2d_want_pjf). The depthwise output goes to a buffer at the start of the
 * workspace instead of a tensor of the graph.
 * - After a channel-block step (c->dwf_c8: ki_conv2d_forward_ovdw_avx2), whose depthwise blocks
 *   on their own transpose each group's output (a pixel's eight channels together) into eight
 *   planes that the projection's OV micro-kernel reads back a pixel at a time: when the
 *   projection runs on the OV path (ki_conv2d_pj_in8), the groups stay as they are, one after
 *   another ([channel / 8][pixel][8]), and after a barrier the projection reads them through
 *   ki_ov_ukernel8.
 * - After bands (conv2d_pwdw.c), when the projection runs on the GEMM (ki_conv2d_pj_bands): each
 *   band computes the projection's rows right after its depthwise rows, which are still in L2
 *   (c->pj_y), instead of the whole depthwise output going out to L3 and coming back a step
 *   later.
 * Either way the same products in the same order as the three layers, so the same bits;
 * otherwise (another size) the projection runs on its own path after the depthwise output. */
#include "../core/team.h"
#include "conv2d.h"

/* The depthwise layer's (dg) and the projection's (pg) geometries for input geometry g. */
static ki_status pj_geoms(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_geom *dg,
                          ki_conv2d_geom *pg, ki_error *err)
{
    ki_status st = ki_conv2d_pwdw_geom(c, g, dg, err);
    if (st != KI_OK) {
        return st;
    }
    const ki_shape mid = ki_cv_nchw_shape(g->in.batched, g->in.n, c->dwf->out_ch, dg->oh, dg->ow);
    return ki_conv2d_geom_make(c->pjf, &mid, pg, err);
}

/* Bytes of the depthwise output (every image), a multiple of 64; false on overflow. */
static bool mid_bytes(const ki_conv2d *c, const ki_conv2d_geom *pg, size_t *bytes)
{
    return ki_ckd_mul(bytes, (size_t)pg->in.n, (size_t)c->dwf->out_ch) &&
           ki_ckd_mul(bytes, *bytes, (size_t)(pg->in.h * pg->in.w)) &&
           ki_ckd_mul(bytes, *bytes, sizeof(float)) && *bytes <= SIZE_MAX - 63 &&
           (*bytes = (*bytes + 63) / 64 * 64, true);
}

ki_status ki_conv2d_ovpj_shape(const ki_conv2d *c, const ki_conv2d_geom *g, ki_shape *out,
                               ki_error *err)
{
    ki_conv2d_geom dg, pg;
    ki_status st = pj_geoms(c, g, &dg, &pg, err);
    if (st == KI_OK) {
        *out = ki_cv_nchw_shape(g->in.batched, g->in.n, c->pjf->out_ch, pg.oh, pg.ow);
    }
    /* its original weights released (OV weights made), the projection may lack another path */
    if (st == KI_OK && !ki_conv2d_path_ok(c->pjf, &pg, ki_conv2d_pick(c->pjf, &pg))) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "the 1x1 layer after it has no path for %lldx%lld planes",
                     (long long)pg.in.h, (long long)pg.in.w);
    }
    return st;
}

/* The larger of the two phases' workspaces per thread (a multiple of 64), or 0. */
static size_t phase_bytes(const ki_conv2d *c, const ki_conv2d_geom *g, const ki_conv2d_geom *pg,
                          int n_threads)
{
    const size_t a = ki_conv2d_pwdw_workspace(c, g);
    const size_t b = ki_conv2d_workspace_for(c->pjf, pg, ki_conv2d_pick(c->pjf, pg), n_threads);
    const size_t w = a > b ? a : b;
    return a == 0 || w >= SIZE_MAX / 4 ? 0 : (w + 63) / 64 * 64;
}

/* The depthwise output first (from the workspace's first 64-byte boundary), then the two phases'
 * slices one after another (forward_ovpj runs them on a workspace that starts past it), so each
 * thread's share is a slice (w, phase_bytes), its part of the depthwise output (mid bytes in all)
 * and room for the alignment; 0 when w is. */
static size_t share_bytes(size_t w, size_t mid, int n_threads)
{
    const size_t nt = n_threads > 0 ? (size_t)n_threads : 1;
    return w > 0 && mid < SIZE_MAX / 4 ? w + ((mid + nt - 1) / nt + 63) / 64 * 64 + 64 : 0;
}

size_t ki_conv2d_ovpj_workspace(const ki_conv2d *c, const ki_conv2d_geom *g, int n_threads)
{
    ki_conv2d_geom dg, pg;
    size_t mid;
    if (pj_geoms(c, g, &dg, &pg, NULL) != KI_OK || !mid_bytes(c, &pg, &mid)) {
        return 0;
    }
    return share_bytes(phase_bytes(c, g, &pg, n_threads), mid, n_threads);
}

/* Every thread's depthwise groups are written before any thread reads them. */
static void all_written(void *arg, const ki_part *p)
{
    (void)arg;
    ki_part_sync(p);
}

ki_status ki_conv2d_forward_ovpj(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                                 const float *res, float *restrict out, const ki_exec *ex)
{
    ki_conv2d_geom dg, pg;
    size_t mid;
    if (pj_geoms(c, g, &dg, &pg, NULL) != KI_OK || !mid_bytes(c, &pg, &mid)) {
        return KI_ERR_INTERNAL;
    }
    ki_conv2d pj = *c->pjf; /* a copy that carries this run's residual and input layout */
    const ki_conv2d_path p = ki_conv2d_pick(&pj, &pg);
    const size_t w = phase_bytes(c, g, &pg, ex->n_threads),
                 share = share_bytes(w, mid, ex->n_threads);
    if (share == 0 || share > ex->ws_per_thread || !ki_conv2d_path_ok(&pj, &pg, p)) {
        return KI_ERR_INTERNAL;
    }
    /* the depthwise output at the start; the phases' slices after it (w each: nt w + mid fit in
     * nt shares of ki_conv2d_ovpj_workspace) */
    float *x = (float *)(void *)((char *)ex->workspace + (64 - (uintptr_t)ex->workspace % 64) % 64);
    ki_exec sub = *ex;
    sub.workspace = (char *)x + mid;
    sub.ws_per_thread = w;
    ki_conv2d cc = *c;
    cc.out8 = pj.in8 = c->dwf_c8 && ki_conv2d_pj_in8(c, &dg, p);
    const bool by_band = !c->dwf_c8 && ki_conv2d_pj_bands(p);
    cc.pj_y = by_band ? out : NULL;
    cc.pj_res = by_band ? res : NULL;
    pj.res = res;
    ki_conv2d_forward_pwdw(&cc, g, in, x, &sub);
    if (!by_band) { /* the projection on its own path, once every thread's part is written */
        ki_team_run(&sub, all_written, NULL);
        ki_conv2d_run(&pj, &pg, p, x, out, &sub);
    }
    return KI_OK;
}
