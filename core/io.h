/* io.h - whole-file reads for the loaders and the CLI. */
#ifndef KI_IO_H
#define KI_IO_H

#include <stddef.h>

#include "status.h"

/* Reads a whole file (at most max bytes, else KI_ERR_LIMIT) into a malloc'd buffer the caller
 * frees. Messages name the path. */
ki_status ki_file_read(const char *path, size_t max, unsigned char **buf, size_t *len,
                       ki_error *err);

#endif
