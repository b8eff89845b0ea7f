/* yolo_detect.c - models.yolo.Detect, the YOLOv5 detection head kept whole by pnnx's
 * `moduleop=models.yolo.Detect`.
 *
 * Inputs are the nl feature maps x_i (N, C_i, H_i, W_i). The operator carries the 1x1 convolutions
 * @m.i.weight (na*no, C_i, 1, 1) and @m.i.bias (na*no), @anchors (nl, na, 2) in grid cells, and
 * constants captured while tracing under @pnnx_NN names. Those are recognised by shape and
 * content, never by number: the strides (nl values, e.g. 8 16 32) are required; grids
 * (1, na, ny, nx, 2) holding the cell coordinates (optionally - 0.5) and anchor grids of the same
 * shape holding anchors * stride (other YOLOv5 versions) are checked and then recomputed for the
 * actual input size. Anything else is an error that names the attribute.
 *
 * For level i, anchor a and cell (gy, gx), with v = sigmoid(conv_i(x_i)) viewed as
 * (N, na, H, W, no) (models/yolo.py, v6/v7):
 *   xy = (2 v[0:2] + (gx, gy) - 0.5) * stride_i,  wh = (2 v[2:4])^2 * anchors[i][a] * stride_i,
 *   the rest is v unchanged. Output 0 is (N, sum_i na H_i W_i, no), levels in order. If the
 * operator has 1 + nl outputs, output 1 + i is the raw convolution (N, na, H_i, W_i, no), as the
 * non-export Detect returns it.
 *
 * The convolutions run as GEMMs of nn.Conv2d's 1x1 path (conv2d.h: its packing, our
 * micro-kernels, bias and the vectorised sigmoid in its epilogue), a chunk of cells at a time on
 * each thread into its workspace, and each chunk is decoded (transposed into the output rows,
 * the box formulas applied) while it is in the cache. State is immutable after create;
 * thread-safe. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "../core/cpu.h"
#include "../core/layer.h"
#include "../core/team.h"
#include "conv2d.h"
#include "shape_common.h"
#include "transpose.h"

#if KI_HAVE_X86
#include <immintrin.h>
#endif

#define YD_MAX_LEVELS 8

typedef struct yd_level {
    const float *w; /* (na*no, c) row-major */
    const float *b; /* (na*no) */
    int64_t c;
    float stride;
    ki_conv2d conv; /* the 1x1 convolution with its bias and, without raw outputs, the sigmoid */
} yd_level;

typedef struct yd_state {
    int nl, na, no;
    bool raw_outputs;
    ki_transpose_fn tr;   /* the fastest transpose for this CPU */
    const float *anchors; /* (nl, na, 2), in cells */
    yd_level lv[YD_MAX_LEVELS];
} yd_state;

static ki_status load_anchors(const ki_op_desc *op, yd_state *s, ki_error *err)
{
    const ki_attr *a = ki_op_attr(op, "anchors");
    if (!a) {
        return KI_FAIL(err, KI_ERR_FORMAT, "attribute @anchors is missing");
    }
    if (a->shape.ndim != 3 || a->shape.d[0] != s->nl || a->shape.d[2] != 2 || a->shape.d[1] < 1 ||
        a->shape.d[1] > 64 || a->numel != a->shape.d[0] * a->shape.d[1] * 2 || !a->data) {
        return KI_FAIL(err, KI_ERR_FORMAT, "@anchors must be (%d, na, 2) with data", s->nl);
    }
    s->na = (int)a->shape.d[1];
    s->anchors = a->data;
    return KI_OK;
}

