/* bench_flops.c - the arithmetic of a step for `kinfer bench --profile` and `kinfer info`:
 * 2 x the multiply-adds of the operators whose time is arithmetic (convolutions of every rank,
 * transposed ones, nn.Linear, matmul, multi-head attention, recurrent layers and YOLOv5's Detect
 * head with its 1x1 convolutions), from the weights' and the tensors' shapes. Other operators
 * count 0: their time is memory traffic. */
#include <stdio.h>
#include <string.h>

#include "../layers/attention.h"
#include "bench.h"

/* Whether every dim of s is known (an undeclared or '?' one is negative). */
static bool known(const ki_shape *s)
{
    if (s->ndim < 0) {
        return false;
    }
    for (int k = 0; k < s->ndim; k++) {
        if (s->d[k] < 0) {
            return false;
        }
    }
    return true;
}

/* The product of s's dims from `from` on. */
static double prod_from(const ki_shape *s, int from)
{
    double p = 1.0;
    for (int k = from; k < s->ndim; k++) {
        p *= (double)s->d[k];
    }
    return p;
}

static bool type_in(const char *type, const char *const *list)
{
    for (; *list; list++) {
        if (strcmp(type, *list) == 0) {
            return true;
        }
    }
    return false;
}

/* A convolution with weight w (out, in / groups, k...): prod(w's dims from 1) multiply-adds per
 * output value. (nn.Conv2d's fused steps, whose output is a fused layer's, are counted by the
 * layer itself: ki_session_step_macs.) */
static double conv_macs(const ki_attr *w, const ki_tensor *out)
{
    return known(&out[0].shape) ? prod_from(&w->shape, 1) * prod_from(&out[0].shape, 0) : -1;
}

/* (length, batch) of a multi-head attention input: (L, N, E), batch_first (N, L, E), or an
 * unbatched (L, E); false for other ranks. */
static bool seq_dims(const ki_shape *s, bool batch_first, double *len, double *n)
{
    if (s->ndim == 2) {
        *len = (double)s->d[0], *n = 1.0;
        return true;
    }
    if (s->ndim != 3) {
        return false;
    }
    *len = (double)(batch_first ? s->d[1] : s->d[0]);
    *n = (double)(batch_first ? s->d[0] : s->d[1]);
    return true;
}

/* nn.MultiheadAttention: the query's L tokens and the key's (= value's) S tokens projected
 * (E x E, E x kdim, E x vdim), the scores Q K^T and their product with V (L x S x E each), and
 * the output projection (E x E), per batch item; the inputs as the layer takes them
 * (ki_mha_inputs). */
static double mha_macs(const ki_op_desc *d, const ki_tensor *in, int n_in)
{
    int64_t e = 0, kd = 0, vd = 0;
    bool bf = false;
    if (ki_op_get_int(d, "embed_dim", 0, &e, NULL) != KI_OK || e <= 0 ||
        ki_op_get_int(d, "kdim", e, &kd, NULL) != KI_OK ||
        ki_op_get_int(d, "vdim", e, &vd, NULL) != KI_OK ||
        ki_op_get_bool(d, "batch_first", false, &bf, NULL) != KI_OK) {
        return 0;
    }
    int idx[3];
    if (ki_mha_inputs(d, idx) == 0 || idx[1] >= n_in) {
        return 0;
    }
    const ki_shape *q = &in[idx[0]].shape, *k = &in[idx[1]].shape;
    double l, n, s, nk;
    if (!known(q) || !known(k)) {
        return -1;
    }
    if (!seq_dims(q, bf, &l, &n) || !seq_dims(k, bf, &s, &nk)) {
        return 0;
    }
    const double ed = (double)e;
    return n * (2.0 * l * ed * ed + s * ed * (double)(kd + vd) + 2.0 * l * s * ed);
}

/* nn.RNN / nn.LSTM / nn.GRU: every weight matrix (weight_ih_l*, weight_hh_l*, weight_hr_l*, each
 * direction's) multiplies one vector per time step and batch item; those are the input's values
 * over its last dim (input_size). */
