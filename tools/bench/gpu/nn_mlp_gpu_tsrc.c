/* nn_mlp_gpu_tsrc.c — times the routine `step` of tools/bench/nn_mlp.tsr (Nn.mlp, cross-entropy,
 * Train.step with Train.adam) compiled by `tsrc -c --target=cuda --name=mlp`, for the mixed
 * precision cases of `make bench-gpu` (tools/bench/gpu/): prepare.sh writes the program at a
 * batch, a hidden width and an element type (`mlp ~dtype:"bf16"`: bf16 parameters and
 * activations, products on the tensor cores with f32 sums, f32 master weights and moments), and
 * the table sets each bf16 step beside the f32 step of the same size.  KIND (the RESULT line's
 * kind) comes from -D.
 *
 * The parameters are tsrc's own initialisation; x gets bench_uniform values in [0, 1) and y a
 * one-hot label per row (as mlp_gpu_tsrc.c), sent to the GPU once.  A timed step is the step
 * and the read of its loss, which waits for the GPU.  Timing as mm_gpu_tsrc.c (best of 3 trials
 * of R steps, each trial ended by the loss's read).  The check: every loss read is finite and
 * the loss after the timed steps (all on the same batch) is below the first; else check=FAIL
 * and exit status 3.
 * Usage: nn_mlp_gpu_tsrc [BUDGET_SECONDS (default 3)] [MAX_REPS (default 2000)]. */
#include <string.h>

#include "common.h"
#include "mlp.h"

#ifndef KIND
#define KIND "gpu_nn_mlp"
#endif

static int launch_step(void *s) { return mlp_step(s) != TSR_OK; }
static int wait_loss(void *s) { return mlp_loss(s) == NULL; }

static int failed(const char *what) {
    fprintf(stderr, "%s: %s\n", what, mlp_last_error());
    return 1;
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 3.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 2000;
    const int batch = (int)MLP_X_DIM0, classes = (int)MLP_Y_DIM1;
    mlp_state *s = mlp_create(1);
    if (!s) return failed("mlp_create");
    float *x = mlp_x(s), *y = mlp_y(s);
    if (!x || !y) return failed("mlp_x/mlp_y");
    bench_uniform(x, MLP_X_SIZE, 11, 0.0, 1.0);
    memset(y, 0, sizeof(float) * MLP_Y_SIZE);
    for (int n = 0; n < batch; n++)
        y[n * classes + bench_label((uint64_t)n, classes)] = 1.0f;
    if (mlp_sync_device(s) != TSR_OK) return failed("mlp_sync_device");

    double t0 = bench_now();
    if (launch_step(s) || wait_loss(s)) return failed("mlp_step");
    double first = bench_now() - t0;
    double loss0 = mlp_loss(s)[0];
    t0 = bench_now();
    if (launch_step(s) || wait_loss(s)) return failed("mlp_step");
    double one = bench_now() - t0;

    int reps;
    double best;
    if (bench_gpu_measure(launch_step, wait_loss, s, one, budget, max_reps, &reps, &best))
        return failed("mlp_step / mlp_loss");
    double loss_end = mlp_loss(s)[0];
    int ok = isfinite(loss0) && isfinite(loss_end) && loss_end < loss0;
    printf("INFO tsrc gpu %s batch %d: first step %.3g s (module load), one step + wait %.3g s; loss %.7g, "
           "after %d more steps %.7g\n", KIND, batch, first, one, loss0, 1 + 3 * reps, loss_end);
    printf("RESULT kind=%s impl=tsrc n=%d reps=%d best_s=%.6g ms=%.4f check=%s maxrel=0 loss0=%.7g "
           "loss_end=%.7g\n", KIND, batch, reps, best, best * 1e3, ok ? "ok" : "FAIL", loss0, loss_end);
    mlp_destroy(s);
    return ok ? 0 : 3;
}
