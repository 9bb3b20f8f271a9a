"""py_loop.py — the Nn/Train MLP step of tools/bench/nn_mlp.tsr driven from a Python loop through
the package runtime/python/tsr, for `make bench` (section python): what the binding costs per
step against the C driver (nn_mlp_tsrc.c, same program, same step).

Usage: py_loop.py TSRC THREADS CACHE_DIR

Compiles the program with tsr.compile (tsrc --shared), fills x and y once, then times
  - `step`: m.step() alone, the binding's own cost (a method lookup and a ctypes call, no copy);
  - `feed`: m["x"] = batch; m["y"] = targets; m.step(), a loop that copies a NumPy batch in
    every step (400 KiB), as a training loop over a data set does.
Prints RESULT lines (kind=nn_mlp_py, impl=step or feed) that tools/bench/table.py sets beside
the C driver's kind=nn_mlp figure.  Threads: TSR_NUM_THREADS (the runtime reads it)."""
import os
import sys

tsrc, threads, cache = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.environ["TSR_NUM_THREADS"] = str(threads)
sys.dont_write_bytecode = True
root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(root, "runtime", "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np  # noqa: E402
import tsr  # noqa: E402
from bench_timing import timed  # noqa: E402

m = tsr.compile(os.path.join(root, "tools", "bench", "nn_mlp.tsr"), seed=1, tsrc=tsrc, cache=cache)
rng = np.random.default_rng(1)
x = rng.random((128, 784), dtype=np.float32)
y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
m["x"], m["y"] = x, y


def steps_only():
    m.step()


def feed():
    m["x"] = x
    m["y"] = y
    m.step()


for impl, fn in (("step", steps_only), ("feed", feed)):
    _, reps, best, med = timed(fn)
    loss = float(m["loss"][0])
    ok = np.isfinite(loss)
    print(f"RESULT kind=nn_mlp_py impl={impl} n=128 threads={threads} reps={reps} best_s={best:.6g} "
          f"median_s={med:.6g} check={'ok' if ok else 'FAIL'} maxrel=0 loss={loss:.7g}")
m.close()
