/* bigbuf.c - see bigbuf.h. */
#include "bigbuf.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define KI_HUGE ((size_t)2 << 20)

void *ki_bigbuf_alloc(size_t bytes)
{
    size_t align = bytes >= 2 * KI_HUGE ? KI_HUGE : 64;
    if (bytes == 0 || bytes > SIZE_MAX - align) {
        return NULL;
    }
    size_t size = (bytes + align - 1) / align * align;
    void *p = aligned_alloc(align, size);
#ifdef MADV_HUGEPAGE
    if (p && align == KI_HUGE) {
        (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: failure only costs speed */
    }
#endif
    return p;
}

void ki_bigbuf_discard(void *p, size_t bytes)
{
#ifdef MADV_DONTNEED
    const uintptr_t page = 4096;
    uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
    uintptr_t b = ((uintptr_t)p + bytes) & ~(page - 1);
    if (p && bytes <= UINTPTR_MAX - (uintptr_t)p && b > a) {
        (void)madvise((void *)a, b - a, MADV_DONTNEED); /* failure only keeps the memory */
    }
#else
    (void)p, (void)bytes;
#endif
}
