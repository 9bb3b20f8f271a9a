#!/usr/bin/env python3
"""sweep_gen.py: random einsum programs for the native differential sweep (tests/native_sweep.sh).

The sweep compiles each program natively (tsrc --run, -O3) for several CPUs and compares what
the executable prints with what the reference executor (tsrc --run --interp) prints, as text.
This script only writes the programs and, on a mismatch, names the einsums whose printed
tensors differ. The reference executor itself is checked against NumPy elsewhere
(tests/einsum/einsum_diff.py); here it is the oracle.

A case is one of four kinds, each with sizes chosen for the native backend:
  small   (30%) a spec from einsum_diff.py's generator (gen_spec, render_spec): 1 to 3 operands,
          diagonals in operands and results, permuted results, fixed indices, placeholders,
          summed labels, labels moving between row kinds, `...` of every kind and named row
          variables `..v..` standing for 0-2 axes, batch `|` and input `->` rows, single- and
          multi-character specs; every axis 1-4 (size 1 the likeliest), so LLVM unrolls the
          whole nest into straight-line code;
  dense   (50%) a plain spec (gen_spec_dense: labels only, half of them batched products with
          batch, contracted and free labels, in any row kinds, the result permuted), every
          label 1-8 with 3, 5 and 7 likely: nests that unroll fully or nearly, with odd strides;
  medium  (15%) an einsum_diff spec with 1-3 labels of 5-17: vectorized loops with remainders;
  large   (5%)  an einsum_diff spec with one label of 24-129: vectorized main loops, and some
          nests big enough for the thread pool.
Operands of up to 24 cells are tensor literals of quarter numbers (products and sums are
exact); bigger ones are `data … = uniform`, whose numbers are all distinct, so a lane read from
the wrong place shows.

With `--dtype f64` every tensor is f64 (docs/language.md section 3.9), and no operand's values
are exact in f32 arithmetic: an operand of up to 24 cells is, half of the time each, an f64
parameter whose initial value is its literal (`{ cN_a = [...]; b = [..]; dtype = "f64" }`) or
`to_f64` of the literal (a conversion nest before the einsum), its numbers float32's of [-2, 2]
with full 24-bit significands (products of two need 48 bits); a bigger one is an f64 parameter
drawn from `normal ()` with every row given (`{ cN_a = normal (); b = [..]; i = [..]; o = [..];
dtype = "f64" }`), whose numbers use all 53 bits.  Sums of such products round differently in
another order or in f32, so native code must compute as the reference executor does, in
double precision and in its order, to print the same 17 digits (native_sweep.sh runs both with
TSR_PRINT_EXACT=1).

With `--dtype bf16` or `--dtype f16` every tensor is of that storage type (docs/language.md
section 3.9: computed in f32 and rounded to nearest even where stored, a contraction
accumulating in f32 and rounding each cell once), made as the f64 ones are: an operand of up to
24 cells is a parameter of the type whose initial value is its literal, or `to_bf16`/`to_f16` of
the literal, half of the time each, the same float32's of 24 significant bits, which both round
to the type; a bigger one is a parameter drawn from `normal ()` with every row given, or
`to_bf16`/`to_f16` of `uniform` data of its own (`data cN_ad = uniform …`; `uniform` has no
dtype), half of the time each. Their products need more than f32's 24 bits, so sums round
differently in another order: native code must accumulate in f32 in the reference executor's
order, and round as it does, to print the same bits (TSR_PRINT_EXACT=1: %.9g of each value's
f32 widening).

With `--dtype i32` or `--dtype i64` every tensor is that integer type (docs/language.md section
3.9): an operand of up to 24 cells is `to_i32`/`to_i64` of a literal of whole numbers of up to
24 bits (an i32's products overflow it, and its sums wrap, two's complement), a bigger one is
`range` data of the type (every cell a different number, so a lane read from the wrong place
shows); native code must print the reference executor's integers exactly.

A case N is the tensors cN_a, cN_b, cN_c (operands) and cN_r (the einsum); a program holds
BATCH cases. Every case's spec and shapes are listed in BATCH.cases, one line per case.

Usage:
    sweep_gen.py gen --count N --seed S --batch B --out DIR [--dtype f32|f64|bf16|f16|i32|i64]
                        writes DIR/bNNN.tsr, bNNN.cases
    sweep_gen.py diff PROGRAM.tsr EXPECTED ACTUAL    names the cases whose printed tensors
                        differ (described from PROGRAM.cases, or else from the program's einsum
                        lines); exit 1 if any differ, 0 if none
Needs Python 3 and NumPy (for einsum_diff.py).
"""

