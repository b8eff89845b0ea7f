/* shape_common.h - helpers shared by the shape and data-movement layers (layers/shape_*.c).
 *
 * One strided copy serves permute, transpose, slice, select, expand and the pixel/channel
 * shuffles: each describes its output as a walk over the input with per-dimension strides.
 * join/split serve cat, stack, chunk, split and unbind, whose pieces are contiguous runs of one
 * row-major layout. Nothing here allocates; every copy runs one OpenMP region at most.
 * Thread-safe (no state). */
#ifndef KI_SHAPE_COMMON_H
#define KI_SHAPE_COMMON_H

#include <stdint.h>

#include "../core/layer.h"

/* Below this many elements a copy (or another pass over them that does little per element) is
 * cheaper than waking the thread team; the small reductions of einsum and the linalg layers and
 * YOLO's decode read it as their work count too. */
#define KI_SHAPEOP_PAR_MIN ((int64_t)1 << 15)

/* The copies work on more dims than a tensor has: pixel shuffle splits a 4-D tensor into 6. */
#define KI_SHAPEOP_MAX_DIMS 8

/* Copy dst[sum k_i * dst[i]] = src[sum k_i * src[i]] for every index k < d. Strides count
 * elements; a source stride of 0 repeats (broadcast). */
typedef struct ki_shapeop_copy {
    int ndim;
    int64_t d[KI_SHAPEOP_MAX_DIMS];
    int64_t src[KI_SHAPEOP_MAX_DIMS];
    int64_t dst[KI_SHAPEOP_MAX_DIMS];
} ki_shapeop_copy;

/* Row-major strides (in elements) of dims d[0..ndim-1]. */
void ki_shapeop_strides(int ndim, const int64_t *d, int64_t *strides);

/* A copy over dims d whose destination is contiguous; source strides are left 0. */
void ki_shapeop_copy_init(ki_shapeop_copy *c, int ndim, const int64_t *d);

void ki_shapeop_copy_run(const ki_shapeop_copy *c, const float *src, float *dst, int n_threads);

/* The joined tensor is (outer, sum of the pieces' row lengths) and piece p is (outer, len_p)
 * with len_p = numel(p) / outer. join gathers pieces into it (cat, stack); split scatters it
 * (chunk, split, unbind). outer must be > 0 and divide every piece's element count. */
void ki_shapeop_join(const ki_tensor *pieces, int n, int64_t outer, float *joined,
                     const ki_exec *ex);
void ki_shapeop_split(const float *joined, int64_t outer, ki_tensor *pieces, int n, int n_threads);

/* Product of d[from..to-1] (1 when empty). Only for shapes already checked. */
int64_t ki_shapeop_prod(const int64_t *d, int from, int to);

/* s seen as outer x n x inner around its dim ax (a 0-d s: 1 x 1 x 1). Only for shapes already
 * checked. */
void ki_shapeop_blocks(const ki_shape *s, int ax, int64_t *outer, int64_t *n, int64_t *inner);

/* Copies in to out unless they are the same buffer (the planner aliased a view). */
void ki_shapeop_view_copy(const ki_tensor *in, ki_tensor *out);

/* Checks the operator's input and output counts; -1 means any (at least 1). */
ki_status ki_shapeop_check_io(const ki_op_desc *op, int n_in, int n_out, ki_error *err);

/* Right-aligned PyTorch broadcasting: x's dims merged into the *nd dims of d (*nd grows to
 * x->ndim, the new leading dims 1; KI_MAX_DIMS at most). Returns -1, or the index in x of the
 * first dimension that is unknown (negative) or does not broadcast; d[*nd - x->ndim + that
 * index] then holds the dimension it met. */
int ki_shapeop_broadcast(int64_t *d, int *nd, const ki_shape *x);

/* Element strides of x's row-major data walked over out's dims (x broadcast to out): 0 along
 * the dims x is broadcast over, and along all of them when x is not a tensor. */
void ki_shapeop_broadcast_strides(const ki_shape *x, const ki_shape *out, int64_t *st);

/* Fills out with a TENSOR shape of dims d and checks it against the limits. */
ki_status ki_shapeop_make(ki_shape *out, int ndim, const int64_t *d, ki_error *err);

/* Values of a SCALAR/LIST input known at shape time: n gets the count (1 for a scalar). */
ki_status ki_shapeop_list_values(const ki_shape *s, const char *what, int64_t *vals, int max,
                                 int *n, ki_error *err);

/* malloc'ed zeroed state of size bytes, or KI_ERR_NOMEM. */
ki_status ki_shapeop_alloc(size_t size, void **state, ki_error *err);

/* ki_shapeop_alloc, then the size bytes at t copied into the new state. */
ki_status ki_shapeop_save(const void *t, size_t size, void **state, ki_error *err);

/* Frees state made by ki_shapeop_alloc (the destroy of every layer here). */
void ki_shapeop_free(void *state);

/* The layer table of an op whose state is freed with ki_shapeop_free and that needs no
 * workspace. */
#define KI_SHAPEOP_OPS(sym, name, create_fn, shape_fn, forward_fn)                                 \
    const ki_layer_ops sym = {                                                                     \
        .type = name,                                                                              \
        .create = create_fn,                                                                       \
        .shape = shape_fn,                                                                         \
        .forward = forward_fn,                                                                     \
        .destroy = ki_shapeop_free,                                                                \
    }

#endif
