/* fuzz_batch.c: the --batch / --check line reader (runtime/engine/runner.c
 * runner_run) on programs/binary_add.tfp (small: fast runs), or on
 * programs/words.tfp (a vocabulary of words: prompts split at blanks). The
 * first byte picks the model (its top bit), the mode (check or generate), the
 * tokens to generate (0..3) and the batch size; the rest is the input
 * stream. Bad lines are counted, never fatal. */
#define _POSIX_C_SOURCE 200809L
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runner.h"
#include "fuzz_util.h"

static TfModel *model, *words;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    model = fuzz_compile_file("binary_add.tfp");
    words = fuzz_compile_file("words.tfp");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    TfRunnerOptions o = {.n_new = data[0] & 3, .batch_size = 1 + ((data[0] >> 2) & 7),
                        .n_threads = 1, .use_cache = !((data[0] >> 5) & 1),
                        .check = (data[0] >> 6) & 1, .show_failures = 3};
    FILE *in = fmemopen((void *)(data + 1), size - 1 > 0 ? size - 1 : 1, "r");
    if (!in) return 0;
    if (size == 1) fgetc(in); /* fmemopen needs a size: read past the one byte */
    TfRunnerStats st;
    TfError err = {""};
    const TfModel *m = (data[0] >> 7) & 1 ? words : model;
    if (runner_run(m, in, "fuzz", fuzz_devnull(), fuzz_devnull(), &o, &st, &err) < 0)
        fuzz_fail("runner_run failed on its own (not a bad line)", err.msg);
    fclose(in);
    return 0;
}
