/* mm_gpu_tsrc.c — times the routine `matmul` of tools/bench/matmul.tsr.in (C = A·B, n×n)
 * compiled by `tsrc -c --target=cuda --name=mm`, for `make bench-gpu` (tools/bench/gpu/).
 * The element type is chosen when the driver is compiled, as prepare.sh builds it:
 *   (default)      f32 matrices, products in plain fp32            kind gpu_matmul
 *   -DMM_TF32      f32 matrices, the program compiled with --tf32   kind gpu_matmul_tf32
 *                  (products of operands rounded to tf32 on the tensor cores, f32 sums)
 *   -DMM_BF16      bf16 matrices (uint16_t *), C bf16               kind gpu_matmul_bf16
 *   -DMM_F16       f16 matrices, C f16                              kind gpu_matmul_f16
 * (the half types' products run on the tensor cores with f32 accumulators, docs/gpu.md).
 *
 * A and B get common.h's bench_fill streams 1 and 2 (as mm_cublas.c; rounded to the half type
 * for bf16/f16), sent to the GPU once.  A first run (routine + mm_sync_host) loads the module and
 * warms up; a second, timed alone, sizes the trials: R = BUDGET/3 seconds' worth of runs (at
 * least 3, at most MAX_REPS).  A trial is R routine calls (they launch without waiting) and one
 * mm_sync_host, timed on the wall clock; the figure is the best of 3 trials divided by R, as
 * GFLOP/s = 2n³/time.  The sync's own cost (a sync with nothing to wait for) is printed on an
 * INFO line.  The check: 64 cells of C (the corners among them) against a double-precision dot
 * product of the values A and B hold; the error relative to sum |A_ik·B_kj| must stay within
 * MAX_REL (1e-3 for f32; 2e-3 for tf32, whose products round each operand to 11 significant
 * bits; 2e-3 for f16 and 1e-2 for bf16, whose C rounds to 11 and 8 bits), else check=FAIL and
 * exit status 3.
 * Usage: mm_gpu_tsrc [BUDGET_SECONDS (default 3)] [MAX_REPS (default 1000)]. */
#include "common.h"
#include "mm.h"

#if defined(MM_BF16)
typedef uint16_t mm_cell;
#define KIND "gpu_matmul_bf16"
#define MAX_REL 1e-2
#define TO_CELL tsr_f32_to_bf16
#define TO_FLOAT tsr_bf16_to_f32
#elif defined(MM_F16)
typedef uint16_t mm_cell;
#define KIND "gpu_matmul_f16"
#define MAX_REL 2e-3
#define TO_CELL tsr_f32_to_f16
#define TO_FLOAT tsr_f16_to_f32
#elif defined(MM_TF32)
typedef float mm_cell;
#define KIND "gpu_matmul_tf32"
#define MAX_REL 2e-3
#else
typedef float mm_cell;
#define KIND "gpu_matmul"
#define MAX_REL 1e-3
#endif

static int launch_matmul(void *s) { return mm_matmul(s); }
static int wait_host(void *s) { return mm_sync_host(s); }

/* count values of bench_fill's stream `seed` into x, rounded to the cell type. */
static void fill(mm_cell *x, uint64_t count, uint64_t seed) {
#ifdef TO_CELL
    bench_fill_half(x, count, seed, TO_CELL);
#else
    bench_fill(x, count, seed);
#endif
}

/* The floats the cells hold (a copy, freed by the caller). */
static float *values(const mm_cell *x, uint64_t count) {
#ifdef TO_FLOAT
    return bench_half_values(x, count, TO_FLOAT);
#else
    float *f = malloc(count * sizeof *f);
    if (!f) { fprintf(stderr, "mm_gpu_tsrc: out of memory\n"); exit(1); }
    for (uint64_t i = 0; i < count; i++) f[i] = x[i];
    return f;
#endif
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 3.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 1000;
    const int64_t n = (int64_t)MM_A_DIM0;
    const uint64_t cells = (uint64_t)(n * n);
    mm_state *s = mm_create(1);
    if (!s) { fprintf(stderr, "mm_create: %s\n", mm_last_error()); return 1; }
    mm_cell *a = mm_a(s), *b = mm_b(s);
    if (!a || !b) { fprintf(stderr, "mm_a/mm_b: %s\n", mm_last_error()); return 1; }
    fill(a, cells, 1);
    fill(b, cells, 2);
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

    const mm_cell *c = mm_c(s);
    if (!c) { fprintf(stderr, "mm_c: %s\n", mm_last_error()); return 1; }
    float *av = values(mm_a(s), cells), *bv = values(mm_b(s), cells), *cv = values(c, cells);
    int ok_loose;
    double maxrel = bench_check_gemm(av, bv, cv, n, 0, 0, 64, &ok_loose);
    int ok = maxrel <= MAX_REL;
    double gflops = 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
    printf("INFO tsrc gpu %s n=%lld: first run %.3g s (module load), one run + sync %.3g s, "
           "a sync alone %.3g s\n", KIND, (long long)n, first, one, sync_only);
    printf("RESULT kind=%s impl=tsrc n=%lld reps=%d best_s=%.6g gflops=%.1f check=%s "
           "maxrel=%.3g\n", KIND, (long long)n, reps, best, gflops, ok ? "ok" : "FAIL", maxrel);
    free(av); free(bv); free(cv);
    mm_destroy(s);
    return ok ? 0 : 3;
}
