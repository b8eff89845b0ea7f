/* bigbuf.h - allocation of the large, long-lived buffers (the converted weights, a session's
 * arena and workspace): 64-byte aligned, and from 4 MiB up 2 MiB aligned with transparent huge
 * pages requested (Linux madvise; ignored where unsupported), since every run streams them and
 * 4 KiB pages would cost a TLB miss every 4 KiB. Freed with free(). */
#ifndef KI_BIGBUF_H
#define KI_BIGBUF_H

#include <stddef.h>

/* NULL on overflow or out of memory. */
void *ki_bigbuf_alloc(size_t bytes);

#endif
