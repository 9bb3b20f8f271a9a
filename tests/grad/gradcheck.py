#!/usr/bin/env python3
"""gradcheck.py -- tsrc's gradients against central finite differences (make check).

For every differentiable operation of the prelude (stdlib/core.tsr) it makes a case: parameters
with random values at random shapes (a pointwise operand of fewer axes broadcasts; einsum and
max-reduction cases use row variables `...`), the operation applied to them, and a scalar
loss sum(op(params) *. W) with a fixed random weighting W.  One .tsr program holds every case
(the total loss is the sum of the cases' losses; each case has its own parameters), and its
routine is `loss.forward; loss.zero_grads; loss.backprop` (the seed is backprop's own).  The
program runs under `tsrc --run --interp` with TSR_PRINT_EXACT=1; the parameters' values are read
back from what it prints, and every parameter's gradient is compared with central differences
of the same formula computed by NumPy in float64 (step 1e-5):

    |grad - fd| <= 1e-3 * max(|fd|, 0.1)      for every cell

With `--dtype f64` every parameter is declared f64 (docs/language.md §3.9), so tsrc computes
the values and the gradients in double precision (libm's functions of doubles), and the bound is
a hundred thousand times tighter: 1e-8 (the differences' own error, truncation and rounding, is
about 1e-10 at these values), the forward value within 1e-12 of NumPy's.

The data avoid non-differentiable points: relu, abs and sat01 inputs stay 0.1 away from their
kinks, binary max/min operands 0.1 apart, the cells of each max reduction 0.05 apart, and
logarithms, roots, quotients and powers see bases in [0.5, 2], and `mod`'s quotients stay 0.1
away from whole numbers.  `--native N` also compiles the
first N programs to executables and requires them to print exactly what the reference executor
printed.  The last line is "N passed, N failed".
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

FLOOR, STEP = 0.1, 1e-5
# The parameters' element type (--dtype) and, per type, the bounds on the gradients' relative
# error and on the forward value's (relative to the sum of its terms' magnitudes).
DTYPE = "f32"
TOLERANCES = {"f32": (1e-3, 1e-4), "f64": (1e-8, 1e-12)}
SUM_ALL = '"... | ... -> ... => 0"'


def literal(values, kinds):
    """A .tsr literal of `values` (memory order batch, output, input) with axis kinds 'b'/'o'/'i'."""
    if not kinds:  # the shortest text that reads back as the value (a float32's, exactly)
        return repr(float(values))
    inner = [literal(values[j], kinds[1:]) for j in range(values.shape[0])]
    if kinds[0] == "b":
        return "[| " + "; ".join(inner) + " |]"
    if kinds[0] == "o":
        return "[" + "; ".join(inner) + "]"
    return "(" + ", ".join(inner) + ")"


class Param:
    def __init__(self, name, values, kinds):
        self.name, self.values, self.kinds = name, np.float32(values).astype(np.float64), kinds

    def decl(self):
        batch = [d for d, k in zip(self.values.shape, self.kinds) if k == "b"]
        extra = "; b = [%s]" % "; ".join(map(str, batch)) if batch else ""
        if DTYPE != "f32":
            extra += '; dtype = "%s"' % DTYPE
        return "let%%op %s = { %s = %s%s }" % (self.name, self.name, literal(self.values, self.kinds), extra)


def rand_shape(rng, rank, lo=2, hi=4):
    return tuple(int(x) for x in rng.integers(lo, hi + 1, size=rank))


def away(rng, shape, lo, hi, kinks, gap):
    """Uniform in [lo, hi) at least `gap` away from every kink."""
    x = rng.uniform(lo, hi, size=shape)
    for k in kinks:
        near = np.abs(x - k) < gap
        x[near] = k + np.sign(x[near] - k + 1e-12) * gap * (1 + rng.uniform(size=near.sum()))
    return x


def spaced(rng, shape, axis, gap):
    """Values distinct by at least `gap` along `axis` (no ties in a max over it)."""
    n = shape[axis]
    moved = shape[:axis] + shape[axis + 1:] + (n,)
    ranks = np.argsort(rng.uniform(size=moved), axis=-1)
    x = ranks * gap * 2 + rng.uniform(0, gap * 0.5, size=moved) - n * gap
    return np.moveaxis(x, -1, axis)


def pointwise_cases(rng):
    """(name, expression over p0 p1 …, numpy function, [(values, kinds)…])"""
    r = lambda: rand_shape(rng, int(rng.integers(1, 4)))
    cases = []

    def unary(op, fn, gen):
        s = r()
        cases.append((op, "%s p0" % op, fn, [(gen(s), "o" * len(s))]))

    def binary(op, expr, fn, gen_a, gen_b):
        s = r()
        t = s[int(rng.integers(0, len(s))):]  # a suffix: the second operand broadcasts
        if rng.uniform() < 0.5:
            s, t = t, s
            cases.append((op, expr, fn, [(gen_a(t), "o" * len(t)), (gen_b(s), "o" * len(s))]))
        else:
            cases.append((op, expr, fn, [(gen_a(s), "o" * len(s)), (gen_b(t), "o" * len(t))]))

    u = lambda s: rng.uniform(-2, 2, size=s)
    pos = lambda s: rng.uniform(0.5, 2, size=s)
    signed = lambda s: pos(s) * rng.choice([-1, 1], size=s)
    binary("+", "p0 + p1", lambda a, b: a + b, u, u)
    binary("-", "p0 - p1", lambda a, b: a - b, u, u)
    binary("*.", "p0 *. p1", lambda a, b: a * b, u, u)
    binary("/.", "p0 /. p1", lambda a, b: a / b, u, signed)
    binary("**", "p0 ** p1", lambda a, b: a ** b, pos, u)
    unary("neg", lambda a: -a, u)
    unary("relu", lambda a: np.maximum(a, 0), lambda s: away(rng, s, -2, 2, [0], 0.1))
    unary("sat01", lambda a: np.clip(a, 0, 1), lambda s: away(rng, s, -0.5, 1.5, [0, 1], 0.1))
    unary("exp", np.exp, u)
    unary("exp2", np.exp2, u)
    unary("log", np.log, pos)
    unary("log2", np.log2, pos)
    unary("sqrt", np.sqrt, pos)
    unary("rsqrt", lambda a: 1 / np.sqrt(a), pos)
    unary("recip", lambda a: 1 / a, signed)
    unary("tanh", np.tanh, u)
    unary("sigmoid", lambda a: 1 / (1 + np.exp(-a)), u)
    unary("sin", np.sin, lambda s: rng.uniform(-3, 3, size=s))
    unary("cos", np.cos, lambda s: rng.uniform(-3, 3, size=s))
    unary("abs", np.abs, lambda s: away(rng, s, -2, 2, [0], 0.1))
    s = r()
    a = u(s)
    b = a + rng.choice([-1, 1], size=s) * rng.uniform(0.1, 1, size=s)
    o = "o" * len(s)
    cases.append(("max", "max p0 p1", np.maximum, [(a, o), (b, o)]))
    cases.append(("min", "min p0 p1", np.minimum, [(b, o), (a, o)]))
    cond = rng.integers(0, 2, size=s).astype(np.float64)
    cases.append(("where", "where %s p0 p1" % literal(cond, o), lambda x, y: np.where(cond != 0, x, y),
                  [(u(s), o), (u(s), o)]))
    cases.append(("where (a < b)", "where (p0 < p1) p0 (p1 *. 3.)", lambda x, y: np.where(x < y, x, 3 * y),
                  [(a, o), (b, o)]))
    t = s[int(rng.integers(0, len(s))):]
    cases.append(("fma", "fma p0 p1 p2", lambda x, y, z: x * y + z, [(u(s), o), (u(t), "o" * len(t)), (u(s), o)]))
    # mod: a = b·(k + f) with k whole and f in [0.1, 0.9], so a / b stays away from the jumps.
    d = signed(s)
    n = d * (rng.integers(-2, 3, size=s) + rng.uniform(0.1, 0.9, size=s))
    cases.append(("mod", "mod p0 p1", np.mod, [(n, o), (d, o)]))
    return cases


def reduction_cases(rng):
    u = lambda s: rng.uniform(-2, 2, size=s)
    m, k, n, x = rand_shape(rng, 4)
    cases = [
        ("* (compose)", "p0 * p1", lambda a, b: np.einsum("mk,kn->mn", a, b), [(u((m, k)), "oi"), (u((k, n)), "oi")]),
        ("transpose", "transpose p0", lambda a: a.T, [(u((m, k)), "oi")]),
        ("+* (row variable)", 'p0 +* "..., j; j, k => ..., k" p1', lambda a, b: np.einsum("...j,jk->...k", a, b),
         [(u((x, m, k)), "ooo"), (u((k, n)), "oo")]),
        ("+++", 'p0 +++ "i; j => i, j" p1', lambda a, b: a[:, None] + b[None, :], [(u((m,)), "o"), (u((n,)), "o")]),
        ("++ (batch, row variable)", 'p0 ++ "... | i, ... => ... | ..."', lambda a: a.sum(axis=1),
         [(u((x, m, k)), "boo")]),
        ("einsum3", 'einsum3 ~spec:"i; i, j; j => i" p0 p1 p2', lambda a, w, b: np.einsum("i,ij,j->i", a, w, b),
         [(u((m,)), "o"), (u((m, n)), "oo"), (u((n,)), "o")]),
        ("@^^ (row variable)", 'p0 @^^ "..., j => ..."', lambda a: a.max(axis=-1),
         [(spaced(rng, (x, m, k), 2, 0.05), "ooo")]),
    ]
    # attend (the fused softmax attention kernel): batch and head rows, keys with a length of
    # their own (s != t), value features of their own (e != d); the causal kernel over t = s;
    # and multi-query attention, k and v shared by the heads (h only in q and the result).
    def attend_ref(q, k, v, causal=False, spec="btd,bsd->bts", out="bts,bse->bte"):
        sc = np.einsum(spec, q, k) / np.sqrt(q.shape[-1])
        if causal:
            t, s = sc.shape[-2], sc.shape[-1]
            sc = np.where(np.arange(s)[None, :] <= np.arange(t)[:, None], sc, -1e30)
        w = np.exp(sc - sc.max(axis=-1, keepdims=True))
        return np.einsum(out, w / w.sum(axis=-1, keepdims=True), v)
    ht, hs, hd, he = int(rng.integers(1, 4)), int(rng.integers(1, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 3))
    cases.append(("attend", 'attend ~spec:"b, t, h, d; b, s, h, d; b, s, h, e => b, t, h, e" p0 p1 p2',
                  lambda q, k, v: attend_ref(q, k, v, spec="bthd,bshd->bhts", out="bhts,bshe->bthe"),
                  [(u((x, ht, 2, hd)), "oooo"), (u((x, hs, 2, hd)), "oooo"), (u((x, hs, 2, he)), "oooo")]))
    cases.append(("attend_causal", 'attend_causal ~spec:"t, d; s, d; s, e => t, e" p0 p1 p2',
                  lambda q, k, v: attend_ref(q, k, v, causal=True, spec="td,sd->ts", out="ts,se->te"),
                  [(u((hs, hd)), "oo"), (u((hs, hd)), "oo"), (u((hs, he)), "oo")]))
    cases.append(("attend (multi-query)", 'attend ~spec:"t, h, d; s, d; s, e => t, h, e" p0 p1 p2',
                  lambda q, k, v: attend_ref(q, k, v, spec="thd,sd->hts", out="hts,se->the"),
                  [(u((ht, 2, hd)), "ooo"), (u((hs, hd)), "oo"), (u((hs, he)), "oo")]))
    # @^+ (max-plus): redraw until the best pair of every output cell wins by at least 0.05.
    while True:
        a, b = u((m, k)), u((k, n))
        sums = np.sort(a[:, :, None] + b[None, :, :], axis=1)
        if k == 1 or (sums[:, -1, :] - sums[:, -2, :]).min() > 0.05:
            break
    cases.append(("@^+", 'p0 @^+ "i, j; j, k => i, k" p1', lambda a, b: (a[:, :, None] + b[None, :, :]).max(axis=1),
                  [(a, "oo"), (b, "oo")]))
    return cases


def result_kinds(name, result):
    """The kinds of the result's axes in memory order: compose and transpose make input axes."""
    if name in ("* (compose)", "transpose"):
        return "oi"
    if name.startswith("++ (batch"):
        return "bo"
    return "o" * result.ndim


