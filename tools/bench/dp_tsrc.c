/* dp_tsrc.c — times the routine `step` of a training program compiled with `tsrc -c --profile
 * --name=dp` on one process or, under `mpirun -np N`, on N (docs/runtime.md §19): the `dp` section
 * of `make bench`, data-parallel training against threads.  The program is tools/bench/nn_mlp.tsr
 * (inputs x and y) or a GPT from tools/bench/gpt.tsr.in (input tokens, VOCAB from -D); each
 * process fills its inputs with its own batch.  The step count is fixed, not a time budget,
 * since every process must make the same collective calls: 3 warm-up steps, then STEPS timed.
 * Process 0 prints "DP kind=KIND procs=N threads=T steps=STEPS step_s=SECONDS" and, to stderr,
 * the profile of the step's kernels, whose line "means across processes" is the time spent in
 * the gradients' mean (blocking: not overlapped with the backward pass in this version).
 * Usage: dp_tsrc STEPS KIND.  Threads: TSR_NUM_THREADS. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "dp.h"

#ifndef VOCAB
#define VOCAB 96
#endif

/* This process's batch: different on every process and every step. */
static void fill(dp_state *s, uint64_t seed) {
#ifdef DP_TOKENS_SIZE
    int32_t *tokens = dp_tokens(s);
    for (uint64_t i = 0; i < DP_TOKENS_SIZE; i++) tokens[i] = (int32_t)(bench_mix(seed * 0x9E3779B97F4A7C15ull + i + 1) % VOCAB);
#else
    float *x = dp_x(s), *y = dp_y(s);
    for (uint64_t i = 0; i < DP_X_SIZE; i++) x[i] = (float)(bench_mix(seed * 0x9E3779B97F4A7C15ull + i + 1) % 1000) / 1000.0f;
    memset(y, 0, DP_Y_SIZE * sizeof *y);
    for (uint64_t r = 0; r < DP_Y_DIM0; r++) y[r * DP_Y_DIM1 + bench_mix(seed + r) % DP_Y_DIM1] = 1;
#endif
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 20;
    const char *kind = argc > 2 ? argv[2] : "dp";
    if (tsr_dist_start("auto") != TSR_OK) { fprintf(stderr, "tsr_dist_start: %s\n", tsr_last_error()); return 1; }
    int rank = tsr_dist_rank(), procs = tsr_dist_size();
    dp_state *s = dp_create(1);
    if (!s) { fprintf(stderr, "dp_create: %s\n", dp_last_error()); return 1; }
    double t0 = 0;
    for (int step = 0; step < steps + 3; step++) {
        if (step == 3) t0 = bench_now();
        fill(s, (uint64_t)step * 1000 + (uint64_t)rank + 1);
        if (dp_step(s) != TSR_OK) { fprintf(stderr, "dp_step: %s\n", dp_last_error()); return 1; }
    }
    double per_step = (bench_now() - t0) / steps;
    if (rank == 0) {
        printf("DP kind=%s procs=%d threads=%d steps=%d step_s=%.6g loss=%.7g\n", kind, procs, tsr_num_threads(), steps,
               per_step, (double)dp_loss(s)[0]);
        dp_profile_report();
    }
    dp_destroy(s);
    tsr_dist_finalize();
    return 0;
}