static ki_status load_level(const ki_op_desc *op, yd_state *s, int i, ki_error *err)
{
    char wk[32], bk[32];
    snprintf(wk, sizeof wk, "m.%d.weight", i);
    snprintf(bk, sizeof bk, "m.%d.bias", i);
    const ki_attr *w = ki_op_attr(op, wk), *b = ki_op_attr(op, bk);
    if (!w || !b) {
        return KI_FAIL(err, KI_ERR_FORMAT, "attribute @%s is missing", w ? bk : wk);
    }
    const int64_t *d = w->shape.d;
    if (w->shape.ndim != 4 || d[2] != 1 || d[3] != 1 || d[0] < 1 || d[1] < 1 || !w->data ||
        w->numel != d[0] * d[1]) {
        return KI_FAIL(err, KI_ERR_FORMAT, "@%s must be a (out, in, 1, 1) weight with data", wk);
    }
    if (d[0] % s->na != 0 || d[0] / s->na < 5 || d[0] / s->na > (int64_t)1 << 20 ||
        (i > 0 && d[0] != (int64_t)s->na * s->no)) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "@%s has %lld output channels, not %d anchors x (5 + classes)", wk,
                       (long long)d[0], s->na);
    }
    s->no = (int)(d[0] / s->na);
    if (b->shape.ndim != 1 || b->shape.d[0] != d[0] || !b->data) {
        return KI_FAIL(err, KI_ERR_FORMAT, "@%s must be (%lld) with data", bk, (long long)d[0]);
    }
    s->lv[i].w = w->data;
    s->lv[i].b = b->data;
    s->lv[i].c = d[1];
    return KI_OK;
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-4 * (1.0 + fabs(b));
}

/* A (1, na, ny, nx, 2) tensor of cell coordinates (x, y) + off, for off 0 or -0.5. */
static bool is_grid(const ki_attr *a)
{
    const int64_t ny = a->shape.d[2], nx = a->shape.d[3];
    for (int k = 0; k < 2; k++) {
        double off = k == 0 ? 0.0 : -0.5;
        bool ok = true;
        for (int64_t j = 0; ok && j < a->numel / 2; j++) {
            int64_t cell = j % (ny * nx);
            ok = near(a->data[2 * j], (double)(cell % nx) + off) &&
                 near(a->data[2 * j + 1], (double)(cell / nx) + off);
        }
        if (ok) {
            return true;
        }
    }
    return false;
}

/* A (1, na, ny, nx, 2) tensor equal to anchors[l][a] * stride[l] everywhere, for some level l. */
static bool is_anchor_grid(const yd_state *s, const ki_attr *a)
{
    const int64_t cells = a->shape.d[2] * a->shape.d[3];
    for (int l = 0; l < s->nl; l++) {
        bool ok = true;
        for (int64_t j = 0; ok && j < a->numel / 2; j++) {
            const float *anc = s->anchors + ((int64_t)l * s->na + j / cells) * 2;
            ok = near(a->data[2 * j], (double)anc[0] * s->lv[l].stride) &&
                 near(a->data[2 * j + 1], (double)anc[1] * s->lv[l].stride);
        }
        if (ok) {
            return true;
        }
    }
    return false;
}

static bool is_strides(const yd_state *s, const ki_attr *a)
{
    if (a->shape.ndim > 1 || a->numel != s->nl || !a->data) {
        return false;
    }
    for (int i = 0; i < s->nl; i++) {
        float v = a->data[i];
        if (!(v >= 1.0f && v <= 4096.0f) || v != floorf(v) || (i > 0 && v <= a->data[i - 1])) {
            return false;
        }
    }
    return true;
}

static bool is_grid_shaped(const yd_state *s, const ki_attr *a)
{
    const int64_t *d = a->shape.d;
    return a->shape.ndim == 5 && d[0] == 1 && d[1] == s->na && d[4] == 2 && a->data &&
           a->numel == d[1] * d[2] * d[3] * 2;
}

static bool is_known_key(const char *k)
{
    return strcmp(k, "anchors") == 0 || strncmp(k, "m.", 2) == 0;
}

/* Finds the strides among the captured constants, then checks that every other one is a grid
 * or an anchor grid. */
