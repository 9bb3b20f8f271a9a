#!/usr/bin/env python3
"""gather_diff.py — gathered axes (docs/language.md §5.11) against NumPy, values and gradients.

Random cases, each a table (a parameter of one to three output axes, sizes 1..5) read through a
spec in which one of its axes is written `[2]`: operand 2 gives the positions, ids of one or two
axes (sizes 1..4) holding values from -2 to the axis's size + 1, so that some fall outside the
axis and are clamped: as i32 (to_i32 of a literal; or a .npy data item of int32, whose values
are in range, since ids read from data are checked) or f32 (a literal times 1, some of its values
fractions, converted toward zero; a literal itself would be checked when compiling).  The result's axes are the ids' axes, then the table's other
axes in a random order.  NumPy computes the result with fancy indexing after clipping, and the
table's gradient of sum(result * w) (w a random literal of the result's shape) with np.add.at,
the scatter-add the backward pass performs.  Every case is run by the reference executor and
natively (`tsrc --run --interp`, `tsrc --run`, in batches of cases per program); the values must
match exactly (a gather copies) and the gradients to 1e-5 relative.

Usage: gather_diff.py --tsrc build/tsrc [--count N] [--seed S].  Last line: "N passed, N failed".
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

LABELS = "abc"
ID_LABELS = "xy"
BATCH = 20


def literal(arr):
    """A tensor literal of arr's values (output axes), as the language writes it."""
    if arr.ndim == 0:
        return "%r" % float(arr)
    if arr.ndim == 1:
        return "[" + "; ".join("%r" % float(v) for v in arr) + "]"
    return "[" + "; ".join(literal(a) for a in arr) + "]"


class Case:
    def __init__(self, rng, index, workdir):
        self.index = index
        rank = int(rng.integers(1, 4))
        self.table = rng.uniform(-1, 1, size=tuple(int(rng.integers(1, 6)) for _ in range(rank))).astype(np.float32)
        self.axis = int(rng.integers(0, rank))
        n = self.table.shape[self.axis]
        id_shape = tuple(int(rng.integers(1, 5)) for _ in range(int(rng.integers(1, 3))))
        # ids: "data" an i32 .npy item (in range: ids from data are checked, language.md §5.11),
        # "cast" to_i32 of a literal (out of range too: clamped), "f32" a literal (times 1) with fractions
        self.mode = ("data", "cast", "f32")[int(rng.integers(0, 3))]
        self.i32 = self.mode != "f32"
        ids = rng.integers(0, n, size=id_shape) if self.mode == "data" else rng.integers(-2, n + 2, size=id_shape)
        if self.i32:
            self.ids = ids.astype(np.int32)
            self.ids_file = os.path.join(workdir, "ids%d.npy" % index)
            if self.mode == "data":
                np.save(self.ids_file, self.ids)
        else:  # some fractions: converted toward zero
            frac = np.where(rng.uniform(size=id_shape) < 0.3, 0.7, 0.0) * np.sign(ids + 0.5)
            self.ids = (ids + frac).astype(np.float32)
        rest = [a for a in range(rank) if a != self.axis]
        rng.shuffle(rest)
        self.rest = rest
        pos = np.clip(np.trunc(self.ids).astype(np.int64), 0, n - 1)
        moved = np.moveaxis(self.table, self.axis, 0)[pos]  # ids axes, then the others in order
        others = [a for a in range(rank) if a != self.axis]
        self.expected = np.transpose(moved, list(range(len(id_shape))) +
                                     [len(id_shape) + others.index(a) for a in rest])
        self.w = rng.uniform(-1, 1, size=self.expected.shape).astype(np.float32)
        grad = np.zeros(self.table.shape, np.float64)
        w_moved = np.transpose(self.w.astype(np.float64), list(range(len(id_shape))) +
                               [len(id_shape) + rest.index(a) for a in others])
        g = np.moveaxis(grad, self.axis, 0)
        np.add.at(g, pos, w_moved)
        self.grad = grad

    def spec(self):
        table = ", ".join("[2]" if a == self.axis else LABELS[a] for a in range(self.table.ndim))
        ids = ", ".join(ID_LABELS[:self.ids.ndim])
        result = ", ".join(list(ID_LABELS[:self.ids.ndim]) + [LABELS[a] for a in self.rest])
        return "%s; %s => %s" % (table, ids, result)

    def program(self):
        k = self.index
        if self.mode == "data":
            ids = "ids%d" % k
            head = 'data ids%d = npy "%s" ~o:[%s] ~dtype:"i32"\n' % (
                k, self.ids_file, "; ".join(str(d) for d in self.ids.shape))
        elif self.mode == "cast":
            ids = "(to_i32 %s)" % literal(self.ids.astype(np.float64))
            head = ""
        else:
            ids = "(%s *. 1.)" % literal(self.ids)  # computed: a literal's positions are checked
            head = ""
        return (head +
                "let%%op t%d = { t%d = %s }\n" % (k, k, literal(self.table)) +
                'let%%op r%d = gather ~spec:"%s" t%d %s\n' % (k, self.spec(), k, ids) +
                'let%%op l%d = (r%d *. %s) ++ "... | ... -> ... => "\n' % (k, k, literal(self.w)))


def parse(text):
    tensors, current = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\S+) : (\S+)$", line)
        if m:
            current = m.group(1)
            tensors[current] = []
        elif line.strip() and not line.startswith("  [") and current:
            tensors[current].extend(float(x) for x in line.split())
    return tensors


def check(case, tensors):
    k = case.index
    got_r, got_g = tensors.get("r%d" % k), tensors.get("t%d.grad" % k)
    if got_r is None or got_g is None:
        return "no output for the case"
    exp_r = case.expected.reshape(-1)
    if len(got_r) != exp_r.size or not np.array_equal(np.array(got_r, dtype=np.float32), exp_r):
        return "values differ: %s, expected %s" % (got_r, exp_r.tolist())
    exp_g = case.grad.reshape(-1)
    if len(got_g) != exp_g.size or not np.allclose(got_g, exp_g, rtol=1e-5, atol=1e-6):
        return "gradient differs: %s, expected %s" % (got_g, exp_g.tolist())
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tsrc", required=True)
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    passed = failed = 0
    with tempfile.TemporaryDirectory() as work:
        cases = [Case(rng, i, work) for i in range(args.count)]
        for start in range(0, len(cases), BATCH):
            batch = cases[start:start + BATCH]
            path = os.path.join(work, "batch%d.tsr" % start)
            with open(path, "w") as f:
                for c in batch:
                    f.write(c.program())
                f.write("routine go = " + "; ".join("l%d.forward; l%d.backprop" % (c.index, c.index) for c in batch) + "\n")
                f.write("main = run go; " + "; ".join("print r%d; print t%d.grad" % (c.index, c.index) for c in batch) + "\n")
            for mode in (["--run", "--interp"], ["--run"]):
                env = dict(os.environ, TSR_PRINT_EXACT="1")
                p = subprocess.run([args.tsrc] + mode + [path], capture_output=True, text=True, timeout=300, env=env)
                tensors = parse(p.stdout) if p.returncode == 0 else {}
                for c in batch:
                    problem = check(c, tensors) if p.returncode == 0 else "tsrc failed: " + p.stderr.strip()[:400]
                    what = "case %d (%s, %s ids, %s)" % (c.index, c.spec(), {"data": "i32 data", "cast": "to_i32",
                                                                             "f32": "f32"}[c.mode], " ".join(mode))
                    if problem:
                        failed += 1
                        print("FAIL %s: %s" % (what, problem))
                    else:
                        passed += 1
                        print("PASS %s" % what)
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
