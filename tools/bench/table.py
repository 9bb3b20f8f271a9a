"""table.py — turns the RESULT lines of tools/bench.sh into the Markdown tables of `make bench`.

Usage: table.py RESULTS_FILE.  Standard library only (runs on any python3).
Figures come from the best time of each measurement (of every round, when a section ran several:
BENCH_ROUNDS); the median is in the results file.
Lines `UNSUPPORTED kind=… impl=tsrc n=… — message` (a program tsrc could not compile) show as
"n/s" in the tsrc column.  Exit status 1 when the MLP's first-step losses of tsrc and PyTorch
(same data, same initial parameters) disagree, or the sums of a convolution's output and
gradients do (within 1e-5 of the sum of their magnitudes), else 0.
"""
import sys

rows, unsupported = {}, set()
for line in open(sys.argv[1]):
    if line.startswith("RESULT ") or line.startswith("UNSUPPORTED "):
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        if line.startswith("UNSUPPORTED "):
            unsupported.add((f["kind"], f["n"]))
            continue
        key = (f["kind"], f["impl"], f["n"], int(f["threads"]))
        if key not in rows or float(f["best_s"]) < float(rows[key]["best_s"]):  # best of the rounds
            rows[key] = f

EW_BYTES_PER_ELEMENT = 16     # ideal fused kernel: read a, b, c, write y (4 bytes each)
TRIAD_BYTES_PER_ELEMENT = 12  # STREAM's count: read b, c, write a


def size_key(n):
    return tuple(int(p) for p in n.split("x"))


def rate(kind, f):
    """Higher is better: GFLOP/s, GB/s, or steps per second for the training steps."""
    best = float(f["best_s"])
    dims = size_key(f["n"])
    if kind.startswith("matmul"):
        return 2.0 * dims[0] ** 3 / best / 1e9
    if kind == "bmm":
        return 2.0 * dims[0] * dims[1] ** 3 / best / 1e9
    if kind == "ew":
        return EW_BYTES_PER_ELEMENT * dims[0] / best / 1e9
    if kind == "ew_bf16":  # values per second, as the f32 chain's figure counts them: 16 bytes each
        return EW_BYTES_PER_ELEMENT * dims[0] / best / 1e9
    if kind == "triad":
        return TRIAD_BYTES_PER_ELEMENT * dims[0] / best / 1e9
    return 1.0 / best


def fmt(x):
    return f"{x:.3g}" if x < 100 else f"{x:.0f}"


def cell(kind, impl, n, t):
    f = rows.get((kind, impl, n, t))
    if f is None:
        return None, ("n/s" if impl == "tsrc" and (kind, n) in unsupported else "–")
    if f["check"] != "ok":
        return None, "WRONG"
    r = rate(kind, f)
    if kind in ("mlp", "nn_mlp", "nn_mlp_dyn", "nn_mlp_py", "moons", "gpt", "gpt124m"):  # time per step: ms, µs for moons
        shown = fmt(float(f["best_s"]) * (1e6 if kind == "moons" else 1e3))
    else:
        shown = fmt(r)
    return r, shown + ("¹" if f["reps"] == "1" else "")


def ratio(x, y):
    if x is None or y is None:
        return "–"
    return f"{x / y:.2g}" if x / y < 10 else f"{x / y:.0f}"


def keys(kind):
    return sorted({(k[2], k[3]) for k in rows if k[0] == kind} |
                  {(n, t) for (kd, n) in unsupported if kd == kind
                   for t in {k[3] for k in rows} or {1}}, key=lambda p: (size_key(p[0]), p[1]))


def table(kind, title, impls, refs, first="n", ratio_label="tsrc/{}"):
    if not keys(kind):
        return
    present = [(i, label) for i, label in impls
               if i == "tsrc" or any(k[0] == kind and k[1] == i for k in rows)]
    print(title)
    print()
    head = [first, "threads"] + [label for _, label in present]
    head += [ratio_label.format(label) for i, label in present if i in refs]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    for n, t in keys(kind):
        vals = {i: cell(kind, i, n, t) for i, _ in present}
        line = [n, str(t)] + [vals[i][1] for i, _ in present]
        line += [ratio(vals["tsrc"][0], vals[i][0]) for i, _ in present if i in refs]
        print("| " + " | ".join(line) + " |")
    print()


