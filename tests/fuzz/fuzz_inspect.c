/* fuzz_inspect.c: the inspection paths over an arbitrary weight file. Bytes
 * -> model (tfw_read_buffer); a model the reader accepts goes through what
 * tfrun --trace, --report, --svg, --dump and --compare do with a two-token
 * prompt: the trace, the report page and its pictures (the decoded
 * registers, inspect_live, the layers' parts and run-time checks), the
 * activations file, and the model compared with itself. Each may refuse
 * (a failed run-time check, float32 overflow, no attention head to compare)
 * with a message; none may crash, trip a sanitizer or leak. Files go to a
 * folder made at start-up. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "dump.h"
#include "fuzz_util.h"
#include "inspect.h"
#include "session.h"
#include "tfw.h"

static char dir[4096], report[4200], svgs[4200], dump[4200], page[4200], pics[4200];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/fuzz_inspect.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) fuzz_fail("mkdtemp", dir);
    snprintf(report, sizeof report, "%s/report.html", dir);
    snprintf(svgs, sizeof svgs, "%s/svg", dir);
    snprintf(dump, sizeof dump, "%s/acts.safetensors", dir);
    snprintf(page, sizeof page, "%s/compare.html", dir);
    snprintf(pics, sizeof pics, "%s/compare", dir);
    return 0;
}

/* A refusal must say why. */
static void refused_with_message(const char *what, int rc, const TfError *err) {
    if (rc < 0 && !err->msg[0]) fuzz_fail(what, "failed without a message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    TfError err = {""};
    TfModel *m = tfw_read_buffer(data, size, &err);
    if (!m) return 0;
    // The prompt: the BOS (or token 0), then the last token of the vocabulary.
    int len = m->max_len >= 2 ? 2 : 1, tokens[2] = {m->bos >= 0 ? m->bos : 0, m->n_vocab - 1};
    char text[3] = {m->vocab[tokens[0]], m->vocab[tokens[1]], '\0'};
    text[len] = '\0';

    // --trace --report --svg, one token generated.
    int *out = calloc((size_t)len + 2, sizeof *out);
    float *values = calloc((size_t)len + 2, sizeof *values);
    if (!out || !values) fuzz_fail("calloc", "out of memory");
    TfInspectOptions opt = {.trace = 1, .report_path = report, .svg_dir = svgs};
    int n_out = 0;
    err.msg[0] = '\0';
    int rc = inspect_run(m, tokens, len, 1, &opt, fuzz_devnull(), out, values, &n_out, &err);
    refused_with_message("inspect_run", rc, &err);
    free(out);
    free(values);

    // --dump.
    err.msg[0] = '\0';
    rc = dump_activations(m, text, tokens, len, NULL, dump, &err);
    refused_with_message("dump_activations", rc, &err);

    // --compare with itself, both outputs.
    err.msg[0] = '\0';
    TfCapture *c = inspect_capture(m, tokens, len, &err);
    refused_with_message("inspect_capture", c ? 0 : -1, &err);
    if (c) {
        char *live = inspect_live(c);
        free(live);
        TfCompare *cmp = compare_new(c, "a.tfw", c, "b.tfw", &err);
        refused_with_message("compare_new", cmp ? 0 : -1, &err);
        if (cmp) {
            err.msg[0] = '\0';
            refused_with_message("compare_write_html", compare_write_html(cmp, page, &err), &err);
            err.msg[0] = '\0';
            refused_with_message("compare_write_svgs", compare_write_svgs(cmp, pics, &err), &err);
            compare_free(cmp);
        }
        capture_free(c);
    }

    // tfinfo's layer and part lines.
    char buf[512];
    for (int l = 0; l < m->n_layers; l++) {
        inspect_layer_text(&m->layers[l], 1, buf, sizeof buf);
        for (int i = 0; i < m->layers[l].n_parts; i++)
            inspect_part_text(&m->layers[l], i, INSPECT_PART_UNITS | INSPECT_PART_LINE, buf,
                              sizeof buf);
    }
    model_free(m);
    return 0;
}
