/* moons_tsrc.c — times the routine `train` of docs/examples/train_moons.tsr, compiled as it is
 * by `tsrc -c --name=moons`: one SGD step of the 2-32-1 perceptron on a batch of 20 points
 * (forward, zero_grads, backprop, three updates, the epoch's loss sum).  One timed run is
 * STEPS steps over the 20 batches in turn (index b), at epoch 0 (learning rate 0.4, as
 * docs/examples/train_moons.tsr sets it); the figures are per step.  The data and the initial parameters are the program's own (the
 * runtime's half_moons; parameters drawn under seed 1).
 * The check: the first step's loss, its gradients and its updates against a double-precision
 * step written out below; then, loosely, that the mean loss of an epoch after the timed runs is
 * below that of the first epoch.
 * Usage: moons_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS.
 * Build with -ffp-contract=off so the update check computes exactly what the generated code does. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "moons.h"

enum { STEPS = 100, NB = MOONS_B_RANGE, BATCH = MOONS_X_DIM0, H = MOONS_B1_DIM0 };

static int run(void *p) {
    moons_state *s = p;
    static int b;
    for (int i = 0; i < STEPS; i++) {
        if (moons_set_b(s, b) != 0 || moons_train(s) != 0) return 1;
        b = (b + 1) % NB;
    }
    return 0;
}

/* One epoch (every batch once) from batch 0; returns the mean loss, or NAN on failure. */
static double epoch(moons_state *s) {
    moons_epoch_loss(s)[0] = 0;
    for (int b = 0; b < NB; b++)
        if (moons_set_b(s, b) != 0 || moons_train(s) != 0) return NAN;
    return moons_epoch_loss(s)[0] / NB;
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    moons_state *s = moons_create(1);
    if (!s) { fprintf(stderr, "moons_create: %s\n", moons_last_error()); return 1; }
    if (moons_set_epoch(s, 0) != 0 || moons_set_b(s, 0) != 0) {
        fprintf(stderr, "moons: %s\n", moons_last_error());
        return 1;
    }

    /* the reference step on batch 0, in double */
    const float *x = moons_moons_points(s), *y = moons_moons_labels(s); /* batch 0 comes first */
    float w1[H * 2], b1[H], w2[H];
    memcpy(w1, moons_w1(s), sizeof w1);
    memcpy(b1, moons_b1(s), sizeof b1);
    memcpy(w2, moons_w2(s), sizeof w2);
    double gw1[H * 2] = {0}, gb1[H] = {0}, gw2[H] = {0}, ref_loss = 0;
    for (int n = 0; n < BATCH; n++) {
        double h[H], out = 0;
        for (int j = 0; j < H; j++) {
            double pre = b1[j] + w1[j * 2] * (double)x[n * 2] + w1[j * 2 + 1] * (double)x[n * 2 + 1];
            h[j] = pre > 0 ? pre : 0;
            out += w2[j] * h[j];
        }
        double margin = 1 - y[n] * out;
        if (margin > 0) {
            ref_loss += margin / BATCH;
            double dout = -y[n] / BATCH;
            for (int j = 0; j < H; j++) {
                gw2[j] += dout * h[j];
                if (h[j] > 0) {
                    double dpre = dout * w2[j];
                    gb1[j] += dpre;
                    gw1[j * 2] += dpre * x[n * 2];
                    gw1[j * 2 + 1] += dpre * x[n * 2 + 1];
                }
            }
        }
    }

    if (moons_train(s) != 0) { fprintf(stderr, "moons_train: %s\n", moons_last_error()); return 1; }
    float lr = moons_lr(s)[0];
    double maxrel = fabs(moons_loss(s)[0] - ref_loss) / (fabs(ref_loss) > 0 ? fabs(ref_loss) : 1);
    double upd = fabs(lr - 0.4f); /* train_moons.tsr: 0.4 at epoch 0 */
    int ok = maxrel <= 1e-5 && upd <= 1e-7;
    struct { const float *got, *before, *now; const double *ref; int count; } t[3] = {
        {moons_w1_grad(s), w1, moons_w1(s), gw1, H * 2},
        {moons_b1_grad(s), b1, moons_b1(s), gb1, H},
        {moons_w2_grad(s), w2, moons_w2(s), gw2, H},
    };
    for (int k = 0; k < 3; k++) {
        double worst = 0, mag = 0;
        for (int i = 0; i < t[k].count; i++) {
            double e = fabs((double)t[k].got[i] - t[k].ref[i]);
            if (isnan(e)) e = INFINITY;
            if (e > worst) worst = e;
            if (fabs(t[k].ref[i]) > mag) mag = fabs(t[k].ref[i]);
            double d = fabs((double)t[k].now[i] - (double)(t[k].before[i] - lr * t[k].got[i]));
            if (isnan(d)) d = INFINITY;
            if (d > upd) upd = d;
        }
        double rel = worst / (mag > 0 ? mag : 1);
        if (rel > maxrel) maxrel = rel;
    }
    if (!(maxrel <= 1e-5) || !(upd <= 1e-7)) ok = 0;
    if (!ok)
        printf("INFO moons tsrc: first step: loss %.7g (reference %.7g), lr %.7g, largest "
               "gradient error %.3g, largest update error %.3g\n", moons_loss(s)[0], ref_loss,
               lr, maxrel, upd);

    double first = epoch(s);
    double t0 = bench_now();
    if (run(s) != 0) { fprintf(stderr, "moons_train: %s\n", moons_last_error()); return 1; }
    double warm = bench_now() - t0;
    int reps;
    double best, median;
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    double last = epoch(s);
    if (!(last < first)) {
        printf("INFO moons tsrc: the mean loss did not decrease: first epoch %.5g, after the "
               "timed runs %.5g\n", first, last);
        ok = 0;
    }
    printf("RESULT kind=moons impl=tsrc n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g "
           "check=%s maxrel=%.3g loss_first=%.5g loss_last=%.5g steps_per_run=%d\n", BATCH,
           tsr_num_threads(), reps, best / STEPS, median / STEPS, ok ? "ok" : "FAIL", maxrel,
           first, last, STEPS);
    moons_destroy(s);
    return ok ? 0 : 3;
}