BLAS = [("tsrc", "tsrc"), ("openblas", "OpenBLAS"), ("numpy", "NumPy"), ("torch", "PyTorch")]
REFS = {"openblas", "numpy", "torch"}
table("matmul", "matmul C = A·B, spec form `a +* \"i, k; k, j => i, j\" b`, float32, n×n "
      "(cblas_sgemm NoTrans/NoTrans, NumPy `a @ b`): GFLOP/s = 2n³ / best time (higher is better)",
      BLAS, REFS)
table("matmul_compose", "matmul, compose form `w * x` (w : n->n stored [o, i], x : n|n), "
      "Y = X·Wᵀ (cblas_sgemm NoTrans/Trans, NumPy `x @ w.T`): GFLOP/s = 2n³ / best time",
      BLAS, REFS)
table("matmul_tn", "matmul, transposed operand `a +* \"k, i; k, j => i, j\" b`, C = Aᵀ·B "
      "(cblas_sgemm Trans/NoTrans, NumPy `a.T @ b`): GFLOP/s = 2n³ / best time",
      BLAS, REFS)
F64 = [("tsrc", "tsrc"), ("openblas", "OpenBLAS")]
for kind, form, blas in (("matmul_f64", "spec form `a +* \"i, k; k, j => i, j\" b`, C = A·B", "NoTrans/NoTrans"),
                         ("matmul_compose_f64", "compose form `w * x`, Y = X·Wᵀ", "NoTrans/Trans"),
                         ("matmul_tn_f64", "transposed operand `a +* \"k, i; k, j => i, j\" b`, C = Aᵀ·B",
                          "Trans/NoTrans")):
    table(kind, f"matmul in f64, {form} (cblas_dgemm {blas}): GFLOP/s = 2n³ / best time", F64, {"openblas"})
table("bmm", "batched matmul `a +* \"b, i, j; b, j, k => b, i, k\" b`, batch × n×n "
      "(OpenBLAS: one cblas_sgemm per product; NumPy `np.matmul`): GFLOP/s = 2·batch·n³ / best time",
      BLAS, REFS, first="batch×n")
table("ew", "elementwise y = relu(a·b + c) − 0.5·a, float32: GB/s = 16 bytes per element "
      "(read a, b, c; write y) / best time",
      [("tsrc", "tsrc"), ("numpy", "NumPy"), ("numpy-out", "NumPy out="), ("torch", "PyTorch")],
      {"numpy", "numpy-out", "torch"}, first="floats")

def pair_table(keys, title, columns, row):
    """A table of two measurements side by side and their ratio, one line per (n, threads) in
    keys: columns names the three value columns after n and threads, and row(n, t) gives
    their cells."""
    if not keys:
        return
    print(title)
    print()
    print("| " + " | ".join(columns) + " |")
    print("|" + "---:|" * len(columns))
    for n, t in keys:
        print("| " + " | ".join([str(n), str(t)] + row(n, t)) + " |")
    print()


# The chain against the STREAM triad of the same run.
def triad_row(n, t):
    tr, trs = cell("triad", "c", n, t)
    ew = [v for k, v in rows.items() if k[0] == "ew" and k[1] == "tsrc" and k[3] == t]
    er, ers = cell("ew", "tsrc", ew[0]["n"], t) if ew else (None, "–")
    return [trs, ers, ratio(er, tr)]


pair_table(sorted({(k[2], k[3]) for k in rows if k[0] == "triad"}, key=lambda p: (size_key(p[0]), p[1])),
           "elementwise chain against the STREAM triad a = b + s·c (C, same run): triad GB/s = 12 "
           "bytes per element / best time; chain GB/s as above",
           ["floats", "threads", "triad", "tsrc chain", "chain/triad"], triad_row)

# bf16 against f32, tsrc's own figures of the same run.
def half_row(f32_kind, bf16_kind):
    def row(n, t):
        fr, frs = cell(f32_kind, "tsrc", n, t)
        hr, hrs = cell(bf16_kind, "tsrc", n, t)
        return [frs, hrs, ratio(hr, fr)]
    return row


