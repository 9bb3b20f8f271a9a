#!/usr/bin/env python3
"""launch_trace.py: whether a fake-driver trace of kernel launches (tests/gpu/fake_cuda.c, one
kernel name a line) is a run of whole routine calls of the program's manifest (tsrc --emit=ptx's
MODEL.json: each routine's launches in order).

Usage: python3 tests/gpu/launch_trace.py MANIFEST.json TRACE
Prints "N launches: K routine calls" and exits 0 when the trace splits into the launch lists
of routines (each call launching all of its kernels, in order); else prints where it stops
matching and exits 1.
"""
import json
import sys


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        manifest = json.load(f)
    with open(argv[2]) as f:
        trace = [line.strip() for line in f if line.strip()]
    routines = [(r["name"], r["launches"]) for r in manifest["routines"] if r["launches"]]
    # reach[i]: the fewest calls whose launches are exactly trace[:i] (None: no split)
    reach = [None] * (len(trace) + 1)
    reach[0] = 0
    furthest = 0
    for i in range(len(trace)):
        if reach[i] is None:
            continue
        furthest = max(furthest, i)
        for _, launches in routines:
            j = i + len(launches)
            if trace[i:j] == launches and (reach[j] is None or reach[j] > reach[i] + 1):
                reach[j] = reach[i] + 1
    if reach[len(trace)] is None:
        print("the launches stop matching the manifest's routines at launch %d of %d ('%s')" %
              (furthest + 1, len(trace), trace[furthest] if furthest < len(trace) else ""))
        return 1
    print("%d launches: %d routine calls" % (len(trace), reach[len(trace)]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
