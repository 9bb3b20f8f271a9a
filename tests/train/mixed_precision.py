#!/usr/bin/env python3
"""mixed_precision.py — Train's f32 master weights for bf16 and f16 parameters, and Train.step
~loss_scale's dynamic loss scaling, against the same steps emulated in NumPy.

Master weights.  A 2->2 weight w of a half type trains on a fixed batch (loss = sum((w x)^2),
x f32, so w x is f32 and w's gradient is that f32 gradient rounded once to w's type) with a
learning rate so small that every update is below half a unit in the last place of w's cells:
without an f32 master copy w would never move.  NumPy keeps the master in float32, rounds the
gradient to the type, updates the master as torch.optim does and rounds it into w; tsrc must
print the same w after every step (within one unit in the last place of the type, since the
f32 sums may be added in another order before the rounding) and w must have moved.

Loss scaling.  An f16 w trains with ~loss_scale:1024 ~scale_window:2, and step 3 of 6 reads its
input multiplied by 1000, so that its scaled gradient overflows f16: that step must leave w as it
was, the scale must halve there and double after every two good steps, and the checkpoint written
at the end must hold the scale NumPy's emulation ends with.  The same with Train.accumulate and
Train.apply over two micro-batches a batch, the scale a one-cell tensor of the program's that
both routines are given, the second micro-batch of batch 3 of 4 overflowing.

Training.  Nn.mlp ~dtype:"bf16" (and "f16") trained with Train.adamw on noisy half moons must
end within 1 % of the same network's f32 final loss over all the points (natively, --native).

Each program runs on the reference executor (scheduled and unscheduled) and, with --native,
natively.  Prints one PASS/FAIL line per case and run, then "N passed, N failed"."""
import os, subprocess, sys, tempfile
import numpy as np
from optimisers import command_line, parse  # this directory's: the same options, the same printed grids

f = np.float32
X = np.array([[1, 2], [3, -1], [.5, .25]], f)
W0 = np.array([[.5, -.25], [.125, 1]], f)


def round_bf16(a):
    """float32 values rounded to nearest even in their top 16 bits (NaN and inf kept)."""
    bits = np.asarray(a, f).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(f)


def round_f16(a):
    with np.errstate(over="ignore"):
        return np.asarray(a, f).astype(np.float16).astype(f)


ROUND = {"bf16": round_bf16, "f16": round_f16}
ULP_AT_1 = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10}

PROGRAM = """let%op x = [| [1.; 2.]; [3.; -1.]; [0.5; 0.25] |]
let%op w = {{ w = [ (0.5, -0.25); (0.125, 1.) ]; dtype = "{dtype}" }}
let%op loss = ((w * x) *. (w * x)) ++ "... | ... => 0"
routine train = Train.step loss ~update:({update})
main = for i = 1 to {steps} do run train; print w done
"""


def grad(w):
    return f(2) * (w @ X.T) @ X


def sgd_mixed(dtype, lr, steps, momentum=0., master_copy=True):
    """master_copy=False: the update applied to w itself (what a half-type optimiser without a
    master would do)."""
    rnd = ROUND[dtype]
    master, w, vel, out = W0.copy(), W0.copy(), np.zeros_like(W0), []
    for _ in range(steps):
        if not master_copy: master = w
        d = rnd(grad(w))
        if momentum > 0:
            vel = f(momentum) * vel + d
            d = vel
        master = master - f(lr) * d
        w = rnd(master)
        out.append(w)
    return out


def adamw_mixed(dtype, lr, steps, weight_decay=0.01, beta1=.9, beta2=.999, eps=1e-8, master_copy=True):
    rnd = ROUND[dtype]
    master, w, m, v, out = W0.copy(), W0.copy(), np.zeros_like(W0), np.zeros_like(W0), []
    for t in range(1, steps + 1):
        if not master_copy: master = w
        g = rnd(grad(w))
        master = master - f(lr) * f(weight_decay) * master
        m = f(beta1) * m + f(1 - beta1) * g
        v = f(beta2) * v + f(1 - beta2) * g * g
        master = master - f(lr) * (m / f(1 - beta1 ** t)) / (np.sqrt(v) / np.sqrt(f(1 - beta2 ** t)) + f(eps))
        w = rnd(master)
        out.append(w)
    return out


