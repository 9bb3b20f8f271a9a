/* pool_test.c — the runtime's thread pool (runtime/pool.c): every iteration of a parallel loop
 * runs exactly once, for many sizes, grains and thread counts; a loop started from inside a
 * chunk runs serially and completes; two threads starting loops at once both complete; a worker
 * that moved off its starter's CPU (pool.c, leave_cpu) is left with the process's CPU mask;
 * loops far apart (the workers asleep between them) and chunks slower than the spin (the caller
 * asleep until the last worker is done) complete, every iteration once; so do thousands of short
 * loops while other threads keep every CPU busy (workers that look at a loop late, after the
 * caller ran their chunks and started the next: their claims must fail, not run a chunk twice).
 * Prints failures and "N passed, N failed". */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tsr.h"

static atomic_int passed, failed; /* check() runs on two threads at once (concurrent) */

static void check(int ok, const char *what, long long n, long long grain, int threads) {
    if (ok) {
        passed++;
        return;
    }
    failed++;
    printf("FAIL %s (n %lld, grain %lld, threads %d)\n", what, n, grain, threads);
}

typedef struct Counts {
    atomic_int *hits;
    atomic_int bad_range;
} Counts;

static void count_range(void *ctx, int64_t lo, int64_t hi) {
    Counts *c = ctx;
    if (lo < 0 || hi <= lo) atomic_fetch_add(&c->bad_range, 1);
    for (int64_t i = lo; i < hi; i++) atomic_fetch_add(&c->hits[i], 1);
}

static void once_each(int64_t n, int64_t grain, int threads) {
    Counts c = {calloc((size_t)n + 1, sizeof(atomic_int)), 0};
    tsr_set_num_threads(threads);
    tsr_parallel_for(count_range, &c, n, grain);
    int ok = atomic_load(&c.bad_range) == 0;
    for (int64_t i = 0; i < n && ok; i++) ok = atomic_load(&c.hits[i]) == 1;
    check(ok, "every iteration runs exactly once", (long long)n, (long long)grain, threads);
    free(c.hits);
}

static void nap_ms(long ms) { nanosleep(&(struct timespec){.tv_sec = ms / 1000, .tv_nsec = ms % 1000 * 1000000}, NULL); }

/* Counts like count_range, after a nap long enough that whoever waits for this chunk (the
 * caller, or a worker waiting for work) stops spinning and sleeps. */
static void slow_range(void *ctx, int64_t lo, int64_t hi) {
    nap_ms(3);
    count_range(ctx, lo, hi);
}

/* `loops` loops of n iterations on `threads` threads, with `gap_ms` of sleep between them, each
 * chunk by `range`: true when every iteration of every loop ran exactly once. */
static int loops_apart(tsr_range_fn range, int loops, int64_t n, int threads, long gap_ms) {
    Counts c = {calloc((size_t)n + 1, sizeof(atomic_int)), 0};
    tsr_set_num_threads(threads);
    int ok = c.hits != NULL;
    for (int l = 0; l < loops && ok; l++) {
        if (gap_ms) nap_ms(gap_ms);
        tsr_parallel_for(range, &c, n, 1);
        ok = atomic_load(&c.bad_range) == 0;
        for (int64_t i = 0; i < n && ok; i++) ok = atomic_load(&c.hits[i]) == l + 1;
    }
    free(c.hits);
    return ok;
}

static atomic_bool hogs_stop;

/* Keeps a CPU busy until hogs_stop. */
static void *hog(void *arg) {
    volatile unsigned long spins = 0;
    while (!atomic_load(&hogs_stop)) spins++;
    return arg;
}

static void nested_chunk(void *ctx, int64_t lo, int64_t hi) {
    Counts *c = ctx;
    for (int64_t i = lo; i < hi; i++) tsr_parallel_for(count_range, c, 2, 1); /* the pool is busy: serial */
}

static void *concurrent(void *arg) {
    once_each(100000, 100, 4);
    return arg;
}

#if defined(__linux__)
static cpu_set_t process_cpus;

/* Counts the chunks that ran on a thread whose CPU mask is not the process's. */
static void affinity_range(void *ctx, int64_t lo, int64_t hi) {
    (void)lo, (void)hi;
    cpu_set_t mine;
    if (sched_getaffinity(0, sizeof mine, &mine) != 0 || !CPU_EQUAL(&mine, &process_cpus)) atomic_fetch_add((atomic_int *)ctx, 1);
}
#endif

int main(void) {
#if defined(__linux__)
    /* Before any worker exists: the first loop starts them, and they move off this CPU. */
    if (sched_getaffinity(0, sizeof process_cpus, &process_cpus) == 0) {
        atomic_int pinned = 0;
        tsr_set_num_threads(4);
        for (int rep = 0; rep < 50; rep++) tsr_parallel_for(affinity_range, &pinned, 64, 1);
        check(atomic_load(&pinned) == 0, "workers keep the process's CPU mask", 64, 1, 4);
    }
#endif
    static const int64_t sizes[] = {1, 2, 3, 7, 64, 1000, 4097, 100000};
    static const int64_t grains[] = {1, 3, 100, 5000};
    static const int threads[] = {1, 2, 3, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
            for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) once_each(sizes[s], grains[g], threads[t]);
    for (int rep = 0; rep < 200; rep++) once_each(10000, 10, 2); /* many loops on a warm pool */

    /* Workers that fell asleep between loops (the spin lasts 0.4 ms) are woken for the next. */
    check(loops_apart(count_range, 20, 64, 2, 2), "loops 2 ms apart", 64, 1, 2);
    check(loops_apart(count_range, 20, 64, 8, 2), "loops 2 ms apart", 64, 1, 8);
    /* Chunks of 3 ms: the caller, done with its own, sleeps until the workers finish theirs. */
    check(loops_apart(slow_range, 10, 2, 2, 0), "chunks slower than the spin", 2, 1, 2);
    check(loops_apart(slow_range, 10, 16, 8, 1), "chunks slower than the spin, loops apart", 16, 1, 8);

    /* Every CPU busy with other threads: workers are descheduled mid-loop and come back late. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int hog_count = cpus < 1 ? 1 : cpus > 8 ? 8 : (int)cpus;
    pthread_t hogs[8];
    for (int i = 0; i < hog_count; i++) pthread_create(&hogs[i], NULL, hog, NULL);
    check(loops_apart(count_range, 3000, 64, 2, 0), "short loops on busy CPUs", 64, 1, 2);
    check(loops_apart(count_range, 1000, 1000, 8, 0), "short loops on busy CPUs", 1000, 1, 8);
    atomic_store(&hogs_stop, true);
    for (int i = 0; i < hog_count; i++) pthread_join(hogs[i], NULL);

    /* A chunk that starts a loop of its own: the inner loop runs on the chunk's thread. */
    tsr_set_num_threads(2);
    Counts inner = {calloc(2, sizeof(atomic_int)), 0};
    tsr_parallel_for(nested_chunk, &inner, 1000, 1);
    check(atomic_load(&inner.hits[0]) == 1000 && atomic_load(&inner.hits[1]) == 1000, "nested loops complete", 1000, 1, 2);
    free(inner.hits);

    pthread_t a, b;
    pthread_create(&a, NULL, concurrent, NULL);
    pthread_create(&b, NULL, concurrent, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    check(tsr_num_threads() >= 1, "thread count", 0, 0, tsr_num_threads());
    printf("%d passed, %d failed\n", atomic_load(&passed), atomic_load(&failed));
    return atomic_load(&failed) != 0;
}
