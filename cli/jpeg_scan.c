/* jpeg_scan.c - Huffman decoding of sequential JPEG scans (see jpeg_scan.h), written from ITU-T
 * T.81 and libjpeg's documented behaviour; no code of libjpeg's or stb_image's. */
#include "jpeg_scan.h"

#include <string.h>

#include "jpeg_pixels.h"

const uint8_t ki_jpeg_natural[80] = {
    0,  1,  8,  16, 9,  2,  3,  10, 17, 24, 32, 25, 18, 11, 4,  5,  12, 19, 26, 33,
    40, 48, 41, 34, 27, 20, 13, 6,  7,  14, 21, 28, 35, 42, 49, 56, 57, 50, 43, 36,
    29, 22, 15, 23, 30, 37, 44, 51, 58, 59, 52, 45, 38, 31, 39, 46, 53, 60, 61, 54,
    47, 55, 62, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63, 63,
};

/* Entropy-coded bits, MSB first: acc holds nbits of them at the top and zeros below. At a marker
 * (or the end of the data) no more bytes come; a read past them gets zero bits and sets starved
 * (libjpeg's insufficient_data), after which MCUs are left mid-gray until a restart. */
typedef struct bits {
    const uint8_t *buf;
    size_t len, pos;
    uint64_t acc;
    int nbits;
    bool marker, starved;
} bits;

/* --- bit reading -------------------------------------------------------------------------- */

/* Inline everywhere, so that a block's decoder keeps the bit state in registers. */
static inline void fill(bits *b)
{
    while (b->nbits <= 56 && !b->marker) {
        if (b->pos >= b->len) {
            b->marker = true;
            break;
        }
        unsigned c = b->buf[b->pos];
        if (c == 0xFF) {
            /* FF 00 is a data byte FF (fill bytes FF may precede the 00); FF xx is a marker,
             * left unread with pos on its first FF */
            size_t p = b->pos + 1;
            while (p < b->len && b->buf[p] == 0xFF) {
                p++;
            }
            if (p >= b->len || b->buf[p] != 0) {
                b->marker = true;
                break;
            }
            b->pos = p + 1;
        } else {
            b->pos++;
        }
        b->acc |= (uint64_t)c << (56 - b->nbits);
        b->nbits += 8;
    }
}

/* Makes sure n <= 57 bits can be taken; past the data they are zeros. */
static inline void need(bits *b, int n)
{
    if (b->nbits < n) {
        fill(b);
        if (b->nbits < n) {
            b->starved = true;
            b->nbits = 64;
        }
    }
}

static inline void skip(bits *b, int n)
{
    b->acc <<= n;
    b->nbits -= n;
}

/* The next Huffman symbol. An invalid code (17 bits matching nothing) counts as symbol 0, as
 * libjpeg counts it. */
static inline int huff_decode(bits *b, const ki_jpeg_huff *t)
{
    if (b->nbits < 16) {
        fill(b);
    }
    unsigned e = t->look[b->acc >> (64 - KI_JPEG_LOOK_BITS)];
    if (e) {
        need(b, (int)(e >> 8));
        skip(b, (int)(e >> 8));
        return (int)(e & 0xFF);
    }
    int32_t code16 = (int32_t)(b->acc >> 48);
    for (int l = KI_JPEG_LOOK_BITS + 1; l <= 16; l++) {
        int32_t c = code16 >> (16 - l);
        if (c <= t->maxcode[l]) {
            need(b, l);
            skip(b, l);
            return t->vals[(t->valoff[l] + c) & 0xFF];
        }
    }
    need(b, 17);
    skip(b, 17);
    return 0;
}

/* s (1..15) bits as a signed coefficient (T.81's EXTEND). */
static inline int32_t receive_extend(bits *b, int s)
{
    need(b, s);
    int32_t v = (int32_t)(b->acc >> (64 - s));
    skip(b, s);
    return v < (1 << (s - 1)) ? v - (1 << s) + 1 : v;
}

/* A run/size symbol of a code of l bits whose value bits also fit in the look-up: each entry
 * with that code gets the run, the value (T.81's EXTEND of the bits after the code) and l + s. */
