/* bench_weights.c - generated weights for `kinfer bench` without a .bin, as ncnn's benchncnn
 * does: a stored zip in pnnx's layout ("op.attr" entries in each attribute's declared type) is
 * written to a temporary file, so the model loads through the ordinary path and the timed run
 * is exactly the one a real .bin would give. Speed does not depend on the values; their scale
 * only keeps activations finite (no inf/NaN or denormals slowing anything down). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

float ki_bench_rand(unsigned long long *state, float lo, float hi)
{
    unsigned long long x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    double u = (double)((x * 0x2545F4914F6CDD1DULL) >> 40) / (double)(1ULL << 24);
    return lo + (float)u * (hi - lo);
}

static uint32_t crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) {
            crc = (crc & 1) ? 0xEDB88320u ^ (crc >> 1) : crc >> 1;
        }
    }
    return ~crc;
}

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static void put32(unsigned char *p, uint32_t v)
{
    put16(p, v & 0xffff);
    put16(p + 2, v >> 16);
}

static uint16_t float_to_half(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    uint32_t sign = (b >> 16) & 0x8000u;
    int32_t exp = (int32_t)((b >> 23) & 0xff) - 127 + 15;
    if (exp <= 0) {
        return (uint16_t)sign; /* tiny values flush to zero: fine for timing */
    }
    if (exp >= 31) {
        return (uint16_t)(sign | 0x7bffu);
    }
    return (uint16_t)(sign | ((uint32_t)exp << 10) | ((b >> 13) & 0x3ffu));
}

static size_t dtype_bytes(ki_dtype t)
{
    switch (t) {
    case KI_DT_F64:
    case KI_DT_I64:
    case KI_DT_C64:
        return 8;
    case KI_DT_F32:
    case KI_DT_I32:
    case KI_DT_C32:
        return 4;
    case KI_DT_F16:
    case KI_DT_BF16:
    case KI_DT_I16:
        return 2;
    case KI_DT_C128:
        return 16;
    default:
        return 1;
    }
}

/* Values like a trained layer's: weights ~ U(-b, b) with b = sqrt(3 / fan_in) keep the
 * variance of activations steady; 1-D parameters (bias, norm scale) stay small or near 1. */
static void gen_range(const ki_attr *at, float *lo, float *hi)
{
    if (at->shape.ndim >= 2 && at->shape.d[0] > 0) {
        double fan_in = (double)at->numel / (double)at->shape.d[0];
        float b = (float)sqrt(3.0 / (fan_in > 1.0 ? fan_in : 1.0));
        *lo = -b, *hi = b;
    } else if (strstr(at->key, "var") || strcmp(at->key, "weight") == 0) {
        *lo = 0.5f, *hi = 1.5f; /* variances must be positive; norm scales near one */
    } else {
        *lo = -0.1f, *hi = 0.1f;
    }
}

/* One element in the declared type; integer and boolean attributes get zeros. */
static void encode(ki_dtype t, float v, unsigned char *p)
{
    memset(p, 0, dtype_bytes(t));
    if (t == KI_DT_F32) {
        memcpy(p, &v, 4);
    } else if (t == KI_DT_F16) {
        put16(p, float_to_half(v));
    } else if (t == KI_DT_BF16) {
        uint32_t b;
        memcpy(&b, &v, 4);
        put16(p, b >> 16);
    } else if (t == KI_DT_F64) {
        double d = v;
        memcpy(p, &d, 8);
    }
}

typedef struct zip_out {
    FILE *f;
    unsigned char *central; /* central directory records, appended as entries are written */
    size_t central_len, central_cap;
    uint32_t offset;
    int count;
    unsigned long long seed;
} zip_out;

static ki_status add_central(zip_out *z, const char *name, uint32_t crc, uint32_t size,
                             ki_error *err)
{
    size_t nl = strlen(name), need = 46 + nl;
    if (z->central_len + need > z->central_cap) {
        size_t cap = (z->central_cap + need) * 2;
        unsigned char *p = realloc(z->central, cap);
        if (!p) {
            return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
        }
        z->central = p, z->central_cap = cap;
    }
    unsigned char *c = z->central + z->central_len;
    memset(c, 0, 46);
    put32(c, 0x02014b50u);
    put16(c + 4, 20), put16(c + 6, 20);
    put32(c + 16, crc), put32(c + 20, size), put32(c + 24, size);
    put16(c + 28, (unsigned)nl);
    put32(c + 42, z->offset);
    memcpy(c + 46, name, nl);
    z->central_len += need;
    return KI_OK;
}

