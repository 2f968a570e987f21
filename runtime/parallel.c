/* parallel.c: parallel_ranges (parallel.h). */
#include "parallel.h"

#include <pthread.h>

typedef struct Job {
    TfRangeFn fn;
    void *ctx;
    int lo, hi, worker;
} Job;

static void *run_job(void *arg) {
    Job *j = arg;
    j->fn(j->ctx, j->lo, j->hi, j->worker);
    return NULL;
}

void parallel_ranges(int n, const long *prefix, int threads, TfRangeFn fn, void *ctx) {
    if (threads > TF_PARALLEL_MAX) threads = TF_PARALLEL_MAX;
    if (threads > n) threads = n;
    if (threads <= 1) {
        if (n > 0) fn(ctx, 0, n, 0);
        return;
    }
    // Range w ends where the cumulative cost passes (w + 1) / threads of the total.
    Job jobs[TF_PARALLEL_MAX];
    int start = 0;
    for (int w = 0; w < threads; w++) {
        int end = n;
        if (w < threads - 1) {
            if (prefix) {
                long goal = prefix[0] + (prefix[n] - prefix[0]) * (w + 1) / threads;
                end = start;
                while (end < n && prefix[end + 1] <= goal) end++;
            } else {
                end = (int)((long)n * (w + 1) / threads);
            }
            if (end < start) end = start;
        }
        jobs[w] = (Job){fn, ctx, start, end, w};
        start = end;
    }
    pthread_t tid[TF_PARALLEL_MAX];
    int started[TF_PARALLEL_MAX] = {0};
    for (int w = 1; w < threads; w++)
        started[w] = jobs[w].lo < jobs[w].hi && pthread_create(&tid[w], NULL, run_job, &jobs[w]) == 0;
    if (jobs[0].lo < jobs[0].hi) run_job(&jobs[0]);
    for (int w = 1; w < threads; w++) {
        if (started[w]) pthread_join(tid[w], NULL);
        else if (jobs[w].lo < jobs[w].hi) run_job(&jobs[w]);
    }
}
