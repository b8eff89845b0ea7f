/* half.h - IEEE binary16 to float32, bit-exact (subnormals, infinities and NaN payloads). Used by
 * the weight loader (f16 attributes) and the .npy reader ('<f2' arrays). */
#ifndef KI_HALF_H
#define KI_HALF_H

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

#endif
