/* conv_tsrc.c — times the routines of tools/bench/conv.tsr (compiled by `tsrc -c --name=conv`):
 * the two 5x5 convolutions of LeNet-5 on a batch of 64, channels last, each forward alone
 * (`fwdN`) and forward then backward (`bwdN`: the gradients of the kernel and of the input from
 * the output gradient gN).
 *
 * The data are the ones tools/bench/py_conv.py gives PyTorch (bench_uniform streams: x in
 * [-1, 1), the kernel in ±1/sqrt(fan_in) as torch.nn.Conv2d draws it, g in [-1, 1)).  The check:
 * after the first run, every cell of y (and of dx and dw for bwdN) against a double-precision
 * convolution written out below, within float rounding of a sum of that many terms relative to
 * the sum of their magnitudes.  Each RESULT line carries the sums of y, dx and dw and of their
 * magnitudes, which tools/bench/table.py compares with PyTorch's.
 * Usage: conv_tsrc BUDGET_SECONDS MAX_REPS.  Threads: TSR_NUM_THREADS. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "conv.h"

enum { B = CONV_X1_DIM0, KS = CONV_CONV2D_KERNEL_DIM1 };

typedef struct {
    int layer, h, w, c, o, oh, ow;         /* input h×w×c, output oh×ow×o */
    int (*fwd)(conv_state *), (*bwd)(conv_state *);
    float *x, *k, *g, *y, *dx, *dk;
} Layer;

static conv_state *state;
static int (*routine)(conv_state *);
static int run(void *unused) { (void)unused; return routine(state); }

/* The largest error of `got` against `ref`, each cell relative to the sum of the magnitudes of
 * its terms (mag); *ok when within float rounding of an n-term sum. */
static double check(const float *got, const double *ref, const double *mag, size_t count, double n, int *ok) {
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double e = fabs((double)got[i] - ref[i]) / (mag[i] > 0 ? mag[i] : 1);
        if (isnan(e)) e = INFINITY;
        if (e > worst) worst = e;
    }
    if (!(worst <= 2.0 * n * 5.96e-8 + 1e-6)) *ok = 0;
    return worst;
}

static void sums(const float *v, size_t count, double *sum, double *mag) {
    *sum = *mag = 0;
    for (size_t i = 0; i < count; i++) { *sum += v[i]; *mag += fabs(v[i]); }
}

static double *dalloc(size_t count) {
    double *p = calloc(count, sizeof(double));
    if (!p) { fprintf(stderr, "conv_tsrc: out of memory\n"); exit(1); }
    return p;
}

static int bench_layer(const Layer *L, int backward, double budget, int max_reps) {
    size_t nx = (size_t)B * L->h * L->w * L->c, nk = (size_t)L->o * KS * KS * L->c,
           ny = (size_t)B * L->oh * L->ow * L->o;
    uint64_t seed = 100 + 10 * (uint64_t)L->layer;
    double bound = 1.0 / sqrt((double)(L->c * KS * KS));
    bench_uniform(L->x, nx, seed, -1.0, 1.0);
    bench_uniform(L->k, nk, seed + 1, -bound, bound);
    bench_uniform(L->g, ny, seed + 2, -1.0, 1.0);
    routine = backward ? L->bwd : L->fwd;
    double t0 = bench_now();
    if (routine(state) != 0) { fprintf(stderr, "conv: %s\n", conv_last_error()); return 1; }
    double warm = bench_now() - t0;

    /* the reference, in double, from the same values */
    double *y = dalloc(ny), *ym = dalloc(ny), *dx = dalloc(nx), *dxm = dalloc(nx), *dk = dalloc(nk),
           *dkm = dalloc(nk);
    for (int n = 0; n < B; n++)
        for (int p = 0; p < L->oh; p++)
            for (int q = 0; q < L->ow; q++)
                for (int o = 0; o < L->o; o++) {
                    size_t yi = (((size_t)n * L->oh + p) * L->ow + q) * L->o + o;
                    double g = L->g[yi];
                    for (int a = 0; a < KS; a++)
                        for (int b = 0; b < KS; b++)
                            for (int c = 0; c < L->c; c++) {
                                size_t xi = (((size_t)n * L->h + p + a) * L->w + q + b) * L->c + c;
                                size_t ki = (((size_t)o * KS + a) * KS + b) * L->c + c;
                                double xv = L->x[xi], kv = L->k[ki];
                                y[yi] += xv * kv; ym[yi] += fabs(xv * kv);
                                dx[xi] += g * kv; dxm[xi] += fabs(g * kv);
                                dk[ki] += g * xv; dkm[ki] += fabs(g * xv);
                            }
                }
    int ok = 1;
    double maxrel = check(L->y, y, ym, ny, KS * KS * L->c, &ok);
    if (backward) {
        double e = check(L->dx, dx, dxm, nx, KS * KS * L->o, &ok);
        if (e > maxrel) maxrel = e;
        e = check(L->dk, dk, dkm, nk, (double)B * L->oh * L->ow, &ok);
        if (e > maxrel) maxrel = e;
    }
    double ys, ya, xs = 0, xa = 0, ks = 0, ka = 0;
    sums(L->y, ny, &ys, &ya);
    if (backward) { sums(L->dx, nx, &xs, &xa); sums(L->dk, nk, &ks, &ka); }
    free(y); free(ym); free(dx); free(dxm); free(dk); free(dkm);

    int reps;
    double best, median;
    bench_measure(run, NULL, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=%s impl=tsrc n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g check=%s "
           "maxrel=%.3g layout=nhwc ysum=%.9g ymag=%.9g", backward ? "conv_bwd" : "conv_fwd", L->layer,
           tsr_num_threads(), reps, best, median, ok ? "ok" : "FAIL", maxrel, ys, ya);
    if (backward) printf(" dxsum=%.9g dxmag=%.9g dksum=%.9g dkmag=%.9g", xs, xa, ks, ka);
    printf("\n");
    return ok ? 0 : 3;
}

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 1.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    state = conv_create(1);
    if (!state) { fprintf(stderr, "conv_create: %s\n", conv_last_error()); return 1; }
    Layer layers[2] = {
        {1, CONV_X1_DIM1, CONV_X1_DIM2, CONV_X1_DIM3, CONV_Y1_DIM3, CONV_Y1_DIM1, CONV_Y1_DIM2, conv_fwd1,
         conv_bwd1, conv_x1(state), conv_conv2d_kernel(state), conv_g1(state), conv_y1(state),
         conv_x1_grad(state), conv_conv2d_kernel_grad(state)},
        {2, CONV_X2_DIM1, CONV_X2_DIM2, CONV_X2_DIM3, CONV_Y2_DIM3, CONV_Y2_DIM1, CONV_Y2_DIM2, conv_fwd2,
         conv_bwd2, conv_x2(state), conv_conv2d_2_kernel(state), conv_g2(state), conv_y2(state),
         conv_x2_grad(state), conv_conv2d_2_kernel_grad(state)},
    };
    int status = 0;
    for (int l = 0; l < 2; l++)
        for (int backward = 0; backward < 2; backward++) {
            int st = bench_layer(&layers[l], backward, budget, max_reps);
            if (st > status) status = st;
        }
    conv_destroy(state);
    return status;
}
