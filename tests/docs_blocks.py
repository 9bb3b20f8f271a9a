#!/usr/bin/env python3
"""docs_blocks.py — every ```tsr block of the documentation compiles, so the docs show only true forms.

Each fenced block whose info string is `tsr` in README.md and docs/*.md is written to a file and
given to `tsrc --check`:

  ```tsr         must compile: exit status 0 and nothing on stderr;
  ```tsr error   an example of an error: exit status 1 and a located `file:line:col: error:`.

A block that is a fragment (it uses names defined elsewhere, as `routine train = …` after the
model) gets its context from an HTML comment right above its fence, which a rendered page does
not show:

  <!-- tsr-context
  input { x; b = [4]; o = [3] }
  -->
  ```tsr
  let%op y = relu x
  ```

The context's lines come first in the compiled file, and the diagnostics' line numbers are
shifted back so a failure points into the document.

A block that shows what a command prints is kept honest by a golden file that tests/run.sh
compares with the real output (tests/native/examples/*.out, tests/shapes/examples/*.shapes,
tests/shape_errors/*.err).
An HTML comment right above its fence names the golden, relative to the top of the tree:

  <!-- tsr-golden tests/native/examples/train_moons.out -->
  ```text
  $ tsrc docs/examples/train_moons.tsr -o train_moons && ./train_moons
  epoch  0  loss 0.3070  accuracy 84.2%
  …
  epoch 39  loss 0.0448  accuracy 99.2%
  ```

A golden of an error names its program by its path in tests/; words `OLD=NEW` after the golden's
name rename it as the document does (`tests/shape_errors/dtype_arithmetic.tsr=prog.tsr`).
The block's lines that start with `$ ` are the commands and are skipped; a line that is only `…`
stands for any number of the golden's lines; every other line must be the golden's, in order,
and the block's first and last lines are the golden's first and last (unless they are `…`).

Prints one PASS/FAIL line per block that fails or per document, then "N passed, N failed" (one
count per block)."""
import argparse, glob, os, re, subprocess, sys, tempfile

CONTEXT_OPEN = "<!-- tsr-context"
CONTEXT_CLOSE = "-->"


def blocks(path):
    """Yields (line of the fence, info words, context lines, code lines) for each ```tsr block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    context, i = [], 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(CONTEXT_OPEN):
            context, i = [], i + 1
            while i < len(lines) and lines[i].strip() != CONTEXT_CLOSE:
                context.append(lines[i])
                i += 1
            i += 1
            continue
        fence = re.match(r"^```(\S*)\s*(.*)$", line)
        if fence:
            start, info, code = i + 1, [fence.group(1)] + fence.group(2).split(), []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                code.append(lines[i])
                i += 1
            if info[0] == "tsr":
                yield start, info[1:], context, code
            context, i = [], i + 1
            continue
        if line.strip():
            context = []  # a context belongs to the fence right below it
        i += 1


GOLDEN = re.compile(r"^<!-- tsr-golden (\S+)((?: \S+=\S+)*) -->\s*$")
ELLIPSIS = "\u2026"


def golden_blocks(path):
    """Yields (line of the fence, golden path, renamings, code lines) for each block under a
    tsr-golden comment."""
    lines = open(path, encoding="utf-8").read().split("\n")
    for i, line in enumerate(lines):
        m = GOLDEN.match(line)
        if not m:
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            yield i + 1, m.group(1), [], None  # not right above a fence
            continue
        code, j = [], i + 2
        while j < len(lines) and not lines[j].startswith("```"):
            code.append(lines[j])
            j += 1
        yield i + 2, m.group(1), [w.split("=", 1) for w in m.group(2).split()], code


def check_golden(root, doc, start, golden, renames, code):
    """None when the block's output lines are the golden's (with `…` for any run of its lines)."""
    if code is None:
        return "%s:%d: a tsr-golden comment not right above a fence" % (doc, start - 1)
    try:
        text = open(os.path.join(root, golden), encoding="utf-8").read()
    except OSError as e:
        return "%s:%d: golden %s: %s" % (doc, start, golden, e.strerror)
    for old, new in renames:
        text = text.replace(old, new)
    want = text.split("\n")
    if want and want[-1] == "":
        want.pop()
    shown = [l for l in code if not l.startswith("$ ")]
    # The segments between `…` lines; the first is anchored at the golden's start, the last at its end.
    segments, seg = [], []
    for l in shown:
        if l.strip() == ELLIPSIS:
            segments.append(seg)
            seg = []
        else:
            seg.append(l)
    segments.append(seg)
    def mismatch(what):
        return "%s:%d: the output shown is not %s's: %s" % (doc, start, golden, what)
    pos = 0
    for k, seg in enumerate(segments):
        last = k == len(segments) - 1
        if k == 0:
            at = 0 if want[:len(seg)] == seg else -1
        elif last and seg:
            at = len(want) - len(seg) if len(want) - len(seg) >= pos and want[len(want) - len(seg):] == seg else -1
        else:
            at = next((a for a in range(pos, len(want) - len(seg) + 1) if want[a:a + len(seg)] == seg), -1)
        if at < 0:
            return mismatch("no run of its lines is\n  " + "\n  ".join(seg))
        pos = at + len(seg)
    if len(segments) == 1 and pos != len(want):
        return mismatch("it has %d lines, the block shows %d (a line `%s` stands for omitted ones)" % (len(want), pos, ELLIPSIS))
    return None


def check(tsrc, doc, start, words, context, code, tmp):
    """None when the block behaves as marked, else a message."""
    src = os.path.join(tmp, "block.tsr")
    with open(src, "w", encoding="utf-8") as f:
        f.write("\n".join(context + code) + "\n")
    run = subprocess.run([tsrc, "--check", src], capture_output=True, text=True, timeout=60)
    # Diagnostics name the temporary file: rename it and move the lines to the document's.
    def relocate(m):
        n = int(m.group(1)) - len(context)
        return "%s:%s:" % (doc, start + n) if n > 0 else "%s (context above line %d):" % (doc, start)
    err = re.sub(re.escape(src) + r":(\d+):", relocate, run.stderr)
    if "error" in words:
        if run.returncode == 1 and re.search(r":\d+:\d+: error: ", run.stderr):
            return None
        return "%s:%d: a block marked as an error example compiled (status %d)" % (doc, start, run.returncode)
    if run.returncode == 0 and not run.stderr:
        return None
    return "%s:%d: does not compile (status %d)\n%s" % (doc, start, run.returncode, err)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", required=True)
    ap.add_argument("--root", default=".")
    args = ap.parse_args()
    docs = [os.path.join(args.root, "README.md")] + sorted(glob.glob(os.path.join(args.root, "docs", "*.md")))
    passed = failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for doc in docs:
            name = os.path.relpath(doc, args.root)
            ok = bad = 0
            for start, words, context, code in blocks(doc):
                problem = check(args.tsrc, name, start, words, context, code, tmp)
                if problem:
                    bad += 1
                    print("FAIL " + problem)
                else:
                    ok += 1
            for start, golden, renames, code in golden_blocks(doc):
                problem = check_golden(args.root, name, start, golden, renames, code)
                if problem:
                    bad += 1
                    print("FAIL " + problem)
                else:
                    ok += 1
            if ok + bad:
                print("%s %s: %d of %d tsr blocks and golden outputs as marked" % ("PASS" if bad == 0 else "FAIL", name, ok, ok + bad))
            passed, failed = passed + ok, failed + bad
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
