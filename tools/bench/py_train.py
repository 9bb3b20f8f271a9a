"""py_train.py — the PyTorch side of the training-step benchmarks of `make bench`
(tools/bench.sh), with NumPy float64 references for the checks.

Usage: py_train.py THREADS mlp     one SGD step of the 784-256-256-10 relu MLP of
                                   tools/bench/mlp.tsr: softmax cross-entropy (mean over a batch
                                   of 128), plain SGD, lr 0.05
       py_train.py THREADS nn_mlp  the same model and data with torch.optim.Adam (lr 1e-3), as
                                   tools/bench/nn_mlp.tsr (Nn.mlp, Train.adam)
       py_train.py THREADS moons   one SGD step of the 2-32-1 perceptron of
                                   docs/examples/train_moons.tsr: hinge loss relu(1 - y·f(x))
                                   (mean over a batch of 20), plain SGD, lr 0.2; a timed run is
                                   100 steps over the 20 batches in turn, figures are per step

Prints RESULT lines like the C drivers.  The MLP gets exactly the data and initial parameters
that tools/bench/mlp_tsrc.c gives tsrc (uniform() below is common.h's bench_uniform), so the
first step's loss (loss0) must agree with tsrc's; tools/bench/table.py compares them.  The moons
data are NumPy's half moons in the layout of tsrc's generator (400 points, classes alternating,
labels ±1, noise 0.1, 20 batches of 20); the parameters are drawn like tsrc's defaults
(weights uniform in [-1, 1), b1 = 0).

Checks: the first step's loss, every gradient and every update against a float64 forward and
backward pass in NumPy from the same values; then, loosely, that the loss after the timed steps
is below the first one.  Threads: torch.set_num_threads(THREADS); tools/bench.sh also sets
OMP_NUM_THREADS and, at 2 threads, OMP_WAIT_POLICY=PASSIVE.
"""
import os
import sys

threads, what = int(sys.argv[1]), sys.argv[2]
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(threads)

import numpy as np  # noqa: E402  (after the environment is set)
from bench_data import stream, uniform  # noqa: E402
from bench_timing import timed  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(threads)
def relerr(got, ref):
    return float(np.max(np.abs(got.astype(np.float64) - ref)) / max(np.max(np.abs(ref)), 1e-300))


def report(kind, n, reps, best, med, ok, err, extra):
    print(f"RESULT kind={kind} impl=torch n={n} threads={threads} reps={reps} best_s={best:.6g} "
          f"median_s={med:.6g} check={'ok' if ok else 'FAIL'} maxrel={err:.3g} {extra}",
          flush=True)


def check_step(params, before, grads_ref, lr, loss, loss_ref, what, adam=False):
    """Loss and gradients against the reference; every update against p - lr·grad, or for
    Adam's first step (bias-corrected moments g and g²) p - lr·g/(|g| + eps)."""
    err = abs(float(loss) - loss_ref) / abs(loss_ref)
    upd = 0.0
    for p, p0, g_ref in zip(params, before, grads_ref):
        g = p.grad.numpy()
        err = max(err, relerr(g, g_ref))
        step = g / (np.abs(g) + np.float32(1e-8)) if adam else g
        upd = max(upd, float(np.max(np.abs(p.detach().numpy() - (p0 - np.float32(lr) * step)))))
    ok = err <= 2e-4 and upd <= 1e-7
    if not ok:
        print(f"INFO {what} torch: first step: loss {float(loss):.7g} (reference {loss_ref:.7g}), "
              f"largest gradient error {err:.3g}, largest update error {upd:.3g}")
    return ok, err


def mlp(what="mlp"):
    """what: "mlp" (SGD, lr 0.05) or "nn_mlp" (Adam, lr 1e-3, as tools/bench/nn_mlp.tsr)."""
    adam = what == "nn_mlp"
    batch, dims, lr = 128, (784, 256, 256, 10), (1e-3 if adam else 0.05)
    x = uniform(11, (batch, dims[0]), 0.0, 1.0)
    labels = (stream(12, batch) % np.uint64(dims[3])).astype(np.int64)
    layers = []
    for k in range(3):  # weights [out, in] and biases, streams 21..26, as mlp_tsrc.c
        bound = 1.0 / np.sqrt(float(dims[k]))
        layers.append(torch.nn.Linear(dims[k], dims[k + 1]))
        with torch.no_grad():
            layers[-1].weight.copy_(torch.from_numpy(
                uniform(21 + 2 * k, (dims[k + 1], dims[k]), -bound, bound)))
            layers[-1].bias.copy_(torch.from_numpy(uniform(22 + 2 * k, (dims[k + 1],), -bound, bound)))
    model = torch.nn.Sequential(layers[0], torch.nn.ReLU(), layers[1], torch.nn.ReLU(), layers[2])
    params = [t for layer in layers for t in (layer.weight, layer.bias)]
    opt = torch.optim.Adam(params, lr=lr) if adam else torch.optim.SGD(params, lr=lr)
    tx, ty = torch.from_numpy(x), torch.from_numpy(labels)

    # reference: float64 forward and backward from the initial values
    before = [p.detach().numpy().copy() for p in params]
    w = [b.astype(np.float64) for b in before]
    h1 = np.maximum(x @ w[0].T + w[1], 0)
    h2 = np.maximum(h1 @ w[2].T + w[3], 0)
    z = h2 @ w[4].T + w[5]
    e = np.exp(z)
    loss_ref = float(np.mean(np.log(e.sum(1)) - z[np.arange(batch), labels]))
    dz = e / e.sum(1, keepdims=True)
    dz[np.arange(batch), labels] -= 1
    dz /= batch
    dh2 = (dz @ w[4]) * (h2 > 0)
    dh1 = (dh2 @ w[2]) * (h1 > 0)
    grads_ref = [dh1.T @ x, dh1.sum(0), dh2.T @ h1, dh2.sum(0), dz.T @ h2, dz.sum(0)]

    last = []

    def step():
        opt.zero_grad(set_to_none=False)
        loss = torch.nn.functional.cross_entropy(model(tx), ty)
        loss.backward()
        opt.step()
        last[:] = [loss]

    step()
    loss0 = float(last[0])
    ok, err = check_step(params, before, grads_ref, lr, loss0, loss_ref, what, adam)
    _, reps, best, med = timed(step)
    loss_end = float(last[0])
    if not loss_end < loss0:
        print(f"INFO {what} torch: the loss did not decrease over {reps + 2} steps: {loss0:.7g}, "
              f"then {loss_end:.7g}")
        ok = False
    report(what, batch, reps, best, med, ok, err,
           f"loss0={loss0:.7g} loss_end={loss_end:.7g} steps={reps + 2}")