import os
import random
import re
import sys

sys.dont_write_bytecode = True   # no __pycache__ left in tests/einsum by make check
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "einsum"))
import einsum_diff as ed  # noqa: E402  (the spec generator)

LITERAL_CELLS = 24     # operands up to this many cells are literals, bigger ones `uniform` data
MAX_CELLS = 4096       # per operand and result
MAX_LOOP = 120000      # product of the sizes of all distinct axes of a case
# How often each kind of case comes (small, dense, medium, large), and the sizes of a dense
# case's labels (1 to 8; an input axis is at least 2).  Odd sizes and 3 next to 5 or 7 are
# likely: LLVM 19's SLP vectorizer went wrong on such fully unrolled nests (sweep_regress.tsr).
REGIME_WEIGHTS = [6, 10, 3, 1]
DENSE_WEIGHTS = [1, 1, 4, 2, 3, 1, 2, 1]
DTYPE = "f32"          # the element type of every tensor (gen --dtype)
HALF = ("bf16", "f16")
INTS = ("i32", "i64")


def choose_sizes(rng, case, regime):
    """einsum_diff.choose_sizes with the size distribution of `regime`."""
    in_input = {e for slot in case.ops for e in slot["i"] if e[0] in ("L", "R")}
    big = set()
    if regime in ("medium", "large"):
        names = sorted({e[1] for slot in case.ops for k in ed.KINDS for e in slot[k]
                        if e[0] == "L"})
        if names:
            big = set(rng.sample(names, min(len(names), 1 if regime == "large" else
                                            rng.randint(1, 3))))

    def size(lo, name=None):
        if name in big:
            if regime == "large":
                return rng.choice([24, 31, 32, 33, 40, 48, 63, 64, 65, 100, 127, 128, 129])
            return rng.choice([5, 6, 7, 8, 9, 11, 12, 15, 16, 17])
        if regime == "dense":
            return rng.choices(range(lo, 9), DENSE_WEIGHTS[lo - 1:])[0]
        return rng.choices(range(lo, 5), [5, 4, 2, 1][lo - 1:])[0]

    case.label_size = {}
    case.rvar_sizes = {}
    for slot in case.ops:
        for k in ed.KINDS:
            for e in slot[k]:
                lo = 2 if e in in_input else 1
                if e[0] == "L" and e[1] not in case.label_size:
                    case.label_size[e[1]] = size(lo, e[1])
                elif e[0] == "R" and e[1] not in case.rvar_sizes:
                    n = rng.choice([0, 1, 2])
                    case.rvar_sizes[e[1]] = [
                        size(lo) if regime in ("small", "dense") or rng.random() < 0.7
                        else rng.choice([5, 8, 9, 16]) for _ in range(n)]
    ed.pick_pinned_sizes(case, rng)


def gen_spec_dense(rng, case):
    """A plain spec: 2-5 labels, no row variables, fixed indices or diagonals, in any row kinds;
    the result keeps most labels, in a random order. Half of them are (batched) products: the
    roles of a batched matmul (batch labels in both operands and the result, contracted labels
    in both operands only, free labels in one operand and the result), each role with 0-2
    labels; the others put each label in one or two operands freely."""
    pool = ed.SINGLE_LABELS if rng.random() < 0.7 else ed.MULTI_LABELS
    kind = lambda: rng.choices(ed.KINDS, [1, 1, 2])[0]
    if rng.random() < 0.5:
        nops = 2
        counts = [rng.choices([0, 1, 2], w)[0] for w in ([3, 5, 1], [3, 5, 1], [1, 5, 2], [1, 5, 2])]
        if sum(counts) < 2:
            counts = [1, 1, 1, 1]
        names = iter(rng.sample(pool, sum(counts)))
        roles = []   # (name, operands, kept)
        for role, n in zip(("batch", "contracted", "left", "right"), counts):
            for _ in range(n):
                where = {"batch": [0, 1], "contracted": [0, 1], "left": [0], "right": [1]}[role]
                roles.append((next(names), where, role != "contracted"))
    else:
        nops = rng.choices([1, 2, 3], [1, 6, 2])[0]
        roles = []
        for name in rng.sample(pool, rng.randint(2, 5)):
            where = rng.sample(range(nops), min(nops, rng.choices([1, 2], [3, 2])[0]))
            roles.append((name, where, rng.random() < (0.85 if len(where) == 1 else 0.45)))
    ops = [{k: [] for k in ed.KINDS} for _ in range(nops)]
    res = {k: [] for k in ed.KINDS}
    for name, where, kept in roles:
        for j in where:
            ops[j][kind()].append(("L", name))
        if kept:
            res[kind()].append(("L", name))
    for j, slot in enumerate(ops):
        if not any(slot[k] for k in ed.KINDS):
            slot["o"].append(("L", rng.choice(roles)[0]))
    for slot in ops + [res]:
        for k in ed.KINDS:
            rng.shuffle(slot[k])
    case.ops = ops
    case.result = res