def prelude_cases(rng):
    return pointwise_cases(rng) + reduction_cases(rng)


def build_program(rng, index, make_cases=prelude_cases, header=""):
    """One program holding every case of make_cases(rng).  A case is (name, expression over
    p0 p1 …, NumPy function, [(values, kinds)…]) and optionally a list of (name, shape) of
    the parameters that a layer of the expression creates itself (their printed values are
    appended to the function's arguments, and their gradients are checked too), and the result's
    kinds."""
    lines = ["(* gradcheck program %d (tests/grad/gradcheck.py) *)" % index] + ([header] if header else [])
    losses, checks = [], []
    for c, case in enumerate(make_cases(rng)):
        name, expr, fn, inputs = case[:4]
        extras = case[4] if len(case) > 4 else []
        params = [Param("c%d_p%d" % (c, k), v, kd) for k, (v, kd) in enumerate(inputs)]
        # A layer's own parameters are only known once tsrc has drawn them: ones stand in here,
        # where only the result's shape is needed.
        result = fn(*[p.values for p in params], *[np.ones(shape) for _, shape in extras])
        kinds = case[5] if len(case) > 5 else result_kinds(name, result)
        weights = np.float32(rng.uniform(-1, 1, size=result.shape)).astype(np.float64)
        weights_text = literal(weights, kinds)
        for p in params:
            lines.append(p.decl())
        body = expr
        for k in range(len(params) - 1, -1, -1):
            body = body.replace("p%d" % k, params[k].name)
        lines.append("let%%op c%d_loss = ((%s) *. %s) ++ %s" % (c, body, weights_text, SUM_ALL))
        losses.append("c%d_loss" % c)
        checks.append((name, fn, params, weights, extras, "c%d_loss" % c))
    lines.append("let%op loss = " + " + ".join(losses))
    lines.append("routine step = loss.forward; loss.zero_grads; loss.backprop")
    return "\n".join(lines) + "\n", checks


