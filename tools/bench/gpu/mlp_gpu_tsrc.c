/* mlp_gpu_tsrc.c — times the routine `step` of tools/bench/mlp.tsr compiled by
 * `tsrc -c --target=cuda --name=mlp` (one SGD step of the 784-256-256-10 relu MLP, softmax
 * cross-entropy, batch 128), for `make bench-gpu` (tools/bench/gpu/).
 *
 * Data and initial parameters are those of tools/bench/mlp_tsrc.c and py_train.py (common.h's
 * bench_uniform streams), sent to the GPU once.  The check: the first step's loss against a
 * double-precision forward pass on the host (relative 1e-4), and that the loss falls over the
 * steps that follow (all on the same batch).  Timing as mm_gpu_tsrc.c: R steps and one
 * mlp_sync_host, best of 3 trials divided by R.
 * Usage: mlp_gpu_tsrc [BUDGET_SECONDS (default 3)] [MAX_REPS (default 5000)]. */
#include <string.h>

#include "common.h"
#include "mlp.h"

enum { B = MLP_X_DIM0, D0 = MLP_X_DIM1, D1 = MLP_B1_DIM0, D2 = MLP_B2_DIM0, D3 = MLP_B3_DIM0 };

/* y[n, o] = b[o] + sum_i w[o, i] x[n, i] in double, then relu when asked. */
static void forward(int in, int out, const float *w, const float *b, const double *x, double *y,
                    int relu) {
    for (int n = 0; n < B; n++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++) s += (double)w[o * in + i] * x[n * in + i];
            y[n * out + o] = relu && s < 0 ? 0 : s;
        }
}

static int launch_step(void *s) { return mlp_step(s); }
static int wait_host(void *s) { return mlp_sync_host(s); }

static int failed(const char *what) {
    fprintf(stderr, "%s: %s\n", what, mlp_last_error());
    return 1;
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 3.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 5000;
    mlp_state *s = mlp_create(1);
    if (!s) return failed("mlp_create");
    float *x = mlp_x(s), *y = mlp_y(s);
    float *params[6] = {mlp_w1(s), mlp_b1(s), mlp_w2(s), mlp_b2(s), mlp_w3(s), mlp_b3(s)};
    if (!x || !y) return failed("mlp_x/mlp_y");
    static int label[B];
    bench_uniform(x, MLP_X_SIZE, 11, 0.0, 1.0);
    memset(y, 0, sizeof(float) * MLP_Y_SIZE);
    for (int n = 0; n < B; n++) {
        label[n] = bench_label((uint64_t)n, D3);
        y[n * D3 + label[n]] = 1.0f;
    }
    const size_t sizes[6] = {MLP_W1_SIZE, MLP_B1_SIZE, MLP_W2_SIZE, MLP_B2_SIZE, MLP_W3_SIZE,
                             MLP_B3_SIZE};
    const int fan_in[6] = {D0, D0, D1, D1, D2, D2};
    for (int p = 0; p < 6; p++) {
        if (!params[p]) return failed("a parameter's accessor");
        double bound = 1.0 / sqrt((double)fan_in[p]);
        bench_uniform(params[p], sizes[p], 21 + (uint64_t)p, -bound, bound);
    }

    /* the reference loss before the first step, in double */
    static double xd[B * D0], h1[B * D1], h2[B * D2], z[B * D3];
    for (size_t i = 0; i < MLP_X_SIZE; i++) xd[i] = x[i];
    forward(D0, D1, params[0], params[1], xd, h1, 1);
    forward(D1, D2, params[2], params[3], h1, h2, 1);
    forward(D2, D3, params[4], params[5], h2, z, 0);
    double ref_loss = 0;
    for (int n = 0; n < B; n++) {
        double sum = 0;
        for (int c = 0; c < D3; c++) sum += exp(z[n * D3 + c]);
        ref_loss += log(sum) - z[n * D3 + label[n]];
    }
    ref_loss /= B;
    if (mlp_sync_device(s) != 0) return failed("mlp_sync_device");

    double t0 = bench_now();
    if (mlp_step(s) != 0 || mlp_sync_host(s) != 0) return failed("mlp_step");
    double first = bench_now() - t0;
    const float *loss = mlp_loss(s);
    if (!loss) return failed("mlp_loss");
    double loss0 = loss[0];
    t0 = bench_now();
    if (mlp_step(s) != 0 || mlp_sync_host(s) != 0) return failed("mlp_step");
    double one = bench_now() - t0;

    int reps;
    double best;
    if (bench_gpu_measure(launch_step, wait_host, s, one, budget, max_reps, &reps, &best))
        return failed("mlp_step / mlp_sync_host");
    double loss_end = mlp_loss(s)[0];
    double rel = fabs(loss0 - ref_loss) / fabs(ref_loss);
    int ok = rel <= 1e-4 && loss_end < loss0;
    if (!ok)
        printf("INFO mlp tsrc gpu: first loss %.7g (reference %.7g, relative error %.3g), after "
               "%d steps %.7g\n", loss0, ref_loss, rel, 2 + 3 * reps, loss_end);
    printf("INFO tsrc gpu mlp: first step %.3g s (module load), one step + sync %.3g s\n", first,
           one);
    printf("RESULT kind=gpu_mlp impl=tsrc n=%d reps=%d best_s=%.6g ms=%.4f check=%s "
           "maxrel=%.3g loss0=%.7g loss_end=%.7g\n", B, reps, best, best * 1e3,
           ok ? "ok" : "FAIL", rel, loss0, loss_end);
    mlp_destroy(s);
    return ok ? 0 : 3;
}
