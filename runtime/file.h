/* file.h: reading a whole file into memory.
 *
 * Memory: the returned buffer is malloc'd, NUL-terminated (the terminator is
 * not counted in *len) and belongs to the caller.
 */
#ifndef TF_FILE_H
#define TF_FILE_H

#include <stddef.h>

/* The file's bytes, or NULL with errno set (open or read failure, or ENOMEM). */
char *tf_file_read(const char *path, size_t *len);

#endif
