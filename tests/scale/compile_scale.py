#!/usr/bin/env python3
"""compile_scale.py — the compile-time and memory regression test of `make check`.

Generated programs (gen_program.py: an elementwise chain whose every definition uses the one
before twice, a deep MLP, a routine of many statements, a deep network whose layers all differ)
of 1 000 and 10 000 lines must compile within a time cap and a memory cap (default 60 s and
2048 MB of resident memory, measured by the kernel for the tsrc process and everything it
starts, the linker included; an address-space limit stops a runaway compile before it takes the
machine).  Each is compiled natively at -O3 (the routine split into parts and the parts'
identical kernels merged, cg_cpu.c and cg_llvm.c) and the executable must print exactly what the
reference executor prints; at 10 000 lines each also goes through the whole pipeline to the
loop IR (--emit=ir) and to an executable at -O0.  And the 1 000-line mlp and varied programs
must define few kernel functions in their -O3 LLVM IR, which the parts call (merging works,
whatever the machine's speed).

    python3 tests/scale/compile_scale.py --tsrc build/tsrc [--seconds 60] [--megabytes 2048]
                                         [--sizes 1000,10000]

One PASS/FAIL line per case, then "N passed, N failed".  Under a sanitizer build (a tsrc under
build/san/) the caps are tripled and no address-space limit is set (ASan reserves terabytes)."""
import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_program  # noqa: E402


def run_capped(argv, seconds, megabytes, address_limit, env=None):
    """Run argv; return (status or None on timeout, seconds, peak MB of it and its children, stderr)."""
    def limit():
        os.setsid()
        if address_limit:
            cap = (megabytes + 2048) << 20  # resident cap + room for the stack reservation, libLLVM
            resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit, env=env)
    try:
        out, err = proc.communicate(timeout=seconds)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        status = None
    elapsed = time.monotonic() - start
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024  # the largest child so far
    return status, elapsed, peak, out, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--megabytes", type=int, default=2048)
    ap.add_argument("--sizes", default="1000,10000")
    args = ap.parse_args()
    sanitized = os.sep + "san" + os.sep in os.path.abspath(args.tsrc)
    seconds = args.seconds * (3 if sanitized else 1)
    megabytes = args.megabytes * (3 if sanitized else 1)
    tsrc = os.path.abspath(args.tsrc)
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="tsrc-scale.") as tmp:
        for lines in (int(n) for n in args.sizes.split(",")):
            for kind in ("chain", "mlp", "routine", "varied"):
                src = os.path.join(tmp, f"{kind}{lines}.tsr")
                with open(src, "w") as f:
                    f.write("\n".join(gen_program.GENERATORS[kind](lines)) + "\n")
                exe = os.path.join(tmp, f"{kind}{lines}")
                modes = [("-O3 executable", ["-O3", "-o", exe])]
                if lines > 1000:
                    modes = [("--emit=ir", ["--emit=ir", "-o", exe + ".ir"]), ("-O0 executable", ["-O0", "-o", exe + "-O0"])] \
                        + modes
                for what, opts in modes:
                    name = f"compile scale: {lines}-line {kind}, {what}"
                    # Each case is measured alone: RUSAGE_CHILDREN keeps the largest child so far,
                    # so the cases run in a fresh Python child each.
                    status, elapsed, peak, _, err = run_capped(
                        [sys.executable, __file__, "--one", tsrc, str(seconds), str(megabytes),
                         "0" if sanitized else "1", src] + opts, seconds + 30, megabytes, False)
                    verdict = (err.decode(errors="replace").strip().splitlines() or ["no verdict"])[-1]
                    if status == 0 and verdict.startswith("ok "):
                        passed += 1
                        print(f"PASS {name} ({verdict[3:]})")
                    else:
                        failed += 1
                        print(f"FAIL {name} ({verdict})")
                        continue
                    if what != "-O3 executable":
                        continue
                    if lines <= 1000 and kind in ("mlp", "varied"):
                        passed, failed = check_merged(tsrc, src, lines, kind, exe, passed, failed)
                    # The parts of a split routine compute what the reference executor computes.
                    env = dict(os.environ, TSR_PRINT_EXACT="1")
                    native = subprocess.run([exe], capture_output=True, env=env, timeout=60)
                    interp = subprocess.run([tsrc, "--run", "--interp", src], capture_output=True, env=env, timeout=120)
                    name = f"compile scale: {lines}-line {kind}, native = reference executor"
                    if native.returncode == 0 and interp.returncode == 0 and native.stdout == interp.stdout \
                            and native.stdout:
                        passed += 1
                        print(f"PASS {name}")
                    else:
                        failed += 1
                        print(f"FAIL {name} (exit {native.returncode}/{interp.returncode}, outputs differ)")
        # Runaway compile-time evaluation stops at a budget, quickly and in little memory.
        for name in ("eval_too_long", "eval_too_much"):
            src = os.path.join(os.path.dirname(HERE), "shape_errors", name + ".tsr")
            cap_s, cap_mb = 10 * (3 if sanitized else 1), 1024 * (3 if sanitized else 1)
            status, elapsed, _, _, err = run_capped(
                [sys.executable, __file__, "--one", tsrc, str(cap_s), str(cap_mb), "0" if sanitized else "1",
                 src, "--check"], cap_s + 30, cap_mb, False)
            verdict = (err.decode(errors="replace").strip().splitlines() or ["no verdict"])[-1]
            label = f"compile scale: {name}.tsr stops at its budget within {cap_s} s and {cap_mb} MB"
            if verdict.startswith("exit 1 ") and "budget" in verdict:
                passed += 1
                print(f"PASS {label} ({verdict.split(':')[0][7:]})")
            else:
                failed += 1
                print(f"FAIL {label} ({verdict})")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


