/* tensor.h - shapes and tensor views.
 *
 * Every runtime value is float32, row-major (last dimension fastest), contiguous. A ki_tensor is
 * a view: it never owns `data`. Besides tensors, PNNX graphs pass small scalars and lists between
 * operators (sizes, shape lists from `pnnx.Expression`); those are values of kind SCALAR or LIST
 * whose numbers are known while shapes are inferred (`values`) and are also stored as floats in
 * the tensor data at run time (a scalar as one float, a list of n as n floats). */
#ifndef KI_TENSOR_H
#define KI_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define KI_MAX_DIMS   6
#define KI_MAX_VALUES 8
/* No dimension or element count may exceed these (checked wherever shapes are made). */
#define KI_MAX_DIM   ((int64_t)1 << 31)
#define KI_MAX_NUMEL ((int64_t)1 << 34)

typedef enum ki_kind {
    KI_KIND_TENSOR = 0, /* an ordinary tensor */
    KI_KIND_SCALAR,     /* a rank-0 number, value in values[0] when known */
    KI_KIND_LIST,       /* a list of n numbers (ndim 1, d[0] = n), values known when n <= 8 */
    KI_KIND_OPAQUE      /* something kinfer does not compute with (e.g. a string operand) */
} ki_kind;

typedef struct ki_shape {
    int ndim;               /* 0..KI_MAX_DIMS; 0 is a scalar with one element */
    int64_t d[KI_MAX_DIMS]; /* every d[i] >= 0 for concrete shapes; -1 = unknown ('?') */
    ki_kind kind;
    bool has_values; /* values[] holds the numbers of a SCALAR or LIST */
    double values[KI_MAX_VALUES];
} ki_shape;

typedef struct ki_tensor {
    ki_shape shape;
    float *data;
} ki_tensor;

/* Element count of a concrete shape; false if a dim is negative or the product overflows
 * or exceeds KI_MAX_NUMEL. */
bool ki_shape_numel(const ki_shape *s, int64_t *numel);

/* Element count of a shape that is known to be valid (checked earlier). */
static inline int64_t ki_shape_count(const ki_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) {
        n *= s->d[i];
    }
    return n;
}

/* A tensor shape of the given dims (kind TENSOR). */
ki_shape ki_shape_make(int ndim, const int64_t *d);

bool ki_shape_equal(const ki_shape *a, const ki_shape *b);

/* Normalises a possibly negative axis against ndim; false if out of range. */
bool ki_axis_norm(int64_t axis, int ndim, int *out);

/* Writes "(1,3,224,224)" ('?' for unknown dims, "[1,2]" with values for lists) into buf. */
const char *ki_shape_str(const ki_shape *s, char *buf, size_t size);

/* Checks that a concrete shape is valid: 0 <= ndim <= KI_MAX_DIMS, 0 <= d[i] <= KI_MAX_DIM,
 * numel <= KI_MAX_NUMEL. */
ki_status ki_shape_check(const ki_shape *s, ki_error *err);

#endif