static double rnn_macs(const ki_op_desc *d, const ki_tensor *in, int n_in)
{
    const ki_shape *x = n_in > 0 ? &in[0].shape : NULL;
    if (x && !known(x)) {
        return -1;
    }
    if (!x || x->ndim < 2 || x->d[x->ndim - 1] <= 0) {
        return 0;
    }
    double per = 0.0;
    for (int a = 0; a < d->n_attrs; a++) {
        if (strncmp(d->attrs[a].key, "weight_", 7) == 0 && d->attrs[a].shape.ndim == 2) {
            per += prod_from(&d->attrs[a].shape, 0);
        }
    }
    return prod_from(x, 0) / (double)x->d[x->ndim - 1] * per;
}

/* YOLOv5's Detect head: level i's 1x1 convolution m.i.weight (no, C_i, 1, 1) over input i. */
static double detect_macs(const ki_op_desc *d, const ki_tensor *in, int n_in)
{
    double macs = 0.0;
    for (int i = 0; i < n_in; i++) {
        char key[32];
        snprintf(key, sizeof key, "m.%d.weight", i);
        const ki_attr *w = ki_op_attr(d, key);
        if (!w || w->shape.ndim != 4 || w->shape.d[1] <= 0) {
            continue;
        }
        if (!known(&in[i].shape)) {
            return -1;
        }
        /* the level's outputs: N x no x H x W = in[i]'s values / C_i x no */
        macs += prod_from(&in[i].shape, 0) / (double)w->shape.d[1] * prod_from(&w->shape, 0);
    }
    return macs;
}

double ki_bench_step_flops(const ki_op_desc *d, const ki_tensor *in, int n_in, const ki_tensor *out)
{
    static const char *const convs[] = { "nn.Conv1d", "nn.Conv2d", "nn.Conv3d",
                                         "torchvision.ops.DeformConv2d", NULL };
    static const char *const transposed[] = { "nn.ConvTranspose1d", "nn.ConvTranspose2d",
                                              "nn.ConvTranspose3d", NULL };
    static const char *const rnns[] = { "nn.RNN", "nn.LSTM", "nn.GRU", NULL };
    const ki_attr *w = ki_op_attr(d, "weight");
    const bool have_out = d->n_outputs > 0;
    double macs = 0.0;
    if (w && w->shape.ndim >= 3 && type_in(d->type, convs) && have_out) {
        macs = conv_macs(w, out);
    } else if (w && w->shape.ndim >= 3 && type_in(d->type, transposed) && n_in > 0) {
        /* weight (in, out / groups, k...): each input value reaches prod(dims from 1) outputs */
        macs = known(&in[0].shape) ? prod_from(&w->shape, 1) * prod_from(&in[0].shape, 0) : -1;
    } else if (w && w->shape.ndim == 2 && strcmp(d->type, "nn.Linear") == 0 && have_out) {
        macs = known(&out[0].shape) ? (double)w->shape.d[1] * prod_from(&out[0].shape, 0) : -1;
    } else if ((strcmp(d->type, "torch.matmul") == 0 || strcmp(d->type, "torch.bmm") == 0) &&
               n_in >= 1 && have_out) {
        const ki_shape *a = &in[0].shape;
        macs = known(a) && a->ndim >= 1 && known(&out[0].shape)
                   ? (double)a->d[a->ndim - 1] * prod_from(&out[0].shape, 0)
                   : -1;
    } else if (strcmp(d->type, "nn.MultiheadAttention") == 0) {
        macs = mha_macs(d, in, n_in);
    } else if (type_in(d->type, rnns)) {
        macs = rnn_macs(d, in, n_in);
    } else if (strcmp(d->type, "models.yolo.Detect") == 0) {
        macs = detect_macs(d, in, n_in);
    }
    return macs < 0 ? -1 : 2.0 * macs;
}

double ki_bench_session_step_flops(const ki_session *s, int k)
{
    const ki_tensor *in, *out;
    const ki_op_desc *d = ki_session_step(s, k, &in, &out, NULL);
    const double macs = ki_session_step_macs(s, k);
    return macs >= 0 ? 2.0 * macs : ki_bench_step_flops(d, in, d->n_inputs, out);
}
