/* detect_draw.c - painting detections onto an RGB image: a box outline in the class colour and a
 * filled tag above it with "LABEL 0.87" in a 5x7 bitmap font (upper case, digits and a few
 * signs; anything else shows as '?'). Then the picture is encoded with stb_image_write into
 * memory and written atomically. */
#include <ctype.h>
#include <stb_image_write.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "detect.h"
#include "image.h"
#include "npy.h"

#define FONT_W 5
#define FONT_H 7

static const char font_chars[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ .-_:%()/?'";

/* One byte per row, bit 4 is the leftmost pixel. */
static const unsigned char font_rows[][FONT_H] = {
    { 0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E }, { 0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E },
    { 0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F }, { 0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E },
    { 0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02 }, { 0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E },
    { 0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E }, { 0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08 },
    { 0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E }, { 0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C },
    { 0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11 }, { 0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E },
    { 0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E }, { 0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C },
    { 0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F }, { 0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10 },
    { 0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F }, { 0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11 },
    { 0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E }, { 0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C },
    { 0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11 }, { 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F },
    { 0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11 }, { 0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11 },
    { 0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E }, { 0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10 },
    { 0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D }, { 0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11 },
    { 0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E }, { 0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04 },
    { 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E }, { 0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04 },
    { 0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A }, { 0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11 },
    { 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04 }, { 0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F },
    { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 }, { 0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C },
    { 0x00, 0x00, 0x00, 0x0E, 0x00, 0x00, 0x00 }, { 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x1F },
    { 0x00, 0x0C, 0x0C, 0x00, 0x0C, 0x0C, 0x00 }, { 0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03 },
    { 0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02 }, { 0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08 },
    { 0x00, 0x01, 0x02, 0x04, 0x08, 0x10, 0x00 }, { 0x0E, 0x11, 0x01, 0x02, 0x04, 0x00, 0x04 },
    { 0x04, 0x04, 0x08, 0x00, 0x00, 0x00, 0x00 },
};

_Static_assert(sizeof font_rows / sizeof font_rows[0] == sizeof font_chars - 1,
               "one glyph per character");

/* YOLOv5's palette (utils/plots.py Colors). */
static const unsigned char palette[20][3] = {
    { 0xFF, 0x38, 0x38 }, { 0xFF, 0x9D, 0x97 }, { 0xFF, 0x70, 0x1F }, { 0xFF, 0xB2, 0x1D },
    { 0xCF, 0xD2, 0x31 }, { 0x48, 0xF9, 0x0A }, { 0x92, 0xCC, 0x17 }, { 0x3D, 0xDB, 0x86 },
    { 0x1A, 0x93, 0x34 }, { 0x00, 0xD4, 0xBB }, { 0x2C, 0x99, 0xA8 }, { 0x00, 0xC2, 0xFF },
    { 0x34, 0x45, 0x93 }, { 0x64, 0x73, 0xFF }, { 0x00, 0x18, 0xEC }, { 0x84, 0x38, 0xFF },
    { 0x52, 0x00, 0x85 }, { 0xCB, 0x38, 0xFF }, { 0xFF, 0x95, 0xC8 }, { 0xFF, 0x37, 0xC7 },
};

const unsigned char *ki_detect_color(int cls)
{
    return palette[(cls < 0 ? -cls : cls) % 20];
}

int ki_detect_line_width(int width, int height)
{
    int lw = (int)((double)(width + height) / 2.0 * 0.003 + 0.5);
    return lw < 2 ? 2 : lw;
}

typedef struct canvas {
    unsigned char *rgb;
    int w, h;
} canvas;

/* Fills [x0, x1) x [y0, y1), clipped to the canvas. */
static void fill_rect(const canvas *c, int x0, int y0, int x1, int y1, const unsigned char *col)
{
    x0 = x0 < 0 ? 0 : x0;
    y0 = y0 < 0 ? 0 : y0;
    x1 = x1 > c->w ? c->w : x1;
    y1 = y1 > c->h ? c->h : y1;
    for (int y = y0; y < y1; y++) {
        for (int x = x0; x < x1; x++) {
            memcpy(c->rgb + ((size_t)y * (size_t)c->w + (size_t)x) * 3, col, 3);
        }
    }
}

static const unsigned char *glyph(char ch)
{
    const char *p = strchr(font_chars, toupper((unsigned char)ch));
    if (!p || ch == '\0') {
        p = strchr(font_chars, '?');
    }
    return font_rows[p - font_chars];
}

/* Draws text with its top-left corner at (x, y), each font pixel s x s screen pixels. */
static void draw_text(const canvas *c, int x, int y, int s, const char *text,
                      const unsigned char *col)
{
    for (; *text; text++, x += (FONT_W + 1) * s) {
        const unsigned char *g = glyph(*text);
        for (int r = 0; r < FONT_H; r++) {
            for (int k = 0; k < FONT_W; k++) {
                if (g[r] & (0x10 >> k)) {
                    fill_rect(c, x + k * s, y + r * s, x + (k + 1) * s, y + (r + 1) * s, col);
                }
            }
        }
    }
}

static void draw_one(const canvas *c, const ki_det *d, const char *name, int lw)
{
    static const unsigned char white[3] = { 255, 255, 255 };
    const unsigned char *col = ki_detect_color(d->cls);
    int x1 = (int)d->x1, y1 = (int)d->y1, x2 = (int)d->x2, y2 = (int)d->y2;
    /* the outline lies inside the box: [x1, x2) x [y1, y2), lw pixels thick */
    fill_rect(c, x1, y1, x2, y1 + lw, col);
    fill_rect(c, x1, y2 - lw, x2, y2, col);
    fill_rect(c, x1, y1, x1 + lw, y2, col);
    fill_rect(c, x2 - lw, y1, x2, y2, col);
    char text[96];
    if (name) {
        snprintf(text, sizeof text, "%.80s %.2f", name, (double)d->score);
    } else {
        snprintf(text, sizeof text, "%d %.2f", d->cls, (double)d->score);
    }
    int s = lw > 2 ? lw - 1 : 1;
    int tw = (int)strlen(text) * (FONT_W + 1) * s + s, th = (FONT_H + 2) * s;
    /* the tag sits on the box's top edge, or just inside when there is no room above */
    int ty = y1 - th >= 0 ? y1 - th : y1;
    fill_rect(c, x1, ty, x1 + tw, ty + th, col);
    draw_text(c, x1 + s, ty + s, s, text, white);
}

void ki_detect_draw(unsigned char *rgb, int w, int h, const ki_det *d, int n,
                    const char *const *names, int n_names)
{
    canvas c = { rgb, w, h };
    int lw = ki_detect_line_width(w, h);
    for (int i = n - 1; i >= 0; i--) {
        /* best last, so it ends up on top */
        const char *name = names && d[i].cls >= 0 && d[i].cls < n_names ? names[d[i].cls] : NULL;
        draw_one(&c, &d[i], name, lw);
    }
}

typedef struct membuf {
    unsigned char *data;
    size_t len, cap;
    bool failed;
} membuf;

static void mem_write(void *ctx, void *data, int size)
{
    membuf *m = ctx;
    if (m->failed || size <= 0) {
        return;
    }
    if (m->len + (size_t)size > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->len + (size_t)size && cap < ((size_t)1 << 40)) {
            cap *= 2;
        }
        unsigned char *p = realloc(m->data, cap);
        if (!p || cap < m->len + (size_t)size) {
            m->failed = true;
            return;
        }
        m->data = p;
        m->cap = cap;
    }
    memcpy(m->data + m->len, data, (size_t)size);
    m->len += (size_t)size;
}

