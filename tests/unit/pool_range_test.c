/* pool_range_test.c — the thread pool (runtime/pool.c) on iteration counts near INT64_MAX.
 *
 * What it does: runs tsr_parallel_for over huge ranges (n up to INT64_MAX, grains from 1 to
 * INT64_MAX, 1 to 8 threads) with a body that only records the [lo, hi) ranges it is given,
 * then checks that the ranges are non-empty, inside [0, n) and tile it exactly once.  A pool
 * whose arithmetic overflows either hands out bad ranges or never stops, so an alarm turns a
 * hang into a failure.  Prints failures and "N passed, N failed". */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tsr.h"

#include "check.h"

enum { MAX_RANGES = 4096, TIME_LIMIT_S = 60 };

typedef struct Ranges {
    pthread_mutex_t lock;
    int64_t lo[MAX_RANGES], hi[MAX_RANGES];
    int count;
    int overflowed; /* more calls than MAX_RANGES */
} Ranges;

static void record_range(void *ctx, int64_t lo, int64_t hi) {
    Ranges *r = ctx;
    pthread_mutex_lock(&r->lock);
    if (r->count < MAX_RANGES) {
        r->lo[r->count] = lo;
        r->hi[r->count] = hi;
        r->count++;
    } else {
        r->overflowed = 1;
    }
    pthread_mutex_unlock(&r->lock);
}

/* The recorded ranges, sorted by start, must be [0, a), [a, b), …, [z, n). */
static int tiles_exactly(Ranges *r, int64_t n) {
    if (r->overflowed || r->count == 0) return 0;
    for (int i = 1; i < r->count; i++) /* insertion sort: few ranges */
        for (int j = i; j > 0 && r->lo[j - 1] > r->lo[j]; j--) {
            int64_t lo = r->lo[j], hi = r->hi[j];
            r->lo[j] = r->lo[j - 1], r->hi[j] = r->hi[j - 1];
            r->lo[j - 1] = lo, r->hi[j - 1] = hi;
        }
    int64_t at = 0;
    for (int i = 0; i < r->count; i++) {
        if (r->lo[i] != at || r->hi[i] <= r->lo[i] || r->hi[i] > n) return 0;
        at = r->hi[i];
    }
    return at == n;
}

static void huge_range(int64_t n, int64_t grain, int threads) {
    static Ranges r = {.lock = PTHREAD_MUTEX_INITIALIZER};
    r.count = 0;
    r.overflowed = 0;
    tsr_set_num_threads(threads);
    tsr_parallel_for(record_range, &r, n, grain);
    char what[160];
    snprintf(what, sizeof what, "n %lld, grain %lld, %d threads: the ranges tile [0, n) exactly once",
             (long long)n, (long long)grain, threads);
    check(tiles_exactly(&r, n), what, NULL);
}

static void on_alarm(int sig) {
    (void)sig;
    static const char message[] = "FAIL tsr_parallel_for did not return within the time limit\n";
    if (write(STDOUT_FILENO, message, sizeof message - 1) < 0) _exit(2);
    _exit(1);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    alarm(TIME_LIMIT_S);
    static const int64_t sizes[] = {INT64_MAX, INT64_MAX - 1, INT64_MAX / 2 + 1, (int64_t)1 << 62};
    static const int64_t grains[] = {1, 1000, INT64_MAX / 3, INT64_MAX / 2, INT64_MAX - 1, INT64_MAX};
    static const int threads[] = {1, 2, 3, 8};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (size_t g = 0; g < sizeof grains / sizeof *grains; g++)
            for (size_t t = 0; t < sizeof threads / sizeof *threads; t++) huge_range(sizes[s], grains[g], threads[t]);
    alarm(0);
    printf("%u passed, %u failed\n", passed, failed);
    return failed != 0;
}
