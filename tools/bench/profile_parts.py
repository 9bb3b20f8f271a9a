#!/usr/bin/env python3
"""profile_parts.py -- a GPT step's kernel profile added up by the part of the model each kernel
comes from (make bench, BENCH_PROFILE=1; docs/performance.md, "Where the time goes").

    profile_parts.py SCHED_IR STDLIB_DIR ROUTINE [LABEL=]PROFILE [[LABEL=]PROFILE ...]

SCHED_IR is `tsrc --emit=sched-ir` of the program, STDLIB_DIR the stdlib/ whose files its
comments name, ROUTINE the profiled routine ("step"), and each PROFILE the standard error of a
run compiled with --profile and run with TSR_PROFILE_ALL=1 (every kernel listed; one file per
thread count, in the order of the table's columns; LABEL heads its column).

A kernel is found in the dump as kernel.c makes it: each top-level statement of the routine is
one, except that a statement touching a local started by the statement before joins it (a full
reduction's `l = ...; for ...; store`), and so does a scalar statement after a kernel of scalar
statements while the kernel touches at most 256 buffers; each statement in the body of a loop of
blocks (a reduction split into blocks) is grouped the same way, apart from the statements
around the loop, and runs once a block.  A kernel's time a step is its total time over the
run's steps, the fewest launches of any kernel.  Its part is where its nest's description comment points
(the last comment of the routine with a FILE:LINE, so a schedule's packing or tile nest goes
with the product it serves), mapped to the stdlib function that line is in; a kernel that only
packs copies (every buffer in its label a `.panels#` or `.rows#`, or the `.tiny#` counts of bf16
pairs) is a part of its own.  The script stops with a
message when the dump's kernel count is not the profile's.
"""
import collections
import re
import sys

PARTS = {
    "linear": "MLP products (linear: up- and down-projection, forward and gradients)",
    "gelu": "GELU (forward and gradient)",
    "_mlp_layers": "GELU (forward and gradient)",
    "attention": "attention (q/k/v/output projections, per-head scores and values, mask)",
    "layer_norm": "layer norms",
    "softmax": "softmax (exp, sum)",
    "sum_last": "row sums, shifts and scalings (softmaxes and layer norms)",
    "_minus_last": "row sums, shifts and scalings (softmaxes and layer norms)",
    "_times_last": "row sums, shifts and scalings (softmaxes and layer norms)",
    "max_last": "row sums, shifts and scalings (softmaxes and layer norms)",
    "_sum_kept": "row sums, shifts and scalings (softmaxes and layer norms)",
    "_minus_kept": "row sums, shifts and scalings (softmaxes and layer norms)",
    "_times_kept": "row sums, shifts and scalings (softmaxes and layer norms)",
    "embedding": "embedding gather and tied head",
    "unembed": "embedding gather and tied head",
}


def statements(lines, indent):
    """The statements of a block at `indent` spaces: (last comment with a FILE:LINE, first line,
    the lines of the statement's body)."""
    out, comment, body = [], None, None
    pad = " " * indent
    for line in lines:
        if not line.startswith(pad):
            continue
        if line.startswith(pad + " "):
            if body is not None:
                body.append(line)
            continue
        text = line[indent:]
        if text.startswith("#"):
            if re.search(r"at [\w.-]+\.tsr:\d+", text):
                comment = text
            continue
        body = []
        out.append((comment, text, body))
    return out


def group(items, kernels):
    """kernel.c's group(): a statement that touches a local the kernel being built started
    joins it, and so does a scalar statement after a kernel of scalar statements while the
    kernel touches at most SCALAR_KERNEL_BUFFERS (256) buffers or has a local."""
    local, scalars, held, held_local = None, False, set(), False
    for comment, text, _ in items:
        loop = text.startswith("for ") or text.startswith("call ")  # neither is a scalar statement
        started = re.match(r"(l\d+) = ", text)
        buffers = set(re.findall(r"([^\s(),\[\]]+)\[", text))
        if scalars and not loop and (held_local or len(held | buffers) <= 256):
            if started:
                local = started.group(1)
            held |= buffers
            held_local |= bool(started)
            continue
        held, held_local = buffers, bool(started)
        scalars = not loop
        if started:
            if local != started.group(1):
                local = started.group(1)
                kernels.append(comment)
            continue
        if text.startswith("for ") and local:
            scalars = False
            continue
        if local and re.search(r"\b%s\b" % local, text):
            local = None
            scalars = False
            continue
        local = None
        kernels.append(comment)


