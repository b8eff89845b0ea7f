/* ckd.h - checked arithmetic for sizes, counts and offsets. Each returns false on overflow
 * (or on a negative operand for the int64 forms) and leaves *out unspecified then. */
#ifndef KI_CKD_H
#define KI_CKD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool ki_ckd_mul(size_t *out, size_t a, size_t b)
{
    return !__builtin_mul_overflow(a, b, out);
}

static inline bool ki_ckd_add(size_t *out, size_t a, size_t b)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline bool ki_ckd_mul_i64(int64_t *out, int64_t a, int64_t b)
{
    return a >= 0 && b >= 0 && !__builtin_mul_overflow(a, b, out);
}

static inline bool ki_ckd_add_i64(int64_t *out, int64_t a, int64_t b)
{
    return a >= 0 && b >= 0 && !__builtin_add_overflow(a, b, out);
}

#endif
