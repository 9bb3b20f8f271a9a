/* mm_cublas.c — the cuBLAS side of `make bench-gpu` (tools/bench/gpu/): C = A·B, n×n fp32,
 * with cublasSgemm in plain FP32 (CUBLAS_DEFAULT_MATH: no TF32 tensor cores).
 *
 * A and B are common.h's bench_fill streams 1 and 2 (row-major; cuBLAS is column-major, so it
 * computes Cᵀ = Bᵀ·Aᵀ, which is C row-major).  One warm-up call, then the trials as
 * mm_gpu_tsrc.c: R calls timed on the wall clock up to cudaDeviceSynchronize, best of 3 trials
 * divided by R, GFLOP/s = 2n³/time.  Checks 64 cells of C (copied back) against a double dot
 * product, relative 1e-3 of sum |A_ik·B_kj|.
 * Build: nvcc -O2 -I tools/bench mm_cublas.c -lcublas  (or cc … -lcublas -lcudart -lm)
 * Usage: mm_cublas N [BUDGET_SECONDS (default 3)] [MAX_REPS (default 1000)]. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "common.h"

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mm_cublas: %s: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS(call) do { cublasStatus_t e_ = (call); if (e_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "mm_cublas: %s: status %d\n", #call, (int)e_); return 1; } } while (0)

/* One product, as bench_gpu_measure launches it. */
typedef struct Gemm {
    cublasHandle_t h;
    int n;
    const float *da, *db;
    float *dc;
} Gemm;

static cublasStatus_t gemm(const Gemm *g) {
    const float one = 1.0f, zero = 0.0f;
    /* row-major C = A·B  <=>  column-major Cᵀ = Bᵀ·Aᵀ: pass B first */
    return cublasSgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->db, g->n, g->da, g->n, &zero, g->dc,
                       g->n);
}

static int launch_gemm(void *ctx) { return gemm(ctx) != CUBLAS_STATUS_SUCCESS; }
static int wait_device(void *ctx) {
    (void)ctx;
    return cudaDeviceSynchronize() != cudaSuccess;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: mm_cublas N [BUDGET] [MAX_REPS]\n"); return 2; }
    const int n = atoi(argv[1]);
    double budget = argc > 2 ? atof(argv[2]) : 3.0;
    int max_reps = argc > 3 ? atoi(argv[3]) : 1000;
    size_t count = (size_t)n * (size_t)n, bytes = count * sizeof(float);
    float *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    if (!a || !b || !c) { fprintf(stderr, "mm_cublas: out of memory\n"); return 1; }
    bench_fill(a, count, 1);
    bench_fill(b, count, 2);
    float *da, *db, *dc;
    CUDA(cudaMalloc((void **)&da, bytes));
    CUDA(cudaMalloc((void **)&db, bytes));
    CUDA(cudaMalloc((void **)&dc, bytes));
    CUDA(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice));
    CUDA(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    CUBLAS(cublasCreate(&h));
    CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    Gemm g = {h, n, da, db, dc};
    CUBLAS(gemm(&g));
    CUDA(cudaDeviceSynchronize());
    double t0 = bench_now();
    CUBLAS(gemm(&g));
    CUDA(cudaDeviceSynchronize());
    double one = bench_now() - t0;
    int reps;
    double best;
    if (bench_gpu_measure(launch_gemm, wait_device, &g, one, budget, max_reps, &reps, &best)) {
        fprintf(stderr, "mm_cublas: cublasSgemm or cudaDeviceSynchronize failed while timing\n");
        return 1;
    }
    CUDA(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost));
    int ok_loose;
    double maxrel = bench_check_gemm(a, b, c, n, 0, 0, 64, &ok_loose);
    int ok = maxrel <= 1e-3;
    double gflops = 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
    printf("RESULT kind=gpu_matmul impl=cublas n=%d reps=%d best_s=%.6g gflops=%.1f check=%s "
           "maxrel=%.3g\n", n, reps, best, gflops, ok ? "ok" : "FAIL", maxrel);
    cublasDestroy(h);
    cudaFree(da); cudaFree(db); cudaFree(dc);
    free(a); free(b); free(c);
    return ok ? 0 : 3;
}
