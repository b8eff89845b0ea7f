/* plan.c - offset assignment by lifetime: greedy by size, or best-fit over a free list for very
 * many buffers. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

#include "ckd.h"

typedef struct block {
    size_t off, size;
} block;

typedef struct free_list {
    block *b;
    int n, cap;
    size_t end; /* high-water mark */
} free_list;

typedef struct key_idx {
    int key, idx;
} key_idx;

static int by_key(const void *a, const void *b)
{
    const key_idx *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static bool fl_insert(free_list *fl, size_t off, size_t size)
{
    int i = 0;
    while (i < fl->n && fl->b[i].off < off) {
        i++;
    }
    if (fl->n == fl->cap) {
        int cap = fl->cap ? fl->cap * 2 : 16;
        block *nb = realloc(fl->b, (size_t)cap * sizeof *nb);
        if (!nb) {
            return false;
        }
        fl->b = nb;
        fl->cap = cap;
    }
    memmove(&fl->b[i + 1], &fl->b[i], (size_t)(fl->n - i) * sizeof *fl->b);
    fl->b[i] = (block){ off, size };
    fl->n++;
    /* merge with the right neighbour, then the left one */
    if (i + 1 < fl->n && fl->b[i].off + fl->b[i].size == fl->b[i + 1].off) {
        fl->b[i].size += fl->b[i + 1].size;
        memmove(&fl->b[i + 1], &fl->b[i + 2], (size_t)(fl->n - i - 2) * sizeof *fl->b);
        fl->n--;
    }
    if (i > 0 && fl->b[i - 1].off + fl->b[i - 1].size == fl->b[i].off) {
        fl->b[i - 1].size += fl->b[i].size;
        memmove(&fl->b[i], &fl->b[i + 1], (size_t)(fl->n - i - 1) * sizeof *fl->b);
        fl->n--;
    }
    return true;
}

static bool fl_alloc(free_list *fl, size_t size, size_t *off)
{
    int best = -1;
    for (int i = 0; i < fl->n; i++) {
        if (fl->b[i].size >= size && (best < 0 || fl->b[i].size < fl->b[best].size)) {
            best = i;
        }
    }
    if (best >= 0) {
        *off = fl->b[best].off;
        fl->b[best].off += size;
        fl->b[best].size -= size;
        if (fl->b[best].size == 0) {
            memmove(&fl->b[best], &fl->b[best + 1], (size_t)(fl->n - best - 1) * sizeof *fl->b);
            fl->n--;
        }
        return true;
    }
    /* grow the arena, reusing a free block that touches its end */
    size_t start = fl->end;
    if (fl->n > 0 && fl->b[fl->n - 1].off + fl->b[fl->n - 1].size == fl->end) {
        start = fl->b[fl->n - 1].off;
        fl->n--;
    }
    if (!ki_ckd_add(&fl->end, start, size)) {
        return false;
    }
    *off = start;
    return true;
}

/* A buffer in the greedy order: larger first, then earlier, then by index (a total order). */
typedef struct size_key {
    size_t size;
    int first, idx;
} size_key;

static int by_size(const void *a, const void *b)
{
    const size_key *x = a, *y = b;
    if (x->size != y->size) {
        return x->size > y->size ? -1 : 1;
    }
    if (x->first != y->first) {
        return x->first < y->first ? -1 : 1;
    }
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int by_offset(const void *a, const void *b)
{
    const block *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Greedy by size: each buffer, largest first, at the lowest offset where it overlaps no buffer
 * already placed whose lifetime meets its own. The large buffers thus share the arena's low
 * addresses one after another, so a large output is mostly written over lines that a tensor of a
 * few steps before used (still in the last-level cache); best-fit had left stretches of the
 * arena that one step alone touched, whose lines came from memory on every run
 * (docs/performance.md, forty-first session). O(n^2 log n): for up to PLAN_BY_SIZE_MAX buffers. */
#define PLAN_BY_SIZE_MAX 4096

static ki_status plan_by_size(ki_plan_buf *bufs, int n, size_t *total, ki_error *err)
{
    size_key *order = malloc(((size_t)n + 1) * sizeof *order);
    block *live = malloc(((size_t)n + 1) * sizeof *live);
    ki_status st = KI_OK;
    size_t end = 0;
    if (!order || !live) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        order[i] = (size_key){ bufs[i].size, bufs[i].first, i };
        bufs[i].offset = 0;
    }
    qsort(order, (size_t)n, sizeof *order, by_size);
    for (int q = 0; q < n && order[q].size > 0; q++) {
        ki_plan_buf *b = &bufs[order[q].idx];
        int nl = 0;
        for (int p = 0; p < q; p++) { /* the placed buffers alive at a step of b's */
            const ki_plan_buf *o = &bufs[order[p].idx];
            if (o->first <= b->last && b->first <= o->last) {
                live[nl++] = (block){ o->offset, o->size };
            }
        }
        qsort(live, (size_t)nl, sizeof *live, by_offset);
        size_t at = 0, stop;
        for (int i = 0; i < nl; i++) {
            if (live[i].off >= at && live[i].off - at >= b->size) {
                break; /* room below it */
            }
            at = live[i].off + live[i].size > at ? live[i].off + live[i].size : at;
        }
        if (!ki_ckd_add(&stop, at, b->size)) {
            st = KI_FAIL(err, KI_ERR_LIMIT, "the tensor arena would overflow");
            goto done;
        }
        b->offset = at;
        end = stop > end ? stop : end;
    }
    *total = end;
done:
    free(order);
    free(live);
    return st;
}

/* Best-fit over a free list: buffers by first step, each released after its last one. */
static ki_status plan_best_fit(ki_plan_buf *bufs, int n, size_t *total, ki_error *err)
{
    key_idx *by_f = malloc(((size_t)n + 1) * sizeof *by_f);
    key_idx *by_l = malloc(((size_t)n + 1) * sizeof *by_l);
    free_list fl = { NULL, 0, 0, 0 };
    ki_status st = KI_OK;
    if (!by_f || !by_l) {
        st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        by_f[i] = (key_idx){ bufs[i].first, i };
        by_l[i] = (key_idx){ bufs[i].last, i };
    }
    qsort(by_f, (size_t)n, sizeof *by_f, by_key);
    qsort(by_l, (size_t)n, sizeof *by_l, by_key);
    int li = 0;
    for (int fi = 0; fi < n; fi++) {
        ki_plan_buf *b = &bufs[by_f[fi].idx];
        /* release everything whose last use is before this buffer's first step */
        while (li < n && bufs[by_l[li].idx].last < b->first) {
            const ki_plan_buf *d = &bufs[by_l[li++].idx];
            if (d->size > 0 && !fl_insert(&fl, d->offset, d->size)) {
                st = KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
                goto done;
            }
        }
        b->offset = 0;
        if (b->size > 0 && !fl_alloc(&fl, b->size, &b->offset)) {
            st = KI_FAIL(err, KI_ERR_LIMIT, "the tensor arena would overflow");
            goto done;
        }
    }
    *total = fl.end;
done:
    free(by_f);
    free(by_l);
    free(fl.b);
    return st;
}

ki_status ki_plan_offsets(ki_plan_buf *bufs, int n, size_t align, size_t *total, ki_error *err)
{
    for (int i = 0; i < n; i++) {
        if (!ki_ckd_add(&bufs[i].size, bufs[i].size, align - 1)) {
            return KI_FAIL(err, KI_ERR_LIMIT, "buffer %d is too large", i);
        }
        bufs[i].size &= ~(align - 1);
    }
    return n <= PLAN_BY_SIZE_MAX ? plan_by_size(bufs, n, total, err)
                                 : plan_best_fit(bufs, n, total, err);
}
