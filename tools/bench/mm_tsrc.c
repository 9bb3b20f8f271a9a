/* mm_tsrc.c — times the routine `matmul` of a model compiled by `tsrc -c --name=mm` from the
 * matmul.tsr that tools/bench.sh generates for one size (c = a +* "i, k; k, j => i, j" b).
 * Usage: mm_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS. */
#include "common.h"
#include "mm.h"

static int run(void *s) { return mm_matmul(s); }

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    int64_t n = (int64_t)MM_A_DIM0;
    mm_state *s = mm_create(1);
    if (!s) { fprintf(stderr, "mm_create: %s\n", mm_last_error()); return 1; }
    bench_fill(mm_a(s), MM_A_SIZE, 1);
    bench_fill(mm_b(s), MM_B_SIZE, 2);
    double t0 = bench_now();
    if (mm_matmul(s) != 0) { fprintf(stderr, "mm_matmul: %s\n", mm_last_error()); return 1; }
    double warm = bench_now() - t0;
    int ok;
    double maxrel = bench_check_matmul(mm_a(s), mm_b(s), mm_c(s), n, 256, &ok);
    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=matmul impl=tsrc n=%lld threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", (long long)n, tsr_num_threads(), reps, best, median,
           ok ? "ok" : "FAIL", maxrel);
    mm_destroy(s);
    return ok ? 0 : 3;
}
