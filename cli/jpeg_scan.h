/* jpeg_scan.h - the entropy-coded part of the JPEG decoder (cli/jpeg.c): Huffman tables and the
 * decoding of one sequential scan into component sample planes, with libjpeg's handling of
 * restart markers and of data that ends early. The caller owns the tables, planes and data; no
 * state; thread-safe. */
#ifndef KI_JPEG_SCAN_H
#define KI_JPEG_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/status.h"

#define KI_JPEG_LOOK_BITS 9 /* Huffman codes this long or shorter decode with one look-up */

/* Zigzag position -> natural (row-major) position; 16 extra entries catch a run past the end of
 * a block (a corrupt file), as libjpeg's table does. */
extern const uint8_t ki_jpeg_natural[80];

typedef struct ki_jpeg_huff {
    uint16_t look[1 << KI_JPEG_LOOK_BITS]; /* (length << 8) | symbol by the next bits; 0: longer */
    /* as an AC table, by the next bits: a coefficient whose code and value bits fit them,
     * value * 256 + run * 16 + bits used; 0 when they do not fit */
    int32_t fast_ac[1 << KI_JPEG_LOOK_BITS];
    int32_t maxcode[17]; /* the largest code of each length; -1 when there is none */
    int32_t valoff[17];  /* symbol of code c of length l: vals[valoff[l] + c] */
    uint8_t vals[256];
    bool defined;
} ki_jpeg_huff;

/* The table of n symbols vals with counts[l - 1] codes of length l. Fails with KI_ERR_FORMAT for
 * codes that do not fit their lengths (libjpeg's check, the all-ones code included). */
ki_status ki_jpeg_huff_build(ki_jpeg_huff *t, const uint8_t *counts, const uint8_t *vals, int n,
                             ki_error *err);

typedef struct ki_jpeg_comp {
    int id, h, v, tq;
    int dw, dh;     /* valid samples: ceil(width * h / hmax) x ceil(height * v / vmax) */
    size_t stride;  /* plane row bytes: the MCU grid's blocks across * 8 */
    uint8_t *plane; /* the MCU grid's rows of samples */
    int32_t q[64];  /* quantisers in natural order, latched when a scan starts */
    const ki_jpeg_huff *dc, *ac;
    int32_t pred; /* DC predictor */
} ki_jpeg_comp;

typedef struct ki_jpeg_scan {
    const uint8_t *buf;
    size_t len, pos;    /* the entropy-coded data starts at pos; set to where it ended */
    ki_jpeg_comp *c[3]; /* the scan's components in order */
    int ns;             /* 1: not interleaved, each block is an MCU */
    int mcux, mcuy;     /* the MCU grid of an interleaved scan */
    int restart;        /* MCUs per restart interval, 0 for none */
} ki_jpeg_scan;

/* Decodes the scan's blocks and writes their samples into the components' planes. Data that runs
 * out (a marker or the end of the buffer where bits are still needed) gives zero bits, and the
 * MCUs after it in the restart interval are all-zero blocks (samples 128), as in libjpeg. */
void ki_jpeg_decode_scan(ki_jpeg_scan *s);

/* The next marker code at or after *pos, skipping anything else and fill bytes (libjpeg's
 * next_marker); *pos ends after the code. -1 at the end of the data. */
int ki_jpeg_next_marker(const uint8_t *buf, size_t len, size_t *pos);

#endif
