/* shard.h: tfrun --batch and --check over the ranks of an MPI job
 * (runtime/dist/distributed.h, docs/cluster.md).
 *
 * shard_run does what runner_run (runner.h) does, with the lines split over
 * the ranks, each running them on its own threads:
 *   - a regular file: rank r reads only its share of the bytes, from the
 *     first line that starts at or after size x r / N to the first line
 *     that starts at or after size x (r + 1) / N (every rank opens the
 *     file: on a cluster it must be on a shared file system);
 *   - a pipe (stdin under mpirun): rank 0 reads blocks of lines and hands
 *     them out in turn, one to each rank, itself included;
 *   - own_input: every rank reads all of its own `in` (say its own
 *     generator's shard: `tools/adder_cases.py --shard R/N | tfrun ...
 *     --check - --shard-input`); the cases are rank 0's, then rank 1's, ...
 * Rank 0 prints every rank's output in case order: the completions, or the
 * first o->show_failures failures (line numbers count from each rank's own
 * input with own_input, from the input's start otherwise). Every rank gets
 * the same stats: sums over the ranks, and the longest wall time.
 * Returns 0, or -1 with err set on every rank when the run failed on one.
 */
#ifndef TF_SHARD_H
#define TF_SHARD_H

#include <stdio.h>

#include "runner.h"

int shard_run(const TfModel *m, FILE *in, const char *in_name, int own_input, FILE *out,
              FILE *errs, const TfRunnerOptions *o, TfRunnerStats *st, TfError *err);

#endif