def parse_print(text):
    """name -> flat float64 array of the values printed under `name : shape`."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^(\S+) : \S+$", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name is not None and line.startswith(" ") and not line.strip().startswith("["):
            out[name].extend(float(v) for v in line.split())
    return {k: np.array(v) for k, v in out.items()}


def central_differences(fn, params, weights, which):
    vals = [p.values.copy() for p in params]
    x = vals[which]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        keep = x[idx]
        x[idx] = keep + STEP
        up = (fn(*vals) * weights).sum()
        x[idx] = keep - STEP
        down = (fn(*vals) * weights).sum()
        x[idx] = keep
        grad[idx] = (up - down) / (2 * STEP)
    return grad


def main(make_cases=prelude_cases, header="", description=__doc__):
    ap = argparse.ArgumentParser(description=description.splitlines()[0])
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--programs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--native", type=int, default=1, help="how many programs also run natively")
    ap.add_argument("--keep", help="write the programs into this directory")
    ap.add_argument("--dtype", choices=sorted(TOLERANCES), default="f32", help="the parameters' element type")
    args = ap.parse_args()
    global DTYPE
    DTYPE = args.dtype
    rtol, value_tol = TOLERANCES[DTYPE]
    rng = np.random.default_rng(args.seed)
    passed = failed = 0
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(args.programs):
            source, checks = build_program(rng, index, make_cases, header)
            path = os.path.join(args.keep or tmp, "gradcheck_%d.tsr" % index)
            with open(path, "w") as f:
                f.write(source)
            run = subprocess.run([args.tsrc, "--run", "--interp", path], capture_output=True, text=True, env=env)
            if run.returncode != 0:
                print("FAIL program %d: tsrc exited %d\n%s" % (index, run.returncode, run.stderr[:2000]))
                failed += 1
                continue
            printed = parse_print(run.stdout)
            for name, fn, params, weights, extras, loss_name in checks:
                for p in params:  # the values tsrc used (exactly as printed)
                    p.values = printed[p.name].reshape(p.values.shape)
                if any(x not in printed or printed[x].size != np.prod(shape) for x, shape in extras):
                    print("FAIL %s (program %d): tsrc did not print %s" %
                          (name, index, ", ".join("%s of shape %s" % x for x in extras)))
                    failed += 1
                    continue
                params = params + [Param(x, printed[x].reshape(shape), "") for x, shape in extras]
                worst, ok = 0.0, True
                # The forward value too: the case's weighted sum against NumPy's, in float32's
                # precision relative to the sum of the terms' magnitudes.
                terms = fn(*[p.values for p in params]) * weights
                want, got_loss = float(terms.sum()), printed.get(loss_name)
                if got_loss is None or got_loss.size != 1 or \
                        abs(float(got_loss[0]) - want) > value_tol * max(float(np.abs(terms).sum()), 1.0):
                    ok = False
                    print("FAIL %s (program %d): value %r, NumPy %r" %
                          (name, index, None if got_loss is None else got_loss.tolist(), want))
                for k, p in enumerate(params):
                    if not ok:
                        break
                    fd = central_differences(fn, params, weights, k)
                    got = printed.get(p.name + ".grad")
                    if got is None or got.size != fd.size:
                        ok = False
                        print("FAIL %s (program %d): no gradient printed for %s" % (name, index, p.name))
                        break
                    err = np.abs(got.reshape(fd.shape) - fd) / np.maximum(np.abs(fd), FLOOR)
                    worst = max(worst, float(err.max()))
                    if err.max() > rtol:
                        ok = False
                        at = np.unravel_index(int(err.argmax()), fd.shape)
                        print("FAIL %s (program %d): %s.grad%s = %r, central differences %r" %
                              (name, index, p.name, list(at), float(got.reshape(fd.shape)[at]), float(fd[at])))
                if ok:
                    passed += 1
                    print("PASS %s (program %d, shapes %s, worst relative error %.1e)" %
                          (name, index, " ".join("x".join(map(str, p.values.shape)) for p in params), worst))
                else:
                    failed += 1
            if index < args.native:
                exe = subprocess.run([args.tsrc, "--run", path], capture_output=True, text=True, env=env)
                if exe.returncode == 0 and exe.stdout == run.stdout:
                    passed += 1
                    print("PASS program %d natively: the same bits as the reference executor" % index)
                else:
                    failed += 1
                    print("FAIL program %d natively: exit %d, output %s" %
                          (index, exe.returncode, "differs" if exe.returncode == 0 else exe.stderr[:2000]))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