for form, what in (("matmul", "spec form"), ("matmul_compose", "compose form"), ("matmul_tn", "transposed operand")):
    pair_table(keys(form + "_bf16"),
               f"matmul in bf16, {what} (bf16 operands and result, f32 accumulation: the schedule tiles "
               "it in f32 over widened copies, or in pairs on VDPBF16PS on AMD's Zen 4/5, docs/ir.md §5.4) "
               "against tsrc's f32 matmul: GFLOP/s",
               ["n", "threads", "f32", "bf16", "bf16/f32"], half_row(form, form + "_bf16"))
pair_table(keys("ew_bf16"),
           "elementwise chain with bf16 storage (tools/bench/elementwise_bf16.tsr: half the bytes of the "
           "f32 chain) against the f32 chain: useful GB/s = 16 bytes per value, as the f32 chain's figure, "
           "/ best time",
           ["values", "threads", "f32 chain", "bf16 chain", "bf16/f32"], half_row("ew", "ew_bf16"))

table("mlp", "MLP 784-256-256-10 training step (relu, biases, softmax cross-entropy, SGD lr 0.05), "
      "batch 128: milliseconds per step (lower is better); tsrc/PyTorch = PyTorch's time / tsrc's",
      [("tsrc", "tsrc"), ("torch", "PyTorch")], {"torch"}, first="batch")
table("nn_mlp", "MLP 784-256-256-10 training step written with Nn and Train (tools/bench/nn_mlp.tsr: "
      "Nn.mlp, Nn.cross_entropy, Train.step with Train.adam lr 1e-3), batch 128: milliseconds per "
      "step (lower is better); tsrc/PyTorch = PyTorch's time / tsrc's",
      [("tsrc", "tsrc"), ("torch", "PyTorch")], {"torch"}, first="batch")
# The run-time batch against the written one: the same program, the same step.
def dyn_row(n, t):
    wr, ws = cell("nn_mlp", "tsrc", n, t)
    rr, rs = cell("nn_mlp_dyn", "tsrc", n, t)
    return [ws, rs, ratio(wr, rr)]  # rates are 1/time: time ratio = wr/rr


pair_table(sorted({(k[2], k[3]) for k in rows if k[0] == "nn_mlp_dyn"}, key=lambda p: (int(p[0]), p[1])),
           "The Nn/Train MLP step with its batch a run-time size (`b = [?]`, set to 128) against the same "
           "program with `b = [128]`: milliseconds per step (lower is better); run-time/written = the "
           "run-time batch's time / the written batch's (at most 1.1 is the goal)",
           ["batch", "threads", "written", "run-time", "run-time/written"], dyn_row)
table("moons", "moons perceptron training step (docs/examples/train_moons.tsr: 2-32-1, hinge loss, "
      "SGD), batch 20: microseconds per step (lower is better); tsrc/PyTorch = PyTorch's time / "
      "tsrc's", [("tsrc", "tsrc"), ("torch", "PyTorch")], {"torch"}, first="batch")

# The Python loop against the C driver: the same program and step.
def py_row(n, t):
    cr, cs = cell("nn_mlp", "tsrc", n, t)
    sr, ss = cell("nn_mlp_py", "step", n, t)
    fr, fs = cell("nn_mlp_py", "feed", n, t)
    return [cs, ss, fs, ratio(cr, sr), ratio(cr, fr)]  # rates are 1/time: time ratio = C's rate / Python's


pair_table(sorted({(k[2], k[3]) for k in rows if k[0] == "nn_mlp_py"}, key=lambda p: (int(p[0]), p[1])),
           "The Nn/Train MLP step driven from Python (runtime/python/tsr, tools/bench/py_loop.py) against the "
           "C driver: milliseconds per step; Python/C = Python's time / C's (at most 1.1 is the goal); "
           "feed also copies a NumPy batch (128×784 and 128×10 floats) into the model every step",
           ["batch", "threads", "C", "Python", "Python + feed", "Python/C", "feed/C"], py_row)