# (name, dtype, update, steps, emulation): each learning rate keeps every update below half a
# unit in the last place of w's cells (bf16: 2^-8 near 1, f16: 2^-11).
CASES = [
    ("bf16 sgd", "bf16", "Train.sgd ~lr:0.00005", 24, lambda **k: sgd_mixed("bf16", 5e-5, 24, **k)),
    ("bf16 sgd momentum", "bf16", "Train.sgd ~lr:0.000005 ~momentum:0.9", 24,
     lambda **k: sgd_mixed("bf16", 5e-6, 24, momentum=0.9, **k)),
    ("bf16 adamw", "bf16", "Train.adamw ~lr:0.0002", 32, lambda **k: adamw_mixed("bf16", 2e-4, 32, **k)),
    ("f16 sgd", "f16", "Train.sgd ~lr:0.00001", 24, lambda **k: sgd_mixed("f16", 1e-5, 24, **k)),
    ("f16 adamw", "f16", "Train.adamw ~lr:0.000025", 32, lambda **k: adamw_mixed("f16", 2.5e-5, 32, **k)),
]

SCALED_PROGRAM = """index i : 6
let%op x = [| [1.; 2.]; [3.; -1.]; [0.5; 0.25] |]
let%op w = { w = [ (0.5, -0.25); (0.125, 1.) ]; dtype = "f16" }
let%op k = where (eq !@i 2.) 1000. 1.
let%op loss = ((w * (x *. k)) *. (w * (x *. k))) ++ "... | ... => 0"
routine train = Train.step loss ~loss_scale:1024. ~scale_window:2 ~update:(Train.sgd ~lr:0.001)
main = for i = 0 to 5 do run train; print w done; save "scaled.npz"
"""


def scaled_emulation():
    """torch.amp.GradScaler's rule on an f16 gradient, unscaled in f32 in the optimiser."""
    scale, good, master, w, out, skipped = f(1024), 0, W0.copy(), W0.copy(), [], []
    for i in range(6):
        k = f(1000) if i == 2 else f(1)
        xk = X * k
        g16 = round_f16(f(2) * scale * (w @ xk.T) @ xk)
        ok = bool(np.all(np.isfinite(g16)))
        skipped.append(not ok)
        if ok:
            master = master - f(0.001) * (g16 * (f(1) / scale))
            w = round_f16(master)
            good += 1
            if good >= 2:
                scale, good = scale * f(2), 0
        else:
            scale, good = scale * f(0.5), 0
        out.append(w)
    return out, skipped, scale


MLP_PROGRAM = """open Nn
data moons = half_moons ~count:800 ~noise:0.35 ~seed:1 ~batches:40
index b : 40
let net = mlp ~hidden:[32; 32] ~out:1 ~dtype:"{dtype}" ()
let%op loss = bce_with_logits (net (moons.points @| b)) (((moons.labels @| b) + 1) /. 2)
let%op all_loss = bce_with_logits (net moons.points) ((moons.labels + 1) /. 2)
routine train = Train.step loss ~update:(Train.adamw ~lr:0.003)
routine evaluate = all_loss.forward
main = for e = 1 to 30 do for b = 0 to 39 do run train done done; run evaluate; print "%.6f" all_loss
"""


ACCUMULATED_PROGRAM = """index i : 4
index m : 2
let%op x = [| [1.; 2.]; [3.; -1.]; [0.5; 0.25] |]
let%op w = { w = [ (0.5, -0.25); (0.125, 1.) ]; dtype = "f16" }
let%op scale = { scale = 1024.; o = [1] }
let%op k = where (eq !@i 2.) (where (eq !@m 1.) 1000. 1.) 1.
let%op loss = ((w * (x *. k)) *. (w * (x *. k))) ++ "... | ... => 0"
routine micro = Train.accumulate ~loss_scale:scale loss
routine update = Train.apply ~micro:2 ~loss_scale:scale ~scale_window:2 ~update:(Train.sgd ~lr:0.001) loss
main = for i = 0 to 3 do for m = 0 to 1 do run micro done; run update; print w; print scale done
"""


def accumulated_emulation():
    """Two micro-batches a batch, the second of batch 2 overflowing: the scale a tensor of the
    program's that Train.accumulate seeds with and Train.apply adjusts."""
    scale, good, master, w, out = f(1024), 0, W0.copy(), W0.copy(), []
    for i in range(4):
        g16 = np.zeros_like(W0)
        for m in range(2):
            k = f(1000) if (i, m) == (2, 1) else f(1)
            xk = X * k
            with np.errstate(over="ignore", invalid="ignore"):
                g16 = round_f16(g16 + f(2) * scale * (w @ xk.T) @ xk)
        with np.errstate(invalid="ignore"):
            g16 = round_f16(g16 * f(0.5))  # the mean of the two passes
        if np.all(np.isfinite(g16)):
            master = master - f(0.001) * (g16 * (f(1) / scale))
            w = round_f16(master)
            good += 1
            if good >= 2:
                scale, good = scale * f(2), 0
        else:
            scale, good = scale * f(0.5), 0
        out += [w, np.array([[scale]], f)]
    return out


