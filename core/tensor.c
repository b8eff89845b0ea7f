/* tensor.c - shape helpers. */
#include "tensor.h"

#include <stdio.h>
#include <string.h>

#include "ckd.h"

bool ki_shape_numel(const ki_shape *s, int64_t *numel)
{
    int64_t n = 1;
    if (s->ndim < 0 || s->ndim > KI_MAX_DIMS) {
        return false;
    }
    for (int i = 0; i < s->ndim; i++) {
        if (s->d[i] < 0 || !ki_ckd_mul_i64(&n, n, s->d[i])) {
            return false;
        }
    }
    if (n > KI_MAX_NUMEL) {
        return false;
    }
    *numel = n;
    return true;
}

ki_shape ki_shape_make(int ndim, const int64_t *d)
{
    ki_shape s;
    memset(&s, 0, sizeof s);
    s.ndim = ndim;
    for (int i = 0; i < ndim && i < KI_MAX_DIMS; i++) {
        s.d[i] = d[i];
    }
    return s;
}

bool ki_shape_equal(const ki_shape *a, const ki_shape *b)
{
    if (a->ndim != b->ndim) {
        return false;
    }
    for (int i = 0; i < a->ndim; i++) {
        if (a->d[i] != b->d[i]) {
            return false;
        }
    }
    return true;
}

bool ki_axis_norm(int64_t axis, int ndim, int *out)
{
    if (axis < 0) {
        axis += ndim;
    }
    if (axis < 0 || axis >= ndim) {
        return false;
    }
    *out = (int)axis;
    return true;
}

const char *ki_shape_str(const ki_shape *s, char *buf, size_t size)
{
    size_t pos = 0;
    if (size == 0) {
        return buf;
    }
    buf[0] = '\0';
    if (s->has_values && (s->kind == KI_KIND_LIST || s->kind == KI_KIND_SCALAR)) {
        int n = s->kind == KI_KIND_SCALAR ? 1 : (int)s->d[0];
        pos += (size_t)snprintf(buf + pos, size - pos, s->kind == KI_KIND_LIST ? "[" : "");
        for (int i = 0; i < n && i < KI_MAX_VALUES && pos < size; i++) {
            pos += (size_t)snprintf(buf + pos, size - pos, "%s%g", i ? "," : "", s->values[i]);
        }
        if (pos < size && s->kind == KI_KIND_LIST) {
            snprintf(buf + pos, size - pos, "]");
        }
        return buf;
    }
    pos += (size_t)snprintf(buf + pos, size - pos, "(");
    for (int i = 0; i < s->ndim && pos < size; i++) {
        if (s->d[i] < 0) {
            pos += (size_t)snprintf(buf + pos, size - pos, "%s?", i ? "," : "");
        } else {
            pos +=
                (size_t)snprintf(buf + pos, size - pos, "%s%lld", i ? "," : "", (long long)s->d[i]);
        }
    }
    if (pos < size) {
        snprintf(buf + pos, size - pos, ")");
    }
    return buf;
}

ki_status ki_shape_check(const ki_shape *s, ki_error *err)
{
    char buf[128];
    int64_t n;
    if (s->ndim < 0 || s->ndim > KI_MAX_DIMS) {
        return KI_FAIL(err, KI_ERR_LIMIT, "rank %d is outside 0..%d", s->ndim, KI_MAX_DIMS);
    }
    for (int i = 0; i < s->ndim; i++) {
        if (s->d[i] < 0 || s->d[i] > KI_MAX_DIM) {
            return KI_FAIL(err, KI_ERR_SHAPE, "shape %s has an invalid dimension %d",
                           ki_shape_str(s, buf, sizeof buf), i);
        }
    }
    if (!ki_shape_numel(s, &n)) {
        return KI_FAIL(err, KI_ERR_LIMIT, "shape %s has more than %lld elements",
                       ki_shape_str(s, buf, sizeof buf), (long long)KI_MAX_NUMEL);
    }
    return KI_OK;
}
