#!/usr/bin/env python3
"""window_orders.py: windows over one shared leaf infer the same shapes in every order.

Each random program makes one unsized leaf (`ones ()`, `zeros ()` or a parameter `{ p }`) and
reads it through two or three windows -- a strided read `k ++ "S*i[+OFF] => i"`, a valid, a
padded or an unmarked convolution, dilated or not (`k +* "S*i<+j; j => i" KERNEL`, `"S*i=+2*j;
…"`, `"S*i+j; …"`: inference chooses that padding) -- or a plain `relu k`, most of them added
to a literal that sizes their output.  The leaf's size is then the one the windows
agree on, if any (docs/inference.md §4.6, "Closing order").  The program is checked with
`tsrc --print-shapes` as generated and with its definitions after the leaf in other orders:

  * every order gives the same outcome: the same shapes and inferred paddings, or an error in each;
  * no order ends in an internal error or a crash (a violated window constraint is the solver's
    bug, never the user's).

Before the closing order took every window's bound first and sized a shared input by all its
windows at once, such pairs compiled in one order and failed in the other, or failed inside
the solver.  Usage: window_orders.py --tsrc TSRC [--count N] [--seed S].
Last line: "N passed, N failed" (one check per program)."""
import argparse
import os
import random
import re
import subprocess
import sys
import tempfile


def literal(cells):
    return "[" + "; ".join("%d." % (i + 1) for i in range(cells)) + "]"


def window_definition(rnd, name):
    stride, offset, dilation = rnd.randint(1, 3), rnd.randint(0, 2), rnd.choice([1, 1, 2])
    kind = rnd.choice(["strided", "valid", "same", "inferred", "plain"])
    if kind == "strided":
        axis = "%d*i+%d" % (stride, offset) if offset else "%d*i" % stride
        expr = 'k ++ "%s => i"' % axis
    elif kind == "plain":
        expr = "relu k"
    else:
        marker = {"valid": "<", "same": "=", "inferred": ""}[kind]
        kernel = "%d*j" % dilation if dilation > 1 else "j"
        expr = 'k +* "%d*i%s+%s; j => i" %s' % (stride, marker, kernel, literal(rnd.randint(1, 3)))
    if rnd.random() < 0.8:
        expr = "(%s) + %s" % (expr, literal(rnd.randint(1, 4)))
    return "let%%op %s = %s" % (name, expr)


def outcome(tsrc, path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    r = subprocess.run([tsrc, "--print-shapes", path], capture_output=True, text=True, timeout=60)
    if "internal error" in r.stderr or r.returncode not in (0, 1):
        return ("crash", r.returncode, r.stderr.strip().splitlines()[:1])
    if r.returncode == 1:
        return ("error",)
    # A padding that inference chose is printed at its spec ("FILE:LINE:COL: padding of …"):
    # compared without the place, which moves with the order.
    lines = [re.sub(r"^.*?: (padding of )", r"\1", line) for line in r.stdout.splitlines() if " : " in line]
    return ("shapes", tuple(sorted(lines)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", required=True)
    ap.add_argument("--count", type=int, default=80)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--orders", type=int, default=3, help="other orders tried per program")
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    passed = failed = 0
    kinds = {}
    with tempfile.TemporaryDirectory(prefix="window-orders.") as scratch:
        path = os.path.join(scratch, "orders.tsr")
        for case in range(args.count):
            leaf = "let%%op k = %s" % rnd.choice(["ones ()", "zeros ()", "{ p }"])
            uses = [window_definition(rnd, "u%d" % j) for j in range(rnd.randint(2, 3))]
            first = outcome(args.tsrc, path, [leaf] + uses)
            kinds[first[0]] = kinds.get(first[0], 0) + 1
            bad = None
            if first[0] == "crash":
                bad = ([leaf] + uses, first)
            for _ in range(args.orders if not bad else 0):
                order = rnd.sample(uses, len(uses))
                other = outcome(args.tsrc, path, [leaf] + order)
                if other != first:
                    bad = ([leaf] + order, other)
                    break
            if bad:
                failed += 1
                print("FAIL case %d: as written %s" % (case, first))
                print("    " + "\n    ".join([leaf] + uses))
                print("  in this order %s" % (bad[1],))
                print("    " + "\n    ".join(bad[0]))
            else:
                passed += 1
    print("outcomes of the written orders: %s" % ", ".join("%s %d" % kv for kv in sorted(kinds.items())))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
