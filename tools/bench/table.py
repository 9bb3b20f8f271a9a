"""table.py — turns the RESULT lines of tools/bench.sh into the Markdown tables of `make bench`.

Usage: table.py RESULTS_FILE.  Standard library only (runs on any python3).
Figures come from the best time of each measurement; the median is in the results file.
"""
import sys

rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("RESULT "):
        continue
    f = dict(kv.split("=", 1) for kv in line.split()[1:])
    rows[(f["kind"], f["impl"], int(f["n"]), int(f["threads"]))] = f

EW_BYTES_PER_ELEMENT = 16  # ideal fused kernel: read a, b, c, write y (4 bytes each)


def rate(kind, f):
    n, best = int(f["n"]), float(f["best_s"])
    return 2.0 * n ** 3 / best / 1e9 if kind == "matmul" else EW_BYTES_PER_ELEMENT * n / best / 1e9


def cell(kind, impl, n, t):
    f = rows.get((kind, impl, n, t))
    if f is None:
        return None, "–"
    if f["check"] != "ok":
        return None, "WRONG"
    r = rate(kind, f)
    return r, (f"{r:.3g}" if r < 100 else f"{r:.0f}") + ("¹" if f["reps"] == "1" else "")


def ratio(x, y):
    if x is None or y is None:
        return "–"
    return f"{x / y:.2g}" if x / y < 10 else f"{x / y:.0f}"


def table(kind, title, impls, refs):
    if not any(k[0] == kind for k in rows):
        return
    present = [(i, label) for i, label in impls
               if i == "tsrc" or any(k[0] == kind and k[1] == i for k in rows)]
    print(title)
    print()
    head = ["n" if kind == "matmul" else "floats", "threads"] + [label for _, label in present]
    head += [f"tsrc/{label}" for i, label in present if i in refs]
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    keys = sorted({(k[2], k[3]) for k in rows if k[0] == kind})
    for n, t in keys:
        vals = {i: cell(kind, i, n, t) for i, _ in present}
        line = [str(n), str(t)] + [vals[i][1] for i, _ in present]
        line += [ratio(vals["tsrc"][0], vals[i][0]) for i, _ in present if i in refs]
        print("| " + " | ".join(line) + " |")
    print()


table("matmul", "matmul C = A·B, float32, n×n: GFLOP/s = 2n³ / best time (higher is better)",
      [("tsrc", "tsrc"), ("openblas", "OpenBLAS"), ("numpy", "NumPy"), ("torch", "PyTorch")],
      {"openblas", "numpy", "torch"})
table("ew", "elementwise y = relu(a·b + c) − 0.5·a, float32: GB/s = 16 bytes per element "
      "(read a, b, c; write y) / best time",
      [("tsrc", "tsrc"), ("numpy", "NumPy"), ("numpy-out", "NumPy out="), ("torch", "PyTorch")],
      {"numpy", "numpy-out", "torch"})
if any(f["reps"] == "1" for f in rows.values()):
    print("¹ one run only: the warm-up run took over 10 time budgets, so it is the figure.")
if any(f["check"] != "ok" for f in rows.values()):
    print("WRONG: the result failed its check; see the RESULT lines in the results file.")
