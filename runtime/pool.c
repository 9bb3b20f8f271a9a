/* pool.c — a small pthread pool for the parallel loops of generated code.
 *
 * tsr_parallel_for(fn, ctx, n, grain) splits [0, n) into contiguous chunks; the pool's workers
 * and the calling thread take chunks from a shared counter until none is left.  A parallel loop
 * only ever spans independent cells (docs/runtime.md), so the split does not change results.
 * The counter numbers chunks, not iterations, and every bound is computed without overflow, so
 * any n up to INT64_MAX works (a chunk's first iteration is index * chunk < n).
 * One loop runs on the pool at a time: a call made while the pool is busy (another thread, or
 * a chunk calling back in) runs serially on its caller.  Threads start on first use.
 * Generated routines launch their loops back to back, and waking a thread that sleeps on a
 * condition variable costs tens of microseconds, so a worker spins for a short while (SPIN_NS
 * of wall time, measured rather than counted in pauses, whose cost differs tenfold between CPUs)
 * on the claim word before it sleeps, and the caller spins likewise before it waits for the
 * loop's chunks.  A training step's serial stretches between two parallel loops (packing, small
 * nests) last up to a few hundred microseconds; a worker that slept through one would cost a
 * wake-up at the next loop.  The caller waits for chunks, not for workers: on a machine busy
 * with other processes a worker may not get a CPU for milliseconds, and the caller then runs the
 * chunks left itself instead of waiting for it (a loop is never slower than on one thread by
 * more than a hand-off). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

enum { MAX_THREADS = 256, SPIN_NS = 400000, SPIN_CHECK = 32 };

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* For a spin loop at its round `round`: true once SPIN_NS have passed since round 0 (the clock
 * is read every SPIN_CHECK rounds; *deadline starts at 0).  Each check also yields the CPU, so
 * that on a machine with more runnable threads than cores the spinning thread does not keep
 * the one doing the work off its core (on an idle core, sched_yield returns at once). */
static bool spin_expired(unsigned round, int64_t *deadline) {
    if (round % SPIN_CHECK) return false;
    if (round) sched_yield();
    int64_t t = now_ns();
    if (!*deadline) *deadline = t + SPIN_NS;
    return t > *deadline;
}

/* The loop being run, written by the caller before it publishes the loop and read by a thread
 * only once it has claimed one of the loop's chunks (below).  The words the threads write each
 * have a cache line of their own.
 *
 * Chunks are claimed through one word, `claim`: the loop's generation (32 bits), its chunk count
 * and the index of the next chunk to take (16 bits each; a loop has at most MAX_THREADS chunks).
 * A thread takes chunk k by moving the word from (g, count, k) to (g, count, k + 1); the word
 * says by itself whether the chunk exists, so a worker that looks at it late (descheduled while
 * the machine ran something else) either claims a chunk of the live loop or finds the word moved
 * on and claims nothing.  The caller waits for its loop's chunks to be done (`done`), not for
 * every worker to show up: a worker that never got a CPU does not hold the loop up, and the
 * caller runs the chunks nobody took.  A chunk claimed is a chunk of the caller's live loop, so
 * the fields below are that loop's while it runs. */
typedef struct Pool {
    pthread_mutex_t lock;      /* guards sleeping and waking on the two conditions below */
    pthread_cond_t work_ready, work_done;
    pthread_mutex_t busy;      /* held by the thread whose loop runs on the pool */
    int workers;               /* threads besides the caller */
    tsr_range_fn fn;
    void *ctx;
    int64_t n, chunk;          /* iterations, and iterations per chunk (the last may have fewer) */
    _Alignas(64) atomic_uint_fast64_t claim; /* generation << 32 | chunk count << 16 | next chunk */
    atomic_int sleepers;       /* workers asleep on work_ready, or about to be */
    _Alignas(64) atomic_int_fast64_t done; /* chunks of the current loop finished */
    atomic_bool caller_asleep; /* the caller sleeps on work_done, or is about to */
} Pool;

