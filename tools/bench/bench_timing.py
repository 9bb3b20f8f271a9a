"""bench_timing.py: the timing policy the Python sides of `make bench` share with the C drivers
(tools/bench/common.h, bench_measure): one warm-up run, untimed runs for a tenth of
BENCH_BUDGET (at most 0.2 s) so that a CPU the previous process left idle is up to speed, then
about BENCH_BUDGET seconds of repetitions, at least 5 and at most BENCH_MAX_REPS, capped near 10
budgets; a warm-up over 10 budgets is the figure."""
import os
import time

BUDGET = float(os.environ.get("BENCH_BUDGET", "1.0"))
MAX_REPS = int(os.environ.get("BENCH_MAX_REPS", "200"))


def timed(fn):
    """(fn's result from the warm-up, repetitions, best seconds, median seconds)."""
    t0 = time.perf_counter()
    out = fn()
    warm = time.perf_counter() - t0
    if warm > 10 * BUDGET:
        return out, 1, warm, warm
    reps = min(MAX_REPS, max(5, int(BUDGET / warm) if warm > 0 else MAX_REPS))
    if reps * warm > 10 * BUDGET:
        reps = max(1, int(10 * BUDGET / warm))
    settle = min(BUDGET / 10, 0.2)
    s0 = time.perf_counter()
    while time.perf_counter() - s0 < settle:
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    ts.sort()
    med = ts[reps // 2] if reps % 2 else 0.5 * (ts[reps // 2 - 1] + ts[reps // 2])
    return out, reps, ts[0], med
