/* file.h: reading a whole file into memory, with a cap.
 *
 * A regular file is read at the size fstat gives, and refused when it is
 * larger than the cap; a pipe or FIFO (`<(cmd)`, /dev/stdin) is read up to
 * the cap; anything else (a directory, a device such as /dev/zero) is refused
 * at once.
 *
 * Memory: the returned buffer is malloc'd, NUL-terminated (the terminator is
 * not counted in *len) and belongs to the caller.
 */
#ifndef TF_FILE_H
#define TF_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"

/* The default cap: 2 GiB. */
#define TF_FILE_MAX ((size_t)1 << 31)

/* The file's bytes, or NULL with err set to "PATH: ..." (cannot open, not a
 * regular file, over max bytes, read error, out of memory). */
char *tf_file_read_max(const char *path, size_t max, size_t *len, TfError *err);

/* The same with the default cap and errno instead of a message: EFBIG when
 * over the cap, ENODEV when not a regular file or pipe. */
char *tf_file_read(const char *path, size_t *len);

/* After a short read of f: 1, with f's error flag cleared, when a signal
 * interrupted it (EINTR: a handler installed without SA_RESTART, as a
 * library may; nothing was consumed: read again); 0 at the end or on a real
 * error. Every reader of a pipe (this file's, lines.h's) asks it. */
int tf_read_interrupted(FILE *f);

#endif
