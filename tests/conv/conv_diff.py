#!/usr/bin/env python3
"""conv_diff.py: affine and strided axes (convolution, pooling, padding, strides) against NumPy.

Random cases, each one einsum over tensor literals, are batched into .tsr files and run by
`tsrc --run --interp` (the reference executor) and by `tsrc --run` (native code); the native
output must be exactly the reference executor's (both print every float in full), and the
reference executor's must match a NumPy reference computed here with plain loops over the
windows -- never with tsrc.  The kinds of case:

  conv1d   x +* "b, AFF, c; k, c, f => b, o, f" w
  conv2d   x +* "b, AFF1, AFF2, c; kh, kw, c, f => b, oh, ow, f" w
  pool2d   x @^+ "b, AFF1, AFF2, c; kh, kw => b, oh, ow, c" w   (max-plus: max of x + w)
  strided  x ++ "b, S*i[+OFF], c => b, i, c"
  inverse  { p } +* "AFF; k, o => o" w: the input size of `p` comes from the output's
           (only the shape of p is checked)

and, with --concat-count, concatenated axes (P, Q random fixed pieces, either may be absent),
checked against np.concatenate and slicing:

  pad      x ++ "b, a, c => b, P^a^Q, c"         zero rows around x
  slice    x ++ "b, P^a^Q, c => b, a, c"         a drops P rows in front and Q behind
  rotate   x ++ "b, P^a, c => b, a^P, c"         the first P rows moved behind, the gap zero
  reduce   x ++ "b, P^a, c => b, c"              the sum over the rows after the first P
  matmul   x +* "b, a^Q, c; c, f => b, a, f" w   a contraction reading a prefix
  tuple    (x, y) ++^ "b, a, c; b, e, c => b, P^a^G^Q^e, c"   x's rows, a gap, y's rows
           (or "b, c, a; b, c, e => b, c, a^e": along the last axis)

and, with --group-count, merged axes `(g, c)` (docs/language.md §5.6: the axis of g blocks of c
cells, index g*size(c) + c), checked against per-group NumPy loops and reshapes:

  gconv1d  x +* "b, AFF, (g, c); k, c, (g, f) => b, p, (g, f)" w      grouped convolution
  gconv2d  x +* "b, AFF1, AFF2, (g, c); kh, kw, c, (g, f) => b, oh, ow, (g, f)" w
           (G groups of C input and F output channels: output channel g*F + f reads input
           channels g*C ... g*C + C - 1 only, as torch's groups=G)
  unmerge  x +* "b, (g, c); g => b, c, g" ones      an axis split into two (g from the ones)
  remerge  x ++ "b, g, c => b, (c, g)"               two axes joined, transposed, in the result
  blocks   x +* "b, (g, c); c => b, g" w            a contraction over each block

where AFF is `S*o[=|<]+[OFF+]D*k` with random stride S, dilation D, kernel size, offset OFF
(below S) and padding: `=` (same), `<` (valid) or none (inferred: `valid`, since nothing else
sizes the output).  The sizes must follow docs/inference.md's closed forms, with K the dilated
kernel D*(k-1)+1:
  valid: out = (n - OFF - K) // S + 1           back: n = S*(out-1) + OFF + K
  same:  out = (n - OFF - 1) // S + 1, left padding D*(k-1)//2     back: n = S*out
Padding positions read the operation's neutral element: 0 for `+*`, -inf for the max of `@^+`.

Usage: python3 tests/conv/conv_diff.py --tsrc build/tsrc --count 520 --seed 1 [--concat-count N]
       [--group-count N] [--no-native]
The last line of stdout is `N passed, N failed` (cases); exit status 1 if any failed.
"""

import argparse
import concurrent.futures
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "einsum"))
try:
    import numpy as np
    from einsum_diff import parse_output
except ImportError:  # pragma: no cover - environment problem, not a test failure
    sys.stderr.write("conv_diff.py: NumPy is required (try /usr/bin/python3 with python3-numpy)\n")
    sys.exit(2)

TOLERANCE = 1e-4
BATCH = 40


