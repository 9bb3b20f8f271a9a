/* mm_cublas.c — the cuBLAS side of `make bench-gpu` (tools/bench/gpu/): C = A·B, n×n, by TYPE:
 *   f32   cublasSgemm in plain FP32 (CUBLAS_DEFAULT_MATH: no TF32 tensor cores)
 *   tf32  cublasGemmEx on f32 matrices with CUBLAS_COMPUTE_32F_FAST_TF32 (tensor cores)
 *   bf16  cublasGemmEx with A, B and C in CUDA_R_16BF, CUBLAS_COMPUTE_32F (tensor cores, f32 sums)
 *   f16   the same in CUDA_R_16F
 * the counterparts of mm_gpu_tsrc.c's kinds (the half types' C is half too, as tsrc's).
 *
 * A and B are common.h's bench_fill streams 1 and 2 (row-major; cuBLAS is column-major, so it
 * computes Cᵀ = Bᵀ·Aᵀ, which is C row-major).  One warm-up call, then the trials as
 * mm_gpu_tsrc.c: R calls timed on the wall clock up to cudaDeviceSynchronize, best of 3 trials
 * divided by R, GFLOP/s = 2n³/time.  Checks 64 cells of C (copied back) against a double dot
 * product of the values A and B hold, relative to sum |A_ik·B_kj|, within mm_gpu_tsrc.c's
 * bound for the type.
 * Build: nvcc -O2 -I tools/bench mm_cublas.c -lcublas  (or cc … -lcublas -lcudart -lm)
 * Usage: mm_cublas N [BUDGET_SECONDS (default 3)] [MAX_REPS (default 1000)] [TYPE (default f32)]. */
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string.h>

#include "common.h"
#include "tsr.h"

#define CUDA(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "mm_cublas: %s: %s\n", #call, cudaGetErrorString(e_)); return 1; } } while (0)
#define CUBLAS(call) do { cublasStatus_t e_ = (call); if (e_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "mm_cublas: %s: status %d\n", #call, (int)e_); return 1; } } while (0)

/* The element types: cuBLAS's type of A, B and C, the compute type, a cell's bytes, the RESULT
 * kind and the check's bound (mm_gpu_tsrc.c's). */
typedef struct GemmType {
    const char *name, *kind;
    cudaDataType_t cells;
    cublasComputeType_t compute;
    size_t bytes;
    double max_rel;
} GemmType;

static const GemmType gemm_types[] = {
    {"f32", "gpu_matmul", CUDA_R_32F, CUBLAS_COMPUTE_32F, 4, 1e-3},
    {"tf32", "gpu_matmul_tf32", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, 4, 2e-3},
    {"bf16", "gpu_matmul_bf16", CUDA_R_16BF, CUBLAS_COMPUTE_32F, 2, 1e-2},
    {"f16", "gpu_matmul_f16", CUDA_R_16F, CUBLAS_COMPUTE_32F, 2, 2e-3},
};

/* One product, as bench_gpu_measure launches it. */
typedef struct Gemm {
    cublasHandle_t h;
    int n;
    const GemmType *type;
    const void *da, *db;
    void *dc;
} Gemm;

static cublasStatus_t gemm(const Gemm *g) {
    const float one = 1.0f, zero = 0.0f;
    /* row-major C = A·B  <=>  column-major Cᵀ = Bᵀ·Aᵀ: pass B first */
    if (g->type->cells == CUDA_R_32F && g->type->compute == CUBLAS_COMPUTE_32F)
        return cublasSgemm(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->db, g->n, g->da, g->n, &zero,
                           g->dc, g->n);
    return cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &one, g->db, g->type->cells, g->n, g->da,
                        g->type->cells, g->n, &zero, g->dc, g->type->cells, g->n, g->type->compute,
                        CUBLAS_GEMM_DEFAULT);
}

static int launch_gemm(void *ctx) { return gemm(ctx) != CUBLAS_STATUS_SUCCESS; }
static int wait_device(void *ctx) {
    (void)ctx;
    return cudaDeviceSynchronize() != cudaSuccess;
}