/* Local header, data, and the matching central record of one attribute. */
static ki_status write_entry(zip_out *z, const ki_op_desc *d, const ki_attr *at, ki_error *err)
{
    char name[512];
    size_t eb = dtype_bytes(at->dtype), size = (size_t)at->numel * eb;
    int nl = snprintf(name, sizeof name, "%s.%s", d->name, at->key);
    if (nl < 0 || (size_t)nl >= sizeof name || size > 0xffffffffu - z->offset - 1024) {
        return KI_FAIL(err, KI_ERR_LIMIT, "attribute %s.%s is too large to generate", d->name,
                       at->key);
    }
    unsigned char *data = malloc(size ? size : 1);
    if (!data) {
        return KI_FAIL(err, KI_ERR_NOMEM, "out of memory");
    }
    float lo, hi;
    gen_range(at, &lo, &hi);
    /* A YOLOv5 Detect head's captured constants, which the layer recognises by content: a 1-D
     * one is its strides (rising whole numbers: the usual 8, 16, 32, ...); older exports also
     * capture (1, na, ny, nx, 2) grids, given the cell coordinates (x, y) here. */
    bool detect = strcmp(d->type, "models.yolo.Detect") == 0 && strncmp(at->key, "pnnx_", 5) == 0;
    bool strides = detect && at->shape.ndim == 1 && at->numel <= 16;
    bool grid = detect && at->shape.ndim == 5 && at->shape.d[4] == 2 && at->shape.d[3] > 0 &&
                at->shape.d[2] > 0;
    for (int64_t i = 0; i < at->numel; i++) {
        float v = strides ? (float)(8 << i) : ki_bench_rand(&z->seed, lo, hi);
        if (grid) {
            int64_t cell = (i / 2) % (at->shape.d[2] * at->shape.d[3]);
            v = (float)(i % 2 == 0 ? cell % at->shape.d[3] : cell / at->shape.d[3]);
        }
        encode(at->dtype, v, data + (size_t)i * eb);
    }
    uint32_t crc = crc32_update(0, data, size);
    unsigned char h[30] = { 0 };
    put32(h, 0x04034b50u);
    put16(h + 4, 20);
    put32(h + 14, crc), put32(h + 18, (uint32_t)size), put32(h + 22, (uint32_t)size);
    put16(h + 26, (unsigned)nl);
    ki_status st = add_central(z, name, crc, (uint32_t)size, err);
    if (st == KI_OK &&
        (fwrite(h, 1, 30, z->f) != 30 || fwrite(name, 1, (size_t)nl, z->f) != (size_t)nl ||
         fwrite(data, 1, size, z->f) != size)) {
        st = KI_FAIL(err, KI_ERR_IO, "cannot write the generated weights");
    }
    free(data);
    z->offset += (uint32_t)(30 + (size_t)nl + size);
    z->count++;
    return st;
}

static ki_status finish(zip_out *z, ki_error *err)
{
    unsigned char e[22] = { 0 };
    put32(e, 0x06054b50u);
    put16(e + 8, (unsigned)z->count), put16(e + 10, (unsigned)z->count);
    put32(e + 12, (uint32_t)z->central_len), put32(e + 16, z->offset);
    if (z->count > 0xffff || fwrite(z->central, 1, z->central_len, z->f) != z->central_len ||
        fwrite(e, 1, 22, z->f) != 22) {
        return KI_FAIL(err, KI_ERR_IO, "cannot write the generated weights");
    }
    return KI_OK;
}

ki_status ki_bench_write_weights(const ki_model *m, char *path, ki_error *err)
{
    int fd = mkstemp(path);
    if (fd < 0) {
        return KI_FAIL(err, KI_ERR_IO, "cannot create a temporary file %s", path);
    }
    zip_out z = { fdopen(fd, "wb"), NULL, 0, 0, 0, 0, 0x9E3779B97F4A7C15ULL };
    ki_status st = z.f ? KI_OK : KI_FAIL(err, KI_ERR_IO, "cannot open %s", path);
    for (int i = 0; st == KI_OK && i < ki_model_n_ops(m); i++) {
        const ki_op_desc *d = ki_model_op(m, i);
        for (int a = 0; st == KI_OK && a < d->n_attrs; a++) {
            st = write_entry(&z, d, &d->attrs[a], err);
        }
    }
    if (st == KI_OK) {
        st = finish(&z, err);
    }
    if (z.f ? fclose(z.f) != 0 : close(fd) != 0) {
        st = st == KI_OK ? KI_FAIL(err, KI_ERR_IO, "cannot write %s", path) : st;
    }
    free(z.central);
    if (st != KI_OK) {
        unlink(path);
    }
    return st;
}

ki_status ki_bench_load(const char *param, const char *bin, ki_model **m, ki_error *err)
{
    if (bin) {
        return ki_model_load(param, bin, NULL, m, err);
    }
    ki_load_options go = { .graph_only = true };
    ki_model *g = NULL;
    ki_status st = ki_model_load(param, NULL, &go, &g, err);
    char path[] = "/tmp/kinfer-bench-XXXXXX";
    if (st == KI_OK) {
        st = ki_bench_write_weights(g, path, err);
    }
    ki_model_destroy(g);
    if (st == KI_OK) {
        st = ki_model_load(param, path, NULL, m, err);
        unlink(path); /* the loader has mapped and converted it */
    }
    return st;
}

ki_status ki_bench_input_shapes(const ki_model *m, const ki_shape *given, int n_given, int batch,
                                ki_shape *shapes, ki_error *err)
{
    int n = ki_model_n_inputs(m);
    if (n > BENCH_MAX_INPUTS || (n_given > 0 && n_given != n)) {
        return KI_FAIL(err, KI_ERR_SHAPE, "the model has %d inputs; give one --input-shape each",
                       n);
    }
    for (int i = 0; i < n; i++) {
        ki_shape s = n_given ? given[i] : ki_model_input_decl(m, i);
        if (s.ndim < 0) {
            return KI_FAIL(err, KI_ERR_SHAPE, "input %d has no annotation: use --input-shape", i);
        }
        for (int k = 0; k < s.ndim; k++) {
            if (s.d[k] < 0) {
                s.d[k] = k == 0 ? 1 : 224;
            }
        }
        if (batch > 0 && s.ndim > 0) {
            s.d[0] = batch;
        }
        s.kind = KI_KIND_TENSOR;
        shapes[i] = s;
    }
    return KI_OK;
}