static ki_status identify_constants(const ki_op_desc *op, yd_state *s, ki_error *err)
{
    const ki_attr *strides = NULL, *other = NULL;
    for (int i = 0; i < op->n_attrs; i++) {
        const ki_attr *a = &op->attrs[i];
        if (is_known_key(a->key)) {
            continue;
        }
        if (!is_strides(s, a)) {
            other = other ? other : a;
        } else if (strides) {
            return KI_FAIL(err, KI_ERR_FORMAT, "attributes @%s and @%s both look like the strides",
                           strides->key, a->key);
        } else {
            strides = a;
        }
    }
    if (!strides) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "no captured constant holds the %d strides (e.g. 8, 16, 32)%s%s", s->nl,
                       other ? "; unexpected attribute @" : "", other ? other->key : "");
    }
    for (int i = 0; i < s->nl; i++) {
        s->lv[i].stride = strides->data[i];
    }
    for (int i = 0; i < op->n_attrs; i++) {
        const ki_attr *a = &op->attrs[i];
        if (a == strides || is_known_key(a->key)) {
            continue;
        }
        if (!is_grid_shaped(s, a) || (!is_grid(a) && !is_anchor_grid(s, a))) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                           "unexpected attribute @%s: not the strides, a grid or an anchor grid",
                           a->key);
        }
    }
    return KI_OK;
}

static ki_status yd_create(const ki_op_desc *op, void **state, ki_error *err)
{
    int nl = op->n_inputs;
    if (nl < 1 || nl > YD_MAX_LEVELS || (op->n_outputs != 1 && op->n_outputs != 1 + nl)) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "expected 1..%d inputs and 1 or 1+inputs outputs, got %d and %d",
                       YD_MAX_LEVELS, op->n_inputs, op->n_outputs);
    }
    yd_state *s = calloc(1, sizeof *s);
    if (!s) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    s->nl = nl;
    s->raw_outputs = op->n_outputs > 1;
    s->tr = ki_transpose_best();
    ki_status st = load_anchors(op, s, err);
    for (int i = 0; i < nl && st == KI_OK; i++) {
        st = load_level(op, s, i, err);
    }
    if (st == KI_OK) {
        st = identify_constants(op, s, err);
    }
    if (st != KI_OK) {
        free(s);
        return st;
    }
    for (int i = 0; i < nl; i++) {
        ki_conv2d *c = &s->lv[i].conv;
        c->in_ch = s->lv[i].c, c->out_ch = (int64_t)s->na * s->no, c->groups = 1;
        c->kh = c->kw = c->sh = c->sw = c->dh = c->dw = 1;
        c->weight = s->lv[i].w;
        c->ep.bias = s->lv[i].b;
        /* the raw outputs need the values before the sigmoid; decoding then applies it */
        c->ep.act = (ki_act){ s->raw_outputs ? KI_ACT_NONE : KI_ACT_SIGMOID, 0, 0 };
        ki_conv2d_set_isa(c, ki_cpu_isa());
    }
    *state = s;
    return KI_OK;
}

static ki_status yd_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const yd_state *s = state;
    int64_t rows = 0;
    if (n_in != s->nl || n_out != (s->raw_outputs ? 1 + s->nl : 1)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "expected %d inputs", s->nl);
    }
    for (int i = 0; i < n_in; i++) {
        const int64_t *d = in[i].d;
        int64_t cells;
        if (in[i].kind != KI_KIND_TENSOR || in[i].ndim != 4 || d[1] != s->lv[i].c ||
            d[0] != in[0].d[0]) {
            return KI_FAIL(err, KI_ERR_SHAPE,
                           "input %d must be (N, %lld, H, W) with the batch of input 0", i,
                           (long long)s->lv[i].c);
        }
        if (!ki_ckd_mul_i64(&cells, d[2], d[3]) || !ki_ckd_mul_i64(&cells, cells, s->na) ||
            !ki_ckd_add_i64(&rows, rows, cells) || cells > INT32_MAX || d[1] > INT32_MAX) {
            return KI_FAIL(err, KI_ERR_LIMIT, "input %d is too large", i);
        }
        ki_conv2d_geom g; /* the level's 1x1 convolution accepts it (its size limits) */
        ki_status st = ki_conv2d_geom_make(&s->lv[i].conv, &in[i], &g, err);
        if (st != KI_OK) {
            return st;
        }
        if (s->raw_outputs) {
            int64_t rd[5] = { d[0], s->na, d[2], d[3], s->no };
            out[1 + i] = ki_shape_make(5, rd);
        }
    }
    int64_t od[3] = { in[0].d[0], rows, s->no };
    out[0] = ki_shape_make(3, od);
    return ki_shape_check(&out[0], err);
}