def kernel_comments(dump, routine):
    """The comment of each kernel of `routine`, in kernel.c's order: the runs of top-level
    statements between loops of blocks grouped, and each loop of blocks' body grouped alone."""
    lines = dump.splitlines()
    try:
        start = lines.index("function %s:" % routine)
    except ValueError:
        sys.exit("profile_parts: the dump has no function %s" % routine)
    end = next((k for k in range(start + 1, len(lines)) if lines[k].startswith("function ")), len(lines))
    kernels, run = [], []
    for comment, text, body in statements(lines[start + 1:end], 2):
        if re.match(r"for \S+ < .* blocks of \d+", text):
            group(run, kernels)
            run = []
            group([(c or comment, t, b) for c, t, b in statements(body, 4)], kernels)
        else:
            run.append((comment, text, body))
    group(run, kernels)
    return kernels


def definitions(path):
    """Line number -> the top-level definition it is in."""
    names, current = {}, "?"
    with open(path) as f:
        for number, line in enumerate(f, 1):
            m = re.match(r"(?:let%op|let%cd|let rec|let|operator)\s+(?:\(\s*)?([A-Za-z_][A-Za-z0-9_]*)", line)
            if m:
                current = m.group(1)
            names[number] = current
    return names


def part(comment, label, stdlib):
    if all(re.search(r"\.(panels|rows|tiny)#", b) for b in label.split(", ")):  # copies only, no tiles
        return "packing operands for the register tiles"
    m = re.search(r"at ([\w.-]+)\.tsr:(\d+)", comment or "")
    if not m:
        return "other"
    source, line = m.group(1), int(m.group(2))
    if source == "train":
        return "optimiser and gradient clipping (Train)"
    if source not in stdlib:
        return "the program itself (%s.tsr: residual adds, positions)" % source
    name = stdlib[source].get(line, "?")
    return PARTS.get(name, "the rest (%s.tsr: %s)" % (source, name))


def read_profile(path, routine):
    """Each kernel's microseconds a step and label, and the kernel count.  A step runs every
    kernel at least once, those inside a loop of blocks once a block: the steps are the fewest
    launches of any kernel."""
    rows, total_kernels = {}, None
    with open(path) as f:
        for line in f:
            head = re.match(r"profile of \S+: .* of (\d+) kernels", line)
            if head:
                total_kernels = int(head.group(1))
            m = re.match(r"\s*([\d.]+)\s+([\d.]+)%\s+(\d+)\s+([\d.]+)\s+" + re.escape(routine) + r" #(\d+)\s+(.*)", line)
            if m:
                rows[int(m.group(5))] = (float(m.group(1)), int(m.group(3)), m.group(6))
    steps = min((launches for _, launches, _ in rows.values()), default=1)
    return {k: (1000 * ms / steps, label) for k, (ms, _, label) in rows.items()}, total_kernels


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    dump_path, stdlib_dir, routine, profiles = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    with open(dump_path) as f:
        comments = kernel_comments(f.read(), routine)
    stdlib = {name: definitions("%s/%s.tsr" % (stdlib_dir, name)) for name in ("nn", "core", "train")}
    columns, labels = [], []
    for arg in profiles:
        label, _, path = arg.rpartition("=")
        labels.append(label or "column %d" % (len(labels) + 1))
        rows, total_kernels = read_profile(path, routine)
        if total_kernels != len(comments):
            sys.exit("profile_parts: %s lists %s kernels, the dump has %d in %s: not the same program"
                     % (path, total_kernels, len(comments), routine))
        times, counts = collections.Counter(), collections.Counter()
        for kernel, (us_per_step, label) in rows.items():
            p = part(comments[kernel], label, stdlib)
            times[p] += us_per_step
            counts[p] += 1
        columns.append((times, counts))
    first, counts = columns[0]
    total = sum(first.values())
    header = "| part of the step | kernels | " + " | ".join("%s ms" % label for label in labels)
    print(header + " | share (%s) |" % labels[0])
    print("|---|---:|" + "---:|" * len(columns) + "---:|")
    for name, us in first.most_common():
        cells = " | ".join("%.1f" % (c[0][name] / 1000) for c in columns)
        print("| %s | %d | %s | %.0f %% |" % (name, counts[name], cells, 100 * us / total if total else 0))
    cells = " | ".join("%.1f" % (sum(c[0].values()) / 1000) for c in columns)
    print("| **the step** | %d | %s | |" % (sum(counts.values()), cells))


if __name__ == "__main__":
    main()