def cells(axes):
    n = 1
    for a in axes:
        n *= a[3]
    return n


def gen_case(rng, index):
    regime = rng.choices(["small", "dense", "medium", "large"], REGIME_WEIGHTS)[0]
    while True:
        case = ed.Case(index)
        if regime == "dense":
            gen_spec_dense(rng, case)
        else:
            ed.gen_spec(rng, case)
        for _attempt in range(10):
            choose_sizes(rng, case, regime)
            layouts = [ed.expand_slot(case, s, sz) for s, sz in zip(case.ops, case.op_axis_sizes)]
            res_axes = ed.expand_slot(case, case.result, operand=False)
            ids = {}
            for lay in layouts:
                for a in lay:
                    ids[a[2]] = a[3]
            loop = 1
            for s in ids.values():
                loop *= s
            if (all(1 <= len(l) and cells(l) <= MAX_CELLS for l in layouts)
                    and cells(res_axes) <= MAX_CELLS and loop <= MAX_LOOP):
                break
        else:
            continue
        case.op_layout = layouts
        case.res_axes = res_axes
        case.regime = regime
        ed.render_spec(rng, case)
        case.values = []
        # f64, bf16, f16: per operand, True for `to_f64 LITERAL` (or `to_bf16 …` of the literal
        # or, for a big operand, of `uniform` data), False for a parameter `{ … }`.
        case.convert = []
        for lay in layouts:
            n = cells(lay)
            if n > LITERAL_CELLS:
                case.values.append(None)
            elif DTYPE in INTS:     # whole numbers of up to 24 bits (exact in a literal's f32)
                case.values.append([float(rng.randint(-2**23, 2**23)) for _ in range(n)])
            elif DTYPE != "f32":    # float32's (what a literal holds) of 24 significant bits
                case.values.append([float(ed.np.float32(rng.uniform(-2.0, 2.0)))
                                    for _ in range(n)])
            else:
                case.values.append([rng.randint(-8, 8) / 4.0 for _ in range(n)])
            if DTYPE != "f32":
                case.convert.append(rng.random() < 0.5)
        case.seed = rng.randint(0, 999)
        return case


def literal(values, layout):
    import numpy as np
    arr = np.array(values, dtype=np.float64).reshape([a[3] for a in layout])
    return ed.literal_text(arr, [a[0] for a in layout])


def case_program(case):
    lines = []
    for j, lay in enumerate(case.op_layout):
        name = case.op_name(j)
        rows = {k: [str(a[3]) for a in lay if a[0] == k] for k in ed.KINDS}
        if DTYPE in INTS and case.values[j] is None:
            args = "".join(" ~%s:[%s]" % (k, "; ".join(rows[k])) for k in ed.KINDS if rows[k])
            lines.append('data %s = range%s ~dtype:"%s"' % (name, args, DTYPE))
        elif DTYPE in INTS:
            lines.append("let%%op %s = to_%s %s" % (name, DTYPE, literal(case.values[j], lay)))
        elif DTYPE in HALF and case.values[j] is None and case.convert[j]:
            # `uniform` data (f32, no dtype of its own) rounded to the type: cN_ad, then cN_a.
            args = "".join(" ~%s:[%s]" % (k, "; ".join(rows[k])) for k in ed.KINDS if rows[k])
            lines.append("data %sd = uniform ~seed:%d%s" % (name, case.seed + j, args))
            lines.append("let%%op %s = to_%s %sd" % (name, DTYPE, name))
        elif DTYPE != "f32" and case.values[j] is None:
            # A parameter's rows other than the batch one are inferred unless given: give all.
            sizes = "".join("; %s = [%s]" % (k, "; ".join(rows[k])) for k in ed.KINDS
                            if rows[k] or k != "b")
            lines.append('let%%op %s = { %s = normal ()%s; dtype = "%s" }' % (name, name, sizes,
                                                                              DTYPE))
        elif DTYPE != "f32" and case.convert[j]:
            lines.append("let%%op %s = to_%s %s" % (name, DTYPE, literal(case.values[j], lay)))
        elif DTYPE != "f32":
            lines.append("let%%op %s = %s" % (name, ed.f64_param(name, literal(case.values[j], lay),
                                                               lay, DTYPE)))
        elif case.values[j] is not None:
            lines.append("let%%op %s = %s" % (name, literal(case.values[j], lay)))
        else:
            args = "".join(" ~%s:[%s]" % (k, "; ".join(rows[k])) for k in ed.KINDS if rows[k])
            lines.append("data %s = uniform ~seed:%d%s" % (name, case.seed + j, args))
    lines.append(ed.einsum_line(case))
    return "\n".join(lines) + "\n"