/* The levels' convolution geometries for input shapes in (into g, one image each); false when
 * a shape is not one shape() accepted. */
static bool level_geoms(const yd_state *s, const ki_shape *in, int n_in, ki_conv2d_geom *g)
{
    for (int i = 0; i < n_in; i++) {
        if (ki_conv2d_geom_make(&s->lv[i].conv, &in[i], &g[i], NULL) != KI_OK) {
            return false;
        }
        g[i].in.n = 1;
    }
    return true;
}

/* The convolutions run a chunk of cells at a time on each thread, as GEMMs of all na*no output
 * channels by the chunk's columns (packed from the input planes as the 1x1 path packs them), into
 * a chunk of z that the decoding then reads from the cache, all in one team run: whole-level z
 * took the largest level's na*no x H*W (6.5 MB for yolov5s at 640x640) and a convolution and a
 * decoding region per level (yolov5s's head on two threads 4.95 -> 4.76 ms; docs/performance.md).
 * A chunk is up to YD_PANELS GEMM panels, fewer when its packed columns and its z would take
 * more than half of L2. The tiles and their sums are the 1x1 path's, so the same bits. */
#define YD_PANELS 4

/* A chunk for state s and inputs in: its panels (*np: the most that keep (K + M + no) * NR
 * floats per panel, for the widest K, within half of L2; at least one) and the floats of a
 * thread's packed columns (*packed); returns the bytes of those, its z and an anchor's rows
 * (no x the chunk's columns), or 0 when they do not fit a size_t. */
static size_t chunk_plan(const yd_state *s, const ki_shape *in, int n_in, int64_t *np,
                         size_t *packed)
{
    const int64_t m = (int64_t)s->na * s->no;
    int64_t kmax = 0, per, pf, zf;
    for (int i = 0; i < n_in; i++) {
        kmax = in[i].d[1] > kmax ? in[i].d[1] : kmax;
    }
    *np = 1;
    if (ki_ckd_add_i64(&per, kmax, m + s->no) &&
        ki_ckd_mul_i64(&per, per, KI_GEMM_NR * (int64_t)sizeof(float))) {
        const int64_t fit = (int64_t)(ki_cpu_get()->l2 / 2) / per;
        *np = fit < 1 ? 1 : fit > YD_PANELS ? YD_PANELS : fit;
    }
    if (!ki_gemm_packed_floats(kmax, *np * KI_GEMM_NR, &pf) ||
        !ki_ckd_mul_i64(&zf, m + s->no, *np * KI_GEMM_NR) ||
        !ki_ckd_add_i64(&zf, zf, (pf + 15) / 16 * 16) || zf > INT64_MAX / 4) {
        return 0;
    }
    *packed = (size_t)(pf + 15) / 16 * 16;
    return (size_t)zf * sizeof(float);
}

/* Per thread: the chunk's packed columns, then its z (na*no x the chunk's columns), then the
 * rows of one anchor's boxes as decode_chunk builds them. */
static size_t yd_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                           int n_out, int n_threads)
{
    const yd_state *s = state;
    (void)out, (void)n_out, (void)n_threads;
    ki_conv2d_geom g[YD_MAX_LEVELS];
    int64_t np;
    size_t packed;
    if (!level_geoms(s, in, n_in, g)) {
        return 0;
    }
    return (chunk_plan(s, in, n_in, &np, &packed) + 63) / 64 * 64;
}

/* What a run's threads share. */
typedef struct yd_job {
    const yd_state *s;
    const ki_tensor *in;
    ki_tensor *out;
    const ki_exec *ex;
    ki_conv2d_geom g[YD_MAX_LEVELS];
    int64_t row0[YD_MAX_LEVELS];      /* each level's first row of output 0 in an image */
    int64_t first[YD_MAX_LEVELS + 1]; /* each level's first chunk in an image; first[nl]: all */
    int64_t cells;                    /* cells of a chunk */
    size_t packed;                    /* floats of a thread's packed columns */
} yd_job;

