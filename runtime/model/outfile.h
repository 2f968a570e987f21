/* outfile.h: writing an output file safely (the tools' -o).
 *
 * The target of a path is the path itself or, when it is a symbolic link,
 * the file the link points to (followed to the end; the link is kept). A
 * target that exists must be a regular file the user may write: a
 * directory, a device, a FIFO or a socket is refused, and so is a read-only
 * file (like `cp` without -f, nothing is replaced that its owner protected).
 *
 * outfile_write writes to a temporary file beside the target and renames
 * it over the target, so a reader sees the old file or the new one, never
 * half of one, and a failure leaves no temporary file behind. On Linux the
 * temporary file has no name while it is written (O_TMPFILE): it is linked
 * as TARGET.tmp.XXXXXX just before the rename, so a tool killed with
 * SIGKILL (or by the kernel's out-of-memory killer) mid-write leaves
 * nothing. Where the file system cannot make unnamed files, it is
 * TARGET.tmp.XXXXXX from the start, and SIGKILL leaves it (not cleaned up
 * by the next write: nothing tells a dead writer's file from one a writer
 * on another host is still filling; README.md says it may be removed).
 * While a named file exists its name is held where outfile_remove_pending,
 * which is async-signal-safe, can remove it: a tool's
 * SIGINT/SIGTERM/SIGHUP/SIGXFSZ handler calls it (runtime/tools/cli.h)
 * before dying. Those signals wait while the name is created and
 * registered.
 *
 * Memory: nothing is kept after a call returns; the caller owns buf. A
 * stream from outfile_open owns its buffer until outfile_close.
 */
#ifndef TF_OUTFILE_H
#define TF_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

#include "error.h"

/* Everything outfile_write does but the writing: the target is resolved and
 * checked, and a temporary file is created beside it and removed again. 0,
 * or -1 with err naming the path and the problem. */
int outfile_check(const char *path, TfError *err);

/* Replaces the target of path with the len bytes of buf. A new file gets
 * mode 0666 less the umask, a replaced one keeps its mode. 0, or -1 with err
 * set (nothing changed at path). */
int outfile_write(const char *path, const void *buf, size_t len, TfError *err);

/* For output written piece by piece (pages, pictures, data files): a
 * stream that collects the bytes in memory after outfile_check has found
 * the target writable; outfile_close writes them with outfile_write. NULL
 * with err set. At most 16 are open at once. */
FILE *outfile_open(const char *path, TfError *err);
/* Closes f (from outfile_open) and writes what it holds to its path; a
 * write error on the stream writes nothing. 0, or -1 with err set. */
int outfile_close(FILE *f, TfError *err);

/* Removes the temporary file of a write in progress, if any. Only calls
 * unlink: safe in a signal handler. */
void outfile_remove_pending(void);

#endif
