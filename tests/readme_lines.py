#!/usr/bin/env python3
"""readme_lines.py — every shell line of README.md's command blocks runs as written.

A newcomer copies the README's ```sh blocks line by line; each of those lines must work.  This
test runs every one of them, as written, with `sh -c`, from the top of a scratch copy of the
source tree (the tracked files, modification times kept) whose `build/` holds the built compiler
and runtime (hard links to the build directory of the tsrc under test, or copies where the
scratch directory is on another file system; either way make finds them up to date), and
requires exit status 0.  The lines run in the README's order in one scratch tree, so
a line may use what an earlier one made (`mlp.o` before the `cc` that links it).  Lines that
share no state still run in order; a line's output is shown when it fails.

One line cannot run here as written: `make check`, which is the command running this test.  For
it the test runs `make -n check` (make's dry run: the target exists and its recipe expands) and
says so; it is counted only when that succeeds.

Prints one PASS/FAIL line per command, then "N passed, N failed"."""
import argparse, os, re, shutil, subprocess, sys, tempfile

# The command that runs this test, and what is run in its place.
SELF = {"make check": "make -n check"}


def commands(path):
    """(line number, command) for each command of each ```sh block: comments stripped, lines
    ending in a backslash joined to the next."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(sh|bash|shell|console)\s*$", lines[i])
        i += 1
        if not fence:
            continue
        pending, first = "", 0
        while i < len(lines) and not lines[i].startswith("```"):
            text = re.sub(r"(^|\s)#.*$", "", lines[i]).rstrip()
            if text:
                if not pending:
                    first = i + 1
                if text.endswith("\\"):
                    pending += text[:-1] + " "
                else:
                    out.append((first, (pending + text).strip()))
                    pending = ""
            i += 1
        i += 1
    return out


def scratch_tree(root, build, dest):
    """A copy of the tracked files of `root` in `dest`, and `dest/build` of hard links to `build`."""
    listed = subprocess.run(["git", "-C", root, "ls-files", "-z"], capture_output=True)
    if listed.returncode == 0 and listed.stdout:
        files = [f for f in listed.stdout.decode().split("\0") if f]
    else:  # not a git checkout (an unpacked tarball): everything but build/
        files = []
        for d, subdirs, names in os.walk(root):
            rel = os.path.relpath(d, root)
            if rel == ".":
                subdirs[:] = [s for s in subdirs if s not in ("build", ".git")]
            files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    for f in files:
        src = os.path.join(root, f)
        if not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, f)) or dest, exist_ok=True)
        shutil.copy2(src, os.path.join(dest, f))
    def link_or_copy(src, dst):  # a hard link where the scratch tree shares the file system
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)
    # What make needs to find tsrc and the runtime up to date; not the other targets' trees.
    others = {"fuzz", "fuzz-replay", "bench", "bench-gpu", "gpu", "san", "unit", "demo"}
    def ignore(d, names):
        return [n for n in names if n in others] if os.path.samefile(d, build) else []
    shutil.copytree(build, os.path.join(dest, "build"), copy_function=link_or_copy, symlinks=True, ignore=ignore)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--timeout", type=int, default=300)
    args = ap.parse_args()
    root = os.path.dirname(os.path.abspath(args.readme))
    build = os.path.dirname(os.path.abspath(args.tsrc))
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="tsrc-readme.") as work:
        scratch_tree(root, build, work)
        env = dict(os.environ)
        for var in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS"):  # not the outer make's jobs
            env.pop(var, None)
        for line, cmd in commands(args.readme):
            run = SELF.get(cmd, cmd)
            shown = cmd if run == cmd else "%s (as %s: it is the command running this test)" % (cmd, run)
            try:
                p = subprocess.run(["sh", "-c", run], cwd=work, env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=args.timeout)
                status, output = p.returncode, (p.stdout + p.stderr).decode(errors="replace")
            except subprocess.TimeoutExpired:
                status, output = "timeout", ""
            if status == 0:
                passed += 1
                print("PASS README.md:%d: %s" % (line, shown))
            else:
                failed += 1
                print("FAIL README.md:%d: %s (exit %s)" % (line, shown, status))
                for text in output.splitlines()[-20:]:
                    print("    " + text)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
