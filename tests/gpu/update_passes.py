#!/usr/bin/env python3
"""update_passes.py MANIFEST PARAM... — for each parameter named, the launches of an --emit=ptx
manifest (docs/gpu.md) that write its optimiser state or itself: the number of launches that
write any of PARAM, PARAM.master, PARAM.m and PARAM.v, and whether one launch writes all that
exist.  Prints "PARAM:N:one" or "PARAM:N:split" for each, space-separated, then the manifest's
number of kernels."""
import json
import sys

m = json.load(open(sys.argv[1]))
names = {b["id"]: b["name"] for b in m["buffers"]}
writes = [{names[p["buffer"]] for p in k["params"] if p.get("buffer") is not None and p.get("writes")}
          for k in m["kernels"]]
out = []
for param in sys.argv[2:]:
    state = {param, param + ".master", param + ".m", param + ".v"}
    present = set().union(*writes) & state
    touching = [w for w in writes if w & state]
    out.append("%s:%d:%s" % (param, len(touching), "one" if any(present <= w for w in touching) else "split"))
print(" ".join(out), len(m["kernels"]))
