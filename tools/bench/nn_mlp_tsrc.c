/* nn_mlp_tsrc.c — times the routine `step` of tools/bench/nn_mlp.tsr (compiled by
 * `tsrc -c --name=nn_mlp`): one Adam training step of the 784-256-256-10 relu MLP written with
 * `Nn.mlp`, `Nn.cross_entropy` and `Train.step`, on a batch of 128.
 *
 * The data and the initial parameters are mlp_tsrc.c's, the ones tools/bench/py_train.py gives
 * PyTorch (bench_uniform streams 11, 12 and 21-26), so the first step's loss must agree with
 * PyTorch's: tools/bench/table.py compares them.  The check here: the first loss is finite
 * and, after the timed steps (all on the same batch), the loss is below it.
 *
 * Built against the program with its batch written as `?` (a run-time size: the header then has
 * NN_MLP_X_ROW_SIZE and setters instead of NN_MLP_X_SIZE), it sets the batch to 128 first and
 * reports kind=nn_mlp_dyn: `make bench` compares the two (docs/runtime.md §16).
 * Usage: nn_mlp_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "nn_mlp.h"

#ifdef NN_MLP_X_ROW_SIZE /* a run-time batch */
#define DYNAMIC 1
#define NN_MLP_X_SIZE (128 * NN_MLP_X_ROW_SIZE)
#define NN_MLP_Y_SIZE (128 * NN_MLP_Y_ROW_SIZE)
#else
#define DYNAMIC 0
#endif

enum { D0 = 784, D1 = 256, D2 = 256, D3 = 10, B = (int)(NN_MLP_Y_SIZE / D3) };

static int run(void *s) { return nn_mlp_step(s); }

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    nn_mlp_state *s = nn_mlp_create(1);
    if (!s) { fprintf(stderr, "nn_mlp_create: %s\n", nn_mlp_last_error()); return 1; }
#if DYNAMIC
    if (nn_mlp_set_x_b(s, B) != 0 || nn_mlp_set_y_b(s, B) != 0) {
        fprintf(stderr, "nn_mlp: setting the batch: %s\n", nn_mlp_last_error());
        return 1;
    }
#endif

    bench_uniform(nn_mlp_x(s), NN_MLP_X_SIZE, 11, 0.0, 1.0);
    float *y = nn_mlp_y(s);
    memset(y, 0, sizeof(float) * NN_MLP_Y_SIZE);
    for (int n = 0; n < B; n++)
        y[n * D3 + bench_label((uint64_t)n, D3)] = 1.0f;
    /* weights in memory order [out, in], as torch.nn.Linear.weight */
    float *params[6] = {nn_mlp_layer_w(s), nn_mlp_layer_b(s), nn_mlp_layer_2_w(s),
                        nn_mlp_layer_2_b(s), nn_mlp_rest_w(s), nn_mlp_rest_b(s)};
    const size_t sizes[6] = {NN_MLP_LAYER_W_SIZE, NN_MLP_LAYER_B_SIZE, NN_MLP_LAYER_2_W_SIZE,
                             NN_MLP_LAYER_2_B_SIZE, NN_MLP_REST_W_SIZE, NN_MLP_REST_B_SIZE};
    const int fan_in[6] = {D0, D0, D1, D1, D2, D2};
    for (int p = 0; p < 6; p++) {
        double bound = 1.0 / sqrt((double)fan_in[p]);
        bench_uniform(params[p], sizes[p], 21 + (uint64_t)p, -bound, bound);
    }

    double t0 = bench_now();
    if (nn_mlp_step(s) != 0) { fprintf(stderr, "nn_mlp_step: %s\n", nn_mlp_last_error()); return 1; }
    double warm = bench_now() - t0;
    double loss0 = nn_mlp_loss(s)[0];
    int ok = isfinite(loss0);

    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    double loss_end = nn_mlp_loss(s)[0];
    if (!(loss_end < loss0)) {
        printf("INFO nn_mlp tsrc: the loss did not decrease over %d steps: %.7g, then %.7g\n",
               reps + 1, loss0, loss_end);
        ok = 0;
    }
    printf("RESULT kind=%s impl=tsrc n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=0 loss0=%.7g loss_end=%.7g steps=%d\n", DYNAMIC ? "nn_mlp_dyn" : "nn_mlp", B,
           tsr_num_threads(), reps,
           best, median, ok ? "ok" : "FAIL", loss0, loss_end, reps + 1);
    nn_mlp_destroy(s);
    return ok ? 0 : 3;
}
