/* profile.c — the report of a program compiled with `tsrc --profile` (docs/runtime.md §17).
 *
 * What it does: generated code keeps, per kernel, the nanoseconds its launches took and their
 * number (two arrays of the module's own, read on the clock below around each launch: a
 * threaded kernel's time is its whole parallel loop, seen from the thread that launches it);
 * tsr_profile_report() prints them as a table sorted by time, with each kernel's label — its
 * routine, its number there and the tensors it writes — so that the time of a training step can
 * be traced to the layer and pass it belongs to.  Kernels under 0.1 % of the total are summed on
 * one line, unless the environment sets TSR_PROFILE_ALL (to anything but "" or "0"): then every
 * kernel gets its line (tools/bench/profile_parts.py adds them up by the model's parts).
 *
 * Requires: nothing but the C library; it keeps no state of its own. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tsr.h"

int64_t tsr_profile_clock(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

typedef struct Row {
    uint32_t kernel;
    int64_t ns;
} Row;

static int slowest_first(const void *a, const void *b) {
    const Row *x = a, *y = b;
    if (x->ns != y->ns) return x->ns < y->ns ? 1 : -1;
    return x->kernel < y->kernel ? -1 : x->kernel > y->kernel;
}

void tsr_profile_report(FILE *out, const char *module, uint32_t count, const char *const *labels, const int64_t *ns,
                        const int64_t *calls) {
    if (!out || !labels || !ns || !calls) return;
    Row *rows = malloc(((size_t)count + 1) * sizeof *rows);
    if (!rows) {
        fprintf(out, "profile of %s: out of memory for the report\n", module ? module : "?");
        return;
    }
    uint32_t launched = 0;
    int64_t total = 0, launches = 0;
    for (uint32_t k = 0; k < count; k++)
        if (calls[k] > 0) {
            rows[launched++] = (Row){k, ns[k]};
            total += ns[k];
            launches += calls[k];
        }
    qsort(rows, launched, sizeof *rows, slowest_first);
    fprintf(out, "profile of %s: %.3f ms in %lld launches of %u kernels (of %u)\n", module ? module : "?",
            (double)total / 1e6, (long long)launches, launched, count);
    fprintf(out, "%10s %6s %9s %10s  %s\n", "ms", "%", "launches", "us/launch", "kernel");
    const char *all = getenv("TSR_PROFILE_ALL");
    double cut_off = all && *all && strcmp(all, "0") != 0 ? -1.0 : 0.1; /* percent of the total */
    int64_t rest_ns = 0, rest_calls = 0;
    uint32_t rest = 0;
    for (uint32_t i = 0; i < launched; i++) {
        uint32_t k = rows[i].kernel;
        double share = total > 0 ? 100.0 * (double)ns[k] / (double)total : 0.0;
        if (share < cut_off) {
            rest++;
            rest_ns += ns[k];
            rest_calls += calls[k];
            continue;
        }
        fprintf(out, "%10.3f %5.1f%% %9lld %10.2f  %s\n", (double)ns[k] / 1e6, share, (long long)calls[k],
                (double)ns[k] / 1e3 / (double)calls[k], labels[k] ? labels[k] : "?");
    }
    if (rest)
        fprintf(out, "%10.3f %5.1f%% %9lld %10s  %u kernels under 0.1 %% each\n", (double)rest_ns / 1e6,
                total > 0 ? 100.0 * (double)rest_ns / (double)total : 0.0, (long long)rest_calls, "", rest);
    free(rows);
}
