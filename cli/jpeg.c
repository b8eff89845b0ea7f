/* jpeg.c - sequential Huffman JPEG decoding (see jpeg.h): markers and tables here, entropy
 * decoding into one sample plane per component in jpeg_scan.c, then upsampling and colour
 * conversion (jpeg_pixels.c) row by row into the output. Written from ITU-T T.81 and libjpeg's
 * documented behaviour; no code of libjpeg's or stb_image's. */
#include "jpeg.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../core/ckd.h"
#include "image.h"
#include "jpeg_pixels.h"
#include "jpeg_scan.h"

#define MAX_SCANS 16 /* a sequential file needs one per component; more is a malformed file */

/* The pixel limit; the fuzz target (tests/fuzz/fuzz.mk) lowers it, so that a header alone cannot
 * make one run slow. */
#ifndef KI_JPEG_MAX_PIXELS
#define KI_JPEG_MAX_PIXELS KI_IMAGE_MAX_PIXELS
#endif

typedef struct jdec {
    const uint8_t *buf;
    size_t len, pos;
    int w, h, ncomp, hmax, vmax, mcux, mcuy;
    ki_jpeg_comp c[3];
    uint16_t qt[4][64]; /* natural order */
    bool qdef[4];
    ki_jpeg_huff dc[4], ac[4];
    int restart, n_scans;
    bool frame, jfif, adobe;
    int adobe_transform;
} jdec;

/* --- markers and tables ------------------------------------------------------------------- */

static int u16(const uint8_t *p)
{
    return p[0] << 8 | p[1];
}

/* The payload of the marker segment at d->pos: its length field checked against the data. */
static ki_status segment(jdec *d, const char *what, const uint8_t **seg, size_t *n, ki_error *err)
{
    if (d->len - d->pos < 2 || u16(d->buf + d->pos) < 2 ||
        (size_t)u16(d->buf + d->pos) > d->len - d->pos) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: truncated %s segment", what);
    }
    *n = (size_t)u16(d->buf + d->pos) - 2;
    *seg = d->buf + d->pos + 2;
    d->pos += *n + 2;
    return KI_OK;
}

static ki_status read_dqt(jdec *d, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    ki_status st = segment(d, "DQT", &s, &n, err);
    while (st == KI_OK && n > 0) {
        int pq = s[0] >> 4, tq = s[0] & 15;
        size_t size = pq ? 129 : 65;
        if (pq > 1 || tq > 3 || n < size) {
            return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad quantisation table");
        }
        for (int k = 0; k < 64; k++) {
            d->qt[tq][ki_jpeg_natural[k]] = (uint16_t)(pq ? u16(s + 1 + 2 * k) : s[1 + k]);
        }
        d->qdef[tq] = true;
        s += size;
        n -= size;
    }
    return st;
}

static ki_status read_dht(jdec *d, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    ki_status st = segment(d, "DHT", &s, &n, err);
    while (st == KI_OK && n > 0) {
        int tc = s[0] >> 4, th = s[0] & 15, total = 0;
        if (tc > 1 || th > 3 || n < 17) {
            return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad Huffman table");
        }
        for (int l = 0; l < 16; l++) {
            total += s[1 + l];
        }
        if (total > 256 || n < 17 + (size_t)total) {
            return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad Huffman table");
        }
        for (int i = 0; tc == 0 && i < total; i++) {
            if (s[17 + i] > 15) { /* a DC difference has at most 15 bits */
                return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad Huffman table");
            }
        }
        st = ki_jpeg_huff_build(tc ? &d->ac[th] : &d->dc[th], s + 1, s + 17, total, err);
        s += 17 + total;
        n -= 17 + (size_t)total;
    }
    return st;
}

/* APP0 JFIF and APP14 Adobe decide the colour space of 3 components (see rgb_space). */
static ki_status read_app(jdec *d, int marker, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    ki_status st = segment(d, "APP", &s, &n, err);
    if (st == KI_OK && marker == 0xE0 && n >= 14 && memcmp(s, "JFIF", 5) == 0) {
        d->jfif = true;
    }
    if (st == KI_OK && marker == 0xEE && n >= 12 && memcmp(s, "Adobe", 5) == 0) {
        d->adobe = true;
        d->adobe_transform = s[11];
    }
    return st;
}