static Pool pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
                    .work_ready = PTHREAD_COND_INITIALIZER,
                    .work_done = PTHREAD_COND_INITIALIZER,
                    .busy = PTHREAD_MUTEX_INITIALIZER};
static atomic_int requested_threads;

static uint32_t claim_generation(uint64_t c) { return (uint32_t)(c >> 32); }

/* ceil(a / b) for a >= 0, b >= 1, without computing a + b - 1. */
static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

/* Runs chunks of the loop of `generation` until none is left to claim; returns how many it ran,
 * and the loop's chunk count in *count when it ran any. */
static int64_t take_chunks(uint32_t generation, int64_t *count) {
    int64_t ran = 0;
    uint64_t c = atomic_load(&pool.claim);
    for (;;) {
        uint64_t next = c & 0xffff;
        *count = (int64_t)(c >> 16 & 0xffff);
        if (claim_generation(c) != generation || (int64_t)next >= *count) return ran;
        if (!atomic_compare_exchange_weak(&pool.claim, &c, c + 1)) continue; /* c reloaded */
        int64_t lo = (int64_t)next * pool.chunk; /* < n: next < ceil(n / chunk) */
        int64_t hi = pool.n - lo > pool.chunk ? lo + pool.chunk : pool.n;
        pool.fn(pool.ctx, lo, hi);
        ran++;
        c = atomic_load(&pool.claim);
    }
}

/* A new worker that the kernel put on the CPU of the thread that started it moves to another
 * CPU the process may use, and is then free to go anywhere again.  Both threads spin between
 * loops, so when they start on one CPU (the other one busy for a moment) the kernel may see no
 * imbalance worth a migration, and every loop runs as on one thread: a 256×256 matmul on two
 * threads took 140 µs instead of 73 in about one process in five. */
static void leave_cpu(int creator_cpu) {
#if defined(__linux__)
    cpu_set_t all;
    if (creator_cpu < 0 || sched_getcpu() != creator_cpu || sched_getaffinity(0, sizeof all, &all) != 0 ||
        !CPU_ISSET(creator_cpu, &all) || CPU_COUNT(&all) < 2)
        return;
    cpu_set_t others = all;
    CPU_CLR(creator_cpu, &others);
    if (sched_setaffinity(0, sizeof others, &others) == 0) (void)sched_setaffinity(0, sizeof all, &all);
#else
    (void)creator_cpu;
#endif
}

/* What a new worker is told: the CPU it was started from, and the generation of the last loop
 * before it (the next one is its first). */
typedef struct WorkerStart {
    int creator_cpu;
    uint32_t generation;
} WorkerStart;

/* Waking and finishing without a lock: the caller publishes a loop (the claim word), then wakes
 * the workers only if one is asleep; a worker counts itself asleep (under the lock) before it
 * looks at the claim word a last time.  Each side writes its own word, then reads the other's,
 * both sequentially consistent, so at least one of them sees the other: either the caller sees
 * a sleeper and broadcasts (under the lock, which the sleeper holds until it waits), or the
 * worker sees the new loop and does not sleep.  The end of a loop is the mirror image, with
 * `done` and `caller_asleep`. */
static void *worker(void *arg) {
    WorkerStart start = *(WorkerStart *)arg;
    free(arg);
    leave_cpu(start.creator_cpu);
    uint32_t seen = start.generation;
    for (;;) {
        int64_t deadline = 0;
        uint32_t now = seen;
        for (unsigned i = 0; (now = claim_generation(atomic_load(&pool.claim))) == seen && !spin_expired(i, &deadline); i++)
            cpu_relax();
        if (now == seen) {
            pthread_mutex_lock(&pool.lock);
            atomic_fetch_add(&pool.sleepers, 1);
            while ((now = claim_generation(atomic_load(&pool.claim))) == seen)
                pthread_cond_wait(&pool.work_ready, &pool.lock);
            atomic_fetch_sub(&pool.sleepers, 1);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = now;
        int64_t count, ran = take_chunks(seen, &count);
        /* The last chunk's end wakes a caller that went to sleep waiting for it. */
        if (ran && atomic_fetch_add(&pool.done, ran) + ran == count && atomic_load(&pool.caller_asleep)) {
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.work_done);
            pthread_mutex_unlock(&pool.lock);
        }
    }
    return NULL;
}