static void fast_ac_entries(ki_jpeg_huff *t, int32_t code, int l, int rs)
{
    int s = rs & 15, n = KI_JPEG_LOOK_BITS;
    if (s == 0 || l + s > n) {
        return;
    }
    for (int32_t x = 0; x < (1 << (n - l)); x++) {
        int32_t v = x >> (n - l - s);
        v = v < (1 << (s - 1)) ? v - (1 << s) + 1 : v;
        t->fast_ac[(code << (n - l)) | x] = v * 256 + (rs >> 4) * 16 + l + s;
    }
}

/* Canonical codes (T.81 Annex C). */
ki_status ki_jpeg_huff_build(ki_jpeg_huff *t, const uint8_t *counts, const uint8_t *vals, int n,
                             ki_error *err)
{
    memset(t->look, 0, sizeof t->look);
    memset(t->fast_ac, 0, sizeof t->fast_ac);
    memcpy(t->vals, vals, (size_t)n);
    int32_t code = 0;
    int k = 0;
    for (int l = 1; l <= 16; l++) {
        t->valoff[l] = k - code;
        t->maxcode[l] = counts[l - 1] ? code + counts[l - 1] - 1 : -1;
        for (int j = 0; j < counts[l - 1]; j++, k++, code++) {
            if (code + 1 >= (1 << l)) {
                return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad Huffman table");
            }
            for (int32_t x = 0; l <= KI_JPEG_LOOK_BITS && x < (1 << (KI_JPEG_LOOK_BITS - l)); x++) {
                t->look[(code << (KI_JPEG_LOOK_BITS - l)) | x] = (uint16_t)(l << 8 | vals[k]);
            }
            fast_ac_entries(t, code, l, vals[k]);
        }
        code <<= 1;
    }
    t->defined = true;
    return KI_OK;
}

int ki_jpeg_next_marker(const uint8_t *buf, size_t len, size_t *pos)
{
    size_t p = *pos;
    for (;;) {
        while (p < len && buf[p] != 0xFF) {
            p++;
        }
        while (p < len && buf[p] == 0xFF) {
            p++;
        }
        if (p >= len) {
            *pos = len;
            return -1;
        }
        if (buf[p] != 0) {
            *pos = p + 1;
            return buf[p];
        }
        p++;
    }
}

/* --- blocks, MCUs, restarts --------------------------------------------------------------- */

/* What decode_block found: whether the IDCT has AC terms and whether they are all small. */
enum { DC_ONLY, AC_SMALL, AC_BIG };

static inline bool is_big(int32_t v)
{
    return (uint32_t)v + KI_JPEG_IDCT_SMALL > 2 * KI_JPEG_IDCT_SMALL;
}

/* One block's DC difference and AC run/size symbols (T.81 F.2.2), dequantised into blk (natural
 * order, zero on entry). The DC value is kept in 16 bits as libjpeg's JCOEF keeps it. */
static int decode_block(bits *state, ki_jpeg_comp *c, int32_t *blk)
{
    bits local = *state, *b = &local;
    int s = huff_decode(b, c->dc);
    int32_t diff = s ? receive_extend(b, s) : 0;
    c->pred = (int32_t)((uint32_t)c->pred + (uint32_t)diff);
    blk[0] = ((c->pred & 0xFFFF) ^ 0x8000) - 0x8000;
    blk[0] *= c->q[0];
    bool any = false, big = is_big(blk[0]);
    for (int k = 1; k < 64; k++) {
        int32_t v;
        if (b->nbits < 16) {
            fill(b);
        }
        int32_t f = c->ac->fast_ac[b->acc >> (64 - KI_JPEG_LOOK_BITS)];
        if (f) { /* the common case: code and value in one look-up */
            need(b, f & 15);
            skip(b, f & 15);
            k += (f >> 4) & 15;
            v = f >> 8;
        } else {
            int rs = huff_decode(b, c->ac), r = rs >> 4;
            s = rs & 15;
            if (s == 0 && r != 15) {
                break; /* end of block */
            }
            k += r; /* 15 and no value: sixteen zeros */
            v = s ? receive_extend(b, s) : 0;
        }
        int z = ki_jpeg_natural[k]; /* k <= 78: the table's tail maps overruns to 63 */
        blk[z] = v * c->q[z];
        big |= is_big(blk[z]);
        any = true;
    }
    *state = local;
    return any ? (big ? AC_BIG : AC_SMALL) : DC_ONLY;
}

