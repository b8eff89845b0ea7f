/* matmul.c - torch.matmul (1-D, 2-D and batched with broadcast batch dimensions, as PyTorch),
 * torch.bmm, and torch.mm / torch.mv (its 2-D x 2-D and 2-D x 1-D cases, checked as such). One
 * product per batch entry on kinfer's GEMM at the CPU's level (ki_sgemm: the right operand packed
 * into the workspace, the team splitting the tiles, so the result does not depend on the thread
 * count); when the right operand has no batch, the batch folds into the rows of a single product.
 */
#include <stdlib.h>
#include <string.h>

#include "../core/cpu.h"
#include "conv_common.h"
#include "gemm.h"

typedef struct matmul {
    int ia, ib; /* input index of the left and right operand */
    bool bmm;
    ki_gemm_ukernel uk; /* the level's micro-kernel */
} matmul;

/* The product's view of two operand shapes. A 1-D left operand is a (1,k) row and a 1-D right
 * operand a (k,1) column; the added dimension is dropped from the output as PyTorch does. */
typedef struct mm_geom {
    int nb;                                   /* batch dims of the output */
    int64_t batch[KI_MAX_DIMS];               /* output batch dims */
    int64_t sa[KI_MAX_DIMS], sb[KI_MAX_DIMS]; /* element strides per batch dim, 0 = broadcast */
    int64_t m, k, n, nbatch;
} mm_geom;

/* second: the key of the right operand ($other, $mat2, $vec). */
static ki_status mm_create_common(const ki_op_desc *op, bool bmm, const char *second, void **state,
                                  ki_error *err)
{
    ki_status st = ki_cv_check_io(op, 2, 1, err);
    if (st != KI_OK) {
        return st;
    }
    matmul *m = calloc(1, sizeof *m);
    if (!m) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    int a = ki_op_input_index(op, "input"), b = ki_op_input_index(op, second);
    /* Unnamed inputs are positional: whichever slot is not named takes the other one. */
    m->ia = a >= 0 ? a : (b == 0 ? 1 : 0);
    m->ib = b >= 0 ? b : 1 - m->ia;
    m->bmm = bmm;
    m->uk = ki_gemm_ukernel_for(ki_cpu_isa());
    *state = m;
    return KI_OK;
}

static ki_status matmul_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return mm_create_common(op, false, "other", state, err);
}

static ki_status bmm_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return mm_create_common(op, true, "mat2", state, err);
}

static ki_status mm_create(const ki_op_desc *op, void **state, ki_error *err)
{
    return mm_create_common(op, false, strcmp(op->type, "torch.mv") == 0 ? "vec" : "mat2", state,
                            err);
}

/* Right-aligned broadcast of the batch dims (all but the last two of each padded operand). */
static ki_status mm_batch(const ki_shape *a, const ki_shape *b, mm_geom *g, ki_error *err)
{
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nb = b->ndim > 2 ? b->ndim - 2 : 0;
    int64_t stra = g->m * g->k, strb = g->k * g->n;
    g->nb = na > nb ? na : nb;
    g->nbatch = 1;
    for (int i = g->nb - 1; i >= 0; i--) {
        int ja = i - (g->nb - na), jb = i - (g->nb - nb);
        int64_t da = ja >= 0 ? a->d[ja] : 1, db = jb >= 0 ? b->d[jb] : 1;
        if (da != db && da != 1 && db != 1) {
            return KI_FAIL(err, KI_ERR_SHAPE, "batch dimensions %lld and %lld do not broadcast",
                           (long long)da, (long long)db);
        }
        g->batch[i] = da == 1 ? db : da;
        g->sa[i] = da == 1 ? 0 : stra;
        g->sb[i] = db == 1 ? 0 : strb;
        stra *= da, strb *= db;
        if (!ki_ckd_mul_i64(&g->nbatch, g->nbatch, g->batch[i])) {
            return KI_FAIL(err, KI_ERR_LIMIT, "batch too large");
        }
    }
    return KI_OK;
}

static ki_status mm_geom_make(const matmul *mm, const ki_shape *a, const ki_shape *b, mm_geom *g,
                              ki_shape *out, ki_error *err)
{
    char sa[96], sb[96];
    if (a->kind != KI_KIND_TENSOR || b->kind != KI_KIND_TENSOR || a->ndim < 1 || b->ndim < 1 ||
        (mm->bmm && (a->ndim != 3 || b->ndim != 3 || a->d[0] != b->d[0]))) {
        return KI_FAIL(err, KI_ERR_SHAPE, "cannot multiply %s by %s",
                       ki_shape_str(a, sa, sizeof sa), ki_shape_str(b, sb, sizeof sb));
    }
    g->m = a->ndim == 1 ? 1 : a->d[a->ndim - 2];
    g->k = a->d[a->ndim - 1];
    g->n = b->ndim == 1 ? 1 : b->d[b->ndim - 1];
    if (b->d[b->ndim == 1 ? 0 : b->ndim - 2] != g->k) {
        return KI_FAIL(err, KI_ERR_SHAPE, "cannot multiply %s by %s: inner sizes differ",
                       ki_shape_str(a, sa, sizeof sa), ki_shape_str(b, sb, sizeof sb));
    }
    ki_status st = mm_batch(a, b, g, err);
    if (st != KI_OK) {
        return st;
    }
    int64_t d[KI_MAX_DIMS + 2];
    int nd = g->nb;
    memcpy(d, g->batch, (size_t)g->nb * sizeof *d);
    if (a->ndim > 1) {
        d[nd++] = g->m;
    }
    if (b->ndim > 1) {
        d[nd++] = g->n;
    }
    if (nd > KI_MAX_DIMS) {
        return KI_FAIL(err, KI_ERR_LIMIT, "result has more than %d dimensions", KI_MAX_DIMS);
    }
    *out = ki_shape_make(nd, d);
    st = ki_shape_check(out, err);
    if (st == KI_OK && (!ki_cv_blas_ok(g->m) || !ki_cv_blas_ok(g->k) || !ki_cv_blas_ok(g->n))) {
        st = KI_FAIL(err, KI_ERR_LIMIT, "matrices too large");
    }
    return st;
}