def close(got, want, dtype):
    """Within one unit in the last place of the type (relative), for every cell."""
    ulp = ULP_AT_1[dtype] * np.maximum(np.abs(want), 2.0 ** -14)
    return got.shape == want.shape and bool(np.all(np.abs(got - want) <= ulp * 1.0001))


def main():
    a = command_line()
    passed = failed = 0
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    modes = [["--run", "--interp"], ["--run", "--interp", "--no-sched"]] + ([["--run"]] if a.native else [])

    def report(ok, label, detail=""):
        nonlocal passed, failed
        if ok:
            passed += 1
            print("PASS", label)
        else:
            failed += 1
            print("FAIL", label, detail)

    with tempfile.TemporaryDirectory() as tmp:
        for name, dtype, update, steps, emulate in CASES:
            want = emulate()
            assert not np.array_equal(want[-1], W0), name  # the case tests that w moves
            # Without the master every update rounds away, or the case would not show it at work.
            assert all(np.array_equal(w, W0) for w in emulate(master_copy=False)), name
            path = os.path.join(tmp, "mixed.tsr")
            with open(path, "w") as fh:
                fh.write(PROGRAM.format(dtype=dtype, update=update, steps=steps))
            for mode in modes:
                r = subprocess.run([a.tsrc, *mode, path], capture_output=True, text=True, env=env, cwd=tmp)
                got = parse(r.stdout) if r.returncode == 0 else []
                ok = len(got) == len(want) and all(close(g, w, dtype) for g, w in zip(got, want))
                report(ok, f"{name} ({' '.join(mode)})", r.stderr.strip()[:400] +
                       "".join(f"\n  got {g.tolist()} want {w.tolist()}" for g, w in zip(got, want) if not close(g, w, dtype)))

        want, skipped, final_scale = scaled_emulation()
        assert skipped == [False, False, True, False, False, False], skipped
        path = os.path.join(tmp, "scaled.tsr")
        with open(path, "w") as fh:
            fh.write(SCALED_PROGRAM)
        for mode in modes:
            ck = os.path.join(tmp, "scaled.npz")
            if os.path.exists(ck): os.remove(ck)
            r = subprocess.run([a.tsrc, *mode, path], capture_output=True, text=True, env=env, cwd=tmp)
            got = parse(r.stdout) if r.returncode == 0 else []
            ok = len(got) == len(want) and all(close(g, w, "f16") for g, w in zip(got, want))
            ok = ok and np.array_equal(got[2], got[1])  # the overflowing step changed nothing
            scale = None
            if ok and os.path.exists(ck):
                with np.load(ck) as z:
                    names = [n for n in z.files if n == "loss.grad_scale"]  # named after the loss
                    scale = float(z[names[0]].reshape(-1)[0]) if len(names) == 1 else None
            ok = ok and scale == float(final_scale)
            report(ok, f"f16 loss scaling, skipped overflow ({' '.join(mode)})",
                   f"{r.stderr.strip()[:400]} scale {scale} want {final_scale}" +
                   "".join(f"\n  got {g.tolist()} want {w.tolist()}" for g, w in zip(got, want)))
        want = accumulated_emulation()
        path = os.path.join(tmp, "accumulated.tsr")
        with open(path, "w") as fh:
            fh.write(ACCUMULATED_PROGRAM)
        for mode in modes:
            r = subprocess.run([a.tsrc, *mode, path], capture_output=True, text=True, env=env, cwd=tmp)
            got = parse(r.stdout) if r.returncode == 0 else []
            ok = len(got) == len(want) and all(close(g, w, "f16") for g, w in zip(got, want))
            ok = ok and np.array_equal(got[4], got[2]) and got[5].item() == 1024.  # batch 2 skipped, scale halved
            report(ok, f"f16 loss scaling with gradient accumulation, a skipped batch ({' '.join(mode)})",
                   r.stderr.strip()[:400] + "".join(f"\n  got {g.tolist()} want {w.tolist()}" for g, w in zip(got, want)))

        if a.native:
            losses = {}
            for dtype in ["f32", "bf16", "f16"]:
                path = os.path.join(tmp, f"mlp_{dtype}.tsr")
                with open(path, "w") as fh:
                    fh.write(MLP_PROGRAM.format(dtype=dtype))
                r = subprocess.run([a.tsrc, "--run", path], capture_output=True, text=True, cwd=tmp)
                try:
                    losses[dtype] = float(r.stdout.split()[-1])
                except (ValueError, IndexError):
                    losses[dtype] = None
                    print("  ", r.stderr.strip()[:400])
            for dtype in ["bf16", "f16"]:
                ok = losses["f32"] is not None and losses[dtype] is not None and \
                     abs(losses[dtype] - losses["f32"]) <= 0.01 * losses["f32"]
                report(ok, f"Nn.mlp ~dtype:\"{dtype}\" trains to within 1 % of f32: {losses[dtype]} vs {losses['f32']}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