static ki_status read_sof(jdec *d, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    ki_status st = segment(d, "SOF", &s, &n, err);
    if (st != KI_OK) {
        return st;
    }
    if (d->frame || n < 6 || n != 6 + 3 * (size_t)s[5]) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad frame header");
    }
    d->h = u16(s + 1);
    d->w = u16(s + 3);
    d->ncomp = s[5];
    if (s[0] != 8) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "JPEG: %d-bit samples", s[0]);
    }
    if (d->ncomp != 1 && d->ncomp != 3) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "JPEG: %d components", d->ncomp);
    }
    if (d->w == 0 || d->h == 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "invalid image size %dx%d", d->w, d->h);
    }
    if ((int64_t)d->w * d->h > KI_JPEG_MAX_PIXELS) {
        return KI_FAIL(err, KI_ERR_LIMIT, "%dx%d pixels is more than kinfer accepts (%lld)", d->w,
                       d->h, (long long)KI_JPEG_MAX_PIXELS);
    }
    for (int i = 0; i < d->ncomp; i++) {
        ki_jpeg_comp *c = &d->c[i];
        c->id = s[6 + 3 * i];
        c->h = s[7 + 3 * i] >> 4;
        c->v = s[7 + 3 * i] & 15;
        c->tq = s[8 + 3 * i];
        for (int j = 0; j < i; j++) {
            if (d->c[j].id == c->id) {
                return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: component %d listed twice", c->id);
            }
        }
        if (c->h < 1 || c->h > 4 || c->v < 1 || c->v > 4 || c->tq > 3) {
            return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad component %d", c->id);
        }
        if (c->h > 2 || c->v > 2) {
            return KI_FAIL(err, KI_ERR_UNSUPPORTED, "JPEG: sampling factors %dx%d", c->h, c->v);
        }
    }
    d->frame = true;
    return KI_OK;
}

/* The component planes, allocated at the first scan: the MCU grid's blocks, all 128 (what the
 * IDCT of an all-zero block gives) until a scan writes them. */
static ki_status alloc_planes(jdec *d, ki_error *err)
{
    d->hmax = d->vmax = 1;
    for (int i = 0; i < d->ncomp; i++) {
        d->hmax = d->c[i].h > d->hmax ? d->c[i].h : d->hmax;
        d->vmax = d->c[i].v > d->vmax ? d->c[i].v : d->vmax;
    }
    d->mcux = (d->w + 8 * d->hmax - 1) / (8 * d->hmax);
    d->mcuy = (d->h + 8 * d->vmax - 1) / (8 * d->vmax);
    for (int i = 0; i < d->ncomp; i++) {
        ki_jpeg_comp *c = &d->c[i];
        size_t bytes;
        c->dw = (d->w * c->h + d->hmax - 1) / d->hmax;
        c->dh = (d->h * c->v + d->vmax - 1) / d->vmax;
        c->stride = (size_t)d->mcux * c->h * 8;
        if (!ki_ckd_mul(&bytes, c->stride, (size_t)d->mcuy * c->v * 8)) {
            return KI_FAIL(err, KI_ERR_LIMIT, "JPEG: image too large");
        }
        c->plane = malloc(bytes);
        if (!c->plane) {
            return KI_FAIL(err, KI_ERR_NOMEM, "JPEG: out of memory for %zu bytes", bytes);
        }
        memset(c->plane, 128, bytes);
    }
    return KI_OK;
}

static ki_status read_dri(jdec *d, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    ki_status st = segment(d, "DRI", &s, &n, err);
    if (st == KI_OK && n != 2) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad DRI segment");
    }
    if (st == KI_OK) {
        d->restart = u16(s);
    }
    return st;
}

/* Scan component i of the SOS payload s: its frame component (once per scan) and tables. */
static ki_status scan_comp(jdec *d, const uint8_t *s, int i, int *sc, ki_error *err)
{
    int id = s[1 + 2 * i], td = s[2 + 2 * i] >> 4, ta = s[2 + 2 * i] & 15;
    sc[i] = -1;
    for (int j = 0; j < d->ncomp; j++) {
        sc[i] = d->c[j].id == id ? j : sc[i];
    }
    for (int j = 0; j < i; j++) {
        sc[i] = sc[j] == sc[i] ? -1 : sc[i];
    }
    if (sc[i] < 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: scan names component %d wrongly", id);
    }
    if (td > 3 || ta > 3 || !d->dc[td].defined || !d->ac[ta].defined) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: scan uses an undefined Huffman table");
    }
    ki_jpeg_comp *c = &d->c[sc[i]];
    if (!d->qdef[c->tq]) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: undefined quantisation table %d", c->tq);
    }
    for (int k = 0; k < 64; k++) {
        c->q[k] = d->qt[c->tq][k];
    }
    c->dc = &d->dc[td];
    c->ac = &d->ac[ta];
    return KI_OK;
}

