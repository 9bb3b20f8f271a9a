#!/usr/bin/env python3
"""optimisers.py — Train.sgd / Train.adam / Train.adamw and Train.step ~max_norm against NumPy.

Each case trains a 2->2 weight w on a fixed batch with loss = sum((w x)^2) for three steps
through `Train.step`, prints w after every step with TSR_PRINT_EXACT=1 (float32 values printed
in full) and compares with the same steps computed in NumPy float32.  Relative tolerance 1e-5
(the two compute the same float32 formulas, possibly in another order).  The clipping cases
train w and a bias b, loss = sum((w x + b)^2), with gradient clipping by global norm, once where
the norm exceeds max_norm at every step and once where it never does.  The layer case clips the
parameters of an `Nn.linear` trained on `Nn.mse` (a bias the library makes, whose input row is
left to the closing policy: clipping's spec over every gradient must not make it a hidden
dimension), starting from the weight the program prints before the first step; the f64 cases
clip an f64 parameter (its norm summed in f64) and train one with AdamW's decay of weights in
double (relative tolerance 1e-13: the decay was once rounded to f32).  Prints one PASS/FAIL
line per case, then "N passed, N failed"; exit status 1 if any failed."""
import argparse, os, subprocess, sys, tempfile
import numpy as np

f = np.float32
X = np.array([[1, 2], [3, -1], [.5, .25]], f)
W0 = np.array([[.5, -.25], [.125, 1]], f)
STEPS = 3

PROGRAM = """let%op x = [| [1.; 2.]; [3.; -1.]; [0.5; 0.25] |]
let%op w = {{ w = [ (0.5, -0.25); (0.125, 1.) ] }}
let%op loss = ((w * x) *. (w * x)) ++ "... | ... => 0"
routine train = Train.step loss ~update:({update})
main = for i = 1 to {steps} do run train; print w done
"""

def grad(w):
    return 2 * (w @ X.T) @ X

def sgd(lr, momentum=0., nesterov=False, weight_decay=0.):
    w, vel, out = W0.copy(), np.zeros_like(W0), []
    for _ in range(STEPS):
        d = grad(w)
        if weight_decay > 0: d = d + f(weight_decay) * w
        if momentum > 0:
            vel = f(momentum) * vel + d
            d = d + f(momentum) * vel if nesterov else vel
        w = w - f(lr) * d
        out.append(w)
    return out

def adam(lr, beta1=.9, beta2=.999, eps=1e-8, weight_decay=0., decoupled=False):
    w, m, v, out = W0.copy(), np.zeros_like(W0), np.zeros_like(W0), []
    for t in range(1, STEPS + 1):
        g = grad(w)
        if weight_decay > 0:
            if decoupled: w = w - f(lr) * f(weight_decay) * w
            else: g = g + f(weight_decay) * w
        m = f(beta1) * m + f(1 - beta1) * g
        v = f(beta2) * v + f(1 - beta2) * g * g
        w = w - f(lr) * (m / f(1 - beta1 ** t)) / (np.sqrt(v / f(1 - beta2 ** t)) + f(eps))
        out.append(w)
    return out

CASES = [
    ("sgd", "Train.sgd ~lr:0.01", sgd(0.01)),
    ("sgd momentum + weight decay", "Train.sgd ~lr:0.1 ~momentum:0.9 ~weight_decay:0.01",
     sgd(0.1, momentum=0.9, weight_decay=0.01)),
    ("sgd nesterov", "Train.sgd ~lr:0.02 ~momentum:0.5 ~nesterov:true", sgd(0.02, momentum=0.5, nesterov=True)),
    ("adam", "Train.adam ~lr:0.1", adam(0.1)),
    ("adam L2 weight decay", "Train.adam ~lr:0.05 ~beta1:0.8 ~beta2:0.99 ~weight_decay:0.1",
     adam(0.05, beta1=0.8, beta2=0.99, weight_decay=0.1)),
    ("adamw", "Train.adamw ~lr:0.1 ~weight_decay:0.2", adam(0.1, weight_decay=0.2, decoupled=True)),
]