class Axis:
    """One affine axis: stride, dilation, kernel size, offset, padding ('=', '<', '') and input."""

    def __init__(self, rng, over, kernel):
        self.over, self.kernel = over, kernel
        self.s = rng.choice([1, 1, 2, 2, 3])
        self.d = rng.choice([1, 1, 1, 2, 3])
        self.k = rng.randint(1, 4)
        self.off = rng.randrange(self.s) if rng.random() < 0.3 else 0
        self.write_off = self.off > 0 or rng.random() < 0.1
        self.pad = rng.choice(["=", "<", ""])
        self.mode = "same" if self.pad == "=" else "valid"
        extent = self.d * (self.k - 1) + 1
        least = self.off + (extent if self.mode == "valid" else 1)
        self.n = max(rng.randint(1, 9), least + rng.randint(0, 2) if rng.random() < 0.5 else least)
        self.left = self.d * (self.k - 1) // 2 if self.mode == "same" else 0

    def text(self):
        off = "%d+" % self.off if self.write_off else ""
        return "%d*%s%s+%s%d*%s" % (self.s, self.over, self.pad, off, self.d, self.kernel)

    def out_size(self):
        extent = self.d * (self.k - 1) + 1
        need = self.off + (extent if self.mode == "valid" else 1)
        return (self.n - need) // self.s + 1

    def in_size(self, out):
        if self.mode == "valid":
            return self.s * (out - 1) + self.off + self.d * (self.k - 1) + 1
        return self.s * out

    def taps(self, o):
        """[(kernel position, input position)] of output position o that fall inside."""
        base = self.s * o + self.off - self.left
        return [(j, base + self.d * j) for j in range(self.k) if 0 <= base + self.d * j < self.n]


def values(rng, shape):
    return np.array([rng.randint(-8, 8) / 4.0 for _ in range(int(np.prod(shape)))]).reshape(shape)


def literal(arr):
    if arr.ndim == 1:
        return "[ " + "; ".join("%g." % v if float(v).is_integer() else "%g" % v for v in arr) + " ]"
    return "[ " + "; ".join(literal(a) for a in arr) + " ]"


def shape_text(shape):
    return ",".join(str(n) for n in shape)


