/* dataparallel.h: data-parallel training whose result does not depend on
 * how many threads or processes share the work.
 *
 *   TfDataParallel *dp = dp_new(master, threads, max_batch, max_len, comm, &err);
 *   for each step:
 *       loss = dp_forward_backward(dp, &train, idx, B, step);  (master's gradient)
 *       trainer_step(master, lr);
 *
 * A global batch of B examples is cut into fixed chunks of K consecutive
 * examples, K = dp_chunk_size(B) (it depends on B alone), G = ceil(B / K)
 * of them. One worker trainer computes a chunk's gradient (its share of the
 * whole batch's loss: TfBatch.loss_rows) on its own, into that chunk's slot;
 * the batch's gradient is then the sum of the slots in chunk order,
 * g_0 + g_1 + ... + g_{G-1}, element by element. Which thread or process
 * computed a chunk changes no bit of it, so the trained model is the same
 * on any number of threads and ranks. (A reduction whose order depends on
 * the number of participants, such as MPI_Allreduce's, would not be.)
 *
 * Threads: the chunks of this process go to `threads` workers (the pool of
 * runtime/engine/parallel.h), each with its own activations; a batch of one chunk
 * runs on one worker, which then splits its attention and LayerNorm work.
 *
 * Processes: `comm` (NULL: one process; runtime/dist/distributed.h makes one
 * from MPI). Rank r computes chunks [G r / size, G (r + 1) / size); one
 * allgather gives every rank every chunk's gradient, every rank sums them
 * in order and takes the same optimizer step, so every rank holds the same
 * model and nothing else is exchanged. Bytes each rank receives per step:
 * (G - its chunks) x (4 n_params + 64).
 *
 * Memory: dp_new borrows the master trainer (which must outlive dp) and the
 * comm; dp owns its workers, batches and G gradient slots.
 */
#ifndef TF_DATAPARALLEL_H
#define TF_DATAPARALLEL_H

#include "dataset.h"
#include "train.h"

/* A group of processes: rank in [0, size). allgather: buf holds `size`
 * parts, part r is counts[r] items of item_bytes bytes at item displs[r];
 * each rank has filled its own part, and afterwards every part is filled on
 * every rank. */
typedef struct TfComm {
    int rank, size;
    void (*allgather)(void *ctx, void *buf, size_t item_bytes, const int *counts,
                      const int *displs);
    void *ctx;
} TfComm;

#define DP_CHUNK 16      /* examples per chunk ... */
#define DP_MAX_CHUNKS 64 /* ... unless the batch has more than DP_CHUNK x this */

typedef struct TfDataParallel TfDataParallel;

/* Examples per chunk for a batch of `batch` examples. */
int dp_chunk_size(int batch);

/* Workers for batches of up to max_batch examples of up to max_len tokens.
 * NULL with err set when out of memory. */
TfDataParallel *dp_new(TfTrainer *master, int threads, int max_batch, int max_len,
                       const TfComm *comm, TfError *err);
void dp_free(TfDataParallel *dp);

/* The loss of examples idx[0..n) of d (n <= max_batch) at training step
 * `step` (dropout masks), and its gradient in the master's gradient buffer;
 * the same on every rank. */
double dp_forward_backward(TfDataParallel *dp, const TfDataset *d, const int *idx, int n,
                           long step);

/* The mean loss over every example of d (no dropout) and, in *correct, how
 * many the model gets right (trainer_evaluate); the same on every rank. */
double dp_evaluate(TfDataParallel *dp, const TfDataset *d, int *correct);

#endif
