/* segment.c - segmentation outputs: argmax, palette PNG (written here: IHDR colour type 3, PLTE,
 * one IDAT of stb_image_write's zlib stream, IEND) and the overlay. */
#include "segment.h"

#include <stdlib.h>
#include <string.h>

#include "npy.h"

/* stb_image_write's deflate (exported by Debian's libstb; declared in the header's
 * implementation part only). The buffer is released with free(). */
unsigned char *stbi_zlib_compress(unsigned char *data, int data_len, int *out_len, int quality);

void ki_segment_argmax(const float *logits, int64_t c, int64_t hw, uint8_t *map)
{
    for (int64_t p = 0; p < hw; p++) {
        int best = 0;
        float bv = logits[p];
        for (int64_t k = 1; k < c; k++) {
            const float v = logits[k * hw + p];
            if (v > bv || (bv != bv && v == v)) { /* a NaN first value loses to a number */
                best = (int)k, bv = v;
            }
        }
        map[p] = (uint8_t)best;
    }
}

void ki_segment_color(int k, unsigned char rgb[3])
{
    rgb[0] = rgb[1] = rgb[2] = 0;
    for (int b = 7; k > 0; b--, k >>= 3) {
        rgb[0] |= (unsigned char)((k & 1) << b);
        rgb[1] |= (unsigned char)(((k >> 1) & 1) << b);
        rgb[2] |= (unsigned char)(((k >> 2) & 1) << b);
    }
}

void ki_segment_unmap(const uint8_t *map, int w, int h, const ki_detect_map *m, uint8_t *out)
{
    for (int y = 0; y < m->height; y++) {
        const float yn = ((float)y + 0.5f) * m->sy + m->py;
        const int iy = yn < 0.0f ? -1 : (int)yn;
        for (int x = 0; x < m->width; x++) {
            const float xn = ((float)x + 0.5f) * m->sx + m->px;
            const int ix = xn < 0.0f ? -1 : (int)xn;
            const bool in = ix >= 0 && ix < w && iy >= 0 && iy < h;
            out[(size_t)y * m->width + x] = in ? map[(size_t)iy * w + ix] : KI_SEGMENT_UNSEEN;
        }
    }
}

static uint32_t crc32_of(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
        }
    }
    return c ^ 0xffffffffu;
}

static void put32be(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* Appends a chunk (length, type, data, CRC of type and data) at *o. */
static void chunk(unsigned char **o, const char type[4], const unsigned char *data, uint32_t n)
{
    put32be(*o, n);
    memcpy(*o + 4, type, 4);
    if (n) {
        memcpy(*o + 8, data, n);
    }
    put32be(*o + 8 + n, crc32_of(*o + 4, (size_t)n + 4));
    *o += 12 + (size_t)n;
}

ki_status ki_segment_write_png(const char *path, const uint8_t *map, int w, int h, ki_error *err)
{
    const size_t row = (size_t)w + 1, raw_n = row * (size_t)h;
    if (w <= 0 || h <= 0 || raw_n > (size_t)1 << 30) {
        return KI_FAIL(err, KI_ERR_LIMIT, "%s: a %dx%d class map is out of range", path, w, h);
    }
    unsigned char *raw = malloc(raw_n), *z = NULL, *png = NULL;
    int zn = 0;
    for (int y = 0; raw && y < h; y++) {
        raw[y * row] = 0; /* filter: none */
        memcpy(raw + y * row + 1, map + (size_t)y * w, (size_t)w);
    }
    if (raw) {
        z = stbi_zlib_compress(raw, (int)raw_n, &zn, 8);
    }
    free(raw);
    if (z) {
        png = malloc(8 + 25 + 12 + 768 + 12 + (size_t)zn + 12);
    }
    if (!png) {
        free(z);
        return KI_FAIL(err, KI_ERR_NOMEM, "%s: out of memory for the PNG", path);
    }
    static const unsigned char sig[8] = { 0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n' };
    unsigned char ihdr[13] = { 0 }, plte[768], *o = png + 8;
    memcpy(png, sig, 8);
    put32be(ihdr, (uint32_t)w);
    put32be(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8, ihdr[9] = 3; /* 8 bits, palette */
    for (int k = 0; k < 256; k++) {
        ki_segment_color(k, plte + 3 * k);
    }
    chunk(&o, "IHDR", ihdr, 13);
    chunk(&o, "PLTE", plte, 768);
    chunk(&o, "IDAT", z, (uint32_t)zn);
    chunk(&o, "IEND", NULL, 0);
    free(z);
    ki_status st = ki_file_write_atomic(path, png, (size_t)(o - png), err);
    free(png);
    return st;
}

typedef struct overlay_ctx {
    const uint8_t *map;
    int w, h;
} overlay_ctx;

static void paint_overlay(unsigned char *rgb, int w, int h, void *ctx)
{
    const overlay_ctx *c = ctx;
    if (w != c->w || h != c->h) {
        return; /* not the image the map was made for */
    }
    for (size_t p = 0; p < (size_t)w * h; p++) {
        const int k = c->map[p];
        if (k == 0 || k == KI_SEGMENT_UNSEEN) {
            continue;
        }
        unsigned char col[3];
        ki_segment_color(k, col);
        for (int ch = 0; ch < 3; ch++) {
            rgb[3 * p + ch] = (unsigned char)((rgb[3 * p + ch] + col[ch] + 1) / 2);
        }
    }
}

ki_status ki_segment_overlay_file(const char *src, const char *dst, const uint8_t *map, int w,
                                  int h, ki_error *err)
{
    overlay_ctx c = { map, w, h };
    return ki_image_repaint_file(src, dst, paint_overlay, &c, err);
}
