/* mlp_tsrc.c — times the routine `step` of tools/bench/mlp.tsr (compiled by
 * `tsrc -c --name=mlp`): one SGD training step of a 784-256-256-10 relu MLP with softmax
 * cross-entropy on a batch of 128.
 *
 * The data and the initial parameters are the ones tools/bench/py_train.py gives PyTorch
 * (bench_uniform streams; weights and biases uniform in ±1/sqrt(fan_in), as torch.nn.Linear
 * draws them; images in [0, 1); labels from a hash, as one-hot rows), so the two report the
 * same loss for the first step.  The check: the first step's loss and every gradient against a
 * double-precision forward and backward pass written out below, and every parameter's update
 * against p − lr·grad; then, loosely, that the loss after the timed steps (all on the same
 * batch) is below the first one.
 * Usage: mlp_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS.
 * Build with -ffp-contract=off so the update check computes exactly what the generated code does. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "mlp.h"

enum { B = MLP_X_DIM0, D0 = MLP_X_DIM1, D1 = MLP_B1_DIM0, D2 = MLP_B2_DIM0, D3 = MLP_B3_DIM0 };
static const float LR = 0.05f; /* as in mlp.tsr */

static int run(void *s) { return mlp_step(s); }

/* One layer's parameters in double, and the gradients the reference computes for them. */
typedef struct { int in, out; double *w, *b, *gw, *gb; } Layer;

static double *dalloc(size_t count) {
    double *p = calloc(count, sizeof(double));
    if (!p) { fprintf(stderr, "mlp_tsrc: out of memory\n"); exit(1); }
    return p;
}

static Layer layer(int in, int out, const float *w, const float *b) {
    Layer l = {in, out, dalloc((size_t)in * out), dalloc((size_t)out), dalloc((size_t)in * out),
               dalloc((size_t)out)};
    for (int i = 0; i < in * out; i++) l.w[i] = w[i];
    for (int o = 0; o < out; o++) l.b[o] = b[o];
    return l;
}

/* y[n, o] = b[o] + sum_i w[o, i] x[n, i], then relu when asked. */
static void forward(const Layer *l, const double *x, double *y, int relu) {
    for (int n = 0; n < B; n++)
        for (int o = 0; o < l->out; o++) {
            double s = l->b[o];
            for (int i = 0; i < l->in; i++) s += l->w[o * l->in + i] * x[n * l->in + i];
            y[n * l->out + o] = relu && s < 0 ? 0 : s;
        }
}

/* From dy (the gradient of the layer's pre-activation output): gw, gb and, if dx is given, the
 * gradient of the input, gated by the input's relu (x > 0) when `gate` is set. */
static void backward(Layer *l, const double *x, const double *dy, double *dx, int gate) {
    for (int n = 0; n < B; n++)
        for (int o = 0; o < l->out; o++) {
            double d = dy[n * l->out + o];
            l->gb[o] += d;
            for (int i = 0; i < l->in; i++) l->gw[o * l->in + i] += d * x[n * l->in + i];
        }
    if (!dx) return;
    for (int n = 0; n < B; n++)
        for (int i = 0; i < l->in; i++) {
            double s = 0;
            for (int o = 0; o < l->out; o++) s += l->w[o * l->in + i] * dy[n * l->out + o];
            dx[n * l->in + i] = gate && x[n * l->in + i] <= 0 ? 0 : s;
        }
}