def moons():
    count, nb, batch, hidden, lr, steps = 400, 20, 20, 32, 0.4, 100  # lr: train_moons.tsr at epoch 0
    rng = np.random.default_rng(1)
    p = np.arange(count)
    t = np.pi * (p // 2) / (count // 2 - 1)  # evenly spaced over [0, π] within each class
    cls = p % 2
    pts = np.where(cls[:, None] == 0, np.stack([np.cos(t), np.sin(t)], 1),
                   np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1))
    pts = (pts + rng.normal(0, 0.1, pts.shape)).astype(np.float32).reshape(nb, batch, 2)
    lab = np.where(cls == 0, 1.0, -1.0).astype(np.float32).reshape(nb, batch, 1)
    xs, ys = [torch.from_numpy(a) for a in pts], [torch.from_numpy(a) for a in lab]
    l1, l2 = torch.nn.Linear(2, hidden), torch.nn.Linear(hidden, 1, bias=False)
    with torch.no_grad():  # tsrc's defaults: weights uniform in [-1, 1), b1 = 0
        l1.weight.copy_(torch.from_numpy(rng.uniform(-1, 1, (hidden, 2)).astype(np.float32)))
        l1.bias.zero_()
        l2.weight.copy_(torch.from_numpy(rng.uniform(-1, 1, (1, hidden)).astype(np.float32)))
    params = [l1.weight, l1.bias, l2.weight]
    opt = torch.optim.SGD(params, lr=lr)

    def one(b):
        opt.zero_grad(set_to_none=False)
        loss = torch.relu(1 - ys[b] * l2(torch.relu(l1(xs[b])))).sum() / batch
        loss.backward()
        opt.step()
        return loss

    # reference: float64 step on batch 0
    before = [q.detach().numpy().copy() for q in params]
    w1, b1, w2 = (a.astype(np.float64) for a in before)
    x, y = pts[0].astype(np.float64), lab[0].astype(np.float64)
    h = np.maximum(x @ w1.T + b1, 0)
    margin = 1 - y * (h @ w2.T)
    loss_ref = float(np.maximum(margin, 0).sum() / batch)
    dout = np.where(margin > 0, -y / batch, 0.0)
    dpre = (dout @ w2) * (h > 0)
    grads_ref = [dpre.T @ x, dpre.sum(0), dout.T @ h]
    loss = one(0)
    ok, err = check_step(params, before, grads_ref, lr, float(loss), loss_ref, "moons")

    def epoch():
        return sum(float(one(b)) for b in range(nb)) / nb

    state = {"b": 0}

    def run():
        b = state["b"]
        for _ in range(steps):
            one(b)
            b = (b + 1) % nb
        state["b"] = b

    first = epoch()
    _, reps, best, med = timed(run)
    last = epoch()
    if not last < first:
        print(f"INFO moons torch: the mean loss did not decrease: first epoch {first:.5g}, after "
              f"the timed runs {last:.5g}")
        ok = False
    report("moons", batch, reps, best / steps, med / steps, ok, err,
           f"loss_first={first:.5g} loss_last={last:.5g} steps_per_run={steps}")


if what in ("mlp", "nn_mlp"):
    mlp(what)
elif what == "moons":
    moons()
else:
    sys.exit(f"py_train.py: unknown benchmark {what}")
config = torch.__config__.show()
blas = [w for w in config.replace(",", " ").split() if w.startswith("BLAS_INFO=")]
cap = [line.split(":", 1)[1].strip() for line in config.splitlines() if "CPU capability" in line]
print(f"INFO PyTorch: {', '.join(blas) or 'BLAS_INFO unknown'}; CPU capability "
      f"{', '.join(cap) or 'unknown'}; oneDNN (MKL-DNN) {'yes' if 'MKL-DNN' in config else 'no'}; "
      f"OpenMP {'yes' if 'OpenMP' in config else 'no'}")
