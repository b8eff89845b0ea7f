/* test_conv_util.h - helpers for the conv/pool/linear/matmul unit tests: build ki_op_desc by
 * hand, run a layer through the registry, a seeded PRNG and tolerant comparison. */
#ifndef TEST_CONV_UTIL_H
#define TEST_CONV_UTIL_H

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../layers/registry.h"

#define TOP_MAX_PARAMS 16
#define TOP_MAX_ATTRS  4
#define TOP_MAX_IO     4

typedef struct top {
    ki_param params[TOP_MAX_PARAMS];
    int64_t ints[TOP_MAX_PARAMS][4];
    double floats[TOP_MAX_PARAMS][4];
    ki_attr attrs[TOP_MAX_ATTRS];
    const char *in_keys[TOP_MAX_IO];
    const char *names[TOP_MAX_IO];
    ki_op_desc d;
} top;

static inline void top_init(top *t, const char *type, int n_in, int n_out)
{
    memset(t, 0, sizeof *t);
    t->d.type = type;
    t->d.name = "t";
    t->d.file = "test.param";
    t->d.line = 1;
    t->d.n_inputs = n_in;
    t->d.n_outputs = n_out;
    t->d.input_keys = t->in_keys;
    t->d.input_names = t->names;
    t->d.output_names = t->names;
    t->d.params = t->params;
    t->d.attrs = t->attrs;
}

static inline ki_param *top_param(top *t, const char *key, const char *raw, ki_param_kind kind)
{
    ki_param *p = &t->params[t->d.n_params++];
    p->key = key;
    p->raw = raw;
    p->kind = kind;
    p->s = raw;
    return p;
}

static inline void top_int(top *t, const char *key, int64_t v)
{
    ki_param *p = top_param(t, key, "int", KI_PARAM_INT);
    p->i = v;
    p->f = (double)v;
}

static inline void top_bool(top *t, const char *key, int v)
{
    top_param(t, key, v ? "True" : "False", KI_PARAM_BOOL)->i = v;
}

static inline void top_str(top *t, const char *key, const char *s)
{
    top_param(t, key, s, KI_PARAM_STRING);
}

static inline void top_none(top *t, const char *key)
{
    top_param(t, key, "None", KI_PARAM_NONE);
}

static inline void top_ints(top *t, const char *key, int n, const int64_t *v)
{
    int k = t->d.n_params;
    ki_param *p = top_param(t, key, "(ints)", KI_PARAM_INTS);
    for (int i = 0; i < n; i++) {
        t->ints[k][i] = v[i];
        t->floats[k][i] = (double)v[i];
    }
    p->n = n;
    p->ints = t->ints[k];
    p->floats = t->floats[k];
}

static inline void top_ints2(top *t, const char *key, int64_t a, int64_t b)
{
    int64_t v[2] = { a, b };
    top_ints(t, key, 2, v);
}

static inline void top_attr(top *t, const char *key, int ndim, const int64_t *d, const float *data)
{
    ki_attr *a = &t->attrs[t->d.n_attrs++];
    a->key = key;
    a->shape = ki_shape_make(ndim, d);
    a->dtype = KI_DT_F32;
    a->data = data;
    a->numel = ki_shape_count(&a->shape);
}

/* Creates the layer, or returns the failing status (message in *err). */
static inline ki_status top_create(const top *t, const ki_layer_ops **ops, void **st, ki_error *err)
{
    *ops = ki_registry_find(t->d.type);
    if (!*ops) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "no layer %s", t->d.type);
    }
    return (*ops)->create(&t->d, st, err);
}

#ifdef fail_msg /* with cmocka */
/* Creating the layer of t must fail with status want and a message containing needle. */
static inline void top_expect_create_fail(const top *t, ki_status want, const char *needle)
{
    const ki_layer_ops *ops;
    void *st = NULL;
    ki_error err = { 0 };
    ki_status s = top_create(t, &ops, &st, &err);
    if (s == KI_OK) {
        ops->destroy(st);
        fail_msg("%s: expected a failure mentioning '%s'", t->d.type, needle);
    }
    if (s != want || !strstr(err.msg, needle)) {
        fail_msg("%s: status %d, message '%s'; expected %d and '%s'", t->d.type, (int)s, err.msg,
                 (int)want, needle);
    }
}
#endif

