/* parallel.c: parallel_ranges (parallel.h) on a pool of worker threads.
 *
 * The trainer calls parallel_ranges a few times per step, on work of a few
 * hundred microseconds, and the runner once per chunk of prompts, so
 * starting threads each time costs too much:
 * workers are started once, on first use, and wait for the next job by
 * spinning briefly on a generation counter, then sleeping on a condition
 * variable. One caller at a time (the trainer's or the runner's thread).
 */
#include "parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define SPINS 20000 /* polls of the counter before a worker sleeps */

typedef struct Job {
    TfRangeFn fn;
    void *ctx;
    int lo, hi, worker;
} Job;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t wake;
    int n_workers; /* started so far; worker w (1..n_workers) runs jobs[w] */
    Job jobs[TF_PARALLEL_MAX];
    unsigned start_gen[TF_PARALLEL_MAX];
    atomic_uint gen;      /* bumped for every job */
    atomic_int remaining; /* workers that have not finished the current job */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {{0}}, {0}, 0, 0};

static void run(const Job *j) {
    if (j->lo < j->hi) j->fn(j->ctx, j->lo, j->hi, j->worker);
}

static void *worker_main(void *arg) {
    int w = (int)(intptr_t)arg;
    // The generation when it was started (the caller posts no job before the
    // worker exists); reading pool.gen here instead could miss a job posted
    // before this thread first runs.
    unsigned seen = pool.start_gen[w];
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen) {
            if (++spins < SPINS) continue;
            pthread_mutex_lock(&pool.mu);
            while ((g = atomic_load(&pool.gen)) == seen) pthread_cond_wait(&pool.wake, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
            break;
        }
        seen = g;
        run(&pool.jobs[w]);
        atomic_fetch_sub_explicit(&pool.remaining, 1, memory_order_release);
    }
    return NULL;
}

/* Starts workers up to `want`; returns how many there are. */
static int ensure_workers(int want) {
    while (pool.n_workers < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int w = pool.n_workers + 1;
        pool.jobs[w] = (Job){0};
        pool.start_gen[w] = atomic_load(&pool.gen);
        int ok = pthread_create(&tid, &attr, worker_main, (void *)(intptr_t)w) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        pool.n_workers = w;
    }
    return pool.n_workers;
}

void parallel_ranges(int n, const long *prefix, int threads, TfRangeFn fn, void *ctx) {
    if (threads > TF_PARALLEL_MAX) threads = TF_PARALLEL_MAX;
    if (threads > n) threads = n;
    if (threads > 1) {
        int have = ensure_workers(threads - 1);
        if (have < threads - 1) threads = have + 1; // as many as could be started
    }
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
    // Every started worker takes part (those beyond `threads` with no work).
    for (int w = 1; w <= pool.n_workers; w++)
        pool.jobs[w] = w < threads ? jobs[w] : (Job){fn, ctx, 0, 0, w};
    atomic_store(&pool.remaining, pool.n_workers);
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add_explicit(&pool.gen, 1, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);
    run(&jobs[0]);
    for (int spins = 0; atomic_load_explicit(&pool.remaining, memory_order_acquire) > 0;)
        if (++spins > SPINS) sched_yield();
}
