#!/usr/bin/env python3
"""tests/native/dtype_half.py EXACT_OUTPUT — every value tests/native/dtype_half.tsr prints (a
TSR_PRINT_EXACT=1 run of the reference executor) against NumPy: f16 as np.float16, bf16 as
float32 rounded to nearest even in its top 16 bits, f32 arithmetic as np.float32, a double
rounded once to bf16 by exact comparison with its neighbours.  Prints each mismatch and
'N passed, M failed'; exits 1 on a mismatch."""
import math
import re
import sys

import numpy as np

f4, f2, u4, i4 = np.float32, np.float16, np.uint32, np.int32


def bf(a):
    """float32 values rounded to the nearest bf16 (ties to even), as float32."""
    u = np.atleast_1d(np.asarray(a, f4)).view(u4).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(u4).view(f4)


def bf_once(d):
    """doubles rounded once to the nearest bf16 (ties to even): the closest of the bf16 values
    around the double's float32, compared exactly as doubles."""
    out = []
    for v in np.ravel(d):
        top = int(np.array([v], f4).view(u4)[0]) & 0xFFFF0000
        near = [np.array([top + (k << 16)], np.int64).astype(u4).view(f4)[0] for k in (-1, 0, 1) if top + (k << 16) >= 0]
        out.append(min(near, key=lambda c: (abs(float(c) - v), (int(np.array([c], f4).view(u4)[0]) >> 16) & 1)))
    return np.array(out, f4).reshape(np.shape(d))


def printed(path):
    values, name = {}, None
    for line in open(path):
        m = re.match(r"^(\w+) : ", line)
        if m:
            name = m.group(1)
            values[name] = []
        elif name:
            values[name] += [float(t) for t in line.split()]
    return values


def main():
    got = printed(sys.argv[1])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        grid = np.arange(12.0).reshape(3, 4)
        x = f4(grid) / f4(7)
        xb, xh = bf(x).reshape(3, 4), x.astype(f2)
        wb = bf_once(np.array([0.3]))[0]
        expected = {
            "xd": bf(grid), "thirds": bf(bf(grid) / f4(3)), "xb": xb, "xh": xh,
            "pb": bf(bf(xb * xb) + f4(1)),
            "ph": (np.sqrt(xh.astype(f4)).astype(f2).astype(f4) - xh.astype(f4)).astype(f2),
            "colb": bf((xb[0] + xb[1]) + xb[2]),  # f32 accumulation in order, one rounding
            "mixed": xb + x, "both": xb + xh.astype(f4), "wide": xb.astype(np.float64),
            "big": (x * f4(50000)).astype(f2), "tiny": (x * f4(1e-6)).astype(f2), "tinyb": bf(x * f4(1e-40)),
            "ints": np.trunc(xh.astype(f4) * f4(100)).astype(i4),
            "prod": np.array([[bf(np.float32(sum(float(wb) * float(v) for v in row)))[0]] * 2 for row in xb]),
            "once": bf_once(x.astype(np.float64) * 1.0000001),
            "fromint": np.trunc(x * f4(1000)).astype(i4).astype(f2),
            "nan": np.full((3, 4), np.nan),
            "odd_bf16": np.full((3, 4), 1.0078125), "odd_f16": np.full((3, 4), 1.0009765625),
        }
    bad = []
    for name, want in expected.items():
        a = np.asarray(got.get(name, []), np.float64)
        b = np.asarray(want, np.float64).ravel()
        # %.9g shows 9 digits: a value matches when it is the printed form of the exact one
        same = a.shape == b.shape and all(
            (math.isnan(p) and math.isnan(q)) or p == q or abs(p - q) <= 5e-9 * abs(q) for p, q in zip(a, b))
        if not same:
            bad.append(f"{name}: printed {a.tolist()}, NumPy {b.tolist()}")
    print("\n".join(["FAIL " + b for b in bad] + [f"{len(expected) - len(bad)} passed, {len(bad)} failed"]))
    sys.exit(1 if bad else 0)


main()
