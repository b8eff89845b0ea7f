/* bigbuf.h - allocation of the large, long-lived buffers (the converted weights, a session's
 * arena and workspace): 64-byte aligned, and from 4 MiB up 2 MiB aligned with transparent huge
 * pages requested (Linux madvise; ignored where unsupported), since every run streams them and
 * 4 KiB pages would cost a TLB miss every 4 KiB. Freed with free(). */
#ifndef KI_BIGBUF_H
#define KI_BIGBUF_H

#include <stddef.h>

/* NULL on overflow or out of memory. */
void *ki_bigbuf_alloc(size_t bytes);

/* Gives the whole pages inside [p, p + bytes) back to the system (Linux madvise DONTNEED;
 * nothing elsewhere): they stay mapped and read as zeros from then on. For data of a bigbuf
 * block that will never be read again. */
void ki_bigbuf_discard(void *p, size_t bytes);

#endif
