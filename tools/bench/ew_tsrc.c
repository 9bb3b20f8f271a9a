/* ew_tsrc.c — times the routine `chain` of tools/bench/elementwise.tsr, compiled by
 * `tsrc -c --name=ew`: y = relu(a *. b + c) - 0.5 *. a over 16M floats.
 * Usage: ew_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS.
 * Build with -ffp-contract=off so the check computes exactly what the generated code does. */
#include "common.h"
#include "ew.h"

static int run(void *s) { return ew_chain(s); }

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    uint64_t n = EW_Y_SIZE;
    ew_state *s = ew_create(1);
    if (!s) { fprintf(stderr, "ew_create: %s\n", ew_last_error()); return 1; }
    float *a = ew_a(s), *b = ew_b(s), *c = ew_c(s);
    bench_fill(a, n, 1);
    bench_fill(b, n, 2);
    bench_fill(c, n, 3);
    double t0 = bench_now();
    if (ew_chain(s) != 0) { fprintf(stderr, "ew_chain: %s\n", ew_last_error()); return 1; }
    double warm = bench_now() - t0;
    const float *y = ew_y(s);
    double maxerr = 0;
    for (uint64_t i = 0; i < n; i++) {
        float t = a[i] * b[i] + c[i];
        float ref = (t > 0 ? t : 0.0f) - 0.5f * a[i];
        double err = fabs((double)y[i] - (double)ref);
        if (isnan(err)) err = INFINITY;
        if (err > maxerr) maxerr = err;
    }
    int ok = maxerr <= 1e-6;
    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=ew impl=tsrc n=%llu threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", (unsigned long long)n, tsr_num_threads(), reps, best, median,
           ok ? "ok" : "FAIL", maxerr);
    ew_destroy(s);
    return ok ? 0 : 3;
}
