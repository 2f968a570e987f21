/* bench/sgemm.c: OpenBLAS's sgemm at n x n (default 1024), the best rate
 * of a few runs, in GFLOP/s (2 n^3 per product). bench/engine.sh compares
 * the engine's GFLOP/s with it, in the same run, with the same threads
 * (OPENBLAS_NUM_THREADS) and core (OPENBLAS_CORETYPE).
 *
 *   cc -O2 bench/sgemm.c $(pkg-config --cflags --libs openblas) -o sgemm && ./sgemm [N] [cpu]
 *
 * With `cpu`, the time is the process's CPU time (CLOCK_PROCESS_CPUTIME_ID,
 * every thread's) instead of the wall clock: on a loaded machine, what the
 * product costs rather than how long it waited (bench/engine_cpu.sh).
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static clockid_t clock_id = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int cpu = argc > 2 && argv[2][0] == 'c' && argv[2][1] == 'p' && argv[2][2] == 'u' && !argv[2][3];
    if (n < 1 || n > 8192 || argc > 3 || (argc > 2 && !cpu)) {
        fprintf(stderr, "usage: sgemm [N [cpu]], 1 <= N <= 8192\n");
        return 2;
    }
    if (cpu) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    size_t nn = (size_t)n * (size_t)n;
    float *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "sgemm: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < nn; i++) {
        a[i] = (float)(i % 7) - 3.0f;
        b[i] = (float)(i % 5) - 2.0f;
    }
    double best = 0;
    for (int rep = 0; rep < 8; rep++) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        double g = 2.0 * n * (double)n * n / (now() - t0) / 1e9;
        if (g > best) best = g;
    }
    printf("%.1f\n", best);
    free(a), free(b), free(c);
    return 0;
}