/* d[0..n) = t[0..n): the head's rows, written once and read by the caller's next step at the
 * earliest, go past the caches (x86's non-temporal stores, SSE2 and so every x86-64 CPU): a
 * store that missed the cache would first read the line it fills. */
static void stream_copy(float *d, const float *t, int64_t n)
{
#if KI_HAVE_X86
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(d + i) & 15) != 0; i++) {
        d[i] = t[i];
    }
    for (; i + 16 <= n; i += 16) {
        _mm_stream_ps(d + i, _mm_loadu_ps(t + i));
        _mm_stream_ps(d + i + 4, _mm_loadu_ps(t + i + 4));
        _mm_stream_ps(d + i + 8, _mm_loadu_ps(t + i + 8));
        _mm_stream_ps(d + i + 12, _mm_loadu_ps(t + i + 12));
    }
    for (; i < n; i++) {
        d[i] = t[i];
    }
    _mm_sfence();
#else
    memcpy(d, t, (size_t)n * sizeof *d);
#endif
}

/* Decodes the chunk of cells c0 .. c0 + nc - 1 of level `level` of one image: z is the
 * convolution (na*no rows of ldz), with the bias and (unless raw) the sigmoid applied; y gets
 * the image's output rows. Per anchor the chunk is transposed into rows in t (from L2 to L1),
 * then the sigmoid (raw outputs only) and the box formulas, and the rows are copied to y, which
 * they fill in one run (stream_copy; written in place, yolov5s's head took 9.0 ms on one thread
 * where it takes 8.5, docs/performance.md). */
static void decode_chunk(const yd_state *s, int level, int64_t h, int64_t w, const float *z,
                         int64_t ldz, int64_t c0, int64_t nc, float *t, float *y)
{
    const int no = s->no;
    const int64_t hw = h * w;
    const float stride = s->lv[level].stride;
    const bool sigmoid_here = s->raw_outputs; /* else the convolution's epilogue applied it */
    for (int64_t a = 0; a < s->na; a++) {
        const float *anc = s->anchors + ((int64_t)level * s->na + a) * 2;
        s->tr(z + a * no * ldz, ldz, no, nc, t, no);
        for (int64_t i = 0; sigmoid_here && i < nc * no; i++) {
            t[i] = 1.0f / (1.0f + expf(-t[i]));
        }
        /* models/yolo.py: xy = (2v + grid) * stride with grid = cell - 0.5;
         * wh = (2v)^2 * anchor_grid with anchor_grid = anchor * stride */
        const float aw = anc[0] * stride, ah = anc[1] * stride;
        int64_t gx = c0 % w, gy = c0 / w;
        for (int64_t j = 0; j < nc; j++) {
            float *r = t + j * no;
            r[0] = (r[0] * 2.0f + ((float)gx - 0.5f)) * stride;
            r[1] = (r[1] * 2.0f + ((float)gy - 0.5f)) * stride;
            const float tw = r[2] * 2.0f, th = r[3] * 2.0f;
            r[2] = tw * tw * aw;
            r[3] = th * th * ah;
            if (++gx == w) {
                gx = 0, gy++;
            }
        }
        stream_copy(y + (a * hw + c0) * no, t, nc * no);
    }
}

/* Chunk q of an image's chunks (over the levels in order) of image n: its GEMM into this
 * thread's z, then the raw outputs (if any) and the decoding. */