/* MCU (mx, my): each component's h x v blocks when interleaved, one block otherwise, decoded
 * and transformed into its plane. Once the data has run out the MCU is left as libjpeg leaves
 * it, all coefficients zero. */
static void decode_mcu(const ki_jpeg_scan *s, bits *b, int mx, int my)
{
    int32_t blk[64];
    bool starved = b->starved;
    for (int i = 0; i < s->ns; i++) {
        ki_jpeg_comp *c = s->c[i];
        int bw = s->ns == 1 ? 1 : c->h, bh = s->ns == 1 ? 1 : c->v;
        for (int by = 0; by < bh; by++) {
            uint8_t *row = c->plane + (size_t)(my * bh + by) * 8 * c->stride;
            for (int bx = 0; bx < bw; bx++) {
                uint8_t *dst = row + (size_t)(mx * bw + bx) * 8;
                memset(blk, 0, sizeof blk);
                int kind = starved ? DC_ONLY : decode_block(b, c, blk);
                if (kind == DC_ONLY) {
                    ki_jpeg_idct_dc(blk[0], dst, c->stride);
                } else {
                    ki_jpeg_idct(blk, kind == AC_SMALL, dst, c->stride);
                }
            }
        }
    }
}

static int rst(int k)
{
    return 0xD0 + (k & 7);
}

/* The end of a restart interval (libjpeg's read_restart_marker and jpeg_resync_to_restart): the
 * bits left are dropped and the next marker read. RSTn as expected (or too far off to tell) is
 * taken and the data flows again; a restart one or two behind is skipped to the next marker; the
 * one or two ahead, a marker of another kind or the end of the data stays unread, so the data
 * of this interval is empty (still starved if it was). The DC predictors restart at 0. */
static void restart(const ki_jpeg_scan *s, bits *b, int *next)
{
    b->acc = 0;
    b->nbits = 0;
    size_t p = b->pos;
    int m = ki_jpeg_next_marker(b->buf, b->len, &p);
    for (;;) {
        bool is_rst = m >= 0xD0 && m <= 0xD7;
        if ((is_rst && (m == rst(*next - 1) || m == rst(*next - 2))) || (m >= 0 && m < 0xC0)) {
            m = ki_jpeg_next_marker(b->buf, b->len, &p);
            continue;
        }
        if (is_rst && m != rst(*next + 1) && m != rst(*next + 2)) {
            b->pos = p;
            b->marker = b->starved = false;
        } else {
            b->pos = m < 0 ? b->len : p - 2; /* on the marker's FF */
            b->marker = true;
        }
        break;
    }
    *next = (*next + 1) & 7;
    for (int i = 0; i < s->ns; i++) {
        s->c[i]->pred = 0;
    }
}

void ki_jpeg_decode_scan(ki_jpeg_scan *s)
{
    bits b = { .buf = s->buf, .len = s->len, .pos = s->pos };
    int nx = s->mcux, ny = s->mcuy;
    if (s->ns == 1) { /* one component: its own blocks, each an MCU */
        nx = (s->c[0]->dw + 7) / 8;
        ny = (s->c[0]->dh + 7) / 8;
    }
    for (int i = 0; i < s->ns; i++) {
        s->c[i]->pred = 0;
    }
    int togo = s->restart, next = 0;
    for (int my = 0; my < ny; my++) {
        for (int mx = 0; mx < nx; mx++) {
            if (s->restart) {
                if (togo == 0) {
                    restart(s, &b, &next);
                    togo = s->restart;
                }
                togo--;
            }
            decode_mcu(s, &b, mx, my);
        }
    }
    s->pos = b.pos;
}