static bool encode(const char *dst, const unsigned char *rgb, int w, int h, membuf *m)
{
    const char *dot = strrchr(dst, '.');
    if (dot && strcasecmp(dot, ".png") == 0) {
        return stbi_write_png_to_func(mem_write, m, w, h, 3, rgb, w * 3) && !m->failed;
    }
    if (dot && strcasecmp(dot, ".bmp") == 0) {
        return stbi_write_bmp_to_func(mem_write, m, w, h, 3, rgb) && !m->failed;
    }
    if (dot && strcasecmp(dot, ".tga") == 0) {
        return stbi_write_tga_to_func(mem_write, m, w, h, 3, rgb) && !m->failed;
    }
    return stbi_write_jpg_to_func(mem_write, m, w, h, 3, rgb, 90) && !m->failed;
}

ki_status ki_image_repaint_file(const char *src, const char *dst, ki_paint_fn paint, void *ctx,
                                ki_error *err)
{
    ki_image_pixels im;
    ki_status st = ki_image_decode(src, 3, &im, err);
    if (st != KI_OK) {
        return st;
    }
    unsigned char *rgb = im.px;
    int w = im.w, h = im.h;
    paint(rgb, w, h, ctx);
    membuf m = { NULL, 0, 0, false };
    st = encode(dst, rgb, w, h, &m) ? ki_file_write_atomic(dst, m.data, m.len, err)
                                    : KI_FAIL(err, KI_ERR_IO, "%s: cannot encode the picture", dst);
    free(m.data);
    ki_image_pixels_free(&im);
    return st;
}

typedef struct boxes_ctx {
    const ki_det *d;
    int n;
    const char *const *names;
    int n_names;
} boxes_ctx;

static void paint_boxes(unsigned char *rgb, int w, int h, void *ctx)
{
    const boxes_ctx *b = ctx;
    ki_detect_draw(rgb, w, h, b->d, b->n, b->names, b->n_names);
}

ki_status ki_detect_draw_file(const char *src, const char *dst, const ki_det *d, int n,
                              const char *const *names, int n_names, ki_error *err)
{
    boxes_ctx b = { d, n, names, n_names };
    return ki_image_repaint_file(src, dst, paint_boxes, &b, err);
}
