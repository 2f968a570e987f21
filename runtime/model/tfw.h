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
 * d_model, registers, layers, output, generate, source, source_name, made_by,
 * learned (how the file was made: JSON objects kept as text).
 *
 * Memory: tfw_read returns a model the caller frees with model_free; the
 * writers do not take ownership of the model.
 */
#ifndef TF_TFW_H
#define TF_TFW_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* Upper bound on the JSON header, against absurd or hostile sizes. */
#define TFW_MAX_HEADER (64u * 1024u * 1024u)
/* Upper bound on a whole file read by tfw_read: 2 GiB. */
#define TFW_MAX_FILE ((size_t)1 << 31)

/* Reads and validates a weight file. NULL with err set on any problem; the
 * message names the file, the field and what is wrong with it. */
TfModel *tfw_read(const char *path, TfError *err);
TfModel *tfw_read_buffer(const unsigned char *buf, size_t len, TfError *err);

/* The tensors of any safetensors file of float32 tensors (a Hugging Face
 * model.safetensors), checked as tfw_read checks them, in a model that holds
 * nothing else (no layers, no metadata: not a valid model). NULL with err
 * set ("PATH: tensor 'h.0.attn.c_attn.weight': dtype 'F16' is not
 * supported (only F32)"). */
TfModel *tfw_read_tensors(const char *path, TfError *err);

/* Writes m (which must pass model_validate). 0, or -1 with err set. The file
 * is written to a temporary name and renamed (outfile_write: through a
 * symbolic link, never over a non-regular or read-only file), so a failure
 * never leaves a half-written file at path. */
int tfw_write(const TfModel *m, const char *path, TfError *err);
/* Serializes to a malloc'd buffer; *out and *len on success. */
int tfw_write_buffer(const TfModel *m, unsigned char **out, size_t *len, TfError *err);
/* tfw_write with only the first n_tensors tensors: a trained model without
 * the optimizer state the trainer appends after them. */
int tfw_write_tensors(const TfModel *m, int n_tensors, const char *path, TfError *err);

/* Any safetensors file of float32 tensors (not a model: an activation dump),
 * with n_meta metadata strings given as key, value pairs meta[2i], meta[2i+1];
 * written as tfw_write writes. 0, or -1 with err set. */
int tfw_write_safetensors(const char *path, const TfTensor *ts, int n, const char *const *meta,
                          int n_meta, TfError *err);

/* The shortest decimal ("0.1", "1e-08") that reads back as the float f: how
 * the metadata writes settings (made_by, learned). buf holds 32 bytes. */
void tfw_float_text(float f, char buf[static 32]);

/* What a trainer needs from a learned model's settings (__metadata__.learned,
 * which tfc writes for a program with a `model { ... }` block). */
typedef struct TfLearnedSettings {
    float dropout;
    int learned_positions; /* 1: embed.position.weight is trained */
    uint64_t seed;
} TfLearnedSettings;
/* 0, or -1 with err set when the model has no learned settings or they are malformed. */
int tfw_learned_settings(const TfModel *m, TfLearnedSettings *s, TfError *err);

#endif
