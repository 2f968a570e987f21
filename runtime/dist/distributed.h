/* distributed.h: running as one of several processes started by an MPI
 * launcher (mpirun, srun), through Open MPI (docs/cluster.md).
 *
 * dist_init starts MPI only when a launcher started this process (its
 * environment has OMPI_COMM_WORLD_SIZE, PMIX_RANK, PMI_RANK or PMI_SIZE);
 * otherwise, and in a build without MPI (CMake option TF_MPI off, or no MPI
 * found), the process is rank 0 of 1 and every function below is the
 * identity or does nothing. MPI's errors end every process (its default
 * handler), so nothing here returns an error after dist_init.
 *
 * Memory: dist_recv grows the caller's buffer; nothing else allocates for
 * the caller.
 */
#ifndef TF_DISTRIBUTED_H
#define TF_DISTRIBUTED_H

#include <stddef.h>

#include "dataparallel.h"

/* 1 when the build has MPI. */
int dist_built(void);
/* Starts MPI under a launcher; 0, or -1 with a message in err when MPI
 * cannot start. */
int dist_init(int *argc, char ***argv, TfError *err);
void dist_finalize(void);
int dist_rank(void);
int dist_size(void);
/* The processes as a TfComm for runtime/train/dataparallel.h; NULL when alone. */
const TfComm *dist_comm(void);

/* Collectives: every rank calls them, in the same order. */
void dist_sum_longs(long *v, int n);      /* v[i] = the sum over the ranks */
void dist_max_doubles(double *v, int n);  /* v[i] = the largest over the ranks */
long dist_exscan_long(long v);            /* the sum of v over the ranks before this one */
void dist_bcast(void *buf, size_t bytes, int root);

/* Point to point. */
void dist_send(const void *buf, size_t bytes, int to);
/* Receives a message from `from` into *buf (grown with realloc as needed,
 * *cap its size); returns its length. */
size_t dist_recv(char **buf, size_t *cap, int from);

#endif
