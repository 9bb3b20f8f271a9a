/* mm_tsrc.c — times the routine `matmul` of a model compiled by `tsrc -c --name=mm` from one of
 * the matmul programs that tools/bench.sh generates for one size.  Which program is chosen when
 * the driver is compiled:
 *   (default)           matmul.tsr.in          c = a +* "i, k; k, j => i, j" b    C = A·B
 *   -DMM_FORM_COMPOSE   matmul_compose.tsr.in  y = w * x, w : n->n, x : n|n      Y = X·Wᵀ
 *   -DMM_FORM_TN        matmul_tn.tsr.in       c = a +* "k, i; k, j => i, j" b    C = Aᵀ·B
 *   -DMM_FORM_BMM       bmm.tsr.in             c = a +* "b, i, j; b, j, k => b, i, k" b
 * With -DBENCH_F64 the program's matrices are f64 (double *) and the kinds end in "_f64"; with
 * -DBENCH_BF16 they are bf16 (uint16_t *, filled with bench_fill's values rounded, checked as the
 * floats they hold) and the kinds end in "_bf16".
 * Usage: mm_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS. */
#include "common.h"
#include "mm.h"

#if defined(MM_FORM_COMPOSE)
/* A = x [batch, in], B = w [out, in] read transposed, C = y [batch, out]. */
#define KIND "matmul_compose" BENCH_KIND_TYPE
#define N_ MM_X_DIM0
#define A_ mm_x
#define B_ mm_w
#define C_ mm_y
#define TA 0
#define TB 1
#elif defined(MM_FORM_TN)
#define KIND "matmul_tn" BENCH_KIND_TYPE
#define N_ MM_A_DIM0
#define A_ mm_a
#define B_ mm_b
#define C_ mm_c
#define TA 1
#define TB 0
#elif defined(MM_FORM_BMM)
#define KIND "bmm" BENCH_KIND_TYPE
#define N_ MM_A_DIM1
#define A_ mm_a
#define B_ mm_b
#define C_ mm_c
#else
#define KIND "matmul" BENCH_KIND_TYPE
#define N_ MM_A_DIM0
#define A_ mm_a
#define B_ mm_b
#define C_ mm_c
#define TA 0
#define TB 0
#endif

static int run(void *s) { return mm_matmul(s); }

#ifdef BENCH_BF16
typedef uint16_t mm_cell;
#else
typedef bench_real mm_cell;
#endif

/* count values of bench_fill's stream `seed`, as cells. */
static void fill(mm_cell *x, uint64_t count, uint64_t seed) {
#ifdef BENCH_BF16
    bench_fill_half(x, count, seed, tsr_f32_to_bf16);
#else
    bench_fill(x, count, seed);
#endif
}

/* The cells as bench_reals for the checks (a copy for bf16, freed by the caller). */
static const bench_real *values(const mm_cell *x, uint64_t count) {
#ifdef BENCH_BF16
    return bench_half_values(x, count, tsr_bf16_to_f32);
#else
    (void)count;
    return x;
#endif
}

static void done_with(const bench_real *v, const mm_cell *x) {
    if ((const void *)v != (const void *)x) free((void *)v);
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    int64_t n = (int64_t)N_;
    mm_state *s = mm_create(1);
    if (!s) { fprintf(stderr, "mm_create: %s\n", mm_last_error()); return 1; }
    /* the same values as mm_blas.c: operand A from stream 1, B from stream 2 */
#if defined(MM_FORM_BMM)
    int64_t batch = (int64_t)MM_A_DIM0;
#else
    int64_t batch = 1;
#endif
    uint64_t cells = (uint64_t)(batch * n * n);
    fill(A_(s), cells, 1);
    fill(B_(s), cells, 2);
    double t0 = bench_now();
    if (mm_matmul(s) != 0) { fprintf(stderr, "mm_matmul: %s\n", mm_last_error()); return 1; }
    double warm = bench_now() - t0;
    int ok;
    const bench_real *a = values(A_(s), cells), *b = values(B_(s), cells), *c = values(C_(s), cells);
#if defined(MM_FORM_BMM)
    double maxrel = bench_check_bmm(a, b, c, batch, n, 64, &ok);
#else
    double maxrel = bench_check_gemm(a, b, c, n, TA, TB, 256, &ok);
#endif
    done_with(a, A_(s));
    done_with(b, B_(s));
    done_with(c, C_(s));
    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
#if defined(MM_FORM_BMM)
    printf("RESULT kind=" KIND " impl=tsrc n=%lldx%lld threads=%d reps=%d best_s=%.6g "
           "median_s=%.6g check=%s maxrel=%.3g\n", (long long)batch, (long long)n,
           tsr_num_threads(), reps, best, median, ok ? "ok" : "FAIL", maxrel);
#else
    printf("RESULT kind=" KIND " impl=tsrc n=%lld threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g\n", (long long)n, tsr_num_threads(), reps, best, median,
           ok ? "ok" : "FAIL", maxrel);
#endif
    mm_destroy(s);
    return ok ? 0 : 3;
}