static ki_status read_sos(jdec *d, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    int sc[3];
    ki_status st = segment(d, "SOS", &s, &n, err);
    if (st != KI_OK) {
        return st;
    }
    if (!d->frame) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: scan before the frame header");
    }
    /* Ss, Se, Ah and Al (the last 3 bytes) mean nothing to a sequential scan; libjpeg ignores
     * them too */
    int ns = n > 0 ? s[0] : 0;
    if (ns < 1 || ns > d->ncomp || n != 4 + 2 * (size_t)ns) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: bad scan header");
    }
    if (++d->n_scans > MAX_SCANS) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: more than %d scans", MAX_SCANS);
    }
    for (int i = 0; i < ns && st == KI_OK; i++) {
        st = scan_comp(d, s, i, sc, err);
    }
    if (st == KI_OK && !d->c[0].plane) {
        st = alloc_planes(d, err);
    }
    if (st == KI_OK) {
        ki_jpeg_scan scan = { d->buf, d->len, d->pos, { NULL }, ns, d->mcux, d->mcuy, d->restart };
        for (int i = 0; i < ns; i++) {
            scan.c[i] = &d->c[sc[i]];
        }
        ki_jpeg_decode_scan(&scan);
        d->pos = scan.pos;
    }
    return st;
}

/* A segment whose length runs past the data: after a scan, the end of a truncated file. */
static bool truncated_segment(const jdec *d)
{
    return d->len - d->pos < 2 || (size_t)u16(d->buf + d->pos) > d->len - d->pos;
}

static ki_status read_marker(jdec *d, int m, ki_error *err)
{
    const uint8_t *s;
    size_t n;
    switch (m) {
    case 0xC0: /* baseline */
    case 0xC1: /* extended sequential: the same for 8-bit samples */
        return read_sof(d, err);
    case 0xC4:
        return read_dht(d, err);
    case 0xDB:
        return read_dqt(d, err);
    case 0xDD:
        return read_dri(d, err);
    case 0xDA:
        return read_sos(d, err);
    case 0xCC:
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "JPEG: arithmetic coding");
    case 0xD8:
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: a second SOI marker");
    default:
        break;
    }
    if (m >= 0xC2 && m <= 0xCF) { /* progressive, lossless, hierarchical, arithmetic */
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "JPEG: SOF%d frames", m - 0xC0);
    }
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* TEM, RSTn outside a scan: no segment */
        return KI_OK;
    }
    if (m >= 0xE0 && m <= 0xEF) {
        return read_app(d, m, err);
    }
    return segment(d, "marker", &s, &n, err); /* COM, DNL, reserved: skipped */
}

static ki_status read_markers(jdec *d, ki_error *err)
{
    for (;;) {
        int m = ki_jpeg_next_marker(d->buf, d->len, &d->pos);
        if (m < 0 || m == 0xD9) {
            break; /* EOI, or the end of the data without one (libjpeg accepts that too) */
        }
        bool has_segment = m != 0x01 && (m < 0xD0 || m > 0xD7);
        if (d->n_scans > 0 && has_segment && truncated_segment(d)) {
            break;
        }
        ki_status st = read_marker(d, m, err);
        if (st != KI_OK) {
            return st;
        }
    }
    if (!d->frame || d->n_scans == 0) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: no image data");
    }
    return KI_OK;
}

/* --- pixels ------------------------------------------------------------------------------- */

/* libjpeg's colour space for 3 components: a JFIF marker means YCbCr; else an Adobe marker means
 * RGB for transform 0 and YCbCr otherwise; else component ids 'R', 'G', 'B' mean RGB; anything
 * else is taken as YCbCr. */
static bool rgb_space(const jdec *d)
{
    if (d->jfif) {
        return false;
    }
    if (d->adobe) {
        return d->adobe_transform == 0;
    }
    return d->c[0].id == 'R' && d->c[1].id == 'G' && d->c[2].id == 'B';
}