/* The cells of x (count floats) in the type's storage, into cells (count · type->bytes bytes). */
static void to_cells(const GemmType *type, const float *x, size_t count, void *cells) {
    if (type->bytes == 4) { memcpy(cells, x, count * sizeof(float)); return; }
    uint16_t *h = cells;
    for (size_t i = 0; i < count; i++) h[i] = type->cells == CUDA_R_16BF ? tsr_f32_to_bf16(x[i]) : tsr_f32_to_f16(x[i]);
}

/* The floats cells hold, back into x. */
static void from_cells(const GemmType *type, const void *cells, size_t count, float *x) {
    if (type->bytes == 4) { memcpy(x, cells, count * sizeof(float)); return; }
    const uint16_t *h = cells;
    for (size_t i = 0; i < count; i++) x[i] = type->cells == CUDA_R_16BF ? tsr_bf16_to_f32(h[i]) : tsr_f16_to_f32(h[i]);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: mm_cublas N [BUDGET] [MAX_REPS] [f32|tf32|bf16|f16]\n"); return 2; }
    const int n = atoi(argv[1]);
    double budget = argc > 2 ? atof(argv[2]) : 3.0;
    int max_reps = argc > 3 ? atoi(argv[3]) : 1000;
    const char *type_name = argc > 4 ? argv[4] : "f32";
    const GemmType *type = NULL;
    for (size_t t = 0; t < sizeof gemm_types / sizeof gemm_types[0]; t++)
        if (strcmp(gemm_types[t].name, type_name) == 0) type = &gemm_types[t];
    if (!type) { fprintf(stderr, "mm_cublas: unknown type '%s' (f32, tf32, bf16 or f16)\n", type_name); return 2; }
    size_t count = (size_t)n * (size_t)n, bytes = count * type->bytes;
    float *a = malloc(count * sizeof(float)), *b = malloc(count * sizeof(float)), *c = malloc(count * sizeof(float));
    void *cells = malloc(bytes);
    if (!a || !b || !c || !cells) { fprintf(stderr, "mm_cublas: out of memory\n"); return 1; }
    bench_fill(a, count, 1);
    bench_fill(b, count, 2);
    void *da, *db, *dc;
    CUDA(cudaMalloc(&da, bytes));
    CUDA(cudaMalloc(&db, bytes));
    CUDA(cudaMalloc(&dc, bytes));
    to_cells(type, a, count, cells);
    from_cells(type, cells, count, a); /* the values the product sees, for the check */
    CUDA(cudaMemcpy(da, cells, bytes, cudaMemcpyHostToDevice));
    to_cells(type, b, count, cells);
    from_cells(type, cells, count, b);
    CUDA(cudaMemcpy(db, cells, bytes, cudaMemcpyHostToDevice));
    cublasHandle_t h;
    CUBLAS(cublasCreate(&h));
    CUBLAS(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH));
    Gemm g = {h, n, type, da, db, dc};
    CUBLAS(gemm(&g));
    CUDA(cudaDeviceSynchronize());
    double t0 = bench_now();
    CUBLAS(gemm(&g));
    CUDA(cudaDeviceSynchronize());
    double one = bench_now() - t0;
    int reps;
    double best;
    if (bench_gpu_measure(launch_gemm, wait_device, &g, one, budget, max_reps, &reps, &best)) {
        fprintf(stderr, "mm_cublas: the %s product or cudaDeviceSynchronize failed while timing\n", type->name);
        return 1;
    }
    CUDA(cudaMemcpy(cells, dc, bytes, cudaMemcpyDeviceToHost));
    from_cells(type, cells, count, c);
    int ok_loose;
    double maxrel = bench_check_gemm(a, b, c, n, 0, 0, 64, &ok_loose);
    int ok = maxrel <= type->max_rel;
    double gflops = 2.0 * (double)n * (double)n * (double)n / best * 1e-9;
    printf("RESULT kind=%s impl=cublas n=%d reps=%d best_s=%.6g gflops=%.1f check=%s "
           "maxrel=%.3g\n", type->kind, n, reps, best, gflops, ok ? "ok" : "FAIL", maxrel);
    cublasDestroy(h);
    cudaFree(da); cudaFree(db); cudaFree(dc);
    free(a); free(b); free(c); free(cells);
    return ok ? 0 : 3;
}
