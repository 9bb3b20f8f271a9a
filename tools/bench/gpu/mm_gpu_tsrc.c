/* mm_gpu_tsrc.c — times the routine `matmul` of tools/bench/matmul.tsr.in (C = A·B, n×n fp32)
 * compiled by `tsrc -c --target=cuda --name=mm`, for `make bench-gpu` (tools/bench/gpu/).
 *
 * A and B get common.h's bench_fill streams 1 and 2 (as mm_cublas.c), sent to the GPU once.  A
 * first run (routine + mm_sync_host) loads the module and warms up; a second, timed alone, sizes
 * the trials: R = BUDGET/3 seconds' worth of runs (at least 3, at most MAX_REPS).  A trial is R
 * routine calls (they launch without waiting) and one mm_sync_host, timed on the wall clock;
 * the figure is the best of 3 trials divided by R, as GFLOP/s = 2n³/time.  The sync's own cost
 * (a sync with nothing to wait for) is printed on an INFO line.  The check: 64 cells of C (the
 * corners among them) against a double-precision dot product on the host; the error relative to
 * sum |A_ik·B_kj| must stay within 1e-3, else check=FAIL and exit status 3.
 * Usage: mm_gpu_tsrc [BUDGET_SECONDS (default 3)] [MAX_REPS (default 1000)]. */
#include "common.h"
#include "mm.h"

static int launch_matmul(void *s) { return mm_matmul(s); }
static int wait_host(void *s) { return mm_sync_host(s); }

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 3.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 1000;
    const int64_t n = (int64_t)MM_A_DIM0;
    mm_state *s = mm_create(1);
    if (!s) { fprintf(stderr, "mm_create: %s\n", mm_last_error()); return 1; }
    float *a = mm_a(s), *b = mm_b(s);
    if (!a || !b) { fprintf(stderr, "mm_a/mm_b: %s\n", mm_last_error()); return 1; }
    bench_fill(a, (uint64_t)(n * n), 1);
    bench_fill(b, (uint64_t)(n * n), 2);
    if (mm_sync_device(s) != 0) { fprintf(stderr, "mm_sync_device: %s\n", mm_last_error()); return 1; }

    double t0 = bench_now();
    if (mm_matmul(s) != 0 || mm_sync_host(s) != 0) {
        fprintf(stderr, "mm_matmul: %s\n", mm_last_error());
        return 1;
    }
    double first = bench_now() - t0;
    t0 = bench_now();
    if (mm_matmul(s) != 0 || mm_sync_host(s) != 0) {
        fprintf(stderr, "mm_matmul: %s\n", mm_last_error());
        return 1;
    }
    double one = bench_now() - t0;
    t0 = bench_now();
    mm_sync_host(s);
    double sync_only = bench_now() - t0;

    int reps;
    double best;
    if (bench_gpu_measure(launch_matmul, wait_host, s, one, budget, max_reps, &reps, &best)) {
        fprintf(stderr, "mm_matmul / mm_sync_host: %s\n", mm_last_error());
        return 1;
    }

    const float *c = mm_c(s);
    if (!c) { fprintf(stderr, "mm_c: %s\n", mm_last_error()); return 1; }
    int ok_loose;
    double maxrel = bench_check_gemm(mm_a(s), mm_b(s), c, n, 0, 0, 64, &ok_loose);
    int ok = maxrel <= 1e-3;
    double gflops = 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
    printf("INFO tsrc gpu matmul n=%lld: first run %.3g s (module load), one run + sync %.3g s, "
           "a sync alone %.3g s\n", (long long)n, first, one, sync_only);
    printf("RESULT kind=gpu_matmul impl=tsrc n=%lld reps=%d best_s=%.6g gflops=%.1f check=%s "
           "maxrel=%.3g\n", (long long)n, reps, best, gflops, ok ? "ok" : "FAIL", maxrel);
    mm_destroy(s);
    return ok ? 0 : 3;
}
