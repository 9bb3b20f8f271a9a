"""bench_data.py: the deterministic numbers the Python sides of `make bench` share with the C
drivers (tools/bench/common.h): bench_mix's splitmix64 finaliser, its streams, and
bench_uniform's values, so PyTorch gets exactly the data and parameters tsrc gets.  Import it
after setting the thread variables (it imports NumPy)."""
import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
M64 = (1 << 64) - 1


def mix(z):
    """splitmix64's finaliser on uint64 arrays (wrapping), as common.h's bench_mix."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def stream(seed, count):
    """bench_mix(seed·GOLDEN + i + 1) for i < count."""
    return mix(np.arange(count, dtype=np.uint64) + np.uint64((seed * GOLDEN + 1) & M64))


def uniform(seed, shape, lo, hi):
    """common.h's bench_uniform: lo + (hi - lo)·u in double, rounded to float32 once."""
    u = (stream(seed, int(np.prod(shape))) >> np.uint64(40)).astype(np.float64) / 16777216.0
    return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)
