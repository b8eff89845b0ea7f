/* conv2d.h - nn.Conv2d and nn.ConvTranspose2d: state, geometry and kernels.
 *
 * create() parses the parameters into a ki_conv2d / ki_deconv2d (malloc'd, freed by destroy);
 * the weight pointer refers to the model's attribute data, which outlives the state. For each
 * input shape, *_geom_make() validates and computes sizes, and *_pick() chooses the kernel: the
 * choice lives only there, so the later speed work (Winograd, AVX2) adds paths in one place.
 * Kernels cannot fail: shape() has checked everything. The reference kernels are plain scalar
 * loops kept as the test oracle. State is read-only after create; kernels are thread-safe. */
#ifndef KI_CONV2D_H
#define KI_CONV2D_H

#include "conv_common.h"

typedef enum ki_conv_pad_mode {
    KI_CONV_PAD_ZEROS = 0,
    KI_CONV_PAD_REFLECT,
    KI_CONV_PAD_REPLICATE,
    KI_CONV_PAD_CIRCULAR
} ki_conv_pad_mode;

typedef struct ki_conv2d {
    int64_t in_ch, out_ch, groups;
    int64_t kh, kw, sh, sw, dh, dw;
    int64_t pt, pb, pl, pr; /* top, bottom, left, right */
    ki_conv_pad_mode pad_mode;
    const float *weight; /* (out_ch, in_ch/groups, kh, kw) */
    ki_cv_epilogue ep;
} ki_conv2d;

/* Sizes for one concrete input. */
typedef struct ki_conv2d_geom {
    ki_cv_nchw in;
    int64_t oh, ow;
} ki_conv2d_geom;

typedef enum ki_conv2d_path {
    KI_CONV2D_REF = 0, /* direct scalar loops */
    KI_CONV2D_GEMM,    /* im2col + cblas_sgemm per (image, group) */
    KI_CONV2D_GEMM1,   /* 1x1, stride 1, no padding: the input already is the column matrix */
    KI_CONV2D_DW       /* depthwise (groups == in == out), direct, parallel over planes */
} ki_conv2d_path;

/* Maps a padded coordinate i (may be < 0 or >= n) to an input coordinate, or -1 for a zero.
 * Valid for |overhang| <= n (circular) and < n (reflect), which shape() ensures. */
static inline int64_t ki_conv_pad_index(int64_t i, int64_t n, ki_conv_pad_mode m)
{
    if (i >= 0 && i < n) {
        return i;
    }
    switch (m) {
    case KI_CONV_PAD_REFLECT:
        return i < 0 ? -i : 2 * (n - 1) - i;
    case KI_CONV_PAD_REPLICATE:
        return i < 0 ? 0 : n - 1;
    case KI_CONV_PAD_CIRCULAR:
        return i < 0 ? i + n : i - n;
    case KI_CONV_PAD_ZEROS:
        break;
    }
    return -1;
}

ki_status ki_conv2d_geom_make(const ki_conv2d *c, const ki_shape *in, ki_conv2d_geom *g,
                              ki_error *err);
ki_conv2d_path ki_conv2d_pick(const ki_conv2d *c, const ki_conv2d_geom *g);
/* Whether a path can run this geometry (tests force each path through ki_conv2d_run). */
bool ki_conv2d_path_ok(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p);
/* Scratch bytes per thread for path p with n_threads threads. */
size_t ki_conv2d_workspace_for(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p,
                               int n_threads);
void ki_conv2d_run(const ki_conv2d *c, const ki_conv2d_geom *g, ki_conv2d_path p, const float *in,
                   float *out, const ki_exec *ex);

/* Kernels (conv2d.c: ref; conv2d_gemm.c: gemm, gemm1, dw). */
void ki_conv2d_forward_ref(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                           float *restrict out);
void ki_conv2d_forward_gemm(const ki_conv2d *c, const ki_conv2d_geom *g, bool im2col,
                            const float *in, float *restrict out, const ki_exec *ex);
void ki_conv2d_forward_dw(const ki_conv2d *c, const ki_conv2d_geom *g, const float *in,
                          float *restrict out, const ki_exec *ex);

/* ---- nn.ConvTranspose2d ---- */
typedef struct ki_deconv2d {
    int64_t in_ch, out_ch, groups;
    int64_t kh, kw, sh, sw, dh, dw, ph, pw, oph, opw;
    const float *weight; /* (in_ch, out_ch/groups, kh, kw) */
    ki_cv_epilogue ep;
} ki_deconv2d;

typedef enum ki_deconv2d_path {
    KI_DECONV2D_REF = 0, /* gather over the input, scalar */
    KI_DECONV2D_GEMM     /* cblas_sgemm into columns, then col2im */
} ki_deconv2d_path;

ki_status ki_deconv2d_geom_make(const ki_deconv2d *c, const ki_shape *in, ki_conv2d_geom *g,
                                ki_error *err);
ki_deconv2d_path ki_deconv2d_pick(const ki_deconv2d *c, const ki_conv2d_geom *g);
size_t ki_deconv2d_workspace_for(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_deconv2d_path p,
                                 int n_threads);
void ki_deconv2d_forward_gemm(const ki_deconv2d *c, const ki_conv2d_geom *g, const float *in,
                              float *restrict out, const ki_exec *ex);
void ki_deconv2d_run(const ki_deconv2d *c, const ki_conv2d_geom *g, ki_deconv2d_path p,
                     const float *in, float *out, const ki_exec *ex);

#endif
