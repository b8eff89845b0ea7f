/* zip.h - read-only access to a stored (uncompressed) ZIP archive such as a .pnnx.bin.
 *
 * The file is memory-mapped once; entries are found through the central directory (zip64
 * extras included) and every offset and size is checked against the file before use. Entry
 * data is unaligned: copy it with memcpy. Thread-safe after open. */
#ifndef KI_ZIP_H
#define KI_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#define KI_ZIP_MAX_ENTRIES 1000000

typedef struct ki_zip ki_zip;

typedef struct ki_zip_entry {
    const char *name;
    uint64_t data_offset; /* from the start of the archive */
    uint64_t size;
    uint32_t crc32;
} ki_zip_entry;

ki_status ki_zip_open(const char *path, ki_zip **out, ki_error *err);
/* Parses an archive held in memory (not copied; must outlive the ki_zip). label names it in
 * messages. */
ki_status ki_zip_open_memory(const void *data, size_t size, const char *label, ki_zip **out,
                             ki_error *err);
void ki_zip_close(ki_zip *z);

int ki_zip_count(const ki_zip *z);
const ki_zip_entry *ki_zip_entry_at(const ki_zip *z, int i);
/* The entry with exactly this name (the last one if the archive repeats it), or NULL. */
const ki_zip_entry *ki_zip_find(const ki_zip *z, const char *name);
const unsigned char *ki_zip_data(const ki_zip *z, const ki_zip_entry *e);
/* Checks the entry's CRC-32 against its data. */
ki_status ki_zip_verify(const ki_zip *z, const ki_zip_entry *e, ki_error *err);
uint32_t ki_crc32(uint32_t crc, const unsigned char *p, size_t n);

#endif
