#!/usr/bin/env python3
"""layout.py — the shape of the source tree, checked by `make check` (tests/run.sh).

The compiler is one folder per pipeline stage (compiler/front, elab, infer, ir, sched, cg, with
compiler/base beneath them all and compiler/main.c the driver above); the runtime is flat.  This
test keeps the house in order as it grows:

  size       no .c or .h file of compiler/ or runtime/ has more than 1500 lines;
  includes   no cycle of #include between files (a header that, through others, includes
             itself), and the compiler reaches into the runtime only through its public header
             (runtime/tsr.h) and the model image's (runtime/image_format.h);
  calls      no cycle of calls between source files: from the built objects (nm), file A depends
             on file B when A uses a symbol that B defines.  Every cycle is printed with the
             symbol behind each edge.  Generated grammar code belongs to the file that drives
             it (build/gen/parser.c and lexer.c to compiler/front/parse.c, spec_parser.c and
             spec_lexer.c to compiler/front/spec.c): Lemon's actions call their builders back.
             The files of compiler/elab/ count as one: they are one evaluator, whose eval() and
             apply() recurse through all of them (an operator's spec argument is evaluated, a
             built-in applies a closure); their shared header is elab_internal.h.

usage: layout.py --objects BUILD/obj   (the objects of the current build; prints PASS/FAIL lines)
"""
import argparse
import collections
import os
import re
import subprocess
import sys

MAX_LINES = 1500
RUNTIME_HEADERS_FOR_COMPILER = {"runtime/tsr.h", "runtime/image_format.h"}
GENERATED_OWNER = {
    "gen/parser": "compiler/front/parse",
    "gen/lexer": "compiler/front/parse",
    "gen/spec_parser": "compiler/front/spec",
    "gen/spec_lexer": "compiler/front/spec",
}
# Folders whose files are one node of the call graph (see above).
ONE_UNIT = ("compiler/elab",)
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def sources(root):
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if name.endswith((".c", ".h")):
                yield os.path.normpath(os.path.join(folder, name))


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iteratively: the components of more than one node (or a self-loop)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges.get(succ, ())))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in edges.get(node, ()):
                    found.append(sorted(component))
    return found


def resolve_include(including, name):
    """The repository path of a quoted include, as the build's -iquote compiler -iquote . finds it."""
    for base in (os.path.dirname(including), "compiler", "."):
        candidate = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(candidate):
            return candidate
    return None  # a system or generated header


def check_sizes(files):
    problems = []
    for path in files:
        with open(path, errors="replace") as f:
            count = sum(1 for _ in f)
        if count > MAX_LINES:
            problems.append(f"{path} has {count} lines (at most {MAX_LINES}: split it by duty)")
    return problems


def check_includes(files):
    problems, edges = [], collections.defaultdict(set)
    for path in files:
        with open(path, errors="replace") as f:
            for line in f:
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve_include(path, m.group(1))
                if target is None:
                    continue
                edges[path].add(target)
                if path.startswith("compiler/") and target.startswith("runtime/") \
                        and target not in RUNTIME_HEADERS_FOR_COMPILER:
                    problems.append(f"{path} includes {target}: the compiler may include only "
                                    + " and ".join(sorted(RUNTIME_HEADERS_FOR_COMPILER)))
    for cycle in strongly_connected(sorted(edges), edges):
        problems.append("include cycle: " + " -> ".join(cycle))
    return problems


def object_symbols(obj):
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    defined, used = set(), set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TDBRCV":
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == "U":
            used.add(parts[1])
    return defined, used


def check_calls(objects_dir, files):
    """Cycles of calls among the files of one part (compiler, runtime)."""
    problems = []
    for part in ("compiler", "runtime"):
        units = {}  # node -> object
        for path in files:
            if path.startswith(part + "/") and path.endswith(".c"):
                units[path[:-2]] = os.path.join(objects_dir, path[:-2] + ".o")
        if part == "compiler":
            for generated, owner in GENERATED_OWNER.items():
                units[generated] = os.path.join(objects_dir, generated + ".o")
        missing = [obj for obj in units.values() if not os.path.isfile(obj)]
        if missing:
            problems.append(f"no object {missing[0]} (build first: make)")
            continue
        owner_of, uses = {}, {}
        for unit, obj in units.items():
            node = GENERATED_OWNER.get(unit, unit)
            node = next((folder for folder in ONE_UNIT if node.startswith(folder + "/")), node)
            defined, used = object_symbols(obj)
            for symbol in defined:
                owner_of[symbol] = node
            uses.setdefault(node, set()).update(used)
        edges, why = collections.defaultdict(set), {}
        for node, used in uses.items():
            for symbol in sorted(used):
                target = owner_of.get(symbol)
                if target and target != node:
                    edges[node].add(target)
                    why.setdefault((node, target), symbol)
        for cycle in strongly_connected(sorted(uses), edges):
            members = set(cycle)
            links = [f"{a} -> {b} ({why[a, b]})" for a in cycle for b in sorted(edges[a]) if b in members]
            problems.append("call cycle: " + "; ".join(links))
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", required=True, help="the build's object folder (build/obj)")
    args = parser.parse_args()
    files = [p for root in ("compiler", "runtime") for p in sources(root)]
    failed = 0
    for name, problems in (("file sizes", check_sizes(files)),
                           ("includes", check_includes(files)),
                           ("calls", check_calls(args.objects, files))):
        if problems:
            failed += 1
            print(f"FAIL tests/layout.py: {name}")
            for problem in problems:
                print("    " + problem)
        else:
            print(f"PASS tests/layout.py: {name}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
