/* runtime_driver.c — drives tests/native/runtime_mlp.tsr, whose batch is a run-time size `?`,
 * from C (tests/native/runtime_sizes.sh): in one process, batches of 1, 37 and 128.
 *   - Every row of every batch matches the MLP computed here in double precision from the
 *     model's own weights (relative error at most 1e-4), and a row computes the same floats,
 *     bit for bit, whatever the batch it is in (each cell takes the same steps in the same order).
 *   - A routine refuses to run before the size is set, and when the two inputs that share the
 *     size were given different sizes: a status and a message naming both, never a crash.
 *   - A size below 1 is refused by the setter, and so is one whose storage cannot be allocated,
 *     which leaves every tensor and its data as they were.
 * Prints "ok" and exits 0, or says what failed and exits 1. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "runtime_mlp.h"

enum { IN = 784, HID = 32, OUT = 10, MAX_BATCH = 128 };

static int failures;
#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (!(cond)) {                                                \
            if (++failures > 10) break;                               \
            fprintf(stderr, "runtime_driver: FAIL line %d: ", __LINE__); \
            fprintf(stderr, __VA_ARGS__);                             \
            fputc('\n', stderr);                                      \
        }                                                             \
    } while (0)

/* Input row r (the same row whatever the batch). */
static float input(int r, int i) { return (float)((r * 131 + i * 7) % 97) / 97.0f - 0.5f; }

static float rows_of_128[MAX_BATCH][OUT];

static void run_batch(runtime_mlp_state *s, int batch) {
    CHECK(runtime_mlp_set_x_b(s, batch) == TSR_OK, "set x.b = %d: %s", batch, runtime_mlp_last_error());
    CHECK(runtime_mlp_x_dim0(s) == batch, "x's length is %lld, not %d", (long long)runtime_mlp_x_dim0(s), batch);
    float *x = runtime_mlp_x(s);
    for (int r = 0; r < batch; r++)
        for (int i = 0; i < IN; i++) x[r * IN + i] = input(r, i);
    CHECK(runtime_mlp_predict(s) == TSR_OK, "predict at batch %d: %s", batch, runtime_mlp_last_error());
    const float *w1 = runtime_mlp_w1(s), *b1 = runtime_mlp_b1(s), *w2 = runtime_mlp_w2(s), *y = runtime_mlp_scores(s);
    for (int r = 0; r < batch; r++) {
        double h[HID];
        for (int j = 0; j < HID; j++) {
            double acc = 0;
            for (int i = 0; i < IN; i++) acc += (double)w1[j * IN + i] * input(r, i);
            acc += b1[j];
            h[j] = acc > 0 ? acc : 0;
        }
        for (int o = 0; o < OUT; o++) {
            double want = 0;
            for (int j = 0; j < HID; j++) want += (double)w2[o * HID + j] * h[j];
            double got = y[r * OUT + o];
            CHECK(fabs(got - want) <= 1e-4 * (1 + fabs(want)), "batch %d row %d output %d: %g, want %g", batch, r, o,
                  got, want);
            if (batch == MAX_BATCH) rows_of_128[r][o] = y[r * OUT + o];
            else CHECK(memcmp(&rows_of_128[r][o], &y[r * OUT + o], sizeof(float)) == 0,
                       "batch %d row %d output %d differs from the same row in a batch of 128", batch, r, o);
        }
    }
}

int main(void) {
    runtime_mlp_state *s = runtime_mlp_create(7);
    if (!s) {
        fprintf(stderr, "runtime_driver: create: %s\n", runtime_mlp_last_error());
        return 1;
    }
    CHECK(runtime_mlp_x(s) == NULL && runtime_mlp_x_dim0(s) == 0, "x has storage before its size is set");
    CHECK(runtime_mlp_predict(s) == TSR_ERR_INDEX && strstr(runtime_mlp_last_error(), "'x.b' is not set"),
          "predict before the size is set: %s", runtime_mlp_last_error());
    run_batch(s, MAX_BATCH);
    run_batch(s, 1);
    run_batch(s, 37);

    /* t shares the size with x: set differently, the routine that reads both refuses. */
    CHECK(runtime_mlp_set_t_b(s, 12) == TSR_OK, "set t.b: %s", runtime_mlp_last_error());
    int status = runtime_mlp_check(s);
    const char *msg = runtime_mlp_last_error();
    CHECK(status == TSR_ERR_INDEX && strstr(msg, "'x.b' = 37") && strstr(msg, "'t.b' = 12"),
          "mismatched sizes: status %d, message '%s'", status, msg);
    CHECK(runtime_mlp_set_t_b(s, 37) == TSR_OK && runtime_mlp_check(s) == TSR_OK, "matching sizes: %s",
          runtime_mlp_last_error());
    const float *err = runtime_mlp_err(s), *y = runtime_mlp_scores(s), *t = runtime_mlp_t(s);
    for (int c = 0; c < 37 * OUT; c++)
        CHECK(err[c] == y[c] - t[c], "err cell %d: %g, want %g", c, err[c], y[c] - t[c]);

    CHECK(runtime_mlp_set_x_b(s, 0) == TSR_ERR_INDEX && strstr(runtime_mlp_last_error(), "at least 1"),
          "a size of 0: %s", runtime_mlp_last_error());
    CHECK(runtime_mlp_x_dim0(s) == 37, "a refused size changed x's length to %lld", (long long)runtime_mlp_x_dim0(s));
    /* A size whose storage cannot be allocated is refused as a whole: the length, every tensor it
     * sizes and the data in them stay as they were. */
    float *x_before = runtime_mlp_x(s), *scores_before = runtime_mlp_scores(s);
    float x5 = x_before[5];
    status = runtime_mlp_set_x_b(s, (int64_t)1 << 40);
    CHECK(status == TSR_ERR_NOMEM && strstr(runtime_mlp_last_error(), "cannot allocate"),
          "a size too large to allocate: status %d, '%s'", status, runtime_mlp_last_error());
    CHECK(runtime_mlp_x_dim0(s) == 37 && runtime_mlp_x(s) == x_before && runtime_mlp_x(s)[5] == x5 &&
              runtime_mlp_scores(s) == scores_before && runtime_mlp_predict(s) == TSR_OK,
          "a size that could not be allocated changed the state (x.b = %lld)", (long long)runtime_mlp_x_dim0(s));
    runtime_mlp_destroy(s);
    if (failures) return 1;
    puts("ok");
    return 0;
}
