/* fuzz_compile.c: the compile pipeline. Program text -> model (parse,
 * check, lower) -> the bytes of a .tfw -> read back. A program that compiles
 * must give a file the reader accepts (tfc never writes a file tfrun
 * refuses); no input may crash, leak or take unbounded time or memory. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "fuzz_util.h"
#include "tfw.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TfError err = {""};
    int n_errors = 0;
    /* -O (the default) on even first bytes, -O0 on odd: both lowerings. */
    int opt = size > 0 && (data[0] & 1) ? 0 : 1;
    TfModel *m = compile_source("fuzz.tfp", (const char *)data, size, opt, fuzz_devnull(),
                                &n_errors, &err);
    if (!m) return 0;
    unsigned char *buf;
    size_t len;
    if (tfw_write_buffer(m, &buf, &len, &err) == 0) {
        TfModel *back = tfw_read_buffer(buf, len, &err);
        if (!back) fuzz_fail("reading back what the writer wrote", err.msg);
        model_free(back);
        free(buf);
    } else if (strstr(err.msg, "would be refused by the reader")) {
        fuzz_fail("tfc compiled a model the reader would refuse", err.msg);
    }
    model_free(m);
    return 0;
}