static ki_status matmul_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out,
                              int n_out, ki_error *err)
{
    const matmul *mm = state;
    mm_geom g;
    if (n_in != 2 || n_out != 1) {
        return KI_FAIL(err, KI_ERR_INTERNAL, "wrong input/output count");
    }
    return mm_geom_make(mm, &in[mm->ia], &in[mm->ib], &g, out, err);
}

/* torch.mm: two matrices; torch.mv: a matrix and a vector. */
static ki_status mm_shape(const void *state, const ki_shape *in, int n_in, ki_shape *out, int n_out,
                          ki_error *err)
{
    const matmul *mm = state;
    int want_b = 2;
    if (n_in == 2 && mm->ib < n_in && in[mm->ib].ndim == 1) {
        want_b = 1; /* torch.mv */
    }
    if (n_in != 2 || in[mm->ia].ndim != 2 || in[mm->ib].ndim != want_b) {
        return KI_FAIL(err, KI_ERR_SHAPE, "expects a matrix times a matrix (mm) or a vector (mv)");
    }
    return matmul_shape(state, in, n_in, out, n_out, err);
}

/* Scratch for one product (ki_sgemm's packed right operand), split over the threads. */
static size_t matmul_workspace(const void *state, const ki_shape *in, int n_in, const ki_shape *out,
                               int n_out, int n_threads)
{
    const matmul *mm = state;
    mm_geom g;
    ki_shape o;
    int64_t floats;
    (void)n_in, (void)out, (void)n_out;
    if (mm_geom_make(mm, &in[mm->ia], &in[mm->ib], &g, &o, NULL) != KI_OK ||
        !ki_sgemm_ws_floats(g.m, g.n, g.k, false, &floats) ||
        (uint64_t)floats > SIZE_MAX / sizeof(float) - 64) {
        return SIZE_MAX; /* more than can be planned: the session refuses the shapes */
    }
    const size_t nt = n_threads > 0 ? (size_t)n_threads : 1;
    return ((size_t)floats * sizeof(float) / nt + 64) / 64 * 64;
}

static void gemm(const matmul *mm, const float *a, const float *b, float *c, int64_t m, int64_t k,
                 int64_t n, const ki_exec *ex)
{
    const ki_sgemm_args s = {
        .m = m, .n = n, .k = k, .a = a, .lda = k, .b = b, .ldb = n, .c = c, .ldc = n
    };
    ki_sgemm(&s, mm->uk, ex->workspace, ex->n_threads);
}

static ki_status matmul_forward(const void *state, const ki_tensor *in, int n_in, ki_tensor *out,
                                int n_out, const ki_exec *ex)
{
    const matmul *mm = state;
    mm_geom g;
    ki_shape o;
    (void)n_in, (void)n_out;
    if (mm_geom_make(mm, &in[mm->ia].shape, &in[mm->ib].shape, &g, &o, NULL) != KI_OK) {
        return KI_ERR_SHAPE;
    }
    const float *a = in[mm->ia].data, *b = in[mm->ib].data;
    float *c = out[0].data;
    bool b_shared = true, a_dense = true;
    for (int i = 0; i < g.nb; i++) {
        b_shared = b_shared && g.sb[i] == 0;
        a_dense = a_dense && (g.sa[i] != 0 || g.batch[i] == 1);
    }
    if (g.m * g.n == 0 || g.nbatch == 0) {
        return KI_OK;
    }
    /* m * nbatch <= the output's element count here, so it cannot overflow. */
    if (b_shared && a_dense && ki_cv_blas_ok(g.m * g.nbatch)) {
        gemm(mm, a, b, c, g.m * g.nbatch, g.k, g.n, ex);
        return KI_OK;
    }
    for (int64_t q = 0; q < g.nbatch; q++) {
        int64_t oa = 0, ob = 0, r = q;
        for (int i = g.nb - 1; i >= 0; i--) {
            int64_t idx = r % g.batch[i];
            r /= g.batch[i];
            oa += idx * g.sa[i], ob += idx * g.sb[i];
        }
        gemm(mm, a + oa, b + ob, c + q * g.m * g.n, g.m, g.k, g.n, ex);
    }
    return KI_OK;
}

static void matmul_destroy(void *state)
{
    free(state);
}

const ki_layer_ops ki_layer_matmul = {
    .type = "torch.matmul",
    .create = matmul_create,
    .shape = matmul_shape,
    .workspace = matmul_workspace,
    .forward = matmul_forward,
    .destroy = matmul_destroy,
};

const ki_layer_ops ki_layer_bmm = {
    .type = "torch.bmm",
    .create = bmm_create,
    .shape = matmul_shape,
    .workspace = matmul_workspace,
    .forward = matmul_forward,
    .destroy = matmul_destroy,
};

const ki_layer_ops ki_layer_mm = {
    .type = "torch.mm",
    .create = mm_create,
    .shape = mm_shape,
    .workspace = matmul_workspace,
    .forward = matmul_forward,
    .destroy = matmul_destroy,
};

const ki_layer_ops ki_layer_mv = {
    .type = "torch.mv",
    .create = mm_create,
    .shape = mm_shape,
    .workspace = matmul_workspace,
    .forward = matmul_forward,
    .destroy = matmul_destroy,
};
