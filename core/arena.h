/* arena.h - a bump allocator for a model's metadata (names, params, shapes). Everything
 * allocated from an arena is freed at once by ki_arena_destroy. Not thread-safe. */
#ifndef KI_ARENA_H
#define KI_ARENA_H

#include <stddef.h>

typedef struct ki_arena ki_arena;

ki_arena *ki_arena_create(void);
void ki_arena_destroy(ki_arena *a);
/* 16-byte aligned, zeroed memory; NULL on overflow or out of memory. */
void *ki_arena_alloc(ki_arena *a, size_t size);
/* n * size bytes with an overflow check. */
void *ki_arena_calloc(ki_arena *a, size_t n, size_t size);
char *ki_arena_strndup(ki_arena *a, const char *s, size_t n);
size_t ki_arena_used(const ki_arena *a);

#endif