int tsr_env_threads(void) {
    const char *env = getenv("TSR_NUM_THREADS");
    if (!env) return 0;
    while (*env == ' ' || *env == '\t') env++;
    if (*env < '0' || *env > '9') return 0; /* no sign, nothing else before the digits */
    errno = 0;
    char *end;
    long n = strtol(env, &end, 10);
    while (*end == ' ' || *end == '\t') end++;
    if (*end || n < 1) return 0;
    return n < MAX_THREADS && errno != ERANGE ? (int)n : MAX_THREADS; /* past 256 (however far): 256 */
}

static int default_threads(void) {
    int n = tsr_env_threads();
    if (n > 0) return n;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus < 1 ? 1 : cpus > MAX_THREADS ? MAX_THREADS : (int)cpus;
}

int tsr_num_threads(void) {
    int n = atomic_load(&requested_threads);
    return n > 0 ? n : default_threads();
}

void tsr_set_num_threads(int threads) {
    atomic_store(&requested_threads, threads < 0 ? 0 : threads > MAX_THREADS ? MAX_THREADS : threads);
}

/* Start workers so that the pool has `want` - 1 of them (never fewer than before).  Called by
 * the thread that holds `busy`, between loops. */
static void grow(int want) {
    while (pool.workers < want - 1) {
        WorkerStart *start = malloc(sizeof *start);
        if (!start) break; /* fewer threads: still correct */
#if defined(__linux__)
        start->creator_cpu = sched_getcpu();
#else
        start->creator_cpu = -1;
#endif
        start->generation = claim_generation(atomic_load(&pool.claim));
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int failed = pthread_create(&t, &attr, worker, start);
        pthread_attr_destroy(&attr);
        if (failed) {
            free(start);
            break;
        }
        pool.workers++;
    }
}

void tsr_parallel_for(tsr_range_fn fn, void *ctx, int64_t n, int64_t grain) {
    if (n <= 0 || !fn) return;
    if (grain < 1) grain = 1;
    int threads = tsr_num_threads();
    if (threads <= 1 || n <= grain || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(ctx, 0, n);
        return;
    }
    grow(threads);
    int helpers = pool.workers < threads - 1 ? pool.workers : threads - 1;
    int64_t chunks = ceil_div(n, grain);
    int64_t parts = chunks < helpers + 1 ? chunks : helpers + 1; /* at most MAX_THREADS */
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.chunk = ceil_div(n, parts);
    uint64_t count = (uint64_t)ceil_div(n, pool.chunk);
    atomic_store(&pool.done, 0);
    uint32_t generation = claim_generation(atomic_load(&pool.claim)) + 1;
    atomic_store(&pool.claim, (uint64_t)generation << 32 | count << 16); /* publishes the loop */
    if (atomic_load(&pool.sleepers) > 0) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.work_ready);
        pthread_mutex_unlock(&pool.lock);
    }
    int64_t claimed_count, ran = take_chunks(generation, &claimed_count);
    if (ran) atomic_fetch_add(&pool.done, ran);
    int64_t deadline = 0;
    for (unsigned i = 0; atomic_load(&pool.done) < (int64_t)count && !spin_expired(i, &deadline); i++) cpu_relax();
    if (atomic_load(&pool.done) < (int64_t)count) {
        pthread_mutex_lock(&pool.lock);
        atomic_store(&pool.caller_asleep, true);
        while (atomic_load(&pool.done) < (int64_t)count) pthread_cond_wait(&pool.work_done, &pool.lock);
        atomic_store(&pool.caller_asleep, false);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.busy);
}