def check_merged(tsrc, src, lines, kind, exe, passed, failed):
    """The repeated layers of a deep network are compiled once (cg_cpu.c, "Splitting"): the -O3
    module defines a few kernel functions that the parts call, instead of a copy of every
    layer's code inlined into its part (about 200 lines of LLVM IR per source line)."""
    name = f"compile scale: {lines}-line {kind}, repeated kernels merged"
    run = subprocess.run([tsrc, "--emit=llvm", "-O3", "-o", exe + ".ll", src], capture_output=True, timeout=120)
    text = open(exe + ".ll").read() if run.returncode == 0 else ""
    kernels = sum(1 for line in text.splitlines() if line.startswith("define") and ".kernel" in line)
    size = text.count("\n")
    if run.returncode == 0 and 1 <= kernels <= 32 and size < 20 * lines:
        print(f"PASS {name} ({kernels} kernel functions, {size} lines of LLVM IR)")
        return passed + 1, failed
    print(f"FAIL {name} (exit {run.returncode}, {kernels} kernel functions, {size} lines of LLVM IR)")
    return passed, failed + 1


def one():
    """--one TSRC SECONDS MEGABYTES ADDRESS_LIMIT SOURCE OPTIONS…: compile once, print the verdict
    ("ok S s, M MB" or why not) as the last line of stderr."""
    tsrc, seconds, megabytes, address_limit, src = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5] == "1", sys.argv[6]
    status, elapsed, peak, _, err = run_capped([tsrc] + sys.argv[7:] + [src], seconds, megabytes, address_limit)
    if status is None:
        verdict = f"over the time cap: still running after {seconds:.0f} s"
    elif peak > megabytes:
        verdict = f"over the memory cap: {peak} MB > {megabytes} MB ({elapsed:.1f} s)"
    elif status != 0:
        first = (err.decode(errors="replace").strip().splitlines() or [""])[0]
        verdict = f"exit {status} after {elapsed:.1f} s, {peak} MB: {first}"
    else:
        verdict = f"ok {elapsed:.1f} s, {peak} MB"
    print(verdict, file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        sys.exit(one())
    sys.exit(main())
