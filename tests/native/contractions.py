#!/usr/bin/env python3
"""contractions.py: random contractions, scheduled and compiled, against the reference executor.

The schedule (compiler/sched/sched.c) rewrites contractions into register-tiled kernels over packed
panels, and the backend emits them with vector operations.  This test generates random
contractions that exercise that path and its edges, and requires every way of running them to
print the same bits:

  - the reference executor on the scheduled IR (`tsrc --run --interp`, the reference),
  - the reference executor on the IR as lowered (`--run --interp --no-sched`),
  - native code at -O3 for the host CPU, for --cpu=x86-64-v4 (AVX-512) and for
    --cpu=x86-64-v3 (AVX2) (`--run`), each where this machine can run it (tests/host_cpus.sh;
    a level it cannot run is compiled to an object, which must succeed),

with every float printed in full (TSR_PRINT_EXACT=1).  At least a quarter of the cases must be
register-tiled by the host's schedule (counted in --emit=sched-ir), so that a schedule which
stopped tiling fails the test instead of passing it vacuously (and, but in bf16, at least one
in a hundred must take an epilogue of several stages: a GELU after the bias); likewise at
least a tenth of the programs must pack an operand by transposing blocks in registers (a
`transpose` loop: the compose form's weight, operands contracted along their contiguous axis),
with and without reduction tails past the last whole block.  A contraction is an einsum
`a +* "SPEC" b` whose labels are batch labels (in both operands and the result), row labels
(first operand and result), column labels (second operand and result) and summed labels (both
operands), each operand's and the result's axes in a random order: the plain matmul, transposed
operands, batched products, several summed axes and permuted results all come out of it.  Sizes
are drawn so that some fill register tiles exactly, some leave row or column tails, and some
are too small to be tiled.  Every fourth case is the compose form `w * x` of a layer, half of
them with a bias and an activation that the schedule fuses into the tiles (an epilogue: a relu,
a GELU, or a GELU then a relu and a scaling, whose nests are the epilogue's stages).  Every
program also differentiates its first two contractions (parameters, `backprop`), so the
backward contractions — the transposed products of the gradients — are compared too.
With --dtype f64 every operand, parameter and gradient is f64 (the uniform data widened by
to_f64, the parameters declared `dtype = "f64"`): the tiles, panels and vectors then hold
doubles (4 to a vector on AVX2, 8 on AVX-512), and the same ways of running must print the same
bits.
With --dtype bf16 every operand, parameter and gradient is bf16 (the data rounded by to_bf16):
the schedule widens them into f32 copies on most CPUs, and for --cpu=znver4 (AMD's Zen 4, AVX-512
BF16) packs them in pairs of steps for VDPBF16PS (LOOP_DOT_PAIRS, docs/ir.md §5.4).  That
schedule is then run too, by the reference executor everywhere (`--run --interp --cpu=znver4`)
and natively where this machine can run it (pass znver4 in --cpus), and at least a tenth of
the contractions must be paired in it.

Cases are batched, BATCH per program; when a program's outputs differ, the tensors that differ
are named.  Usage:
    python3 tests/native/contractions.py --tsrc build/tsrc [--count 300] [--seed 1]
                                         [--batch 25] [--jobs 2] [--keep DIR]
                                         [--cpus "native x86-64-v4 x86-64-v3"] [--dtype f64|bf16]
The last line of stdout is `N passed, N failed` (cases); exit status 1 if any case failed.
"""

import argparse
import concurrent.futures
import os
import random
import re
import subprocess
import sys
import tempfile

LABELS = "abcdefghpqrstuvwxyz"


def pick_size(rng, role):
    """Sizes around the register tiles: 6 rows by 16, 32 or 64 columns."""
    r = rng.random()
    if role == "row":
        return rng.choice([1, 5, 6, 7, 12, 13, 18, 24, 31]) if r < 0.8 else rng.randint(1, 40)
    if role == "col":
        return rng.choice([3, 16, 17, 31, 32, 48, 64, 65, 70, 100, 128, 129]) if r < 0.8 else rng.randint(1, 130)
    if role == "sum":
        return rng.choice([1, 3, 16, 33, 64]) if r < 0.8 else rng.randint(1, 80)
    return rng.choice([1, 2, 3])  # batch


