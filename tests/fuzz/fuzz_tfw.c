/* fuzz_tfw.c: the weight-file reader. Bytes -> model (tfw_read_buffer) ->
 * written again -> read again -> one inference step. A file the reader
 * accepts must be written back, re-read, and run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "fuzz_util.h"
#include "tfw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TfError err = {""};
    TfModel *m = tfw_read_buffer(data, size, &err);
    if (!m) return 0;
    unsigned char *buf;
    size_t len;
    if (tfw_write_buffer(m, &buf, &len, &err) < 0)
        fuzz_fail("writing a model the reader accepted", err.msg);
    TfModel *back = tfw_read_buffer(buf, len, &err);
    if (!back) fuzz_fail("re-reading a written model", err.msg);
    free(buf);
    fuzz_one_step(back);
    model_free(back);
    model_free(m);
    return 0;
}
