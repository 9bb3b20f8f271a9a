"""python_views.py — a GPU model in the Python package (runtime/python/tsr), against the fake
CUDA driver (run by tests/gpu/fake_driver.sh): a NumPy view held across routines stays the
tensor, as on the CPU.  The fake driver runs no kernel, so the routine leaves `scores` on the
"GPU" as it was uploaded: 5 written through the view goes up before the first predict, 7 written
through the same view after it must go up before the second (it was lost: the buffer was no
longer marked host-newer), and both the held view and a fresh one then read 7.

    TSR_CUDA_DRIVER=libfakecuda.so python3 python_views.py PACKAGE_DIR LIBRARY

Exit status 0 when it holds; otherwise a message and 1."""
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, sys.argv[1])
import tsr  # noqa: E402

m = tsr.load(sys.argv[2])
held = m["scores"]
held[...] = 5.0
m.predict()
first = float(held[0, 0])
held[...] = 7.0
m.predict()
fresh, kept = float(m["scores"][0, 0]), float(held[0, 0])
if (first, fresh, kept) != (5.0, 7.0, 7.0):
    print(f"after the routines: held view {first} then {kept}, fresh view {fresh}; expected 5, 7, 7")
    sys.exit(1)