CLIP_PROGRAM = """let%op x = [| [1.; 2.]; [3.; -1.]; [0.5; 0.25] |]
let%op w = {{ w = [ (0.5, -0.25); (0.125, 1.) ] }}
let%op b = {{ b = [ 0.25; -0.5 ] }}
let%op loss = ((w * x + b) *. (w * x + b)) ++ "... | ... => 0"
routine train = Train.step loss ~max_norm:{max_norm} ~update:({update})
main = for i = 1 to {steps} do run train; print w; print b done
"""
B0 = np.array([.25, -.5], f)

def clipped_sgd(max_norm, lr, momentum=0., active=True):
    """torch.nn.utils.clip_grad_norm_ then torch.optim.SGD; `active` is whether the norm must
    exceed max_norm at every step (True) or at none (False), so each case tests what it says."""
    w, b, vw, vb, out = W0.copy(), B0.copy(), np.zeros_like(W0), np.zeros_like(B0), []
    for _ in range(STEPS):
        r = X @ w.T + b
        gw, gb = 2 * r.T @ X, 2 * r.sum(0)
        norm = np.sqrt(np.sum(gw * gw) + np.sum(gb * gb))
        assert (norm > max_norm) == active, (norm, max_norm)
        scale = min(f(1), f(max_norm) / (norm + f(1e-6)))
        gw, gb = gw * scale, gb * scale
        if momentum > 0:
            vw, vb = f(momentum) * vw + gw, f(momentum) * vb + gb
            gw, gb = vw, vb
        w, b = w - f(lr) * gw, b - f(lr) * gb
        out += [w, b[None, :]]
    return out

CLIP_CASES = [
    ("sgd clipped", 3., "Train.sgd ~lr:0.02", clipped_sgd(3., 0.02)),
    ("sgd momentum clipped", 2., "Train.sgd ~lr:0.02 ~momentum:0.9", clipped_sgd(2., 0.02, momentum=0.9)),
    ("sgd not clipped", 1000., "Train.sgd ~lr:0.01", clipped_sgd(1000., 0.01, active=False)),
]

LAYER_PROGRAM = """open Nn
let%op x = [| [1.; 2.]; [3.; -1.]; [0.5; 0.25] |]
let%op y = [| [1.; 0.]; [0.; 2.]; [0.5; 0.5] |]
let net = linear ~out:2 ()
let%op loss = mse (net x) y
let ps = params loss
routine train = Train.step loss ~max_norm:0.5 ~update:(Train.sgd ~lr:0.1)
main = print (nth ps 0); for i = 1 to {steps} do run train; print (nth ps 0); print (nth ps 1) done
"""

def clipped_layer(w, max_norm=0.5, lr=0.1):
    """torch.nn.Linear(2, 2) with weight w (out x in) and bias 0, MSE loss, clip_grad_norm_, SGD."""
    xs = X.astype(f)
    ys = np.array([[1, 0], [0, 2], [.5, .5]], f)
    b, out = np.zeros(2, f), [w]
    for _ in range(STEPS):
        r = xs @ w.T + b - ys
        gr = f(2) * r / f(r.size)
        gw, gb = gr.T @ xs, gr.sum(0)
        norm = np.sqrt(np.sum(gw * gw) + np.sum(gb * gb))
        assert norm > max_norm, norm
        scale = min(f(1), f(max_norm) / (norm + f(1e-6)))
        w, b = w - f(lr) * gw * scale, b - f(lr) * gb * scale
        out += [w, b[None, :]]
    return out

F64_PROGRAM = """let%op x = [| [1.; 2.]; [3.; -1.] |]
let%op w = {{ w = [ (0.5, -0.25) ]; dtype = "f64" }}
let%op loss = ((w * x) *. (w * x)) ++ "... | ... -> ... => 0"
routine train = Train.step loss ~max_norm:1. ~update:(Train.sgd ~lr:0.01)
main = for i = 1 to {steps} do run train; print w done
"""

