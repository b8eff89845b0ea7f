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