# The GPT steps: time, GFLOP/s and the losses side by side.  Per configuration (tools/bench.sh
# BENCH_GPT): L, C, NH, T, B, V.
GPT_CONFIGS = {"gpt": (4, 256, 4, 64, 8, 96), "gpt124m": (12, 768, 12, 64, 4, 50304)}


def gpt_flop(kind):
    """Forward and backward (3x the forward) of every contraction, attention unmasked."""
    layers, c, _, t, b, v = GPT_CONFIGS[kind]
    bt = b * t
    block = 2 * bt * c * 3 * c + 2 * 2 * b * t * t * c + 2 * bt * c * c + 2 * 2 * bt * c * 4 * c
    return 3 * (layers * block + 2 * bt * c * v)


def gpt_table(kind, title):
    flop = gpt_flop(kind)

    def row(n, t):
        tr, ts = cell(kind, "tsrc", n, t)
        pr, ps = cell(kind, "torch", n, t)
        gflops = [fmt(flop * r / 1e9) if r else "–" for r in (tr, pr)]
        own = ratio(tr, cell(kind, "tsrc", n, 1)[0]) if t > 1 else "–"
        return [ts, ps, gflops[0], gflops[1], ratio(tr, pr), own]

    pair_table(sorted({(k[2], k[3]) for k in rows if k[0] == kind}, key=lambda p: (int(p[0]), p[1])),
               title + " (tools/bench/gpt.tsr.in; PyTorch: py_gpt.py, eager float32, from the same "
               "parameters): milliseconds per step (lower is better); GFLOP/s = "
               f"{flop / 1e9:.2f} GFLOP (forward and backward of every contraction, attention "
               "unmasked) / best time; tsrc/PyTorch = PyTorch's time / tsrc's; own speed-up = tsrc's "
               "one-thread time / this one",
               ["batch", "threads", "tsrc", "PyTorch", "tsrc GFLOP/s", "PyTorch GFLOP/s", "tsrc/PyTorch",
                "own speed-up"], row)


gpt_table("gpt", "GPT training step: docs/examples/gpt.tsr's model, L=4, C=256, NH=4, T=64, B=8, vocabulary 96, "
          "tied head, clipped AdamW")
gpt_table("gpt124m", "GPT training step: GPT-2 124M's model, L=12, C=768, NH=12, vocabulary 50 304, at T=64, B=4, "
          "tied head, clipped AdamW")

# The convolutions: per layer and thread count, forward and forward+backward side by side.
conv = sorted({(k[2], k[3]) for k in rows if k[0] in ("conv_fwd", "conv_bwd")} |
              {(n, t) for (kd, n) in unsupported if kd == "conv" for t in {k[3] for k in rows} or {1}},
              key=lambda p: (int(p[0]), p[1]))
