/* distributed.c: MPI start-up, collectives and messages (distributed.h);
 * without TF_HAVE_MPI, one process. */
#define _POSIX_C_SOURCE 200809L
#include "distributed.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef TF_HAVE_MPI
#include <mpi.h>
#endif

static int started, rank, size = 1;
static TfComm comm;

int dist_rank(void) { return rank; }
int dist_size(void) { return size; }
const TfComm *dist_comm(void) { return size > 1 ? &comm : NULL; }

/* Whether a launcher started this process: Open MPI's mpirun, or a PMI/PMIx
 * process manager (srun, MPICH's and Intel's launchers). */
static int under_launcher(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return 1;
    return 0;
}

#ifdef TF_HAVE_MPI

#define PIECE (1 << 30) /* bytes per MPI message: counts are ints */

int dist_built(void) { return 1; }

/* TfComm's allgather: item_bytes-sized items, as one contiguous type. */
static void allgather(void *ctx, void *buf, size_t item_bytes, const int *counts,
                      const int *displs) {
    (void)ctx;
    MPI_Datatype item;
    MPI_Type_contiguous((int)item_bytes, MPI_BYTE, &item);
    MPI_Type_commit(&item);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, counts, displs, item,
                   MPI_COMM_WORLD);
    MPI_Type_free(&item);
}

int dist_init(int *argc, char ***argv, TfError *err) {
    if (!under_launcher()) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        tf_error_set(err, "MPI could not start");
        return -1;
    }
    started = 1;
    atexit(dist_finalize); /* also after exit() on a usage error */
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    comm = (TfComm){rank, size, allgather, NULL};
    return 0;
}

void dist_finalize(void) {
    if (started) MPI_Finalize();
    started = 0;
}

void dist_sum_longs(long *v, int n) {
    if (size > 1) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
}

void dist_max_doubles(double *v, int n) {
    if (size > 1) MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
}

long dist_exscan_long(long v) {
    long before = 0;
    if (size > 1) MPI_Exscan(&v, &before, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return rank == 0 ? 0 : before; /* MPI leaves rank 0's undefined */
}

void dist_bcast(void *buf, size_t bytes, int root) {
    for (size_t off = 0; size > 1 && off < bytes; off += PIECE) {
        size_t n = bytes - off < PIECE ? bytes - off : PIECE;
        MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
    }
}

void dist_send(const void *buf, size_t bytes, int to) {
    uint64_t len = bytes;
    MPI_Send(&len, 1, MPI_UINT64_T, to, 0, MPI_COMM_WORLD);
    for (size_t off = 0; off < bytes; off += PIECE) {
        size_t n = bytes - off < PIECE ? bytes - off : PIECE;
        MPI_Send((const char *)buf + off, (int)n, MPI_BYTE, to, 0, MPI_COMM_WORLD);
    }
}

size_t dist_recv(char **buf, size_t *cap, int from) {
    uint64_t len;
    MPI_Recv(&len, 1, MPI_UINT64_T, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (*cap < len + 1) {
        char *p = realloc(*buf, len + 1);
        if (!p) MPI_Abort(MPI_COMM_WORLD, 1); /* nowhere to put it: every rank stops */
        *buf = p;
        *cap = len + 1;
    }
    for (size_t off = 0; off < len; off += PIECE) {
        size_t n = len - off < PIECE ? len - off : PIECE;
        MPI_Recv(*buf + off, (int)n, MPI_BYTE, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    (*buf)[len] = '\0';
    return len;
}

#else /* one process */

int dist_built(void) { return 0; }
int dist_init(int *argc, char ***argv, TfError *err) {
    (void)argc;
    (void)argv;
    // Several copies that each did all the work would print and write N times.
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    if (under_launcher() && n && atoi(n) > 1) {
        tf_error_set(err, "built without MPI (CMake found none, or TF_MPI=OFF): run it "
                          "without mpirun or srun, or rebuild with MPI");
        return -1;
    }
    return 0;
}
void dist_finalize(void) { (void)started; (void)comm; }
void dist_sum_longs(long *v, int n) { (void)v; (void)n; }
void dist_max_doubles(double *v, int n) { (void)v; (void)n; }
long dist_exscan_long(long v) { (void)v; return 0; }
void dist_bcast(void *buf, size_t bytes, int root) { (void)buf; (void)bytes; (void)root; }
void dist_send(const void *buf, size_t bytes, int to) { (void)buf; (void)bytes; (void)to; }
size_t dist_recv(char **buf, size_t *cap, int from) {
    (void)buf;
    (void)cap;
    (void)from;
    return 0;
}

#endif
