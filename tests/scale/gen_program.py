#!/usr/bin/env python3
"""gen_program.py — generate a .tsr program of about N lines, for the compile-time and memory
tests (tests/scale/compile_scale.sh) and the curve in docs/performance.md.

    python3 tests/scale/gen_program.py KIND N [OUT]

KIND is one of
  chain    a chain of elementwise `let%op` definitions, each using the one before twice
           (`let%op t5 = relu (t4 *. t4 + t4)`…): sharing that fusion must not re-expand;
  mlp      a deep MLP of N/3 layers, each a fresh application of one layer function;
  routine  one routine of N statements updating a handful of tensors;
  varied   a deep network of N/3 layers that differ from each other (widths 4 to 16, each its
           own constant and activation), so that few kernels are the same code: the case that
           merging identical kernels (cg_llvm.c) does not help.
Every program is one that tsrc compiles: shapes are fixed by an input, and the result is
printed (no `main`: every named tensor is printed after the routines run).  The curve in
docs/performance.md ("Compile time and memory") is measured on these programs."""
import sys


def chain(n):
    lines = ["input { x; o = [8] }", "let%op t0 = x"]
    ops = ["({p} *. {p} + {p}) /. 4", "relu ({p} + {p}) - 0.25", "{p} *. {p} - {p}"]
    for i in range(1, n - 1):
        p = f"t{i - 1}"
        lines.append(f"let%op t{i} = " + ops[i % len(ops)].format(p=p))
    return lines


def mlp(n):
    layers = max(1, n // 3)
    lines = ["input { x; b = [4]; o = [8] }",
             "let%op layer ~hid () x = relu ({ w } * x + { b = 0.; o = [ hid ] })",
             "let%op h0 = x"]
    for i in range(1, layers + 1):
        lines.append(f"let%op h{i} = layer ~hid:8 () h{i - 1}")
    return lines


def routine(n):
    tensors = 4
    lines = ["input { x; o = [8] }"]
    for k in range(tensors):
        lines.append(f"let%op a{k} = {{ a{k} = 0.; o = [8] }}")
    lines.append("routine r =")
    body = n - len(lines)
    forms = ["a{k} =+ x * {c}", "a{k} =: a{j} * 0.5 + x", "a{k} =+ relu (a{j} - {c})"]
    for i in range(max(1, body)):
        k, j = i % tensors, (i + 1) % tensors
        c = f"{(i % 7) + 1}." if forms[i % 3].count("{c}") else ""
        stmt = "  " + forms[i % 3].format(k=k, j=j, c=c)
        lines.append(stmt + (";" if i + 1 < body else ""))
    return lines


def varied(n):
    layers = max(1, n // 3)
    lines = ["input { x; b = [4]; o = [8] }", "let%op h0 = x"]
    widths, acts = [4, 8, 12, 16], ["relu", "tanh", "sigmoid"]
    for i in range(1, layers + 1):
        width, act = widths[(i * 7) % len(widths)], acts[(i * 5) % len(acts)]
        lines.append(f"let%op h{i} = {act} ({{ w{i}; o = [{width}] }} * h{i - 1} + 0.{i % 997 + 1:03d})")
    return lines


GENERATORS = {"chain": chain, "mlp": mlp, "routine": routine, "varied": varied}


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in GENERATORS:
        sys.exit("usage: gen_program.py chain|mlp|routine|varied N [OUT]")
    lines = GENERATORS[sys.argv[1]](int(sys.argv[2]))
    text = "\n".join(lines) + "\n"
    if len(sys.argv) == 4:
        with open(sys.argv[3], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
