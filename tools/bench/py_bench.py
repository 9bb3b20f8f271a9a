"""py_bench.py — the NumPy and PyTorch sides of `make bench` (tools/bench.sh).

Usage: py_bench.py numpy|torch THREADS N [N ...]     matmul C = A·B, n×n float32, per N
       py_bench.py numpy THREADS nt N [N ...]        C = X·Wᵀ, the compose form (x @ w.T)
       py_bench.py numpy THREADS tn N [N ...]        C = Aᵀ·B, the transposed operand (a.T @ b)
       py_bench.py numpy THREADS bmm BxN [BxN ...]   B products of n×n matrices (np.matmul)
       py_bench.py numpy|torch THREADS ew COUNT      y = relu(a*b + c) - 0.5*a over COUNT floats

Prints the same RESULT lines as the C drivers.  Thread counts must be fixed before the library
starts its pool, so tools/bench.sh also sets OPENBLAS_NUM_THREADS / OMP_NUM_THREADS (and, for
PyTorch at 2 threads, OMP_WAIT_POLICY=PASSIVE) in the environment; this script sets them again
before the import, for runs by hand.
"""
import os
import sys

impl, threads = sys.argv[1], int(sys.argv[2])
args = sys.argv[3:]
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(threads)

import numpy as np  # noqa: E402  (after the environment is set)
from bench_timing import timed  # noqa: E402


if impl == "torch":
    import torch  # noqa: E402

    torch.set_num_threads(threads)


def report(kind, name, n, reps, best, med, ok, err):
    print(f"RESULT kind={kind} impl={name} n={n} threads={threads} reps={reps} best_s={best:.6g} "
          f"median_s={med:.6g} check={'ok' if ok else 'FAIL'} maxrel={err:.3g}", flush=True)


def check_matmul(a, b, c, n):
    rng = np.random.default_rng(7)
    ii = np.concatenate(([0, 0, n - 1, n - 1], rng.integers(0, n, 252)))
    jj = np.concatenate(([0, n - 1, 0, n - 1], rng.integers(0, n, 252)))
    a64, b64 = a[ii].astype(np.float64), b[:, jj].astype(np.float64)
    prod = a64 * b64.T
    ref, mag = prod.sum(axis=1), np.abs(prod).sum(axis=1)
    err = float(np.max(np.abs(c[ii, jj].astype(np.float64) - ref) / np.maximum(mag, 1e-300)))
    return err <= 2.0 * n * 5.96e-8 + 1e-6, err


def blas_libraries():
    """The BLAS and LAPACK libraries this process has mapped (NumPy's are chosen by Debian's
    alternatives: the reference BLAS, or OpenBLAS once libopenblas is installed)."""
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            name = path.rsplit("/", 1)[-1]
            if "blas" in name or "lapack" in name or "mkl" in name:
                libs.add(os.path.realpath(path))
    return ", ".join(sorted(libs)) or "none found"


rng = np.random.default_rng(1)
if args[0] == "ew":
    count = int(args[1])
    a, b, c = (rng.uniform(-1, 1, count).astype(np.float32) for _ in range(3))
    ref = np.maximum(a * b + c, np.float32(0)) - np.float32(0.5) * a
    if impl == "numpy":
        def unfused():
            return np.maximum(a * b + c, np.float32(0)) - np.float32(0.5) * a

        _, reps, best, med = timed(unfused)
        report("ew", "numpy", count, reps, best, med, True, 0.0)
        t, u, y = (np.empty_like(a) for _ in range(3))

        def inplace():
            np.multiply(a, b, out=t)
            np.add(t, c, out=t)
            np.maximum(t, np.float32(0), out=t)
            np.multiply(a, np.float32(0.5), out=u)
            return np.subtract(t, u, out=y)

        out, reps, best, med = timed(inplace)
        err = float(np.max(np.abs(out - ref)))
        report("ew", "numpy-out", count, reps, best, med, err <= 1e-6, err)
    else:
        ta, tb, tc = (torch.from_numpy(x) for x in (a, b, c))
        out, reps, best, med = timed(lambda: torch.relu(ta * tb + tc) - 0.5 * ta)
        err = float(np.max(np.abs(out.numpy() - ref)))
        report("ew", "torch", count, reps, best, med, err <= 1e-6, err)
elif args[0] in ("nt", "tn"):
    # NumPy hands the transposed view to sgemm with the matching transpose flag (no copy).
    kind = "matmul_compose" if args[0] == "nt" else "matmul_tn"
    for n in map(int, args[1:]):
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        if args[0] == "nt":  # a plays x [batch, in], b plays w [out, in]: y = x @ w.T
            out, reps, best, med = timed(lambda: a @ b.T)
            ok, err = check_matmul(a, b.T, out, n)
        else:
            out, reps, best, med = timed(lambda: a.T @ b)
            ok, err = check_matmul(a.T, b, out, n)
        report(kind, impl, n, reps, best, med, ok, err)
elif args[0] == "bmm":
    for size in args[1:]:
        nb, n = map(int, size.split("x"))
        a = rng.uniform(-1, 1, (nb, n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (nb, n, n)).astype(np.float32)
        out, reps, best, med = timed(lambda: np.matmul(a, b))
        ok, err = True, 0.0
        for q in sorted({0, nb // 3, 2 * nb // 3, nb - 1}):
            one, e = check_matmul(a[q], b[q], out[q], n)
            ok, err = ok and one, max(err, e)
        report("bmm", impl, size, reps, best, med, ok, err)
else:
    for n in map(int, args):
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        if impl == "numpy":
            out, reps, best, med = timed(lambda: a @ b)
        else:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            out, reps, best, med = timed(lambda: torch.mm(ta, tb))
            out = out.numpy()
        ok, err = check_matmul(a, b, out, n)
        report("matmul", impl, n, reps, best, med, ok, err)
    if impl == "numpy":
        print(f"INFO NumPy BLAS: {blas_libraries()}")
