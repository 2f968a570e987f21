/* fuzz_train.c: tftrain --init on an arbitrary weight file and training
 * data. The input is a 4-byte little-endian length N, N bytes of a weight
 * file, then a training-data file (PROMPT<TAB>ANSWER or INPUT<TAB>LABEL
 * lines). As tftrain does: the file is read (tfw_read_buffer), its
 * optimizer state dropped, the model checked for training
 * (finetune_check_model), the data read (dataset_load_text) and checked
 * (finetune_check_data), a trainer made for batches of up to 4 examples,
 * each batch checked (trainer_check_batch), then one AdamW step on the first
 * batch; when the loss and the step are finite, the model is written and
 * read back (tftrain never writes a file tfrun refuses). Every refusal is a
 * message; nothing may crash, trip a sanitizer or leak. */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"
#include "finetune.h"
#include "fuzz_util.h"
#include "tfw.h"
#include "train.h"

#define FUZZ_BATCH 4

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fd = memfd_create("fuzz_train", 0);
    if (fd < 0) fuzz_fail("memfd_create", "failed");
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

static void train_one_step(TfModel *m, const TfDataset *d, const int *trainable,
                           const TfLearnedSettings *set) {
    TfError err = {""};
    TfTrainOptions o = {TF_OPT_ADAMW, 0.0f, 0.9f, 0.999f, 1e-8f, 0.01f, 0.0f, set->dropout,
                        set->learned_positions, set->seed, 1, trainable};
    int max_len = d->max_len < 6 ? 6 : d->max_len;
    TfTrainer *t = trainer_new(m, &o, FUZZ_BATCH * max_len, FUZZ_BATCH, &err);
    if (!t) {
        if (!err.msg[0]) fuzz_fail("trainer_new", "failed without a message");
        return;
    }
    TfBatchBuf bb = {0};
    if (batchbuf_init(&bb, FUZZ_BATCH, max_len) < 0) fuzz_fail("batchbuf_init", "out of memory");
    int idx[FUZZ_BATCH], ok = 1;
    for (int i = 0; i < d->n && ok; i += FUZZ_BATCH) {
        int n = d->n - i < FUZZ_BATCH ? d->n - i : FUZZ_BATCH;
        for (int j = 0; j < n; j++) idx[j] = i + j;
        batchbuf_fill(&bb, d, idx, n);
        ok = trainer_check_batch(t, &bb.batch, &err) == 0;
    }
    if (ok) {
        int n = d->n < FUZZ_BATCH ? d->n : FUZZ_BATCH;
        for (int j = 0; j < n; j++) idx[j] = j;
        batchbuf_fill(&bb, d, idx, n);
        double loss = trainer_forward_backward(t, &bb.batch, 0, NULL);
        double norm = trainer_step(t, 1e-3f);
        if (isfinite(loss) && isfinite(norm)) {
            trainer_sync_model(t);
            unsigned char *buf;
            size_t len;
            if (tfw_write_buffer(m, &buf, &len, &err) == 0) {
                TfModel *back = tfw_read_buffer(buf, len, &err);
                // A non-finite parameter is refused by the writer's reader:
                // tftrain would have stopped on the step's norm first.
                if (!back) fuzz_fail("re-reading a trained model", err.msg);
                model_free(back);
                free(buf);
            }
        }
    } else if (!err.msg[0]) {
        fuzz_fail("trainer_check_batch", "refused without a message");
    }
    batchbuf_free(&bb);
    trainer_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    size_t n = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
    if (n > size - 4) return 0;
    TfError err = {""};
    TfModel *m = tfw_read_buffer(data + 4, n, &err);
    if (!m) return 0;
    TfDataset d;
    memset(&d, 0, sizeof d);
    int *trainable = calloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1), sizeof *trainable);
    TfFinetuneRules rules = {0};
    TfLearnedSettings set = {0.0f, 0, 0};
    if (!trainable) fuzz_fail("calloc", "out of memory");
    finetune_drop_state(m);
    if (finetune_check_model(m, &err) < 0) goto done;
    if (m->learned && tfw_learned_settings(m, &set, &err) < 0) goto done;
    if (finetune_mask(m, &rules, !set.learned_positions, trainable, &err) < 0) goto done;
    size_t rest = size - 4 - n;
    if (ftruncate(fd, 0) != 0 || pwrite(fd, data + 4 + n, rest, 0) != (ssize_t)rest)
        fuzz_fail("memfd", "write failed");
    if (dataset_load_text(&d, m, path, &err) < 0) goto done;
    if (finetune_check_data(m, &d, &err) < 0) goto done;
    train_one_step(m, &d, trainable, &set);
done:
    dataset_free(&d);
    free(trainable);
    model_free(m);
    return 0;
}