class Case:
    def __init__(self, rng, index, kinds=("conv1d", "conv2d", "conv2d", "pool2d", "pool2d", "strided", "inverse")):
        self.index = index
        self.name = "r%d" % index
        self.kind = rng.choice(kinds)
        getattr(self, "make_" + self.kind)(rng)

    def concat_sizes(self, rng):
        """(b, n, c, P, Q) and the pieces' text, for the concatenation kinds."""
        b, n, c = rng.randint(1, 2), rng.randint(1, 5), rng.randint(1, 3)
        p, q = rng.choice([0, 1, 2, 3]), rng.choice([0, 1, 2])
        return b, n, c, p, q

    @staticmethod
    def pieces(p, q, label="a"):
        return "".join(["%d^" % p if p else "", label, "^%d" % q if q else ""])

    def make_pad(self, rng):
        b, n, c, p, q = self.concat_sizes(rng)
        x = values(rng, (b, n, c))
        self.spec = "b, a, c => b, %s, c" % self.pieces(p, q)
        self.line = "let%%op %s = %s ++ \"%s\"\n" % (self.name, literal(x), self.spec)
        self.expected = np.concatenate([np.zeros((b, p, c)), x, np.zeros((b, q, c))], axis=1)

    def make_slice(self, rng):
        b, n, c, p, q = self.concat_sizes(rng)
        x = values(rng, (b, n + p + q, c))
        self.spec = "b, %s, c => b, a, c" % self.pieces(p, q)
        self.line = "let%%op %s = %s ++ \"%s\"\n" % (self.name, literal(x), self.spec)
        self.expected = x[:, p:p + n, :]

    def make_rotate(self, rng):
        b, n, c, p, _ = self.concat_sizes(rng)
        p = p or 1
        x = values(rng, (b, n + p, c))
        self.spec = "b, %d^a, c => b, a^%d, c" % (p, p)
        self.line = "let%%op %s = %s ++ \"%s\"\n" % (self.name, literal(x), self.spec)
        self.expected = np.concatenate([x[:, p:, :], np.zeros((b, p, c))], axis=1)

    def make_reduce(self, rng):
        b, n, c, p, _ = self.concat_sizes(rng)
        x = values(rng, (b, n + p, c))
        self.spec = "b, %s, c => b, c" % self.pieces(p, 0)
        self.line = "let%%op %s = %s ++ \"%s\"\n" % (self.name, literal(x), self.spec)
        self.expected = x[:, p:, :].sum(axis=1)

    def make_matmul(self, rng):
        b, n, c, _, q = self.concat_sizes(rng)
        f = rng.randint(1, 3)
        x, w = values(rng, (b, n + q, c)), values(rng, (c, f))
        self.spec = "b, %s, c; c, f => b, a, f" % self.pieces(0, q)
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = x[:, :n, :] @ w

    def make_tuple(self, rng):
        b, n, c, p, q = self.concat_sizes(rng)
        m, g = rng.randint(1, 4), rng.choice([0, 0, 1, 2])
        if rng.random() < 0.5:  # along the rows: x is b,n,c and y is b,m,c
            x, y = values(rng, (b, n, c)), values(rng, (b, m, c))
            pieces = "%s^%se" % (self.pieces(p, g), "" if q == 0 else "%d^" % q)
            self.spec = "b, a, c; b, e, c => b, %s, c" % pieces
            zeros = lambda k: np.zeros((b, k, c))
            self.expected = np.concatenate([zeros(p), x, zeros(g), zeros(q), y], axis=1)
        else:  # along the last axis, without gaps: x is b,c,n and y is b,c,m
            x, y = values(rng, (b, c, n)), values(rng, (b, c, m))
            self.spec = "b, c, a; b, c, e => b, c, a^e"
            self.expected = np.concatenate([x, y], axis=2)
        self.line = "let%%op %s = (%s, %s) ++^ \"%s\"\n" % (self.name, literal(x), literal(y), self.spec)

    def make_conv1d(self, rng):
        ax = Axis(rng, "o", "k")
        b, c, f = rng.randint(1, 2), rng.randint(1, 3), rng.randint(1, 3)
        x, w = values(rng, (b, ax.n, c)), values(rng, (ax.k, c, f))
        out = np.zeros((b, ax.out_size(), f))
        for o in range(out.shape[1]):
            for j, i in ax.taps(o):
                out[:, o, :] += x[:, i, :] @ w[j]
        self.spec = "b, %s, c; k, c, f => b, o, f" % ax.text()
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = out

    def make_conv2d(self, rng):
        ah, aw = Axis(rng, "oh", "kh"), Axis(rng, "ow", "kw")
        b, c, f = rng.randint(1, 2), rng.randint(1, 2), rng.randint(1, 2)
        x, w = values(rng, (b, ah.n, aw.n, c)), values(rng, (ah.k, aw.k, c, f))
        out = np.zeros((b, ah.out_size(), aw.out_size(), f))
        for oh in range(out.shape[1]):
            for ow in range(out.shape[2]):
                for jh, ih in ah.taps(oh):
                    for jw, iw in aw.taps(ow):
                        out[:, oh, ow, :] += x[:, ih, iw, :] @ w[jh, jw]
        self.spec = "b, %s, %s, c; kh, kw, c, f => b, oh, ow, f" % (ah.text(), aw.text())
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = out

    def make_pool2d(self, rng):
        ah, aw = Axis(rng, "oh", "kh"), Axis(rng, "ow", "kw")
        b, c = rng.randint(1, 2), rng.randint(1, 2)
        x, w = values(rng, (b, ah.n, aw.n, c)), values(rng, (ah.k, aw.k))
        out = np.full((b, ah.out_size(), aw.out_size(), c), -np.inf)
        for oh in range(out.shape[1]):
            for ow in range(out.shape[2]):
                for jh, ih in ah.taps(oh):
                    for jw, iw in aw.taps(ow):
                        out[:, oh, ow, :] = np.maximum(out[:, oh, ow, :], x[:, ih, iw, :] + w[jh, jw])
        self.spec = "b, %s, %s, c; kh, kw => b, oh, ow, c" % (ah.text(), aw.text())
        self.line = "let%%op %s = %s @^+ \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = out

    def make_gconv1d(self, rng):
        ax = Axis(rng, "p", "k")
        b, g, cpg, opg = rng.randint(1, 2), rng.randint(1, 4), rng.randint(1, 3), rng.randint(1, 3)
        x, w = values(rng, (b, ax.n, g * cpg)), values(rng, (ax.k, cpg, g * opg))
        out = np.zeros((b, ax.out_size(), g * opg))
        for p in range(out.shape[1]):
            for j, i in ax.taps(p):
                for gg in range(g):
                    ci, co = slice(gg * cpg, (gg + 1) * cpg), slice(gg * opg, (gg + 1) * opg)
                    out[:, p, co] += x[:, i, ci] @ w[j, :, co]
        self.spec = "b, %s, (g, c); k, c, (g, f) => b, p, (g, f)" % ax.text()
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = out

    def make_gconv2d(self, rng):
        ah, aw = Axis(rng, "oh", "kh"), Axis(rng, "ow", "kw")
        b, g, cpg, opg = 1, rng.randint(1, 3), rng.randint(1, 2), rng.randint(1, 2)
        x, w = values(rng, (b, ah.n, aw.n, g * cpg)), values(rng, (ah.k, aw.k, cpg, g * opg))
        out = np.zeros((b, ah.out_size(), aw.out_size(), g * opg))
        for oh in range(out.shape[1]):
            for ow in range(out.shape[2]):
                for jh, ih in ah.taps(oh):
                    for jw, iw in aw.taps(ow):
                        for gg in range(g):
                            ci, co = slice(gg * cpg, (gg + 1) * cpg), slice(gg * opg, (gg + 1) * opg)
                            out[:, oh, ow, co] += x[:, ih, iw, ci] @ w[jh, jw, :, co]
        self.spec = "b, %s, %s, (g, c); kh, kw, c, (g, f) => b, oh, ow, (g, f)" % (ah.text(), aw.text())
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = out

    def make_unmerge(self, rng):
        b, g, c = rng.randint(1, 2), rng.randint(1, 4), rng.randint(1, 4)
        x = values(rng, (b, g * c))
        self.spec = "b, (g, c); g => b, c, g"
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(np.ones(g)))
        self.expected = np.array([[[x[i, gg * c + cc] for gg in range(g)] for cc in range(c)] for i in range(b)])

    def make_remerge(self, rng):
        b, g, c = rng.randint(1, 2), rng.randint(1, 4), rng.randint(1, 4)
        x = values(rng, (b, g, c))
        self.spec = "b, g, c => b, (c, g)"
        self.line = "let%%op %s = %s ++ \"%s\"\n" % (self.name, literal(x), self.spec)
        self.expected = np.array([[x[i, k % g, k // g] for k in range(c * g)] for i in range(b)])

    def make_blocks(self, rng):
        b, g, c = rng.randint(1, 2), rng.randint(1, 4), rng.randint(1, 4)
        x, w = values(rng, (b, g * c)), values(rng, (c,))
        self.spec = "b, (g, c); c => b, g"
        self.line = "let%%op %s = %s +* \"%s\" %s\n" % (self.name, literal(x), self.spec, literal(w))
        self.expected = np.array([[sum(x[i, gg * c + cc] * w[cc] for cc in range(c)) for gg in range(g)]
                                  for i in range(b)])

    def make_strided(self, rng):
        s = rng.randint(1, 4)
        off = rng.randrange(s)
        n, b, c = rng.randint(off + 1, 11), rng.randint(1, 2), rng.randint(1, 2)
        x = values(rng, (b, n, c))
        self.spec = "b, %d*i%s, c => b, i, c" % (s, "+%d" % off if off or rng.random() < 0.3 else "")
        self.line = "let%%op %s = %s ++ \"%s\"\n" % (self.name, literal(x), self.spec)
        self.expected = x[:, off::s, :]

    def make_inverse(self, rng):
        ax = Axis(rng, "o", "k")
        out = rng.randint(1, 6)
        w = values(rng, (ax.k, out))
        self.spec = "%s; k, o => o" % ax.text()
        self.line = "let%%op %s = { p%d } +* \"%s\" %s\n" % (self.name, self.index, self.spec, literal(w))
        self.param = ("p%d" % self.index, str(ax.in_size(out)))
        self.expected = None

    def check(self, tensors):
        if self.expected is None:
            name, shape = self.param
            if name not in tensors:
                return "tsrc printed no parameter %s" % name
            got = tensors[name][0]
            return None if got == shape else "parameter %s: tsrc %s, expected %s" % (name, got, shape)
        if self.name not in tensors:
            return "tsrc printed no tensor %s" % self.name
        shape, vals = tensors[self.name]
        if shape != shape_text(self.expected.shape):
            return "shape: tsrc %s, expected %s" % (shape, shape_text(self.expected.shape))
        exp = self.expected.reshape(-1)
        got = np.array(vals)
        if got.size != exp.size:
            return "tsrc printed %d values, expected %d" % (got.size, exp.size)
        finite = np.isfinite(exp)
        tol = TOLERANCE * max(1.0, float(np.max(np.abs(exp[finite]))) if finite.any() else 1.0)
        with np.errstate(invalid="ignore"):
            bad = np.nonzero(np.where(finite, ~(np.abs(got - exp) <= tol), got != exp))[0]
        if bad.size:
            return "%d of %d values differ, first at %d: tsrc %g, expected %g" % (
                bad.size, exp.size, bad[0], got[bad[0]], exp[bad[0]])
        return None


def run(tsrc, path, native):
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    cmd = [tsrc, "--run", path] if native else [tsrc, "--run", "--interp", path]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out"


def run_batch(tsrc, workdir, number, cases, native):
    """[(case, None | problem)] for one batch file."""
    path = os.path.join(workdir, "batch%03d.tsr" % number)
    with open(path, "w") as fh:
        fh.write("".join(c.line for c in cases))
    rc, out, err = run(tsrc, path, False)
    if rc != 0:
        if len(cases) == 1:
            return [(cases[0], "tsrc --run --interp exited with %d: %s\n%s" % (rc, err.strip(), cases[0].line))]
        return [r for c in cases for r in run_batch(tsrc, workdir, 1000 + c.index, [c], native)]
    tensors = parse_output(out)
    results = [(c, c.check(tensors)) for c in cases]
    if native:
        nrc, nout, nerr = run(tsrc, path, True)
        if nrc != 0 or nout != out:
            why = "native exited with %d: %s" % (nrc, nerr.strip()) if nrc else "native output differs"
            results = [(c, problem or why) for c, problem in results]
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--count", type=int, default=520)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--concat-count", type=int, default=0)
    ap.add_argument("--group-count", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-native", action="store_true")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    cases = [Case(rng, i) for i in range(args.count)]
    crng = random.Random(args.seed + 1)
    cases += [Case(crng, args.count + i, ("pad", "slice", "rotate", "reduce", "matmul", "tuple"))
              for i in range(args.concat_count)]
    grng = random.Random(args.seed + 2)
    cases += [Case(grng, args.count + args.concat_count + i,
                   ("gconv1d", "gconv1d", "gconv2d", "gconv2d", "unmerge", "remerge", "blocks"))
              for i in range(args.group_count)]
    batches = [cases[i:i + BATCH] for i in range(0, len(cases), BATCH)]
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="conv-diff.") as workdir:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_batch, args.tsrc, workdir, n, b, not args.no_native)
                       for n, b in enumerate(batches)]
            for fut in futures:
                for case, problem in fut.result():
                    if problem is None:
                        passed += 1
                    else:
                        failed += 1
                        print("FAIL case %d (%s, spec \"%s\"): %s" % (case.index, case.kind, case.spec, problem))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