static void run_chunk(const yd_job *j, int64_t n, int64_t q, float *packed, float *z)
{
    const yd_state *s = j->s;
    int i = 0;
    while (q >= j->first[i + 1]) {
        i++;
    }
    const ki_conv2d *c = &s->lv[i].conv;
    const ki_conv2d_geom *g = &j->g[i];
    const int64_t k = c->in_ch, hw = g->oh * g->ow, m = c->out_ch, no = s->no;
    const int64_t c0 = (q - j->first[i]) * j->cells, nc = hw - c0 < j->cells ? hw - c0 : j->cells;
    const int64_t np = (nc + KI_GEMM_NR - 1) / KI_GEMM_NR, ldz = np * KI_GEMM_NR;
    const float *x = j->in[i].data + n * k * hw;
    for (int64_t p = 0; p < np; p++) {
        const int64_t nr = nc - p * KI_GEMM_NR < KI_GEMM_NR ? nc - p * KI_GEMM_NR : KI_GEMM_NR;
        ki_conv2d_pack_cols(c, g, false, x, c0 + p * KI_GEMM_NR, nr, k, KI_GEMM_NR,
                            packed + p * KI_GEMM_NR * k);
    }
    const ki_gemm_args ga = { .m = m,
                              .n = nc,
                              .k = k,
                              .a = c->weight,
                              .lda = k,
                              .bp = packed,
                              .c = z,
                              .ldc = ldz,
                              .ep = &c->ep,
                              .epf = c->epf,
                              .ch0 = 0,
                              .uk = c->uk };
    ki_gemm_panels(&ga, 0, np, packed);
    if (s->raw_outputs) { /* the raw convolution (bias included) as (na, hw, no) */
        float *raw = j->out[1 + i].data + n * s->na * hw * no;
        for (int64_t a = 0; a < s->na; a++) {
            s->tr(z + a * no * ldz, ldz, no, nc, raw + (a * hw + c0) * no, no);
        }
    }
    decode_chunk(s, i, g->oh, g->ow, z, ldz, c0, nc, z + m * ldz,
                 j->out[0].data + (n * j->out[0].shape.d[1] + j->row0[i]) * no);
}

/* The team's chunks of every image (ki_share: each thread its run from the front, then what is
 * left of the others' from their back). */
static void yd_body(void *arg, const ki_part *pt)
{
    const yd_job *j = arg;
    const int nl = j->s->nl;
    float *packed = ki_exec_slice(j->ex, pt->tid), *z = packed + j->packed;
    const int64_t per = j->first[nl];
    ki_share_begin(pt, j->in[0].shape.d[0] * per);
    for (int64_t t = ki_share_take(pt->share, pt->tid); t >= 0;
         t = ki_share_take(pt->share, pt->tid)) {
        run_chunk(j, t / per, t % per, packed, z);
    }
}

static ki_status yd_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                            int n_out, const ki_exec *ex)
{
    const yd_state *s = state;
    (void)n_out;
    yd_job j = { .s = s, .in = in, .out = out, .ex = ex };
    ki_shape shapes[YD_MAX_LEVELS];
    for (int i = 0; i < n_in; i++) {
        shapes[i] = in[i].shape;
    }
    if (!level_geoms(s, shapes, n_in, j.g)) {
        return KI_ERR_SHAPE;
    }
    int64_t np;
    const size_t bytes = chunk_plan(s, shapes, n_in, &np, &j.packed);
    if (bytes == 0 || bytes > ex->ws_per_thread) {
        return KI_ERR_INTERNAL;
    }
    j.cells = np * KI_GEMM_NR;
    int64_t row = 0;
    j.first[0] = 0;
    for (int i = 0; i < n_in; i++) {
        const int64_t hw = j.g[i].oh * j.g[i].ow;
        j.row0[i] = row;
        row += s->na * hw;
        j.first[i + 1] = j.first[i] + (hw + j.cells - 1) / j.cells;
    }
    if (j.first[n_in] > 0 && in[0].shape.d[0] > 0) {
        ki_team_run(ex, yd_body, &j);
    }
    return KI_OK;
}

const ki_layer_ops ki_layer_yolo_detect = {
    .type = "models.yolo.Detect",
    .flags = KI_LAYER_TEAM, /* yd_forward only reads outside its ki_team_run */
    .create = yd_create,
    .shape = yd_shape,
    .workspace = yd_workspace,
    .forward = yd_forward,
    .destroy = free,
};
