/* npy.h - NumPy .npy files: read any little-endian float/int array as float32; write float32.
 * Every header field is checked against the file; writes go to a temporary name and are
 * renamed into place when complete. */
#ifndef KI_NPY_H
#define KI_NPY_H

#include "../core/io.h"
#include "../core/kinfer.h"

/* Reads path into *data (malloc'd, caller frees) with its shape. */
ki_status ki_npy_read(const char *path, ki_shape *shape, float **data, ki_error *err);
/* Parses a whole .npy held in memory. */
ki_status ki_npy_parse(const unsigned char *buf, size_t len, const char *label, ki_shape *shape,
                       float **data, ki_error *err);
/* Writes a float32 array atomically (temporary file + rename). */
ki_status ki_npy_write(const char *path, const ki_shape *shape, const float *data, ki_error *err);
/* Writes bytes to path atomically. */
ki_status ki_file_write_atomic(const char *path, const void *data, size_t len, ki_error *err);

#endif
