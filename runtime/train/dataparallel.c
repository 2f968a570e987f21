/* dataparallel.c: chunks of a batch on threads and processes, summed in a
 * fixed order (dataparallel.h). */
#include "dataparallel.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"

#define SLOT_ALIGN 16 /* floats: slots start on 64-byte boundaries */

struct TfDataParallel {
    TfTrainer *master;
    const TfComm *comm;
    int threads, max_batch, max_chunk, max_chunks;
    TfTrainer *workers[TF_PARALLEL_MAX];
    TfBatchBuf bufs[TF_PARALLEL_MAX];
    size_t n_params, stride; /* floats per gradient slot: n_params, a double, padding */
    float *slots;            /* max_chunks slots */
    int classify;
    int *counts, *displs;    /* per rank, for allgather */
};

/* The current job: a batch cut into chunks, this rank's [c0, c1). */
typedef struct Job {
    TfDataParallel *dp;
    const TfDataset *d;
    const int *idx;
    int n, k, c0;
    long step;
    int rows, attn_seqs; /* the whole batch's (TfBatch.loss_rows, loss_attn_seqs) */
    int train;           /* 0: evaluate into eval[] */
    double *eval;        /* per chunk: loss x examples, correct */
    int local;           /* chunks run here: [c0, c0 + local) */
    atomic_int next;     /* the next of them not yet taken by a worker */
} Job;

int dp_chunk_size(int batch) {
    int k = DP_CHUNK;
    if (batch > DP_CHUNK * DP_MAX_CHUNKS) k = (batch + DP_MAX_CHUNKS - 1) / DP_MAX_CHUNKS;
    return k;
}

void dp_free(TfDataParallel *dp) {
    if (!dp) return;
    for (int w = 0; w < TF_PARALLEL_MAX; w++) {
        trainer_free(dp->workers[w]);
        batchbuf_free(&dp->bufs[w]);
    }
    free(dp->slots);
    free(dp->counts);
    free(dp->displs);
    free(dp);
}

TfDataParallel *dp_new(TfTrainer *master, int threads, int max_batch, int max_len,
                       const TfComm *comm, TfError *err) {
    TfDataParallel *dp = calloc(1, sizeof *dp);
    if (!dp) goto oom;
    dp->master = master;
    dp->comm = comm && comm->size > 1 ? comm : NULL;
    dp->threads = threads < 1 ? 1 : threads > TF_PARALLEL_MAX ? TF_PARALLEL_MAX : threads;
    dp->max_batch = max_batch < 1 ? 1 : max_batch;
    dp->max_chunk = dp_chunk_size(dp->max_batch);
    // Batches of up to max_batch examples have at most this many chunks.
    dp->max_chunks = (dp->max_batch + DP_CHUNK - 1) / DP_CHUNK;
    if (dp->max_chunks > DP_MAX_CHUNKS) dp->max_chunks = DP_MAX_CHUNKS;
    dp->classify = trainer_model(master)->output_kind == TF_OUTPUT_CLASSIFY;
    int size = dp->comm ? dp->comm->size : 1;
    dp->counts = malloc((size_t)size * sizeof *dp->counts);
    dp->displs = malloc((size_t)size * sizeof *dp->displs);
    if (!dp->counts || !dp->displs) goto oom;
    trainer_grads(master, &dp->n_params);
    dp->stride = (dp->n_params + 2 + SLOT_ALIGN - 1) / SLOT_ALIGN * SLOT_ALIGN;
    dp->slots = aligned_alloc(SLOT_ALIGN * sizeof(float),
                              (size_t)dp->max_chunks * dp->stride * sizeof(float));
    if (!dp->slots) goto oom;
    for (int w = 0; w < dp->threads; w++) {
        dp->workers[w] = trainer_new_worker(master, dp->max_chunk * max_len, dp->max_chunk, err);
        if (!dp->workers[w]) {
            dp_free(dp);
            return NULL;
        }
        trainer_set_threads(dp->workers[w], 1); /* run_local gives worker 0 more */
        if (batchbuf_init(&dp->bufs[w], dp->max_chunk, max_len) < 0) goto oom;
    }
    return dp;
oom:
    dp_free(dp);
    tf_error_set(err, "out of memory for the data-parallel workers");
    return NULL;
}

/* The whole batch's output rows and sequences with attention targets, as
 * batchbuf_fill lays them out (runtime/train/dataset.c). */
static void loss_counts(const TfDataset *d, const int *idx, int n, int classify, int *rows,
                        int *attn_seqs) {
    *rows = 0;
    *attn_seqs = 0;
    for (int i = 0; i < n; i++) {
        const TfExample *e = &d->ex[idx[i]];
        *rows += classify ? 1 : e->len - e->n_prompt + 1;
        int has = 0;
        for (int a = 0; e->attn && a < d->n_attn; a++) has |= d->attn[a].T == e->len;
        *attn_seqs += has;
    }
}

/* Chunks [lo, hi) of this rank's share, on worker w. */
static void run_chunks(void *ctx, int lo, int hi, int w) {
    const Job *j = ctx;
    TfDataParallel *dp = j->dp;
    for (int c = j->c0 + lo; c < j->c0 + hi; c++) {
        int first = c * j->k, n = j->n - first < j->k ? j->n - first : j->k;
        batchbuf_fill(&dp->bufs[w], j->d, j->idx + first, n);
        TfBatch b = dp->bufs[w].batch;
        if (!j->train) {
            int correct;
            double loss = trainer_evaluate(dp->workers[w], &b, &correct);
            j->eval[2 * c] = loss * n;
            j->eval[2 * c + 1] = correct;
            continue;
        }
        b.chunk = c;
        b.loss_rows = j->rows;
        b.loss_attn_seqs = j->attn_seqs;
        float *slot = dp->slots + (size_t)c * dp->stride;
        trainer_set_grads(dp->workers[w], slot);
        double loss = trainer_forward_backward(dp->workers[w], &b, j->step, NULL);
        memcpy(slot + dp->n_params, &loss, sizeof loss);
    }
}

