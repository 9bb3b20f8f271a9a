/* ew_tsrc.c — times the routine `chain` of tools/bench/elementwise.tsr, compiled by
 * `tsrc -c --name=ew`: y = relu(a *. b + c) - 0.5 *. a over 16M floats.  With -DBENCH_BF16 the
 * program is tools/bench/elementwise_bf16.tsr: the vectors are bf16 (uint16_t *), the chain is
 * computed in f32 and y rounded once, and the kind is "ew_bf16".
 * Usage: ew_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS.
 * Build with -ffp-contract=off so the check computes exactly what the generated code does. */
#include "common.h"
#include "ew.h"

#ifdef BENCH_BF16
#define KIND "ew_bf16"
typedef uint16_t cell;
static float value(cell x) { return tsr_bf16_to_f32(x); }
static cell stored(float x) { return tsr_f32_to_bf16(x); }
#else
#define KIND "ew"
typedef float cell;
static float value(cell x) { return x; }
static cell stored(float x) { return x; }
#endif

/* count values of bench_fill's stream `seed`, as cells. */
static void fill(cell *x, uint64_t count, uint64_t seed) {
    float *f = malloc(count * sizeof *f);
    if (!f) { fprintf(stderr, "out of memory\n"); exit(1); }
    bench_fill(f, count, seed);
    for (uint64_t i = 0; i < count; i++) x[i] = stored(f[i]);
    free(f);
}

static int run(void *s) { return ew_chain(s); }

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    uint64_t n = EW_Y_SIZE;
    ew_state *s = ew_create(1);
    if (!s) { fprintf(stderr, "ew_create: %s\n", ew_last_error()); return 1; }
    cell *a = ew_a(s), *b = ew_b(s), *c = ew_c(s);
    fill(a, n, 1);
    fill(b, n, 2);
    fill(c, n, 3);
    double t0 = bench_now();
    if (ew_chain(s) != 0) { fprintf(stderr, "ew_chain: %s\n", ew_last_error()); return 1; }
    double warm = bench_now() - t0;
    const cell *y = ew_y(s);
    double maxerr = 0;
    for (uint64_t i = 0; i < n; i++) {
        float t = value(a[i]) * value(b[i]) + value(c[i]);
        float ref = value(stored((t > 0 ? t : 0.0f) - 0.5f * value(a[i])));
        double err = fabs((double)value(y[i]) - (double)ref);
        if (isnan(err)) err = INFINITY;
        if (err > maxerr) maxerr = err;
    }
    int ok = maxerr <= 1e-6;
    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=" KIND " impl=tsrc n=%llu threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", (unsigned long long)n, tsr_num_threads(), reps, best, median,
           ok ? "ok" : "FAIL", maxerr);
    ew_destroy(s);
    return ok ? 0 : 3;
}
