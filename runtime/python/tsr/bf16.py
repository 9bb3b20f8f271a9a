"""tsr.bf16 — bfloat16 values as NumPy holds them: uint16 bit patterns (docs/python.md).

    bits = m["w"]                          # a bf16 tensor: a uint16 view of its cells
    values = tsr.bf16_to_float32(bits)     # float32, exactly
    m["w"] = tsr.float32_to_bf16(values)   # bit patterns in (m["w"] = values rounds the same way)

NumPy has no bfloat16, so a model's bf16 tensors are uint16 arrays of the patterns (the top 16
bits of a float32); these convert them as the runtime does (runtime/tsr.h's tsr_bf16_to_f32,
tsr_f32_to_bf16 and tsr_f64_to_bf16): to float32 exactly, and from float32 or float64 to the
nearest bfloat16, ties to even, overflowing to infinity, keeping subnormals, a NaN becoming the
quiet NaN of its sign (0x7fc0 / 0xffc0).  A float64 is rounded once (through float32 rounded to
odd), never twice; other numbers (integers, float16) are taken as float64.  f16 tensors need
none of this: they are numpy.float16 arrays."""
import numpy as np

__all__ = ["bf16_to_float32", "float32_to_bf16"]


def bf16_to_float32(bits):
    """The float32 values of bfloat16 bit patterns `bits` (uint16, or integers in 0 … 65535), exactly."""
    bits = np.asarray(bits)
    if bits.dtype != np.uint16:
        if bits.dtype.kind not in "iu" or (bits.size and (bits.min() < 0 or bits.max() > 0xFFFF)):
            raise TypeError(f"bf16_to_float32 takes uint16 bit patterns, not an array of {bits.dtype}")
        bits = bits.astype(np.uint16)
    return np.asarray(bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def _odd_float32(values):
    """float64 `values` as float32 rounded to odd: truncated toward zero, the last bit set when
    inexact (tsr.h's tsr_f64_to_f32_odd), so that one more rounding to a narrower type is the
    only rounding."""
    with np.errstate(over="ignore", invalid="ignore"):
        r = values.astype(np.float32)
        bits = r.view(np.uint32).copy()
        inexact = ~np.isnan(values) & (r.astype(np.float64) != values)
        over = inexact & (np.abs(r.astype(np.float64)) > np.abs(values))
    bits[over] -= np.uint32(1)
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def float32_to_bf16(values):
    """The bfloat16 bit patterns (uint16) nearest to `values`, ties to even, as the runtime rounds."""
    values = np.asarray(values)
    if values.dtype != np.float32:
        if values.dtype.kind not in "biuf":
            raise TypeError(f"float32_to_bf16 takes numbers, not an array of {values.dtype}")
        values = _odd_float32(values.astype(np.float64))
    b = values.view(np.uint32)
    with np.errstate(over="ignore"):
        rounded = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = (b & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    quiet = (((b >> np.uint32(16)) & np.uint32(0x8000)) | np.uint32(0x7FC0)).astype(np.uint16)
    return np.where(nan, quiet, rounded)
