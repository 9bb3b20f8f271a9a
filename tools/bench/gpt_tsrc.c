/* gpt_tsrc.c — times the routine `step` of a GPT written from tools/bench/gpt.tsr.in (compiled by
 * `tsrc -c --name=gpt`): one AdamW training step of a GPT-2 at the configuration tools/bench.sh
 * chose (docs/examples/gpt.tsr's L=4, C=256, NH=4, T=64, B=8, vocabulary 96; GPT-2 124M's L=12,
 * C=768, NH=12 at T=64, B=4, vocabulary 50 304).  KIND (the RESULT line's kind) and VOCAB come
 * from -D; the rest from the generated header.
 *
 * Before the first step it saves the parameters tsrc initialised to INIT (a checkpoint, .npz),
 * from which tools/bench/py_gpt.py builds the same model in PyTorch; then it runs STEPS steps on
 * the windows gpt_window() gives (py_gpt.py draws the same ones) and prints their losses, which
 * tools/bench/table.py compares with PyTorch's; then it times the step (on the last window).
 * The check: every loss finite and the last below the first.  FLOP/s are counted by table.py.
 * Built with -DGPT_PROFILE against the program compiled with --profile, it ends by printing
 * the kernels by time (stderr) of the timed steps (the counters reset after the ten first).  Built with -DGPT_GPU against the program compiled with
 * --target=cuda (make bench-gpu, tools/bench/gpu/), a timed step is the step and the read of its
 * loss, which waits for the GPU (as PyTorch's float(loss) in py_gpt.py does).
 * Usage: gpt_tsrc BUDGET_SECONDS MAX_REPS INIT.npz.  Threads: TSR_NUM_THREADS. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "gpt.h"

#ifndef VOCAB
#define VOCAB 96
#endif
#ifndef KIND
#define KIND "gpt"
#endif
enum { STEPS = 10 };

/* The i32 token ids of step s: from bench_mix, as py_gpt.py's window(). */
static void gpt_window(int32_t *tokens, int s) {
    for (uint64_t i = 0; i < GPT_TOKENS_SIZE; i++)
        tokens[i] = (int32_t)(bench_mix((uint64_t)(31 + s) * 0x9E3779B97F4A7C15ull + i + 1) % VOCAB);
}

#ifdef GPT_GPU
static int run(void *s) { return gpt_step(s) != TSR_OK || !gpt_loss(s); }
#else
static int run(void *s) { return gpt_step(s); }
#endif

int main(int argc, char **argv) {
    double budget = argc > 1 ? atof(argv[1]) : 2.0;
    int max_reps = argc > 2 ? atoi(argv[2]) : 200;
    const char *init = argc > 3 ? argv[3] : "gpt_init.npz";
    gpt_state *s = gpt_create(1);
    if (!s) { fprintf(stderr, "gpt_create: %s\n", gpt_last_error()); return 1; }
    if (gpt_save(s, init) != TSR_OK) { fprintf(stderr, "gpt_save %s: %s\n", init, gpt_last_error()); return 1; }

    double losses[STEPS], warm = 0;
    int ok = 1;
    for (int step = 0; step < STEPS; step++) {
        gpt_window(gpt_tokens(s), step);
        double t0 = bench_now();
        if (gpt_step(s) != TSR_OK) { fprintf(stderr, "gpt_step: %s\n", gpt_last_error()); return 1; }
        warm = bench_now() - t0;
        losses[step] = gpt_loss(s)[0];
        ok &= isfinite(losses[step]);
    }
    if (!(losses[STEPS - 1] < losses[0])) {
        printf("INFO gpt tsrc: the loss did not decrease over %d steps: %.7g, then %.7g\n", STEPS, losses[0],
               losses[STEPS - 1]);
        ok = 0;
    }
    int reps;
    double best, median;
#ifdef GPT_PROFILE
    gpt_profile_reset(); /* the table: the timed steps alone, not the first ones (module loads, first touches) */
#endif
    bench_measure(run, s, warm, budget, max_reps, &reps, &best, &median);
    printf("RESULT kind=%s impl=tsrc n=%d threads=%d reps=%d best_s=%.6g median_s=%.6g check=%s maxrel=0 losses=",
           KIND, (int)GPT_TOKENS_DIM0, tsr_num_threads(), reps, best, median, ok ? "ok" : "FAIL");
    for (int step = 0; step < STEPS; step++) printf("%s%.8g", step ? "," : "", losses[step]);
    printf("\n");
#ifdef GPT_PROFILE /* tsrc --profile (BENCH_PROFILE=1): the table of kernels by time, to stderr */
    gpt_profile_report();
#endif
    gpt_destroy(s);
    return ok ? 0 : 3;
}