def case_line(case):
    ops = ", ".join("%s : %s" % (case.op_name(j), ed.shape_text(l))
                    for j, l in enumerate(case.op_layout))
    return '%s\t%s\t"%s"\t%s -> %s : %s' % (case.prefix, case.regime, case.spec, ops,
                                             case.result_name, ed.shape_text(case.res_axes))


def cmd_gen(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="sweep_gen.py gen")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=50)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=("f32", "f64") + HALF + INTS, default="f32",
                    help="the element type of every tensor")
    a = ap.parse_args(argv)
    global DTYPE
    DTYPE = a.dtype
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    for b, first in enumerate(range(0, a.count, a.batch)):
        cases = [gen_case(rng, i) for i in range(first, min(a.count, first + a.batch))]
        base = os.path.join(a.out, "b%03d" % b)
        with open(base + ".tsr", "w") as fh:
            fh.write("(* native sweep, seed %d, cases %d-%d%s (tests/native/sweep_gen.py) *)\n"
                     % (a.seed, cases[0].index, cases[-1].index,
                        "" if DTYPE == "f32" else ", " + DTYPE))
            fh.write("".join(case_program(c) for c in cases))
        with open(base + ".cases", "w") as fh:
            fh.write("".join(case_line(c) + "\n" for c in cases))
    return 0


def tensors(text):
    """Printed output -> {name: text of its block}."""
    out, cur = {}, None
    for line in text.splitlines(True):
        m = re.match(r"^(\S+) : \S+$", line)
        if m:
            cur = m.group(1)
            out[cur] = ""
        if cur is not None:
            out[cur] += line
    return out


def cmd_diff(argv):
    prog_path, exp_path, act_path = argv
    cases = {}
    cases_path = prog_path[:-4] + ".cases" if prog_path.endswith(".tsr") else prog_path
    if os.path.exists(cases_path) and cases_path != prog_path:
        with open(cases_path) as fh:
            for line in fh:
                cases[line.split("\t", 1)[0]] = line.rstrip("\n")
    else:   # a program without a case list: describe a case by the line that defines cN_r
        with open(prog_path) as fh:
            for line in fh:
                m = re.match(r"^let%op ([A-Za-z0-9]+)_r = (.*)$", line)
                if m:
                    cases[m.group(1)] = "%s\t%s" % (m.group(1), m.group(2))
    with open(exp_path, errors="replace") as fh:
        exp_text = fh.read()
    with open(act_path, errors="replace") as fh:
        act_text = fh.read()
    exp, act = tensors(exp_text), tensors(act_text)
    bad = {}
    for name in sorted(set(exp) | set(act)):
        if exp.get(name) != act.get(name):
            bad.setdefault(name.split("_")[0], []).append(name)
    for prefix in sorted(bad, key=lambda p: int(p[1:]) if p[1:].isdigit() else -1):
        names = bad[prefix]
        print("  %s: %s" % (", ".join(names), cases.get(prefix, "(not a case)")))
        for name in names[:1]:
            e, a = (exp.get(name) or "(missing)\n"), (act.get(name) or "(missing)\n")
            el, al = e.splitlines(), a.splitlines()
            for i in range(max(len(el), len(al))):
                x = el[i] if i < len(el) else ""
                y = al[i] if i < len(al) else ""
                if x != y:
                    print("    line %d of its printout: interp '%s'" % (i + 1, x.strip()))
                    print("                           native '%s'" % y.strip())
                    break
    if not bad and exp_text != act_text:
        print("  the outputs differ outside any tensor's printout")
        return 1
    return 1 if bad else 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "gen":
        return cmd_gen(sys.argv[2:])
    if len(sys.argv) == 5 and sys.argv[1] == "diff":
        return cmd_diff(sys.argv[2:])
    sys.stderr.write(__doc__.split("Usage:")[1].split("Needs")[0])
    return 2


if __name__ == "__main__":
    sys.exit(main())