if conv:
    shapes = {"1": "28×28×1 → 24×24×6", "2": "12×12×6 → 8×8×16"}
    print("LeNet-5 convolutions, 5×5 kernels, padding valid, no bias, batch 64 (tools/bench/conv.tsr: "
          "Nn.conv2d, channels last; PyTorch: torch.nn.functional.conv2d in the faster of NCHW and "
          "channels last, given under layout): microseconds per call (lower is better); "
          "forward+backward = the forward, then the gradients of the kernel and of the input from "
          "the output's gradient; tsrc/PyTorch = PyTorch's time / tsrc's")
    print()
    print("| layer | threads | tsrc fwd | PyTorch fwd | tsrc/PyTorch fwd | tsrc fwd+bwd | "
          "PyTorch fwd+bwd | tsrc/PyTorch fwd+bwd | PyTorch layout (fwd, fwd+bwd) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for n, t in conv:
        line = [f"{n}: {shapes.get(n, '?')}", str(t)]
        layouts = []
        for kind in ("conv_fwd", "conv_bwd"):
            vals = []
            for impl in ("tsrc", "torch"):
                f = rows.get((kind, impl, n, t))
                if f is None:
                    vals.append((None, "n/s" if impl == "tsrc" and ("conv", "1") in unsupported else "–"))
                elif f["check"] != "ok":
                    vals.append((None, "WRONG"))
                else:
                    vals.append((1.0 / float(f["best_s"]),
                                 fmt(float(f["best_s"]) * 1e6) + ("¹" if f["reps"] == "1" else "")))
            layouts.append(rows.get((kind, "torch", n, t), {}).get("layout", "–"))
            line += [vals[0][1], vals[1][1], ratio(vals[0][0], vals[1][0])]
        print("| " + " | ".join(line + [", ".join(layouts)]) + " |")
    print()

status = 0
for (kind, impl, n, t), f in sorted(rows.items()):
    if kind in ("conv_fwd", "conv_bwd") and impl == "tsrc" and (kind, "torch", n, t) in rows:
        g = rows[(kind, "torch", n, t)]
        bad = [q for q in ("y", "dx", "dk") if q + "sum" in f and q + "sum" in g and
               not abs(float(f[q + "sum"]) - float(g[q + "sum"])) <= 1e-5 * float(f[q + "mag"])]
        if bad:
            print(f"conv layer {n} {'forward+backward' if kind == 'conv_bwd' else 'forward'} at {t} "
                  f"thread{'s' if t > 1 else ''}: tsrc and PyTorch DISAGREE on the sums of "
                  f"{', '.join(bad)} (same data)")
            status = 1

    if kind in ("mlp", "nn_mlp") and impl == "tsrc" and (kind, "torch", n, t) in rows:
        a, b = float(f["loss0"]), float(rows[(kind, "torch", n, t)]["loss0"])
        agree = abs(a - b) <= 1e-5 * abs(b)
        print(f"{'MLP' if kind == 'mlp' else 'Nn/Train MLP'} at {t} thread{'s' if t > 1 else ''}: first-step loss tsrc {a:.7g}, PyTorch {b:.7g} (same data and "
              f"parameters): {'agree' if agree else 'DISAGREE'}")
        if not agree:
            status = 1
    if kind in GPT_CONFIGS and impl == "tsrc" and (kind, "torch", n, t) in rows:
        a = [float(v) for v in f["losses"].split(",")]
        b = [float(v) for v in rows[(kind, "torch", n, t)]["losses"].split(",")]
        agree = abs(a[0] - b[0]) <= 1e-5 * abs(b[0])
        drift = max(abs(x - y) / abs(y) for x, y in zip(a, b))
        print(f"{kind} at {t} thread{'s' if t > 1 else ''}: first-step loss tsrc {a[0]:.7g}, PyTorch {b[0]:.7g} "
              f"(same parameters and windows): {'agree' if agree else 'DISAGREE'}; over {len(a)} steps the "
              f"losses differ by at most {drift:.1e} relative")
        if not agree:
            status = 1
# Data-parallel training (the dp section): one process of 1 and 2 threads against two processes of
# one thread each, the same global batch; DP lines, process 0's.
dp = {}
for line in open(sys.argv[1]):
    if line.startswith("DP "):
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        dp[(f["kind"], int(f["procs"]), int(f["threads"]))] = float(f["step_s"])
if dp:
    print()
    print("| data-parallel step | 1 process, 1 thread | 1 process, 2 threads | 2 processes, 1 thread each | 2 processes / 2 threads | 2 processes / 1 thread |")
    print("|---|---|---|---|---|---|")
    for kind in sorted({k for k, _, _ in dp}):
        one, two, procs = dp.get((kind, 1, 1)), dp.get((kind, 1, 2)), dp.get((kind, 2, 1))
        ms = lambda v: f"{v * 1e3:.2f} ms" if v else "-"
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
        print(f"| {kind} | {ms(one)} | {ms(two)} | {ms(procs)} | {ratio(two, procs)} | {ratio(one, procs)} |")
    print("(speed: steps per second of two processes over those of one process; >1: the processes are faster)")
if any(f["reps"] == "1" for f in rows.values()):
    print("¹ one run only: the warm-up run took over 10 time budgets, so it is the figure.")
if unsupported:
    print("n/s: not supported: tsrc could not compile the program (the reason is in the results "
          "file and was printed above).")
if any(f["check"] != "ok" for f in rows.values()):
    print("WRONG: the result failed its check; see the RESULT lines in the results file.")
sys.exit(status)