def spec_case(rng, name, seed):
    """An einsum contraction with random labels, roles, orders and sizes."""
    labels = list(LABELS)
    rng.shuffle(labels)
    nb, ni, nj, nk = rng.choice([0, 0, 1, 2]), rng.choice([1, 1, 1, 2]), rng.choice([1, 1, 1, 2]), rng.choice([1, 1, 2])
    roles = ["batch"] * nb + ["row"] * ni + ["col"] * nj + ["sum"] * nk
    size = {}
    for lab, role in zip(labels, roles):
        size[lab] = pick_size(rng, role)
    if rng.random() < 0.6:  # big enough to tile: one label of each role carries the size
        firsts = {}
        for lab, role in zip(labels, roles):
            if role in firsts or role == "batch":
                size[lab] = rng.choice([1, 2, 3])
            else:
                firsts[role] = lab
                size[lab] = {"row": rng.choice([6, 7, 12, 13, 24, 31]), "col": rng.choice([16, 17, 33, 64, 65, 100, 128]),
                             "sum": rng.choice([16, 33, 64, 70])}[role]
    work = 1
    for v in size.values():
        work *= v
    while work > 400000:  # keep the reference executor quick
        lab = max(size, key=size.get)
        size[lab] = max(1, size[lab] // 2)
        work = 1
        for v in size.values():
            work *= v
    used = labels[: len(roles)]
    batch = [l for l, r in zip(used, roles) if r == "batch"]
    rows = [l for l, r in zip(used, roles) if r == "row"]
    cols = [l for l, r in zip(used, roles) if r == "col"]
    sums = [l for l, r in zip(used, roles) if r == "sum"]
    a_axes = batch + rows + sums
    b_axes = batch + sums + cols
    c_axes = batch + rows + cols
    for axes in (a_axes, b_axes, c_axes):
        rng.shuffle(axes)
    if rng.random() < 0.6:  # usually a column label walks the result with stride 1
        c_axes.remove(cols[0])
        c_axes.append(cols[0])
    spec = "%s; %s => %s" % (", ".join(a_axes), ", ".join(b_axes), ", ".join(c_axes))
    dims = lambda axes: "; ".join(str(size[l]) for l in axes)
    lines = [
        "data %s_a = uniform ~seed:%d ~o:[%s]" % (name, seed, dims(a_axes)),
        "data %s_b = uniform ~seed:%d ~o:[%s]" % (name, seed + 1, dims(b_axes)),
        'let%%op %s = %s_a +* "%s" %s_b' % (name, name, spec, name),
    ]
    return lines, spec


def compose_case(rng, name, seed):
    """y = w * x: w : o<-i (stored [o, i]), x with a batch axis."""
    batch, inp, out = pick_size(rng, "row"), pick_size(rng, "sum"), pick_size(rng, "col")
    lines = [
        "data %s_x = uniform ~seed:%d ~b:[%d] ~o:[%d]" % (name, seed, batch, inp),
        "data %s_w = uniform ~seed:%d ~i:[%d] ~o:[%d]" % (name, seed + 1, inp, out),
    ]
    if rng.random() < 0.5:  # a layer: bias and activation, fused into the tiles as an epilogue
        # relu joins the bias's nest (one stage); GELU reads its input four times, so it is a
        # nest of its own (two stages); then a relu and a scaling of that (four)
        act = rng.choice(["relu (%s)", "Nn.gelu (%s)", "0.5 *. relu (Nn.gelu (%s))"])
        lines += ["data %s_c = uniform ~seed:%d ~o:[%d]" % (name, seed + 2, out),
                  "let%%op %s = %s" % (name, act % ("%s_c + %s_w * %s_x" % (name, name, name)))]
        return lines, "layer %s %d|%d -> %d" % (act % "c + w * x", batch, inp, out)
    lines.append("let%%op %s = %s_w * %s_x" % (name, name, name))
    return lines, "compose %d|%d -> %d" % (batch, inp, out)


def grad_case(rng, name, seed):
    """A contraction of two parameters whose gradients come from a random upstream gradient."""
    m, k, n = rng.choice([6, 13, 24]), rng.choice([16, 40]), rng.choice([16, 33, 64, 70])
    spec = rng.choice(["i, k; k, j => i, j", "k, i; k, j => i, j", "i, k; j, k => i, j", "i, k; k, j => j, i"])
    shape = {"i": m, "k": k, "j": n}
    a_axes = [l.strip() for l in spec.split(";")[0].split(",")]
    b_axes = [l.strip() for l in spec.split(";")[1].split("=>")[0].split(",")]
    c_axes = [l.strip() for l in spec.split("=>")[1].split(",")]
    dims = lambda axes: "; ".join(str(shape[l]) for l in axes)
    lines = [
        "let%%op %s_p = { %s_p; o = [%s] }" % (name, name, dims(a_axes)),
        "let%%op %s_q = { %s_q; o = [%s] }" % (name, name, dims(b_axes)),
        "data %s_g = uniform ~seed:%d ~o:[%s]" % (name, seed, dims(c_axes)),
        'let%%op %s = %s_p +* "%s" %s_q' % (name, name, spec, name),
    ]
    routine = "%s.forward; %s.zero_grads; %s.grad =: %s_g; %s.backprop" % (name, name, name, name, name)
    return lines, "grad " + spec + " %dx%dx%d" % (m, k, n), routine


def as_dtype(lines, dtype):
    """The case's lines with tensors of `dtype` (f64, bf16): `data X = uniform …` becomes an f32
    `X_f32` converted by `to_f64` / `to_bf16`, and a parameter record `{ X; … }` gets
    `dtype = "…"`."""
    out = []
    for line in lines:
        m = re.match(r"data (\S+) = (uniform .*)$", line)
        if m:
            out += ["data %s_f32 = %s" % (m.group(1), m.group(2)),
                    "let%%op %s = to_%s %s_f32" % (m.group(1), dtype, m.group(1))]
        else:
            out.append(re.sub(r"\{ (\S+); o = \[([^]]*)\] \}", r'{ \1; o = [\2]; dtype = "%s" }' % dtype, line))
    return out


def make_program(rng, first, count, seed, dtype="f32"):
    lines, descr, routines = [], [], []
    for c in range(count):
        name = "c%d" % (first + c)
        s = seed * 1000 + 2 * (first + c)
        if c < 2:
            l, d, r = grad_case(rng, name, s)
            routines.append(r)
        elif c % 4 == 3:
            l, d = compose_case(rng, name, s)
            routines.append("%s.forward" % name)
        else:
            l, d = spec_case(rng, name, s)
            routines.append("%s.forward" % name)
        lines += as_dtype(l, dtype) if dtype != "f32" else l
        descr.append((name, d))
    lines.append("routine run_all = " + "; ".join(routines))
    return "\n".join(lines) + "\n", descr


def run(cmd, env):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=600)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def tensors(text):
    """'NAME : SHAPE' blocks of a grid print, by name."""
    out, name = {}, None
    for line in text.splitlines():
        if " : " in line and not line.startswith(" "):
            name = line.split(" : ")[0]
            out[name] = []
        elif name is not None:
            out[name].append(line)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--keep")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cpus", default="native x86-64-v4 x86-64-v3")
    ap.add_argument("--dtype", choices=["f32", "f64", "bf16"], default="f32")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    work = args.keep or tempfile.mkdtemp(prefix="tsrc-contractions.")
    os.makedirs(work, exist_ok=True)
    passed = failed = tiled = transposing = paired = chained = 0
    ways = [("scheduled IR, reference executor", ["--run", "--interp"]),
            ("lowered IR, reference executor", ["--run", "--interp", "--no-sched"])]
    if args.dtype == "bf16":
        ways.append(("scheduled IR for znver4 (bf16 pairs), reference executor", ["--run", "--interp", "--cpu=znver4"]))
    # Levels this machine cannot run (tests/host_cpus.sh) are compiled to objects, not run.
    here = os.path.dirname(os.path.abspath(__file__))
    runnable = subprocess.run(["sh", os.path.join(here, "..", "host_cpus.sh")] + args.cpus.split(),
                              capture_output=True, text=True, check=True).stdout.split()
    compile_only = [cpu for cpu in args.cpus.split() if cpu not in runnable]
    for cpu in compile_only:
        print("INFO this machine cannot run --cpu=%s code: compiled, not run" % cpu)
    ways += [("native -O3 --cpu=%s" % cpu, ["--run", "-O3", "--cpu=%s" % cpu]) for cpu in runnable]
    programs, first = [], 0
    while first < args.count:
        count = min(args.batch, args.count - first)
        text, descr = make_program(rng, first, count, args.seed, args.dtype)
        path = os.path.join(work, "contractions_%d.tsr" % first)
        with open(path, "w") as f:
            f.write(text)
        programs.append((path, count, descr))
        first += count

    def check(program):
        """(lines to print, passed, failed, tiled, transposing, paired, chained) for one program."""
        path, count, descr = program
        code, out, err = run([args.tsrc, "--emit=sched-ir", path], env)
        # One register-tile scratch buffer per tiled contraction, in the buffer list.
        tiled = sum(1 for line in out.splitlines() if line.startswith("  ") and ".tile#s" in line and " scratch " in line)
        transposing = 1 if " transpose:" in out else 0
        # Tiles whose epilogue has several stages (`through the epilogue into D0, then D1`).
        chained = sum(1 for line in out.splitlines() if "register tile" in line and ", then " in line
                      and "(the last" not in line)
        paired = 0
        if args.dtype == "bf16":
            code, out, err = run([args.tsrc, "--emit=sched-ir", "--cpu=znver4", path], env)
            paired = sum(1 for line in out.splitlines() if "register tile" in line and " in bf16 pairs" in line
                         and "(the last" not in line)
        for cpu in compile_only:
            obj = path + "." + cpu + ".o"
            code, out, err = run([args.tsrc, "--emit=obj", "-O3", "--cpu=" + cpu, path, "-o", obj], env)
            if os.path.exists(obj):
                os.remove(obj)
            if code != 0:
                return ["FAIL %s (--emit=obj -O3 --cpu=%s: exit %d: %s)" % (path, cpu, code, err.strip()[:400])], 0, count, tiled, transposing, paired, chained
        outputs = []
        for what, flags in ways:
            code, out, err = run([args.tsrc] + flags + [path], env)
            if code != 0:
                return ["FAIL %s (%s: exit %d: %s)" % (path, what, code, err.strip()[:400])], 0, count, tiled, transposing, paired, chained
            outputs.append((what, tensors(out)))
        ref, lines, ok = outputs[0][1], [], 0
        for name, d in descr:
            differs = [what for what, t in outputs[1:]
                       if any(t.get(k) != ref.get(k) for k in ref if k == name or k.startswith(name + "_"))]
            if differs:
                lines.append("FAIL %s %s (%s) differs: %s" % (path, name, d, "; ".join(differs)))
            else:
                ok += 1
        return lines, ok, count - ok, tiled, transposing, paired, chained

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for lines, ok, bad, t, tr, pr, ch in pool.map(check, programs):
            for line in lines:
                print(line)
            passed, failed, tiled, transposing = passed + ok, failed + bad, tiled + t, transposing + tr
            paired, chained = paired + pr, chained + ch
    if not args.keep and failed == 0:
        for f in os.listdir(work):
            os.remove(os.path.join(work, f))
        os.rmdir(work)
    # The point is the scheduled path: a schedule that stopped tiling would pass vacuously.
    print("%d of %d contractions were register-tiled for this host" % (tiled, args.count))
    if tiled * 4 < args.count:
        print("FAIL fewer than a quarter of the contractions were register-tiled")
        failed += 1
    print("%d of %d programs packed an operand by transposing in registers" % (transposing, len(programs)))
    if transposing * 10 < len(programs):
        print("FAIL fewer than a tenth of the programs packed by transposing")
        failed += 1
    # Layers whose activation is a nest of its own (a GELU) take it as a second stage of the
    # tiles' epilogue.  bf16 ones are not held to it: where their products run on f32 copies of
    # the operands, the nest that rounds the result comes between the tiles and the activation.
    print("%d of %d contractions took an epilogue of several stages" % (chained, args.count))
    if args.dtype != "bf16" and chained * 100 < args.count:
        print("FAIL fewer than one in a hundred contractions took an epilogue of several stages")
        failed += 1
    if args.dtype == "bf16":
        print("%d of %d contractions were tiled in bf16 pairs for --cpu=znver4" % (paired, args.count))
        if paired * 10 < args.count:
            print("FAIL fewer than a tenth of the contractions were tiled in bf16 pairs for znver4")
            failed += 1
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
