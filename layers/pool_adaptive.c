/* pool_adaptive.c - nn.AdaptiveAvgPool2d / F.adaptive_avg_pool2d and nn.AdaptiveMaxPool2d /
 * F.adaptive_max_pool2d. Output cell i covers [floor(i*H/oh), ceil((i+1)*H/oh)), as PyTorch;
 * an output size of 0 or None keeps the input size. Direct loops, parallel over planes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/team.h"
#include "conv_common.h"

typedef struct apool {
    bool is_max, return_indices;
    int64_t oh, ow;        /* 0 = the input's size */
    ki_plane_sums_fn sums; /* whole-plane sums (a global average) of this CPU's level */
} apool;

static ki_status parse_size(const ki_op_desc *op, apool *a, ki_error *err)
{
    const ki_param *p = ki_op_param(op, "output_size");
    if (!p || p->kind == KI_PARAM_NONE) {
        return KI_OK;
    }
    if (p->kind == KI_PARAM_INT) {
        a->oh = a->ow = p->i;
        return p->i >= 0 && p->i <= KI_MAX_DIM
                   ? KI_OK
                   : KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is out of range", p->raw);
    }
    if ((p->kind != KI_PARAM_INTS && p->kind != KI_PARAM_STRINGS) || p->n < 1 || p->n > 2) {
        return KI_FAIL(err, KI_ERR_FORMAT, "output_size=%s is not one or two sizes", p->raw);
    }
    ki_status st = ki_cv_size_entry(p, 0, &a->oh, err);
    if (st == KI_OK) {
        st = ki_cv_size_entry(p, p->n - 1, &a->ow, err);
    }
    return st;
}

static ki_status apool_create(const ki_op_desc *op, bool is_max, void **state, ki_error *err)
{
    apool *a = calloc(1, sizeof *a);
    if (!a) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    a->is_max = is_max;
    a->sums = ki_cpu_isa() >= KI_ISA_AVX2 ? KI_X86(ki_plane_sums_avx2) : ki_plane_sums_ref;
    ki_status st = parse_size(op, a, err);
    if (st == KI_OK && is_max) {
        st = ki_op_get_bool(op, "return_indices", false, &a->return_indices, err);
    }
    if (st == KI_OK) {
        st = ki_cv_check_io(op, 1, a->return_indices ? 2 : 1, err);
    }
    if (st != KI_OK) {
        free(a);
        return st;
    }
    *state = a;
    return KI_OK;
}

static ki_status amax_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return apool_create(op, true, state, err);
}

static ki_status aavg_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return apool_create(op, false, state, err);
}

static ki_status apool_geom(const apool *a, const ki_shape *in, ki_cv_nchw *x, int64_t *oh,
                            int64_t *ow, ki_error *err)
{
    ki_status st = ki_cv_nchw_get(in, x, err);
    if (st != KI_OK) {
        return st;
    }
    if (x->h < 1 || x->w < 1) {
        return KI_FAIL(err, KI_ERR_SHAPE, "input %lldx%lld is empty", (long long)x->h,
                       (long long)x->w);
    }
    *oh = a->oh ? a->oh : x->h;
    *ow = a->ow ? a->ow : x->w;
    return KI_OK;
}

static ki_status apool_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                             int n_out, ki_error *err)
{
    const apool *a = state;
    ki_cv_nchw x;
    int64_t oh, ow;
    if (n_in != 1 || n_out != (a->return_indices ? 2 : 1)) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    ki_status st = apool_geom(a, &in[0], &x, &oh, &ow, err);
    if (st != KI_OK) {
        return st;
    }
    for (int i = 0; i < n_out; i++) {
        out[i] = ki_cv_nchw_shape(x.batched, x.n, x.c, oh, ow);
    }
    return ki_shape_check(&out[0], err);
}

/* Sum of n contiguous floats in eight interleaved partial sums (independent add chains instead
 * of one), combined pairwise; the order depends only on n. */
static float sum_run(const float *p, int64_t n)
{
    float s[8] = { 0 };
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) {
            s[j] += p[i + j];
        }
    }
    for (int j = 0; i < n; i++, j++) {
        s[j] += p[i];
    }
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

void ki_plane_sums_ref(const float *x, int64_t stride, int64_t n, int64_t planes, float *sums)
{
    for (int64_t p = 0; p < planes; p++) {
        sums[p] = sum_run(x + p * stride, n);
    }
}