typedef struct emitter {
    int n_rows;      /* component rows used: 1 (gray, or Y alone) or 3 */
    bool rgb;        /* the 3 rows are R, G, B, not Y, Cb, Cr */
    int channels, w; /* of the output */
    ki_jpeg_ycc ycc;
} emitter;

static void emit_row(const emitter *e, const uint8_t *const *r, uint8_t *out)
{
    int w = e->w;
    if (e->n_rows == 1 && e->channels == 1) {
        memcpy(out, r[0], (size_t)w);
    } else if (e->n_rows == 1) {
        for (int i = 0; i < w; i++) {
            out[3 * i] = out[3 * i + 1] = out[3 * i + 2] = r[0][i];
        }
    } else if (!e->rgb) {
        ki_jpeg_ycc_to_rgb(&e->ycc, r[0], r[1], r[2], w, out);
    } else if (e->channels == 3) {
        for (int i = 0; i < w; i++) {
            out[3 * i] = r[0][i];
            out[3 * i + 1] = r[1][i];
            out[3 * i + 2] = r[2][i];
        }
    } else { /* stb_image's gray from RGB, as kinfer had it before this decoder */
        for (int i = 0; i < w; i++) {
            out[i] = (uint8_t)((r[0][i] * 77 + r[1][i] * 150 + r[2][i] * 29) >> 8);
        }
    }
}

/* The planes upsampled and converted row by row into out. */
static ki_status emit(const jdec *d, int channels, ki_jpeg_image *out, ki_error *err)
{
    size_t bytes, row = (size_t)d->w * (size_t)channels, buf_row = (size_t)d->w + 16;
    if (!ki_ckd_mul(&bytes, row, (size_t)d->h)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "JPEG: image too large");
    }
    emitter *e = malloc(sizeof *e);
    uint8_t *px = malloc(bytes), *buf = malloc(3 * buf_row);
    if (!e || !px || !buf) {
        free(e);
        free(px);
        free(buf);
        return KI_FAIL(err, KI_ERR_NOMEM, "JPEG: out of memory for %zu bytes", bytes);
    }
    e->rgb = d->ncomp == 3 && rgb_space(d);
    e->n_rows = d->ncomp == 1 || (channels == 1 && !e->rgb) ? 1 : 3;
    e->channels = channels;
    e->w = d->w;
    ki_jpeg_ycc_init(&e->ycc);
    ki_jpeg_plane pl[3];
    for (int i = 0; i < e->n_rows; i++) {
        const ki_jpeg_comp *c = &d->c[i];
        pl[i] =
            (ki_jpeg_plane){ c->plane, c->stride, c->dw, c->dh, d->hmax / c->h, d->vmax / c->v };
    }
    for (int y = 0; y < d->h; y++) {
        const uint8_t *r[3];
        for (int i = 0; i < e->n_rows; i++) {
            r[i] = ki_jpeg_upsample_row(&pl[i], y, buf + (size_t)i * buf_row);
        }
        emit_row(e, r, px + (size_t)y * row);
    }
    free(e);
    free(buf);
    *out = (ki_jpeg_image){ px, d->w, d->h, channels };
    return KI_OK;
}

bool ki_jpeg_is_jpeg(const unsigned char *buf, size_t len)
{
    return len >= 2 && buf[0] == 0xFF && buf[1] == 0xD8;
}

ki_status ki_jpeg_decode(const unsigned char *buf, size_t len, int channels, ki_jpeg_image *out,
                         ki_error *err)
{
    if (channels != 1 && channels != 3) {
        return KI_FAIL(err, KI_ERR_UNSUPPORTED, "JPEG: %d channels asked for", channels);
    }
    if (!ki_jpeg_is_jpeg(buf, len)) {
        return KI_FAIL(err, KI_ERR_FORMAT, "JPEG: no SOI marker");
    }
    jdec *d = calloc(1, sizeof *d);
    if (!d) {
        return KI_FAIL(err, KI_ERR_NOMEM, "JPEG: out of memory");
    }
    d->buf = buf;
    d->len = len;
    d->pos = 2;
    ki_status st = read_markers(d, err);
    if (st == KI_OK) {
        st = emit(d, channels, out, err);
    }
    for (int i = 0; i < 3; i++) {
        free(d->c[i].plane);
    }
    free(d);
    return st;
}