/* Worker w's share of the job: the next chunk no worker has taken, until
 * none is left. A worker that a busy machine slows takes fewer chunks
 * instead of holding up the step; each chunk writes only its own slot, so
 * the result does not depend on which worker ran it. */
static void take_chunks(void *ctx, int lo, int hi, int w) {
    Job *j = ctx;
    (void)lo, (void)hi;
    for (int c; (c = atomic_fetch_add(&j->next, 1)) < j->local;) run_chunks(j, c, c + 1, w);
}

/* Runs chunks [c0, c1) of the job on the workers: one chunk at a time
 * (worker 0, which then splits its own work over the threads), or the
 * chunks over the workers, each taking the next one left. */
static void run_local(TfDataParallel *dp, Job *j, int c1) {
    int local = c1 - j->c0;
    if (local <= 0) return;
    if (local == 1 || dp->threads == 1) {
        trainer_set_threads(dp->workers[0], dp->threads);
        run_chunks(j, 0, local, 0);
        trainer_set_threads(dp->workers[0], 1);
        return;
    }
    j->local = local;
    atomic_store(&j->next, 0);
    parallel_ranges(dp->threads, NULL, dp->threads, take_chunks, j);
}

/* This rank's chunks of G: [*c0, *c1); every rank's in counts and displs. */
static void share(TfDataParallel *dp, int G, int *c0, int *c1) {
    int size = dp->comm ? dp->comm->size : 1, rank = dp->comm ? dp->comm->rank : 0;
    for (int r = 0; r < size; r++) {
        dp->displs[r] = (int)((long)G * r / size);
        dp->counts[r] = (int)((long)G * (r + 1) / size) - dp->displs[r];
    }
    *c0 = (int)((long)G * rank / size);
    *c1 = (int)((long)G * (rank + 1) / size);
}

typedef struct SumJob {
    TfDataParallel *dp;
    float *grads;
    int G;
} SumJob;

#define SUM_BLOCK 4096 /* parameters per block of the ordered sum */

/* grads = slot 0 + slot 1 + ... in order, for parameter blocks [lo, hi). */
static void sum_slots(void *ctx, int lo, int hi, int worker) {
    const SumJob *s = ctx;
    (void)worker;
    size_t p0 = (size_t)lo * SUM_BLOCK, p1 = (size_t)hi * SUM_BLOCK;
    if (p1 > s->dp->n_params) p1 = s->dp->n_params;
    memcpy(s->grads + p0, s->dp->slots + p0, (p1 - p0) * sizeof(float));
    for (int c = 1; c < s->G; c++) {
        const float *g = s->dp->slots + (size_t)c * s->dp->stride;
        for (size_t p = p0; p < p1; p++) s->grads[p] += g[p];
    }
}

double dp_forward_backward(TfDataParallel *dp, const TfDataset *d, const int *idx, int n,
                           long step) {
    Job j = {dp, d, idx, n, dp_chunk_size(n), 0, step, 0, 0, 1, NULL, 0, 0};
    int G = (n + j.k - 1) / j.k, c1;
    loss_counts(d, idx, n, dp->classify, &j.rows, &j.attn_seqs);
    share(dp, G, &j.c0, &c1);
    run_local(dp, &j, c1);
    if (dp->comm)
        dp->comm->allgather(dp->comm->ctx, dp->slots, dp->stride * sizeof(float), dp->counts,
                            dp->displs);
    size_t n_params;
    SumJob s = {dp, trainer_grads(dp->master, &n_params), G};
    int blocks = (int)((n_params + SUM_BLOCK - 1) / SUM_BLOCK);
    parallel_ranges(blocks, NULL, (size_t)G * n_params < 1000000 ? 1 : dp->threads, sum_slots, &s);
    double loss = 0;
    for (int c = 0; c < G; c++) {
        double l;
        memcpy(&l, dp->slots + (size_t)c * dp->stride + dp->n_params, sizeof l);
        loss += l;
    }
    return loss;
}

double dp_evaluate(TfDataParallel *dp, const TfDataset *d, int *correct) {
    *correct = 0;
    if (d->n == 0) return 0.0;
    int k = dp->max_chunk, G = (d->n + k - 1) / k, c1;
    double *eval = calloc((size_t)G * 2, sizeof *eval);
    int *idx = malloc((size_t)d->n * sizeof *idx);
    if (!eval || !idx) { /* no room: the loss is not known */
        free(eval);
        free(idx);
        return -1.0;
    }
    for (int i = 0; i < d->n; i++) idx[i] = i;
    Job j = {dp, d, idx, d->n, k, 0, 0, 0, 0, 0, eval, 0, 0};
    share(dp, G, &j.c0, &c1);
    run_local(dp, &j, c1);
    if (dp->comm)
        dp->comm->allgather(dp->comm->ctx, eval, 2 * sizeof *eval, dp->counts, dp->displs);
    double loss = 0;
    for (int c = 0; c < G; c++) {
        loss += eval[2 * c];
        *correct += (int)eval[2 * c + 1];
    }
    free(eval);
    free(idx);
    return loss / d->n;
}
