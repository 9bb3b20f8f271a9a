#!/usr/bin/env python3
"""schedules.py — Train.linear_schedule / cosine_schedule / step_schedule / warmup_cosine_schedule
against NumPy.

One program prints, at every epoch of a loop over an index symbol, the four schedules (with
TSR_PRINT_EXACT=1, every float32 in full), and trains a weight with Train.sgd whose ~lr is the
cosine schedule of the epoch; NumPy computes the same formulas in float64 and the same SGD steps
in float32.  Relative tolerance 1e-5 for the schedules and the weights.  Run with the reference
executor and natively; prints one PASS/FAIL line per run, then "N passed, N failed"."""
import argparse, math, os, subprocess, sys, tempfile
import numpy as np

EPOCHS = 12
PROGRAM = """index epoch : %d
let%%op lin = Train.linear_schedule ~lr:0.1 ~final:0.01 ~steps:%d (!@epoch)
let%%op cosine = Train.cosine_schedule ~lr:0.1 ~final:0.001 ~steps:%d (!@epoch)
let%%op stepped = Train.step_schedule ~lr:0.1 ~gamma:0.5 ~every:4 ~steps:%d (!@epoch)
let%%op warm = Train.warmup_cosine_schedule ~lr:0.1 ~final:0.01 ~warmup:3 ~steps:%d (!@epoch)
let%%op x = [| [1.; 2.]; [3.; -1.] |]
let%%op w = { w = [ (0.5, -0.25) ] }
let%%op loss = ((w * x) *. (w * x)) ++ "... | ... -> ... => 0"
routine schedules = lin.forward; cosine.forward; stepped.forward; warm.forward
routine train = Train.step loss ~update:(Train.sgd ~lr:(Train.cosine_schedule ~lr:0.05 ~steps:%d (!@epoch)))
main = for epoch = 0 to %d do run schedules; run train; print "%%.9g %%.9g %%.9g %%.9g" lin cosine stepped warm; print w done
""" % ((EPOCHS,) * 6 + (EPOCHS - 1,))

X = np.array([[1, 2], [3, -1]], np.float32)


def expected():
    rows, w, ws = [], np.array([[0.5, -0.25]], np.float32), []
    for e in range(EPOCHS):
        rows.append([0.1 + (0.01 - 0.1) * e / EPOCHS,
                     0.001 + 0.5 * (0.1 - 0.001) * (1 + math.cos(math.pi * e / EPOCHS)),
                     0.1 * 0.5 ** (e // 4),
                     0.1 * (e + 1) / 3 if e < 3 else
                     0.01 + 0.5 * (0.1 - 0.01) * (1 + math.cos(math.pi * (e - 3) / (EPOCHS - 3)))])
        lr = np.float32(0.5 * 0.05 * (1 + math.cos(math.pi * e / EPOCHS)))
        w = w - lr * (2 * (w @ X.T) @ X)
        ws.append(w.copy())
    return np.array(rows), np.array(ws)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", default="build/tsrc")
    a = ap.parse_args()
    tsrc = os.path.abspath(a.tsrc)
    want_rows, want_w = expected()
    passed = failed = 0
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "schedules.tsr")
        with open(path, "w") as fh:
            fh.write(PROGRAM)
        for mode in (["--run", "--interp"], ["--run"]):
            r = subprocess.run([tsrc, *mode, path], capture_output=True, text=True, env=env, cwd=tmp)
            lines = r.stdout.splitlines()
            rows = [[float(v) for v in l.split()] for l in lines if l and l[0].isdigit()]
            ws = [[float(v) for v in l.split()] for l in lines if l.startswith("    ")]
            ok = (r.returncode == 0 and len(rows) == EPOCHS and len(ws) == EPOCHS and
                  np.allclose(rows, want_rows, rtol=1e-5, atol=1e-8) and
                  np.allclose(np.array(ws).reshape(want_w.shape), want_w, rtol=1e-5, atol=1e-7))
            label = "schedules and sgd on a cosine schedule (%s)" % " ".join(mode)
            if ok:
                passed += 1
                print("PASS", label)
            else:
                failed += 1
                print("FAIL", label, r.stderr.strip()[:400])
                print("  got", rows, ws)
                print("  want", want_rows.tolist(), want_w.tolist())
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
