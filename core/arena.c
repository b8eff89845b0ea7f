/* arena.c - chunked bump allocator. */
#include "arena.h"

#include <stdlib.h>
#include <string.h>

#include "ckd.h"

typedef struct chunk {
    struct chunk *next;
    size_t size, used;
    /* data follows, 16-byte aligned */
} chunk;

struct ki_arena {
    chunk *head;
    size_t total;
};

#define CHUNK_HDR ((sizeof(chunk) + 15) & ~(size_t)15)
#define CHUNK_MIN (64 * 1024)

ki_arena *ki_arena_create(void)
{
    return calloc(1, sizeof(ki_arena));
}

void ki_arena_destroy(ki_arena *a)
{
    if (!a) {
        return;
    }
    chunk *c = a->head;
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

void *ki_arena_alloc(ki_arena *a, size_t size)
{
    size_t need;
    if (!ki_ckd_add(&need, size, 15)) {
        return NULL;
    }
    need &= ~(size_t)15;
    if (need == 0) {
        need = 16;
    }
    chunk *c = a->head;
    if (!c || c->size - c->used < need) {
        size_t cap = need > CHUNK_MIN ? need : CHUNK_MIN, bytes;
        if (!ki_ckd_add(&bytes, cap, CHUNK_HDR)) {
            return NULL;
        }
        c = malloc(bytes);
        if (!c) {
            return NULL;
        }
        c->size = cap;
        c->used = 0;
        c->next = a->head;
        a->head = c;
        a->total += bytes;
    }
    char *p = (char *)c + CHUNK_HDR + c->used;
    c->used += need;
    memset(p, 0, need);
    return p;
}

void *ki_arena_calloc(ki_arena *a, size_t n, size_t size)
{
    size_t bytes;
    if (!ki_ckd_mul(&bytes, n, size)) {
        return NULL;
    }
    return ki_arena_alloc(a, bytes);
}

char *ki_arena_strndup(ki_arena *a, const char *s, size_t n)
{
    size_t bytes;
    if (!ki_ckd_add(&bytes, n, 1)) {
        return NULL;
    }
    char *p = ki_arena_alloc(a, bytes);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

size_t ki_arena_used(const ki_arena *a)
{
    return a->total;
}
