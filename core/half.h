/* half.h - IEEE binary16 to float32, bit-exact (subnormals, infinities and NaN payloads). Used by
 * the weight loader (f16 attributes) and the .npy reader ('<f2' arrays); and back where exact
 * (the OV path's binary16 weights). */
#ifndef KI_HALF_H
#define KI_HALF_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline float ki_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13); /* inf / nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal half: value = man * 2^-24, exact in float32 */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The binary16 bits of f in *h when f is exactly a binary16 value (zeros, infinities, normals and
 * subnormals; a NaN never, its payload would not survive): the inverse of ki_half_to_float where
 * it is one. */
static inline bool ki_half_exact(float f, uint16_t *h)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    const uint32_t sign = (bits >> 16) & 0x8000u, exp = (bits >> 23) & 0xffu,
                   man = bits & 0x7fffffu;
    const int e = (int)exp - 127;
    if (exp == 0xff) {
        if (man) {
            return false;
        }
        *h = (uint16_t)(sign | 0x7c00u);
    } else if (exp == 0 && man == 0) {
        *h = (uint16_t)sign;
    } else if (exp == 0) {
        return false; /* a float32 subnormal is below binary16's range */
    } else if (e >= -14 && e <= 15) {
        if (man & 0x1fffu) {
            return false;
        }
        *h = (uint16_t)(sign | (uint32_t)(e + 15) << 10 | man >> 13);
    } else if (e >= -24 && e < -14) { /* a binary16 subnormal: m * 2^-24 */
        const uint32_t full = man | 0x800000u, shift = (uint32_t)(-(e + 1));
        if (full & ((1u << shift) - 1)) {
            return false;
        }
        *h = (uint16_t)(sign | full >> shift);
    } else {
        return false;
    }
    return true;
}

#endif
