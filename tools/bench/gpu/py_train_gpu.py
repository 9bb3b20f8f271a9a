"""py_train_gpu.py — the PyTorch side of the MLP case of `make bench-gpu` (tools/bench/gpu/):
one SGD step of the 784-256-256-10 relu MLP of tools/bench/mlp.tsr (softmax cross-entropy, the
mean over a batch of 128, lr 0.05) on the GPU, in plain FP32 (no TF32).

Usage: python3 py_train_gpu.py [BUDGET_SECONDS (default 3)] [MAX_REPS (default 5000)]

The data and initial parameters are those of tools/bench/mlp_tsrc.c, mlp_gpu_tsrc.c and
py_train.py (common.h's bench_uniform, computed here with NumPy when it is there, else in plain
Python).  Timing as mlp_gpu_tsrc.c: a warm-up step, one step timed alone to size the trials, then
the best of 3 trials of R steps followed by torch.cuda.synchronize(), divided by R.  The check:
the first step's loss against a float64 forward pass on the CPU (relative 1e-4), and that the
loss falls.  Prints a RESULT line as the C drivers; exit 3 on a wrong result, 2 without CUDA.
"""
import sys
import time

import torch

GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def uniform(seed, shape, lo, hi):
    """common.h's bench_uniform: lo + (hi - lo)·u in double, rounded to float32 once."""
    count = 1
    for d in shape:
        count *= d
    base = (seed * GOLDEN + 1) & M64
    try:
        import numpy as np
        z = np.arange(count, dtype=np.uint64) + np.uint64(base)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
        u = (z >> np.uint64(40)).astype(np.float64) / 16777216.0
        vals = torch.from_numpy((lo + (hi - lo) * u).astype(np.float64))
    except ImportError:
        vals = torch.tensor([lo + (hi - lo) * ((mix((base + i) & M64) >> 40) / 16777216.0)
                             for i in range(count)], dtype=torch.float64)
    return vals.to(torch.float32).reshape(shape)


def main():
    budget = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
    max_reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5000
    if not torch.cuda.is_available():
        print("py_train_gpu.py: PyTorch sees no CUDA device", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    dev = torch.device("cuda")
    batch, dims, lr = 128, (784, 256, 256, 10), 0.05
    x = uniform(11, (batch, dims[0]), 0.0, 1.0)
    labels = torch.tensor([mix((12 * GOLDEN + n + 1) & M64) % dims[3] for n in range(batch)],
                          dtype=torch.int64)
    layers = []
    for k in range(3):  # weights [out, in] and biases, streams 21..26, as mlp_tsrc.c
        bound = 1.0 / float(dims[k]) ** 0.5
        lin = torch.nn.Linear(dims[k], dims[k + 1])
        with torch.no_grad():
            lin.weight.copy_(uniform(21 + 2 * k, (dims[k + 1], dims[k]), -bound, bound))
            lin.bias.copy_(uniform(22 + 2 * k, (dims[k + 1],), -bound, bound))
        layers.append(lin)

    # reference loss: float64 on the CPU, from the initial values
    w = [t.detach().to(torch.float64) for lin in layers for t in (lin.weight, lin.bias)]
    h = x.to(torch.float64)
    for k in range(3):
        h = h @ w[2 * k].T + w[2 * k + 1]
        if k < 2:
            h = torch.relu(h)
    loss_ref = float(torch.nn.functional.cross_entropy(h, labels))

    model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(),
                                layers[2]).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    tx, ty = x.to(dev), labels.to(dev)
    last = []

    def step():
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        last[:] = [loss]

    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    loss0 = float(last[0])
    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    one = time.perf_counter() - t0
    reps = min(max_reps, max(3, int(budget / 3 / one) if one > 0 else max_reps))
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            step()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t0) / reps)
    loss_end = float(last[0])
    rel = abs(loss0 - loss_ref) / abs(loss_ref)
    ok = rel <= 1e-4 and loss_end < loss0
    if not ok:
        print(f"INFO mlp torch gpu: first loss {loss0:.7g} (reference {loss_ref:.7g}, relative "
              f"error {rel:.3g}), after {2 + 3 * reps} steps {loss_end:.7g}")
    print(f"INFO torch gpu mlp: {torch.__version__} on {torch.cuda.get_device_name()}; first "
          f"step {first:.3g} s, one step + sync {one:.3g} s")
    print(f"RESULT kind=gpu_mlp impl=torch n={batch} reps={reps} best_s={best:.6g} "
          f"ms={best * 1e3:.4f} check={'ok' if ok else 'FAIL'} maxrel={rel:.3g} "
          f"loss0={loss0:.7g} loss_end={loss_end:.7g}", flush=True)
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
