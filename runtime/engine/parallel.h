/* parallel.h: a loop split over threads: the runtime's one thread pool, for
 * the runner's engines (runner.c: each thread's share of a chunk of prompts)
 * and the trainer (its data-parallel chunks and per-sequence work).
 *
 * parallel_ranges(n, prefix, threads, fn, ctx) calls fn(ctx, lo, hi, worker)
 * on contiguous ranges that cover [0, n) once, one range per worker, worker
 * 0 on the calling thread, and returns when all are done. prefix (n + 1
 * cumulative costs, or NULL for equal costs) balances the ranges. Each item
 * must write only its own outputs: then the result does not depend on the
 * number of threads. Workers are started on first use and kept (if one
 * cannot be started, fewer threads share the work). One caller at a time.
 */
#ifndef TF_PARALLEL_H
#define TF_PARALLEL_H

#define TF_PARALLEL_MAX 64 /* tfrun --threads allows as many */

typedef void (*TfRangeFn)(void *ctx, int lo, int hi, int worker);

void parallel_ranges(int n, const long *prefix, int threads, TfRangeFn fn, void *ctx);

#endif
