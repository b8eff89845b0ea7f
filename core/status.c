/* status.c - error record helpers. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ki_status ki_fail(ki_error *err, ki_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void ki_error_prefix(ki_error *err, const char *fmt, ...)
{
    if (!err) {
        return;
    }
    char head[KI_ERROR_MSG_MAX];
    char old[KI_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    size_t n = strlen(head);
    if (n > sizeof err->msg - 3) {
        n = sizeof err->msg - 3;
    }
    memcpy(err->msg, head, n);
    memcpy(err->msg + n, ": ", 2);
    size_t rest = sizeof err->msg - n - 3;
    size_t m = strnlen(old, rest);
    memcpy(err->msg + n + 2, old, m);
    err->msg[n + 2 + m] = '\0';
}

void ki_error_clear(ki_error *err)
{
    if (err) {
        err->code = KI_OK;
        err->msg[0] = '\0';
    }
}

const char *ki_status_name(ki_status s)
{
    switch (s) {
    case KI_OK:
        return "ok";
    case KI_ERR_IO:
        return "I/O error";
    case KI_ERR_FORMAT:
        return "format error";
    case KI_ERR_UNSUPPORTED:
        return "unsupported";
    case KI_ERR_SHAPE:
        return "shape error";
    case KI_ERR_LIMIT:
        return "limit exceeded";
    case KI_ERR_NOMEM:
        return "out of memory";
    case KI_ERR_INTERNAL:
        return "internal error";
    }
    return "unknown status";
}
