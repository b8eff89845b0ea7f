/* hash.h - the string hash for core's name tables (FNV-1a, 64-bit). */
#ifndef KI_HASH_H
#define KI_HASH_H

#include <stdint.h>

static inline uint64_t ki_hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    }
    return h;
}

#endif