def clipped_f64(max_norm=1., lr=0.01):
    """An f64 parameter clipped (the norm summed in f64, as torch.nn.utils.clip_grad_norm_)."""
    xs, w, out = np.array([[1, 2], [3, -1]], np.float64), np.array([[.5, -.25]]), []
    for _ in range(STEPS):
        g = 2 * (xs @ w.T).T @ xs
        norm = np.sqrt(np.sum(g * g))
        w = w - lr * g * min(1., max_norm / (norm + 1e-6))
        out.append(w)
    return out

F64_ADAMW_PROGRAM = F64_PROGRAM.replace("~max_norm:1. ~update:(Train.sgd ~lr:0.01)",
                                        '~update:(Train.adamw ~lr:0.05 ~weight_decay:0.3 ~decay:"weights")')

def adamw_f64(lr=0.05, wd=0.3, b1=0.9, b2=0.999, eps=1e-8):
    """torch.optim.AdamW on an f64 map (a decayed weight) in double: the decay is the double 0.3
    (it was rounded to f32 through the f32 0/1 that marks a map, a relative error of 1e-9)."""
    xs, w, out = np.array([[1, 2], [3, -1]], np.float64), np.array([[.5, -.25]]), []
    m, v = np.zeros_like(w), np.zeros_like(w)
    for t in range(1, STEPS + 1):
        g = 2 * (xs @ w.T).T @ xs
        w = w - lr * wd * w
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        w = w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v) / np.sqrt(1 - b2 ** t) + eps)
        out.append(w)
    return out

def parse(text):
    """Each printed tensor (a header line, then its rows indented) as an array."""
    out = []
    for line in text.splitlines():
        if line.startswith("    ") and out: out[-1].append(line.split())
        elif not line.startswith("    "): out.append([])
    return [np.array(rows, dtype=np.float64) for rows in out]

def command_line():
    """--tsrc (made absolute) and --native, as this script and mixed_precision.py take them."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--native", action="store_true", help="also run each program natively")
    a = ap.parse_args()
    a.tsrc = os.path.abspath(a.tsrc)
    return a

def main():
    a = command_line()
    passed = failed = 0
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    with tempfile.TemporaryDirectory() as tmp:
        runs = [(name, PROGRAM.format(update=update, steps=STEPS), want) for name, update, want in CASES]
        runs += [(name, CLIP_PROGRAM.format(max_norm=max_norm, update=update, steps=STEPS), want)
                 for name, max_norm, update, want in CLIP_CASES]
        runs.append(("Nn.linear clipped", LAYER_PROGRAM.format(steps=STEPS), None))
        runs.append(("f64 clipped", F64_PROGRAM.format(steps=STEPS), clipped_f64()))
        runs = [(name, text, want, 1e-5) for name, text, want in runs]
        runs.append(("f64 AdamW, decay of weights, in double", F64_ADAMW_PROGRAM.format(steps=STEPS), adamw_f64(), 1e-13))
        for name, text, want, rtol in runs:
            path = os.path.join(tmp, "opt.tsr")
            with open(path, "w") as fh:
                fh.write(text)
            modes = [["--run", "--interp"], ["--run", "--interp", "--no-sched"]] + ([["--run"]] if a.native else [])
            for mode in modes:
                r = subprocess.run([a.tsrc, *mode, path], capture_output=True, text=True, env=env, cwd=tmp)
                got = parse(r.stdout) if r.returncode == 0 else []
                if name == "Nn.linear clipped": want = clipped_layer(got[0].astype(f)) if got else []
                ok = len(got) == len(want) > 0 and all(np.allclose(g, w, rtol=rtol, atol=rtol / 100) for g, w in zip(got, want))
                label = f"{name} ({' '.join(mode)})"
                if ok:
                    passed += 1
                    print("PASS", label)
                else:
                    failed += 1
                    print("FAIL", label, r.stderr.strip()[:400])
                    for g, w in zip(got, want): print("  got", g.tolist(), "want", w.tolist())
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0

if __name__ == "__main__":
    sys.exit(main())
