/* weights.c - attaches .bin entries to the attributes declared in the param file, converted to
 * float32 into one 64-byte-aligned block: one pass over the mapped file, no second copy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigbuf.h"
#include "ckd.h"
#include "half.h"
#include "model_internal.h"

static void convert(float *dst, const unsigned char *src, int64_t n, ki_dtype t)
{
    const size_t es = ki_dtype_size(t);
    if (t == KI_DT_F32) {
        memcpy(dst, src, (size_t)n * sizeof(float)); /* unaligned source: one copy, no casts */
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = src + (size_t)i * es;
        switch (t) {
        case KI_DT_F32:
            memcpy(&dst[i], p, 4);
            break;
        case KI_DT_F16: {
            uint16_t h;
            memcpy(&h, p, 2);
            dst[i] = ki_half_to_float(h);
            break;
        }
        case KI_DT_BF16: {
            uint32_t b = (uint32_t)(p[0] | (p[1] << 8)) << 16;
            memcpy(&dst[i], &b, 4);
            break;
        }
        case KI_DT_F64: {
            double d;
            memcpy(&d, p, 8);
            dst[i] = (float)d;
            break;
        }
        case KI_DT_I8:
            dst[i] = (float)(int8_t)p[0];
            break;
        case KI_DT_U8:
        case KI_DT_BOOL:
            dst[i] = (float)p[0];
            break;
        case KI_DT_I16: {
            int16_t v;
            memcpy(&v, p, 2);
            dst[i] = (float)v;
            break;
        }
        case KI_DT_I32: {
            int32_t v;
            memcpy(&v, p, 4);
            dst[i] = (float)v;
            break;
        }
        case KI_DT_I64: {
            int64_t v;
            memcpy(&v, p, 8);
            dst[i] = (float)v;
            break;
        }
        default:
            dst[i] = NAN;
            break;
        }
    }
}

static size_t round64(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

static ki_status check_attr_types(const ki_graph *g, size_t *total, ki_error *err)
{
    *total = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_op_desc *d = &g->nodes[n].desc;
        for (int a = 0; a < d->n_attrs; a++) {
            const ki_attr *at = &d->attrs[a];
            size_t bytes;
            if (at->dtype == KI_DT_NULL || at->dtype == KI_DT_C32 || at->dtype == KI_DT_C64 ||
                at->dtype == KI_DT_C128) {
                return KI_FAIL(err, KI_ERR_UNSUPPORTED,
                               "%s:%d: op '%s': attribute @%s has element type %s, which kinfer "
                               "does not support",
                               g->path, d->line, d->name, at->key, ki_dtype_name(at->dtype));
            }
            if (!ki_ckd_mul(&bytes, (size_t)at->numel, sizeof(float)) ||
                !ki_ckd_add(total, *total, round64(bytes))) {
                return KI_FAIL(err, KI_ERR_LIMIT, "%s:%d: op '%s': attributes are too large",
                               g->path, d->line, d->name);
            }
        }
    }
    return KI_OK;
}

static ki_status check_entry(const ki_model *m, const ki_op_desc *d, const ki_attr *at,
                             const ki_zip_entry *e, const char *name, bool verify_crc,
                             ki_error *err)
{
    const ki_graph *g = m->g;
    size_t want = (size_t)at->numel * ki_dtype_size(at->dtype);
    if (!e) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "%s:%d: op '%s': the .bin has no entry '%s' for attribute @%s", g->path,
                       d->line, d->name, name, at->key);
    }
    if (e->size != want) {
        return KI_FAIL(err, KI_ERR_FORMAT,
                       "%s:%d: op '%s': entry '%s' has %llu bytes, but @%s declares %lld %s "
                       "elements (%zu bytes)",
                       g->path, d->line, d->name, name, (unsigned long long)e->size, at->key,
                       (long long)at->numel, ki_dtype_name(at->dtype), want);
    }
    return verify_crc ? ki_zip_verify(m->zip, e, err) : KI_OK;
}

/* Finds and checks the entry of attribute at of op d (exists, size, CRC) into *out. */
static ki_status find_entry(const ki_model *m, const ki_op_desc *d, const ki_attr *at,
                            bool verify_crc, const ki_zip_entry **out, ki_error *err)
{
    size_t len = strlen(d->name) + strlen(at->key) + 2;
    char *name = malloc(len);
    if (!name) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    snprintf(name, len, "%s.%s", d->name, at->key);
    const ki_zip_entry *e = ki_zip_find(m->zip, name);
    ki_status st = check_entry(m, d, at, e, name, verify_crc, err);
    free(name);
    *out = e;
    return st;
}

ki_status ki_weights_attach(ki_model *m, bool verify_crc, ki_error *err)
{
    ki_graph *g = m->g;
    size_t total;
    ki_status st = check_attr_types(g, &total, err);
    if (st != KI_OK || total == 0) {
        return st;
    }
    /* Every entry is checked before the block is allocated, so the allocation is bounded by
     * the .bin's real size, not by shapes the param file merely declares. */
    const ki_zip_entry *e;
    for (int n = 0; n < g->n_nodes; n++) {
        const ki_op_desc *d = &g->nodes[n].desc;
        for (int a = 0; a < d->n_attrs; a++) {
            if ((st = find_entry(m, d, &d->attrs[a], verify_crc, &e, err)) != KI_OK) {
                return st;
            }
        }
    }
    m->weights = ki_bigbuf_alloc(round64(total));
    if (!m->weights) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory for %zu bytes of weights", total);
    }
    m->weight_bytes = total;
    size_t off = 0;
    for (int n = 0; n < g->n_nodes; n++) {
        ki_op_desc *d = &g->nodes[n].desc;
        for (int a = 0; a < d->n_attrs; a++) {
            ki_attr *at = (ki_attr *)&d->attrs[a];
            if ((st = find_entry(m, d, at, false, &e, err)) != KI_OK) {
                return st;
            }
            float *dst = (float *)((char *)m->weights + off);
            convert(dst, ki_zip_data(m->zip, e), at->numel, at->dtype);
            at->data = dst;
            off += round64((size_t)at->numel * sizeof(float));
        }
        d->attrs_releasable = d->n_attrs > 0; /* all of them in m->weights */
    }
    return KI_OK;
}
