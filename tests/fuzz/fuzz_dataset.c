/* fuzz_dataset.c: the training-data reader (runtime/train/dataset.c
 * dataset_load_text) on a next-token model (the adder) and a classifier
 * (programs/xor.tfp), chosen by the first byte; the rest is the file. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"
#include "fuzz_util.h"

static TfModel *models[2];
static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    models[0] = fuzz_compile_file("adder.tfp");
    models[1] = fuzz_compile_file("xor.tfp");
    fd = memfd_create("fuzz_dataset", 0);
    if (fd < 0) fuzz_fail("memfd_create", "failed");
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data + 1, size - 1, 0) != (ssize_t)(size - 1))
        fuzz_fail("memfd", "write failed");
    TfDataset d;
    memset(&d, 0, sizeof d);
    TfError err = {""};
    const TfModel *m = models[data[0] & 1];
    dataset_load_text(&d, m, path, &err);
    dataset_free(&d);
    return 0;
}
