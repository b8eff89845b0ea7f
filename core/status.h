/* status.h - result codes and the error record every fallible function fills.
 *
 * A function that can fail returns ki_status and takes `ki_error *err` last. The message names
 * what went wrong (file:line, operator, entry); callers add context on the way up with
 * ki_error_prefix so the user reads one line. No global state; thread-safe. */
#ifndef KI_STATUS_H
#define KI_STATUS_H

#include <stddef.h>

typedef enum ki_status {
    KI_OK = 0,
    KI_ERR_IO,          /* a file could not be opened, read or written */
    KI_ERR_FORMAT,      /* malformed input: param text, zip, npy, expression */
    KI_ERR_UNSUPPORTED, /* valid input that kinfer does not implement */
    KI_ERR_SHAPE,       /* shapes that do not fit the operator */
    KI_ERR_LIMIT,       /* a size beyond kinfer's limits or an overflow */
    KI_ERR_NOMEM,       /* an allocation failed */
    KI_ERR_INTERNAL     /* a broken invariant: a bug in kinfer */
} ki_status;

#define KI_ERROR_MSG_MAX 1024

typedef struct ki_error {
    ki_status code;
    char msg[KI_ERROR_MSG_MAX];
} ki_error;

/* Fills err (if not NULL) and returns code. */
ki_status ki_fail(ki_error *err, ki_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define KI_FAIL(err, code, ...) ki_fail((err), (code), __VA_ARGS__)

/* Prepends "context: " to err->msg (truncating the tail if needed). */
void ki_error_prefix(ki_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Resets err to KI_OK with an empty message. */
void ki_error_clear(ki_error *err);

const char *ki_status_name(ki_status s);

/* KI_ALWAYS(x): an invariant that must hold. Debug builds assert; release builds fail with
 * KI_ERR_INTERNAL from the enclosing function (which must return ki_status and have `err`). */
#ifdef NDEBUG
#define KI_ALWAYS(x)                                                                               \
    do {                                                                                           \
        if (!(x)) {                                                                                \
            return ki_fail(err, KI_ERR_INTERNAL, "%s:%d: invariant failed: %s", __FILE__,          \
                           __LINE__, #x);                                                          \
        }                                                                                          \
    } while (0)
#else
#include <assert.h>
#define KI_ALWAYS(x) assert(x)
#endif

#endif
