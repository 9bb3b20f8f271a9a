"""single_launches.py MANIFEST.json — of a --emit=ptx manifest's routines (docs/gpu.md), prints
how many launches run one thread in one block, and how many of those follow another such
launch.  tests/run.sh uses it to check that consecutive scalar statements make one kernel
(compiler/sched/kernel.c)."""
import json, sys
m = json.load(open(sys.argv[1]))
single = {k["name"] for k in m["kernels"] if k["grid"] == [1, 1, 1] and k["block"] == [1, 1, 1]}
runs = launches = 0
for r in m["routines"]:
    prev = False
    for name in r["launches"]:
        cur = name in single
        runs += cur and prev
        launches += cur
        prev = cur
print(launches, runs)