/* One output cell over [y0,y1) x [x0,x1): the mean, or the first maximum (any NaN wins) and
 * its flat index, as PyTorch. A mean over whole rows is one contiguous run. */
static void cell(bool is_max, const float *x, int64_t w, const int64_t r[4], float *val, float *idx)
{
    if (!is_max && r[2] == 0 && r[3] == w) {
        int64_t n = (r[1] - r[0]) * w;
        *val = n > 0 ? sum_run(x + r[0] * w, n) / (float)n : NAN;
        *idx = (float)(r[0] * w);
        return;
    }
    float acc = is_max ? -INFINITY : 0.0f;
    int64_t at = r[0] * w + r[2];
    for (int64_t y = r[0]; y < r[1]; y++) {
        for (int64_t xx = r[2]; xx < r[3]; xx++) {
            float v = x[y * w + xx];
            if (!is_max) {
                acc += v;
            } else if (v > acc || isnan(v)) {
                acc = v, at = y * w + xx;
            }
        }
    }
    *val = is_max ? acc : acc / (float)((r[1] - r[0]) * (r[3] - r[2]));
    *idx = (float)at;
}

typedef struct apool_job {
    const apool *a;
    ki_cv_nchw x;
    int64_t oh, ow;
    const float *src;
    float *dst, *ind;
} apool_job;

/* A global average: each thread a run of planes, their sums side by side (the same floats as
 * sum_run), then the mean as cell() takes it. */
static void global_avg_body(void *arg, const ki_part *p)
{
    const apool_job *j = arg;
    const int64_t planes = j->x.n * j->x.c, hw = j->x.h * j->x.w;
    const int64_t p0 = planes * p->tid / p->nt, p1 = planes * (p->tid + 1) / p->nt;
    j->a->sums(j->src + p0 * hw, hw, hw, p1 - p0, j->dst + p0);
    for (int64_t q = p0; q < p1; q++) {
        j->dst[q] /= (float)hw;
    }
}

/* Each thread its planes (OpenMP's static split), cell by cell. */
static void cells_body(void *arg, const ki_part *p)
{
    const apool_job *j = arg;
    const int64_t hw = j->x.h * j->x.w, ow = j->ow, ohw = j->oh * ow;
    int64_t p0, p1;
    ki_part_range(j->x.n * j->x.c, p, &p0, &p1);
    for (int64_t pl = p0; pl < p1; pl++) {
        for (int64_t i = 0; i < ohw; i++) {
            int64_t r[4];
            ki_cv_adaptive_range(i / ow, j->x.h, j->oh, &r[0], &r[1]);
            ki_cv_adaptive_range(i % ow, j->x.w, ow, &r[2], &r[3]);
            float v, at;
            cell(j->a->is_max, j->src + pl * hw, j->x.w, r, &v, &at);
            j->dst[pl * ohw + i] = v;
            if (j->ind) {
                j->ind[pl * ohw + i] = at;
            }
        }
    }
}

static ki_status apool_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                               int n_out, const ki_exec *ex)
{
    apool_job j = { .a = state, .src = in[0].data };
    (void)n_in;
    if (apool_geom(j.a, &in[0].shape, &j.x, &j.oh, &j.ow, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    j.dst = out[0].data, j.ind = n_out > 1 ? out[1].data : NULL;
    const bool global_avg = !j.a->is_max && j.oh * j.ow == 1 && j.x.h * j.x.w > 0;
    ki_team_run(ex, global_avg ? global_avg_body : cells_body, &j);
    return KI_OK;
}

static void apool_destroy(void *state)
{
    free(state);
}

#define APOOL_OPS(sym, name, create_fn)                                                            \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .flags = KI_LAYER_TEAM,                                                                    \
        .create = create_fn,                                                                       \
        .shape = apool_shape,                                                                      \
        .forward = apool_forward,                                                                  \
        .destroy = apool_destroy,                                                                  \
    }

APOOL_OPS(ki_layer_adaptive_avg_pool2d, "nn.AdaptiveAvgPool2d", aavg_create);
APOOL_OPS(ki_layer_f_adaptive_avg_pool2d, "F.adaptive_avg_pool2d", aavg_create);
APOOL_OPS(ki_layer_adaptive_max_pool2d, "nn.AdaptiveMaxPool2d", amax_create);
APOOL_OPS(ki_layer_f_adaptive_max_pool2d, "F.adaptive_max_pool2d", amax_create);