/* Runs shape + forward with n_threads; out[i].data is allocated here (free with free()). */
static inline ki_status top_run(const ki_layer_ops *ops, const void *st, const ki_tensor *in,
                                int n_in, ki_tensor *out, int n_out, int n_threads, ki_error *err)
{
    ki_shape ins[TOP_MAX_IO], outs[TOP_MAX_IO];
    for (int i = 0; i < n_in; i++) {
        ins[i] = in[i].shape;
    }
    ki_status s = ops->shape(st, ins, n_in, outs, n_out, err);
    if (s != KI_OK) {
        return s;
    }
    for (int i = 0; i < n_out; i++) {
        out[i].shape = outs[i];
        out[i].data = malloc((size_t)ki_shape_count(&outs[i]) * sizeof(float) + 4);
    }
    size_t ws = ops->workspace ? ops->workspace(st, ins, n_in, outs, n_out, n_threads) : 0;
    ki_exec ex = { .n_threads = n_threads, .ws_per_thread = ws };
    ex.workspace = ws ? malloc(ws * (size_t)n_threads) : NULL;
    omp_set_num_threads(n_threads);
    s = ops->forward(st, in, n_in, out, n_out, &ex);
    free(ex.workspace);
    return s;
}

/* xorshift64*: deterministic across platforms. */
static inline uint64_t trng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static inline int64_t trng_int(uint64_t *s, int64_t lo, int64_t hi)
{
    return lo + (int64_t)(trng_next(s) % (uint64_t)(hi - lo + 1));
}

static inline void trng_fill(uint64_t *s, float *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (float)((double)(trng_next(s) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
}

/* Max violation of |a-b| <= atol + rtol*|b|; returns the index of the worst or -1. */
static inline long tclose(const float *a, const float *b, size_t n, float atol, float rtol)
{
    long worst = -1;
    double wv = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) - (atol + rtol * fabs((double)b[i]));
        if (d > wv || (isnan(a[i]) != isnan(b[i]))) {
            wv = d > wv ? d : 1e30;
            worst = (long)i;
        }
    }
    return worst;
}

/* An nn.Conv2d or nn.ConvTranspose2d op with default stride, padding and dilation; the weight is
 * (out, in/groups, kh, kw) for a convolution and (in, out/groups, kh, kw) for a transposed one. */
static inline void top_conv_like(top *t, const char *type, int64_t in, int64_t out, int64_t kh,
                                 int64_t kw, int64_t groups, const float *w, const float *b)
{
    bool transposed = strcmp(type, "nn.ConvTranspose2d") == 0;
    int64_t wd[4] = { transposed ? in : out, (transposed ? out : in) / groups, kh, kw };
    top_init(t, type, 1, 1);
    top_int(t, "in_channels", in);
    top_int(t, "out_channels", out);
    top_ints2(t, "kernel_size", kh, kw);
    top_int(t, "groups", groups);
    top_bool(t, "bias", b != NULL);
    top_attr(t, "weight", 4, wd, w);
    if (b) {
        top_attr(t, "bias", 1, &out, b);
    }
}

#ifdef KI_CONV2D_H /* with layers/conv2d.h */
/* A random geometry for the Winograd transform tests, drawn from *s: F(4x4) for odd seeds, else
 * F(2x2); an h x w input (w at most max_w) padded by 0-2 on each side; its tiles; and the tile
 * columns [tb, te) a call covers (n of them): from the second panel for every third seed, one
 * panel only for some. False when the output is empty. */
typedef struct wino_case {
    int64_t m, npos, h, w, oh, ow, tb, te, n;
    ki_wino_tiles tg;
} wino_case;

static inline bool wino_random_case(uint64_t seed, uint64_t *s, int64_t max_w, wino_case *c)
{
    const int64_t m = seed % 2 ? 4 : 2;
    c->m = m, c->npos = (m + 2) * (m + 2);
    c->h = trng_int(s, 1, 40);
    c->w = trng_int(s, 1, max_w);
    const int64_t pt = trng_int(s, 0, 2), pl = trng_int(s, 0, 2);
    const int64_t pb = trng_int(s, 0, 2), pr = trng_int(s, 0, 2);
    c->oh = c->h + pt + pb - 2, c->ow = c->w + pl + pr - 2;
    if (c->oh < 1 || c->ow < 1) {
        return false;
    }
    c->tg = (ki_wino_tiles){ (c->ow + m - 1) / m, 0, pt, pl, c->oh, c->ow, m };
    c->tg.tiles = c->tg.ntx * ((c->oh + m - 1) / m);
    const int64_t tp = (c->tg.tiles + KI_GEMM_NR - 1) / KI_GEMM_NR * KI_GEMM_NR;
    c->tb = tp > KI_GEMM_NR && seed % 3 == 0 ? KI_GEMM_NR : 0;
    /* sometimes one panel only (the blocked runs' calls), with a guard after it */
    c->te = seed % 4 == 2 && tp - c->tb > KI_GEMM_NR ? c->tb + KI_GEMM_NR : tp;
    c->n = c->te - c->tb;
    return true;
}
#endif

#endif
