"""py_conv.py — the PyTorch side of the convolution benchmark of `make bench` (tools/bench.sh):
the two 5x5 convolutions of LeNet-5 of tools/bench/conv.tsr, batch 64, no bias, padding valid,
with torch.nn.functional.conv2d:
  layer 1: 64 images 28x28x1 -> 24x24x6;  layer 2: 64 maps 12x12x6 -> 8x8x16
each forward alone (kind conv_fwd) and forward then backward with the output gradient g
(kind conv_bwd: y = conv2d(x, w); y.backward(g), gradients of x and w, which start as None).

Usage: py_conv.py THREADS

The data are those of tools/bench/conv_tsrc.c (uniform() is common.h's bench_uniform, on the
channels-last arrays tsrc uses).  Each case is timed in both memory formats, NCHW (contiguous)
and channels last (torch.channels_last, which is tsrc's layout), and the faster is reported
(field layout=nchw or nhwc; both times are in an INFO line).  Checks: y, and the gradients of x
and w, against float64 NumPy references, every cell within float rounding of its sum (relative
to the sum of the magnitudes of its terms); the sums in the RESULT line are compared with tsrc's
by tools/bench/table.py.  Threads: torch.set_num_threads(THREADS); tools/bench.sh also sets
OMP_NUM_THREADS and, at 2 threads, OMP_WAIT_POLICY=PASSIVE.
"""
import os
import sys

threads = int(sys.argv[1])
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(threads)

import numpy as np  # noqa: E402  (after the environment is set)
from bench_timing import timed  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(threads)
GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1
BATCH, K = 64, 5
LAYERS = {1: (28, 28, 1, 6), 2: (12, 12, 6, 16)}  # input h, w, c; output channels


def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform(seed, shape, lo, hi):
    """common.h's bench_uniform: lo + (hi - lo)·u in double, rounded to float32 once."""
    z = mix(np.arange(int(np.prod(shape)), dtype=np.uint64) + np.uint64((seed * GOLDEN + 1) & M64))
    u = (z >> np.uint64(40)).astype(np.float64) / 16777216.0
    return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)


def windows(x, oh, ow):
    """x [n, h, w, c] -> [n, oh, ow, kh, kw, c], float64 (im2col as a view)."""
    s = x.strides
    return np.lib.stride_tricks.as_strided(x, (x.shape[0], oh, ow, K, K, x.shape[3]),
                                           (s[0], s[1], s[2], s[1], s[2], s[3]))


def reference(x, k, g):
    """y, dx, dk and the magnitudes of their terms, in float64, channels last (k: [o, kh, kw, c])."""
    n, h, w, c = x.shape
    oh, ow = h - K + 1, w - K + 1
    x64, k64, g64 = (a.astype(np.float64) for a in (x, k, g))
    win, awin = windows(x64, oh, ow), windows(np.abs(x64), oh, ow)
    y = np.einsum("npqabc,oabc->npqo", win, k64)
    ym = np.einsum("npqabc,oabc->npqo", awin, np.abs(k64))
    dk = np.einsum("npqabc,npqo->oabc", win, g64)
    dkm = np.einsum("npqabc,npqo->oabc", awin, np.abs(g64))
    dx, dxm = np.zeros_like(x64), np.zeros_like(x64)
    t = np.einsum("npqo,oabc->npqabc", g64, k64)
    tm = np.einsum("npqo,oabc->npqabc", np.abs(g64), np.abs(k64))
    for a in range(K):
        for b in range(K):
            dx[:, a:a + oh, b:b + ow, :] += t[:, :, :, a, b, :]
            dxm[:, a:a + oh, b:b + ow, :] += tm[:, :, :, a, b, :]
    return (y, ym), (dx, dxm), (dk, dkm)


def check(got, ref, terms):
    val, mag = ref
    err = float(np.max(np.abs(got.astype(np.float64) - val) / np.where(mag > 0, mag, 1)))
    return err <= 2.0 * terms * 5.96e-8 + 1e-6, err


def layer(num, backward):
    h, w, c, o = LAYERS[num]
    seed = 100 + 10 * num
    bound = 1.0 / np.sqrt(float(c * K * K))
    x = uniform(seed, (BATCH, h, w, c), -1.0, 1.0)            # NHWC, as tsrc stores it
    k = uniform(seed + 1, (o, K, K, c), -bound, bound)       # [o, kh, kw, c]
    g = uniform(seed + 2, (BATCH, h - K + 1, w - K + 1, o), -1.0, 1.0)
    best = None
    times = []
    for layout in ("nchw", "nhwc"):
        fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
        tx = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous(memory_format=fmt).requires_grad_(backward)
        tk = torch.from_numpy(k).permute(0, 3, 1, 2).contiguous(memory_format=fmt).requires_grad_(backward)
        tg = torch.from_numpy(g).permute(0, 3, 1, 2).contiguous(memory_format=fmt)
        if backward:
            def run():
                tx.grad = tk.grad = None
                y = F.conv2d(tx, tk)
                y.backward(tg)
                return y
        else:
            def run():
                with torch.no_grad():
                    return F.conv2d(tx, tk)
        y, reps, tbest, med = timed(run)
        times.append(f"{layout} {tbest * 1e6:.1f} us")
        if best is None or tbest < best[2]:
            nhwc = (lambda t: t.detach().permute(0, 2, 3, 1).numpy())
            out = [nhwc(y)] + ([nhwc(tx.grad), nhwc(tk.grad)] if backward else [])
            best = (layout, reps, tbest, med, out)
    layout, reps, tbest, med, out = best
    ry, rdx, rdk = reference(x, k, g)
    oh, ow = h - K + 1, w - K + 1
    ok, err = check(out[0], ry, K * K * c)
    fields = f"ysum={out[0].astype(np.float64).sum():.9g} ymag={np.abs(out[0].astype(np.float64)).sum():.9g}"
    if backward:
        for name, got, ref, terms in (("dx", out[1], rdx, K * K * o), ("dk", out[2], rdk, BATCH * oh * ow)):
            one, e = check(got, ref, terms)
            ok, err = ok and one, max(err, e)
            g64 = got.astype(np.float64)
            fields += f" {name}sum={g64.sum():.9g} {name}mag={np.abs(g64).sum():.9g}"
    kind = "conv_bwd" if backward else "conv_fwd"
    print(f"INFO conv torch: layer {num} {'forward+backward' if backward else 'forward'} at {threads} "
          f"thread{'s' if threads > 1 else ''}: {', '.join(times)} (best of each)")
    print(f"RESULT kind={kind} impl=torch n={num} threads={threads} reps={reps} best_s={tbest:.6g} "
          f"median_s={med:.6g} check={'ok' if ok else 'FAIL'} maxrel={err:.3g} layout={layout} {fields}",
          flush=True)
    return ok


status = 0
for num in (1, 2):
    for backward in (False, True):
        if not layer(num, backward):
            status = 3
sys.exit(status)