/* max |got - ref| / max |ref| over one tensor. */
static double relerr(const float *got, const double *ref, size_t count) {
    double worst = 0, mag = 0;
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (isnan(e)) e = INFINITY;
        if (e > worst) worst = e;
        if (fabs(ref[i]) > mag) mag = fabs(ref[i]);
    }
    return worst / (mag > 0 ? mag : 1);
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    mlp_state *s = mlp_create(1);
    if (!s) { fprintf(stderr, "mlp_create: %s\n", mlp_last_error()); return 1; }

    /* data and parameters: the streams of py_train.py */
    static int label[B];
    bench_uniform(mlp_x(s), MLP_X_SIZE, 11, 0.0, 1.0);
    float *y = mlp_y(s);
    memset(y, 0, sizeof(float) * MLP_Y_SIZE);
    for (int n = 0; n < B; n++) {
        label[n] = bench_label((uint64_t)n, D3);
        y[n * D3 + label[n]] = 1.0f;
    }
    float *params[6] = {mlp_w1(s), mlp_b1(s), mlp_w2(s), mlp_b2(s), mlp_w3(s), mlp_b3(s)};
    float *grads[6] = {mlp_w1_grad(s), mlp_b1_grad(s), mlp_w2_grad(s), mlp_b2_grad(s),
                       mlp_w3_grad(s), mlp_b3_grad(s)};
    const size_t sizes[6] = {MLP_W1_SIZE, MLP_B1_SIZE, MLP_W2_SIZE, MLP_B2_SIZE, MLP_W3_SIZE,
                             MLP_B3_SIZE};
    const int fan_in[6] = {D0, D0, D1, D1, D2, D2};
    for (int p = 0; p < 6; p++) {
        double bound = 1.0 / sqrt((double)fan_in[p]);
        bench_uniform(params[p], sizes[p], 21 + (uint64_t)p, -bound, bound);
    }

    /* the reference step in double, from the same values */
    Layer l1 = layer(D0, D1, params[0], params[1]), l2 = layer(D1, D2, params[2], params[3]),
          l3 = layer(D2, D3, params[4], params[5]);
    double *x = dalloc((size_t)B * D0), *h1 = dalloc((size_t)B * D1),
           *h2 = dalloc((size_t)B * D2), *z = dalloc((size_t)B * D3),
           *dz = dalloc((size_t)B * D3), *dh2 = dalloc((size_t)B * D2),
           *dh1 = dalloc((size_t)B * D1);
    for (size_t i = 0; i < MLP_X_SIZE; i++) x[i] = mlp_x(s)[i];
    forward(&l1, x, h1, 1);
    forward(&l2, h1, h2, 1);
    forward(&l3, h2, z, 0);
    double ref_loss = 0;
    for (int n = 0; n < B; n++) {
        double sum = 0;
        for (int c = 0; c < D3; c++) sum += exp(z[n * D3 + c]);
        ref_loss += log(sum) - z[n * D3 + label[n]];
        for (int c = 0; c < D3; c++)
            dz[n * D3 + c] = (exp(z[n * D3 + c]) / sum - (c == label[n])) / B;
    }
    ref_loss /= B;
    backward(&l3, h2, dz, dh2, 1);
    backward(&l2, h1, dh2, dh1, 1);
    backward(&l1, x, dh1, NULL, 0);
    const double *ref_grads[6] = {l1.gw, l1.gb, l2.gw, l2.gb, l3.gw, l3.gb};

    /* the first step, checked */
    float *before[6];
    for (int p = 0; p < 6; p++) {
        before[p] = malloc(sizeof(float) * sizes[p]);
        if (!before[p]) { fprintf(stderr, "mlp_tsrc: out of memory\n"); return 1; }
        memcpy(before[p], params[p], sizeof(float) * sizes[p]);
    }
    double t0 = bench_now();
    if (mlp_step(s) != 0) { fprintf(stderr, "mlp_step: %s\n", mlp_last_error()); return 1; }
    double warm = bench_now() - t0;
    double loss0 = mlp_loss(s)[0];
    double maxrel = fabs(loss0 - ref_loss) / fabs(ref_loss), upd = 0;
    int ok = maxrel <= 1e-5;
    for (int p = 0; p < 6; p++) {
        double e = relerr(grads[p], ref_grads[p], sizes[p]);
        if (e > maxrel) maxrel = e;
        if (!(e <= 2e-4)) ok = 0;
        for (size_t i = 0; i < sizes[p]; i++) {
            double d = fabs((double)params[p][i] - (double)(before[p][i] - LR * grads[p][i]));
            if (isnan(d)) d = INFINITY;
            if (d > upd) upd = d;
        }
    }
    if (!(upd <= 1e-7)) ok = 0;
    if (!ok)
        printf("INFO mlp tsrc: first step: loss %.7g (reference %.7g), largest gradient error "
               "%.3g, largest update error %.3g\n", loss0, ref_loss, maxrel, upd);

    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    double loss_end = mlp_loss(s)[0];
    if (!(loss_end < loss0)) {
        printf("INFO mlp tsrc: the loss did not decrease over %d steps: %.7g, then %.7g\n",
               reps + 1, loss0, loss_end);
        ok = 0;
    }
    printf("RESULT kind=mlp impl=tsrc n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g loss0=%.7g loss_end=%.7g steps=%d\n", B, tsr_num_threads(),
           reps, best, median, ok ? "ok" : "FAIL", maxrel, loss0, loss_end, reps + 1);
    mlp_destroy(s);
    return ok ? 0 : 3;
}
