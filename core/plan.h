/* plan.h - the memory planner: given buffers with sizes and lifetimes [first, last] over the
 * execution steps, assigns offsets in one arena so that no two buffers alive at the same step
 * overlap: greedy by size (largest first, each at the lowest offset that fits), or for very many
 * buffers best-fit over a free list that merges neighbours (ggml-alloc style).
 * A pure function: no global state, thread-safe. */
#ifndef KI_PLAN_H
#define KI_PLAN_H

#include <stddef.h>

#include "status.h"

typedef struct ki_plan_buf {
    size_t size;   /* bytes; rounded up to the alignment by the planner */
    int first;     /* step that writes it (-1: before the first step) */
    int last;      /* last step that reads it (inclusive; >= first) */
    size_t offset; /* out */
} ki_plan_buf;

/* align must be a power of two. *total gets the arena size. */
ki_status ki_plan_offsets(ki_plan_buf *bufs, int n, size_t align, size_t *total, ki_error *err);

#endif
