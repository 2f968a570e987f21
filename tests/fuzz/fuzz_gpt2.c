/* fuzz_gpt2.c: tfconvert's GPT-2-style folder reader (convert_from_gpt2).
 * The input is a folder packed as
 *
 *   1 byte    flags: bit 0 set, the vocabulary part is --vocab's characters
 *             (no vocab.json); clear, it is vocab.json
 *   4 bytes   little-endian length C, then C bytes of config.json
 *   4 bytes   little-endian length V, then V bytes of the vocabulary
 *   the rest  model.safetensors
 *
 * (lengths past the end are cut to what is there). The harness writes the
 * files into a folder of its own and converts it as tfconvert does. A
 * refusal must be a message; a model the reader makes must be one tfrun
 * runs: written (tfw_write_buffer) and read back, run one step; written as
 * ONNX (or refused with a message); and written as a GPT-2-style folder
 * when it fits one, which the reader must then take back. Nothing may
 * crash, trip a sanitizer or leak. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "convert.h"
#include "fuzz_util.h"
#include "tfw.h"

static char dir[64], out_dir[96], onnx_path[96];

static void put(const char *folder, const char *name, const uint8_t *p, size_t n);

static void cleanup(void) {
    static const char *names[] = {"config.json", "vocab.json", "model.safetensors"};
    for (int i = 0; i < 3; i++) {
        put(out_dir, names[i], NULL, 0);
        put(dir, names[i], NULL, 0);
    }
    unlink(onnx_path);
    rmdir(out_dir);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fuzz_gpt2.XXXXXX", tmp && strlen(tmp) < 40 ? tmp : "/tmp");
    if (!mkdtemp(dir)) fuzz_fail("mkdtemp", dir);
    snprintf(out_dir, sizeof out_dir, "%s/out", dir);
    snprintf(onnx_path, sizeof onnx_path, "%s/model.onnx", dir);
    atexit(cleanup);
    return 0;
}

/* dir/name holds n bytes of p; a NULL p removes it. */
static void put(const char *folder, const char *name, const uint8_t *p, size_t n) {
    char path[160];
    snprintf(path, sizeof path, "%s/%s", folder, name);
    unlink(path);
    if (!p) return;
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) fuzz_fail("writing", path);
}

/* One part: a 4-byte length and that many bytes (cut to what is left). */
static const uint8_t *part(const uint8_t **p, size_t *left, size_t *n) {
    if (*left < 4) {
        *n = 0;
        *p += *left;
        *left = 0;
        return *p;
    }
    size_t len = (size_t)(*p)[0] | (size_t)(*p)[1] << 8 | (size_t)(*p)[2] << 16 |
                 (size_t)(*p)[3] << 24;
    *p += 4, *left -= 4;
    *n = len < *left ? len : *left;
    const uint8_t *at = *p;
    *p += *n, *left -= *n;
    return at;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int chars = data[0] & 1;
    const uint8_t *p = data + 1;
    size_t left = size - 1, n_config, n_vocab;
    const uint8_t *config = part(&p, &left, &n_config);
    const uint8_t *vocab = part(&p, &left, &n_vocab);
    put(dir, "config.json", config, n_config);
    put(dir, "vocab.json", chars ? NULL : vocab, n_vocab);
    put(dir, "model.safetensors", p, left);

    char vocab_text[257];
    TfConvertOptions opt = {NULL, 0, 2, "fuzz"};
    if (chars) { // tfconvert's --vocab: at most 256 characters, no NUL (argv)
        size_t n = n_vocab > 256 ? 256 : n_vocab;
        memcpy(vocab_text, vocab, n);
        vocab_text[n] = 0;
        opt.vocab = vocab_text;
        opt.vocab_len = (int)strlen(vocab_text);
    }
    TfError err = {""};
    TfModel *m = convert_from_gpt2(dir, &opt, &err);
    if (!m) {
        if (!err.msg[0]) fuzz_fail("convert_from_gpt2", "refused without a message");
        return 0;
    }
    unsigned char *buf;
    size_t len;
    if (tfw_write_buffer(m, &buf, &len, &err) < 0) fuzz_fail("writing a converted model", err.msg);
    TfModel *back = tfw_read_buffer(buf, len, &err);
    if (!back) fuzz_fail("re-reading a converted model (tfrun would refuse it)", err.msg);
    free(buf);
    fuzz_one_step(back);
    model_free(back);

    err.msg[0] = 0;
    if (convert_to_onnx(m, onnx_path, &err) < 0 && !err.msg[0])
        fuzz_fail("convert_to_onnx", "refused without a message");
    unlink(onnx_path);

    // Back out to a folder; a folder the writer makes, the reader takes.
    put(out_dir, "config.json", NULL, 0);
    put(out_dir, "vocab.json", NULL, 0);
    put(out_dir, "model.safetensors", NULL, 0);
    err.msg[0] = 0;
    if (convert_to_gpt2(m, out_dir, &err) == 0) {
        TfConvertOptions again = {NULL, 0, 2, "fuzz"};
        TfModel *m2 = convert_from_gpt2(out_dir, &again, &err);
        if (!m2) fuzz_fail("reading back a folder convert_to_gpt2 wrote", err.msg);
        if (m2->n_layers != m->n_layers || m2->d_model != m->d_model || m2->n_vocab != m->n_vocab)
            fuzz_fail("reading back a folder convert_to_gpt2 wrote", "another shape");
        model_free(m2);
    } else if (!err.msg[0]) {
        fuzz_fail("convert_to_gpt2", "refused without a message");
    }
    model_free(m);
    return 0;
}
