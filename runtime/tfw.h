/* tfw.h: the .tfw weight file, a safetensors file with a documented metadata
 * profile (docs/weight-format.md).
 *
 *   +--------------------+---------------------------+----------------------+
 *   | u64 LE header size | JSON header (cJSON), padded | tensor data, F32 LE  |
 *   | N                  | with spaces to 8 bytes      | tiled exactly        |
 *   +--------------------+---------------------------+----------------------+
 *
 * The JSON header maps each tensor name to {dtype, shape, data_offsets} and
 * "__metadata__" to a map of strings: format, format_version, vocab, period,
 * d_model, registers, layers, output, generate, source, source_name.
 *
 * Memory: tfw_read returns a model the caller frees with model_free; the
 * writers do not take ownership of the model.
 */
#ifndef TF_TFW_H
#define TF_TFW_H

#include <stddef.h>

#include "model.h"

/* Upper bound on the JSON header, against absurd or hostile sizes. */
#define TFW_MAX_HEADER (64u * 1024u * 1024u)
/* Upper bound on a whole file read by tfw_read: 2 GiB. */
#define TFW_MAX_FILE ((size_t)1 << 31)

/* Reads and validates a weight file. NULL with err set on any problem; the
 * message names the file, the field and what is wrong with it. */
TfModel *tfw_read(const char *path, TfError *err);
TfModel *tfw_read_buffer(const unsigned char *buf, size_t len, TfError *err);

/* Writes m (which must pass model_validate). 0, or -1 with err set. The file
 * is written to a temporary name and renamed (outfile_write: through a
 * symbolic link, never over a non-regular or read-only file), so a failure
 * never leaves a half-written file at path. */
int tfw_write(const TfModel *m, const char *path, TfError *err);
/* Serializes to a malloc'd buffer; *out and *len on success. */
int tfw_write_buffer(const TfModel *m, unsigned char **out, size_t *len, TfError *err);

#endif
