"""binding.py — the Python package runtime/python/tsr over libraries from `tsrc --shared`
(docs/python.md), run by tests/run.sh:

    python3 tests/python/binding.py --tsrc build/tsrc

Checks: --shared writes the library and its manifest and exports the model's C API alone; tsr.load gives
tensors as NumPy views of the state's buffers (no copy: a write through one is what the routine
reads), routines as methods, the MLP's scores as NumPy computes them from the model's own
weights; two loads of one library and a second library in one process are independent; run-time
sizes set from Python reshape the views, and a mismatch is a tsr.Error with the runtime's
message; assignment checks shapes; save and load round-trip the parameters between two models;
a closed model (its routines, sizes and shapes) and an unknown routine are errors; a view keeps
its model's state alive (after close() too); a new run-time size is refused while a view of the
old storage is left; None or a string assigned to a tensor and a NUL in a checkpoint path are
errors; a library rebuilt at a path already loaded loads as rebuilt; tsr.compile caches by source
and by CPU and raises tsrc's errors; a manifest of another compile or another module is refused;
sem.tsr compiles as module m_sem; the arrays export __dlpack__; `pip install` of runtime/python works offline
(into a scratch directory; skipped with a SKIP line where pip is missing).  And: close() or a new
run-time size from another thread while a routine runs waits for it (it crashed); `del m` frees
the state with the cyclic collector off; the same rebuilt library loaded again maps no new copy
and starts no threads; manifests without image_checksum, with a buffer, dims, dtype or symbol
not the image's, or without "tensors" are tsr.Error naming the file; ragged lists, integers
beyond int64, a tsrc that is not executable, a cache that cannot be a directory and options as
one string; every use of a closed model but repr/name/closed is a tsr.Error, and copy/pickle too; m.options
reads and sets the program's options; tsr.load(..., data=) reads data items from other files;
m.init_from reads the parameters a checkpoint shares; tsr.set_num_threads reaches every library's
pool.  Prints PASS/FAIL lines and "N passed, N failed"."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(ROOT, "runtime", "python"))
import tsr  # noqa: E402

counts = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    counts["passed" if ok else "failed"] += 1
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else "\n    " + str(detail)[:600]))


def raises(kind, fn, needle=""):
    try:
        fn()
    except kind as e:
        return needle in str(e), str(e)
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"
    return False, "no exception"


def python(code, *args):
    """Run `code` in a Python of its own with the package on its path (a crash is its exit status)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "runtime", "python"), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", required=True)
    tsrc = os.path.abspath(ap.parse_args().tsrc)
    with tempfile.TemporaryDirectory(prefix="tsrc-python.") as d:
        lib = os.path.join(d, "libmlp.so")
        p = subprocess.run([tsrc, "--shared", os.path.join(ROOT, "docs/examples/mlp_lib.tsr"), "-o", lib],
                           capture_output=True, text=True)
        check(p.returncode == 0 and os.path.exists(lib) and os.path.exists(os.path.join(d, "libmlp.json")),
              "tsrc --shared writes libmlp.so and libmlp.json", p.stderr)
        nm = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True).stdout
        exported = sorted(line.split()[-1] for line in nm.splitlines() if line.strip())
        check(exported == sorted(["libmlp__image", "libmlp__image_size", "libmlp_create", "libmlp_create_data", "libmlp_destroy",
                                  "libmlp_init_from", "libmlp_last_error", "libmlp_load", "libmlp_num_threads", "libmlp_option", "libmlp_predict",
                                  "libmlp_save", "libmlp_set_num_threads", "libmlp_set_option",
                                  "libmlp_set_symbol"]),
              "the library exports the model's C API and nothing else (the runtime inside is hidden)", exported)

        olib = os.path.join(d, "libopts.so")
        p = subprocess.run([tsrc, "--shared", os.path.join(ROOT, "tests/native/object_options.tsr"), "-o", olib],
                           capture_output=True, text=True)
        o = tsr.load(olib)
        check(p.returncode == 0 and {k: o.options[k] for k in o.options} == {"lr": 0.1, "steps": 3}
              and isinstance(o.options["steps"], int), "m.options reads the program's options (an integer one as an int)",
              p.stderr + repr(o.options))
        o.options["lr"] = 0.25
        o.train()
        check(o["w"].tolist() == [0.5, 1.0] and o.options["lr"] == 0.25, "an option set from Python is what the routine reads",
              o["w"])
        o.options["steps"] = 7.0
        check(o.options["steps"] == 7, "an integer option takes a whole float, as the C setter does", o.options["steps"])
        ok0, why0 = raises(tsr.Error, lambda: o.options.__setitem__("lr", 10**400), "beyond")
        check(ok0, "a Python integer beyond the doubles is a tsr.Error", why0)
        ok1, why1 = raises(tsr.Error, lambda: o.options.__setitem__("steps", 2.5), "needs an integer")
        ok2, why2 = raises(tsr.Error, lambda: o.options.__setitem__("lr", 1e39), "beyond f32's range")
        ok3, why3 = raises(KeyError, lambda: o.options.__setitem__("rate", 1), "lr, steps")
        check(ok1 and ok2 and ok3 and o.options["lr"] == 0.25, "an option refuses a value it cannot take, and an unknown "
              "name is a KeyError naming the options", (why1, why2, why3))
        o.close()

        rlib = os.path.join(d, "librdata.so")
        p = subprocess.run([tsrc, "--shared", os.path.join(ROOT, "tests/native/runtime_data.tsr"), "-o", rlib],
                           capture_output=True, text=True)
        seven = os.path.join(d, "seven.npy")
        np.save(seven, np.arange(21, dtype=np.float32).reshape(7, 3))
        r = tsr.load(rlib, data={"xs": seven})
        check(p.returncode == 0 and r["xs"].shape == (7, 3) and r["xs"][6, 2] == 20,
              "tsr.load(..., data={name: path}) reads a data item from another file (its run-time length too)",
              p.stderr + repr(r["xs"].shape))
        r.close()
        ok, why = raises(tsr.Error, lambda: tsr.load(rlib, data={"ys": seven}), "no data named 'ys' (its data: xs)")
        check(ok, "data= naming an item the program lacks is a tsr.Error naming its data", why)
        ok1, why1 = raises(tsr.Error, lambda: tsr.load(rlib, data={"xs\0zz": seven}), "data is a dict")
        ok2, why2 = raises(tsr.Error, lambda: tsr.load(rlib, data={"xs": None}), "each file is a path")
        ok3, why3 = raises(tsr.Error, lambda: tsr.load(rlib, data=[("xs", seven)]), "data is a dict")
        check(ok1 and ok2 and ok3, "data= with a NUL in a name, a file that is no path, or no dict is a tsr.Error",
              (why1, why2, why3))
        r = tsr.load(rlib)
        ok, why = raises(tsr.Error, lambda: setattr(r.sizes, "xs_b", 3), "set one by name")
        check(ok, "an attribute set on m.sizes (m.options) is a tsr.Error, not a silent no-op", why)
        r.close()

        glib = os.path.join(d, "libmlpgpu.so")
        p = subprocess.run([tsrc, "--shared", "--target=cuda", os.path.join(ROOT, "docs/examples/mlp_lib.tsr"), "-o", glib],
                           capture_output=True, text=True)
        gnm = subprocess.run(["nm", "-D", "--defined-only", glib], capture_output=True, text=True).stdout
        check(p.returncode == 0 and " T libmlpgpu_host_buffer" in gnm and " T libmlpgpu_sync_device" in gnm,
              "--shared --target=cuda builds a GPU model's library, with host_buffer and the syncs", p.stderr + gnm)
        try:
            g = tsr.load(glib, seed=1)
        except tsr.Error as e:  # no GPU here: the runtime's message, not a crash
            check("CUDA" in str(e), "loading a GPU model without a GPU is a tsr.Error saying why", str(e))
        else:
            xg = np.random.default_rng(0).normal(size=(32, 10)).astype(np.float32)
            g["features"] = xg
            g.predict()
            want = np.maximum(xg @ g["w1"].T + g["b1"], 0) @ g["w2"].T
            check(np.allclose(g["scores"], want, rtol=1e-5, atol=1e-5), "a GPU model from Python: host views, "
                  "the routine on the GPU, NumPy's scores", np.abs(g["scores"] - want).max())
            g.close()

        m = tsr.load(lib, seed=1)
        x = np.random.default_rng(0).normal(size=(32, 10)).astype(np.float32)
        m["features"] = x
        m.predict()
        w1, b1, w2 = m["w1"], m["b1"], m["w2"]
        want = np.maximum(x @ w1.T + b1, 0) @ w2.T
        check(m["scores"].shape == (32, 3) and np.allclose(m["scores"], want, rtol=1e-5, atol=1e-5),
              "m.predict() gives NumPy's scores from the model's own weights", np.abs(m["scores"] - want).max())
        view = m["w1"]
        check(np.shares_memory(view, m["w1"]) and view.dtype == np.float32, "tensors are float32 views, not copies")
        view[...] = 0
        m.predict()
        check(np.allclose(m["scores"], np.maximum(b1, 0) @ w2.T), "a write through a view is what the routine reads")

        twin = tsr.load(lib, seed=2)
        check(not np.array_equal(twin["w2"], m["w2"]) and not np.shares_memory(twin["w2"], m["w2"]),
              "a second load of the library has its own state (seed 2's parameters)")
        ok, why = raises(ValueError, lambda: m.__setitem__("features", np.zeros((31, 10))), "[32, 10]")
        check(ok, "assigning a value of another shape is a ValueError naming both shapes", why)
        ok, why = raises(tsr.Error, lambda: m.run("train"), "no routine 'train'")
        check(ok, "an unknown routine is a tsr.Error", why)

        check(m.seed == 1 and m.runs == 2 and twin.seed == 2 and twin.runs == 0,
              "m.seed and m.runs read the state's seed and its count of routine runs", (m.seed, m.runs))
        for _ in range(3):
            twin.predict()
        path = os.path.join(d, "mlp.npz")
        twin.save(path)
        m.load(path)
        check(np.array_equal(m["w1"], twin["w1"]) and np.array_equal(m["w2"], twin["w2"]),
              "save and load carry the parameters from one model to another")
        check(m.seed == 2 and m.runs == 3, "a checkpoint of a run further on brings its seed and run count", (m.seed, m.runs))
        m.seed, m.runs = 5, 1
        check(m.seed == 5 and m.runs == 1, "m.seed and m.runs are set as tsr_state's fields", (m.seed, m.runs))
        ok, why = raises(tsr.Error, lambda: setattr(m, "seed", -1), "out of the range")
        check(ok, "a negative seed is a tsr.Error", why)
        ok, why = raises(tsr.Error, lambda: m.load(os.path.join(d, "missing.npz")), "missing.npz")
        check(ok, "loading a missing checkpoint is a tsr.Error with the runtime's message", why)

        # set_num_threads reaches every library's own pool, and a library loaded later; the
        # scores are the same bits at 1 and 2 threads; 0 is the default again.
        m.predict()
        scores = m["scores"].copy()
        tsr.set_num_threads(1)
        alib = os.path.join(d, "libaffine.so")
        subprocess.run([tsrc, "--shared", os.path.join(ROOT, "tests/native/affine.tsr"), "-o", alib], check=True)
        later = tsr.load(alib)
        threads = (tsr.get_num_threads(), m._api.num_threads(), later._api.num_threads())
        m.predict()
        one = m["scores"].copy()
        tsr.set_num_threads(2)
        m.predict()
        check(threads == (1, 1, 1) and m._api.num_threads() == 2 and later._api.num_threads() == 2 and
              np.array_equal(one, m["scores"]) and np.array_equal(one, scores),
              "tsr.set_num_threads sets every loaded library's thread count (and a library loaded later's); "
              "the same scores at 1 and 2 threads", threads)
        tsr.set_num_threads(0)
        default = int(os.environ.get("TSR_NUM_THREADS") or 0) or os.sysconf("SC_NPROCESSORS_ONLN")
        ok, why = raises(tsr.Error, lambda: tsr.set_num_threads(-1), "out of the range")
        check(tsr.get_num_threads() == min(default, 256) and ok, "tsr.set_num_threads(0) returns to the default "
              "(TSR_NUM_THREADS, else the online CPUs); a negative count is a tsr.Error", (tsr.get_num_threads(), why))
        later.close()

        # A library of an older tsrc, without the API's later functions (here libmlp.so with their
        # names changed in its symbol table), still loads and runs; what it lacks is a tsr.Error
        # that says to rebuild it, and tsr.set_num_threads passes it by.
        older = os.path.join(d, "libolder.so")
        with open(lib, "rb") as f:
            image = f.read()
        for name in (b"libmlp_init_from", b"libmlp_num_threads", b"libmlp_set_num_threads", b"libmlp_create_data"):
            image = image.replace(name + b"\0", name[:-1] + b"X\0")
        with open(older, "wb") as f:
            f.write(image)
        shutil.copy(os.path.join(d, "libmlp.json"), os.path.join(d, "libolder.json"))
        old = tsr.load(older, seed=1)
        old["features"] = x
        old.predict()
        tsr.set_num_threads(1)
        ok, why = raises(tsr.Error, lambda: old.init_from(path), "does not export libmlp_init_from: it was built by an "
                         "older tsrc; build it again")
        check(ok and np.allclose(old["scores"], np.maximum(x @ old["w1"].T + old["b1"], 0) @ old["w2"].T, atol=1e-5) and
              tsr.get_num_threads() == 1, "a library of an older tsrc loads and runs; init_from is a tsr.Error saying to "
              "rebuild it", why)
        tsr.set_num_threads(0)
        old.close()

        # init_from: the parameters the file holds, the others and the seed and counters kept
        part = os.path.join(d, "part.npz")
        first = np.full_like(m["w1"], 0.25)
        np.savez(part, w1=first, b1=np.ones_like(m["b1"]), extra=np.zeros(3, np.float32))
        w2_before, seed_before, runs_before = m["w2"].copy(), m.seed, m.runs
        read = m.init_from(part)
        check(read == 2 and np.array_equal(m["w1"], first) and np.array_equal(m["b1"], np.ones_like(m["b1"])) and
              np.array_equal(m["w2"], w2_before) and (m.seed, m.runs) == (seed_before, runs_before),
              "m.init_from reads the parameters the file holds (2), keeps the others, the seed and the counters",
              (read, m.seed, m.runs))
        none = os.path.join(d, "none.npz")
        np.savez(none, other=np.zeros(3, np.float32))
        ok, why = raises(tsr.Error, lambda: m.init_from(none), "holds none of the 3 parameters")
        check(ok and np.array_equal(m["w1"], first), "m.init_from of a file holding none of the parameters is a "
              "tsr.Error that changes nothing", why)
        np.savez(part, w1=np.zeros((3, 3), np.float32), b1=np.zeros_like(m["b1"]))
        ok, why = raises(tsr.Error, lambda: m.init_from(part), "w1")
        check(ok and np.array_equal(m["w1"], first) and np.array_equal(m["b1"], np.ones_like(m["b1"])),
              "m.init_from of a parameter in another shape is a tsr.Error that changes nothing", why)

        rlib = os.path.join(d, "libsizes.so")
        p = subprocess.run([tsrc, "--shared", "--name=sizes", os.path.join(ROOT, "tests/native/runtime_mlp.tsr"), "-o", rlib],
                           capture_output=True, text=True)
        check(p.returncode == 0, "tsrc --shared --name=sizes for a program with run-time sizes", p.stderr)
        r = tsr.load(rlib)
        ok, why = raises(tsr.Error, r.predict, "x.b")
        check(ok, "a routine run before its run-time size is set is a tsr.Error naming the size", why)
        ok, why = raises(tsr.Error, lambda: r["x"], "no storage yet")
        check(ok, "a tensor of an unset size has no view yet: a tsr.Error", why)
        r.sizes["x.b"] = 37
        r.sizes["t.b"] = 37
        check(r.shape("x") == (37, 784) and r["x"].shape == (37, 784) and r.sizes["x.b"] == 37,
              "a run-time size set from Python shapes the views")
        r["x"] = np.ones((37, 784), np.float32)
        r.predict()
        check(r["scores"].shape == (37, 10) and np.isfinite(r["scores"]).all(), "the routine runs at the size set")
        r.sizes["t.b"] = 5
        ok, why = raises(tsr.Error, r.check, "t.b")
        check(ok, "mismatched sizes are a tsr.Error with the runtime's message", why)
        for bad, needle in ((2.9, "takes an integer"), ("1", "takes an integer"), (True, "takes an integer"),
                            (2**64 + 3, "out of the range")):
            ok, why = raises(tsr.Error, lambda: r.sizes.__setitem__("x.b", bad), needle)
            check(ok and r.sizes["x.b"] == 37, f"a run-time size set to {bad!r} is a tsr.Error and changes nothing", why)
        r.sizes["x.b"] = np.int64(37)
        check(r.sizes["x.b"] == 37, "a NumPy integer sets a run-time size")
        # A new length frees the old storage: refused while a view of it (here a slice) is left.
        part = r["x"][:2]
        r.sizes["x.b"] = 37  # the same length keeps the storage
        ok, why = raises(tsr.Error, lambda: r.sizes.__setitem__("x.b", 38), "views of the old are left")
        check(ok and r.sizes["x.b"] == 37, "a new run-time size is refused while a view of the old storage is left", why)
        del part
        r.sizes["x.b"] = 38
        check(r["x"].shape == (38, 784), "once the views are gone the size is set")
        r.sizes["x.b"] = 37
        for bad in (None, "1.5", [None, 1]):
            ok, why = raises(tsr.Error, lambda: m.__setitem__("w1", bad), "takes numbers")
            check(ok, f"assigning {bad!r} to a tensor is a tsr.Error (NumPy would make NaN or parse it)", why)
        # A model's tensors by `in` and iteration (KeyError 'has no tensor 0' before), its routines
        # in dir(); a missing library said so (it said the manifest could not be read); a tsrc
        # that fails silently named.
        check("w1" in m and "nope" not in m and list(m) == list(m.tensors) and "predict" in dir(m),
              "'name' in m, list(m) and dir(m) give the tensors' and routines' names", (list(m), dir(m)[-5:]))
        ok, why = raises(tsr.Error, lambda: tsr.load(os.path.join(d, "missing.so")), "there is no such file")
        check(ok, "loading a library that does not exist says so", why)
        ok, why = raises(tsr.Error, lambda: tsr.compile(os.path.join(ROOT, "docs/examples/mlp_lib.tsr"), tsrc="/bin/false",
                                                       cache=os.path.join(d, "cache_false")), "ended with status 1")
        check(ok, "a tsrc that fails without a word is named with its exit status", why)
        # Values NumPy cannot take as they are: a tsr.Error, not NumPy's ValueError ("inhomogeneous
        # shape") or "takes numbers, not int"; integers beyond int64 compared exactly.
        ints = os.path.join(d, "ints.tsr")
        with open(ints, "w") as f:
            f.write('input { x; b = [2]; o = [3] }\ninput { big; b = [2]; dtype = "i64" }\n'
                    'input { small; b = [2]; dtype = "i32" }\nlet%op y = x *. 2.\nroutine go = y.forward\n')
        subprocess.run([tsrc, "--shared", ints, "-o", os.path.join(d, "libints.so")], check=True)
        n = tsr.load(os.path.join(d, "libints.so"))
        for tensor, bad, needle in (("x", [[1, 2, 3], [1]], "rectangular"),
                                    ("big", [2**63, 1], "holds 9223372036854775808, which does not fit int64"),
                                    ("big", [-2**70, 1.0], "holds -1180591620717411303424, which"),
                                    ("small", [2**40, 1], "holds 1099511627776, which does not fit int32"),
                                    ("small", [[1, 2], [3]], "rectangular")):
            ok, why = raises(tsr.Error, lambda: n.__setitem__(tensor, bad), needle)
            check(ok, f"assigning {str(bad)[:40]} to {tensor!r} is a tsr.Error saying so exactly", why)
        n["x"] = 2**70
        n["big"] = [2**53 + 1, 1.0]
        check(np.all(n["x"] == np.float32(2.0**70)) and n["big"].tolist() == [2**53 + 1, 1],
              "a Python integer beyond int64 goes into an f32 tensor rounded, and into an i64 one exactly",
              (n["x"].tolist(), n["big"].tolist()))
        # NumPy scalars among Python numbers (a list of a float32 array's items): whole ones taken, a
        # fraction a tsr.Error (math.trunc of an np.float32 raised an internal TypeError)
        n["small"] = [np.float32(3), 2**31 - 1]
        n["big"] = [np.float16(-2), 2**63 - 1]
        check(n["small"].tolist() == [3, 2**31 - 1] and n["big"].tolist() == [-2, 2**63 - 1],
              "NumPy float scalars holding whole numbers go into i32 and i64 tensors among Python integers",
              (n["small"].tolist(), n["big"].tolist()))
        ok, why = raises(tsr.Error, lambda: n.__setitem__("small", [np.float32(1.5), 2**31 - 1]), "not an integer")
        check(ok, "a NumPy float scalar holding a fraction, into an i32 tensor, is a tsr.Error", why)
        n["x"] = [[-2**1100, 1, 2**1100]] * 2
        check(n["x"][0].tolist() == [-np.inf, 1, np.inf], "an integer beyond float64 becomes infinity of its sign",
              n["x"].tolist())
        n.close()
        ok, why = raises(tsr.Error, lambda: m.save(os.path.join(d, "a\0b.npz")), "NUL")
        check(ok and not os.path.exists(os.path.join(d, "a")), "a checkpoint path with a NUL byte is a tsr.Error", why)
        # A library rebuilt at a path this process loaded: the loader would give the old one.
        again = os.path.join(d, "librebuilt.so")
        shutil.copy(lib, again)
        shutil.copy(os.path.join(d, "libmlp.json"), os.path.join(d, "librebuilt.json"))
        old = tsr.load(again)
        other = os.path.join(d, "other.tsr")
        with open(other, "w") as f:
            f.write("let%op w = { w = [1.; 2.; 3.] }\nlet%op y = w *. 2.\nroutine double = y.forward\n")
        p = subprocess.run([tsrc, "--shared", other, "-o", again], capture_output=True, text=True)
        new = tsr.load(again)
        new.double()
        check(p.returncode == 0 and np.array_equal(new["y"], [2, 4, 6]) and "w1" in old.tensors,
              "a library rebuilt at a loaded path loads as rebuilt, the earlier model unchanged", p.stderr)
        # ... once: every later load of the same build reuses it (each load made a copy of its own,
        # with its own runtime and thread pool, never unloaded: threads 2 -> 42 after 40 loads).
        def mapped_copies():
            with open("/proc/self/maps") as f:
                return len({line.split()[-2] if line.rstrip().endswith("(deleted)") else line.split()[-1]
                            for line in f if "librebuilt.so" in line})
        before = (mapped_copies(), len(os.listdir("/proc/self/task")))
        for _ in range(5):
            more = tsr.load(again)
            more.double()
            more.close()
        after = (mapped_copies(), len(os.listdir("/proc/self/task")))
        check(before == after and before[0] == 2, "loading the same rebuilt library again maps no new copy and starts "
              "no new threads", (before, after))
        # Two data files of one size class: the second item's own `?` reads the length too (it read 0).
        np.save(os.path.join(d, "xs.npy"), np.arange(12, dtype=np.float32).reshape(4, 3))
        np.save(os.path.join(d, "ys.npy"), np.ones((4, 3), dtype=np.float32))
        pair = os.path.join(d, "pair.tsr")
        with open(pair, "w") as f:
            f.write(f'data xs = npy "{d}/xs.npy" ~b:[?] ~o:[3]\ndata ys = npy "{d}/ys.npy" ~b:[?] ~o:[3]\n'
                    'let%op s = xs + ys\nroutine go = s.forward\n')
        p = subprocess.run([tsrc, "--shared", pair, "-o", os.path.join(d, "libpair.so")], capture_output=True, text=True)
        q = tsr.load(os.path.join(d, "libpair.so"))
        q.go()
        check(p.returncode == 0 and q.sizes["xs.b"] == 4 and q.sizes["ys.b"] == 4 and
              np.array_equal(q["s"], np.arange(12).reshape(4, 3) + 1),
              "every size of a class a data file gave reads the file's length", (repr(q.sizes), p.stderr))
        q.close()
        # A load that fails leaves the state as it was: a damaged shuffle count is refused after the
        # seed and the run count were read (they were set before the refusal).
        shf = os.path.join(d, "shf.tsr")
        with open(shf, "w") as f:
            f.write("data d = range ~b:[4] ~o:[1]\nlet%op w = { w = [1.] }\nlet%op y = w *. 2.\n"
                    "routine r = y.forward\nmain = shuffle d; run r; print d\n")
        p = subprocess.run([tsrc, "--shared", shf, "-o", os.path.join(d, "libshf.so")], capture_output=True, text=True)
        top = float(2 ** 24 - 1)
        np.savez(os.path.join(d, "bad.npz"), w=np.array([1.], np.float32), **{
            "tsrc.runs": np.array([0, 5], np.float32), "tsrc.seed": np.array([77], np.int64),
            "tsrc.shuffles": np.array([[top, top]], np.float32)})
        q = tsr.load(os.path.join(d, "libshf.so"), seed=3)
        ok, why = raises(tsr.Error, lambda: q.load(os.path.join(d, "bad.npz")), "shuffles beyond the runs")
        check(p.returncode == 0 and ok and q.seed == 3 and q.runs == 0,
              "a checkpoint load that fails leaves the seed and the run count as they were", (why, q.seed, q.runs))
        q.close()
        ok, why = raises(tsr.Error, lambda: tsr.load(rlib, seed=-1), "out of the range")
        check(ok, "a negative seed is a tsr.Error, not one wrapped to 2^64 - 1", why)
        m.close()
        ok, why = raises(tsr.Error, m.predict, "closed")
        check(ok, "a closed model is an error, not a crash", why)
        twin.close()
        r.close()
        # Every use after close() is an error: m.shape of a fixed-size tensor, m.dtype, m.is_bf16,
        # m.tensors went on working, m.shape of a run-time-sized one raised.
        for what, use in (("a size", lambda: r.sizes["x.b"]), ("a shape", lambda: r.shape("x")),
                          ("the sizes' repr", lambda: repr(r.sizes)), ("a fixed shape", lambda: r.shape("w1")),
                          ("a dtype", lambda: r.dtype("w1")), ("is_bf16", lambda: r.is_bf16("w1")),
                          ("the tensors", lambda: r.tensors), ("the routines", lambda: r.routines),
                          ("the manifest", lambda: r.manifest), ("'in' of its sizes", lambda: "x.b" in r.sizes),
                          ("a routine", r.predict), ("the seed", lambda: r.seed), ("save", lambda: r.save(path)),
                          ("init_from", lambda: r.init_from(path)),
                          ("a tensor", lambda: r["w1"])):
            ok, why = raises(tsr.Error, use, "closed")
            check(ok, f"{what} of a closed model is a tsr.Error", why)
        check(r.closed and "closed" in repr(r) and r.name == "sizes", "repr(m), m.name and m.closed stay", repr(r))
        # A copy would share the state (copy.copy(m).sizes were the original's): an error.
        import copy
        import pickle
        for what, fn in (("copy.copy", copy.copy), ("copy.deepcopy", copy.deepcopy), ("pickle.dumps", pickle.dumps)):
            ok, why = raises(tsr.Error, lambda: fn(twin), "cannot be")
            check(ok, f"{what} of a model is a tsr.Error", why)
        # A view keeps its model alive: the model below is garbage as soon as it is indexed, and
        # the collector would free the buffer under the view (the values read were other data's).
        import gc
        orphan = tsr.load(lib, seed=3)["w1"]
        kept = tsr.load(lib, seed=3)["w1"].copy()
        gc.collect()
        junk = [np.full(1 << 16, 7.0, np.float32) for _ in range(64)]
        check(np.array_equal(orphan, kept) and len(junk) == 64, "a view outlives the expression that loaded its model")
        del orphan, junk
        # ... and close() too: the state is freed when the last view goes.
        closing = tsr.load(lib, seed=3)
        view = closing["w1"]
        closing.close()
        junk = [np.full(1 << 16, 7.0, np.float32) for _ in range(64)]
        check(np.array_equal(view, kept) and raises(tsr.Error, lambda: closing["w1"], "closed")[0],
              "a view outlives close(), which closes the model at once")
        del view, junk

        # A dropped model is freed at once: its sizes referred back to it, a cycle that only the
        # cyclic collector broke (loading models in a loop grew by gigabytes).
        import weakref
        gc.disable()
        try:
            dropped = tsr.load(rlib)
            state = weakref.ref(dropped._owner)
            sizes = dropped.sizes
            del dropped
            freed = state() is None
            ok, why = raises(tsr.Error, lambda: sizes["x.b"], "closed")
        finally:
            gc.enable()
        check(freed and ok, "del m frees the model's state without the cyclic collector; its sizes then raise", why)
        # Threads: close() or a new run-time size from another thread while a routine runs (ctypes
        # releases the GIL) freed the state under the routine (exit 139). Each in a process of its
        # own, so that a crash is a FAIL line.
        big = os.path.join(d, "big.tsr")
        with open(big, "w") as f:
            f.write("input { a; b = [?]; o = [512] }\nlet%op y = { w; o = [512] } * a\n"
                    "let%op z = { w2; o = [512] } * relu y\nlet%op s = z ++ \"b|o => o\"\nroutine go = s.forward\n")
        biglib = os.path.join(d, "libbig.so")
        subprocess.run([tsrc, "--shared", big, "-o", biglib], check=True)
        for what, during, after in (
                ("close()", "m.close()", "print('closed', m.closed); m.go()"),
                ("a new run-time size", "m.sizes['a.b'] = 100", "m.go(); print('resized', m.shape('a'), m['s'][0])")):
            p = python(f"""
import sys, threading, time, tsr
m = tsr.load(sys.argv[1]); m.sizes["a.b"] = 20000; m["a"] = 1.0
t = threading.Thread(target=m.go); t.start(); time.sleep(0.05)
{during}
t.join()
print('joined')
try:
    {after}
except tsr.Error as e:
    print('error:', e)
""", biglib)
            want = "closed True\nerror: the model libbig is closed" if what == "close()" else "resized (100, 512)"
            check(p.returncode == 0 and p.stdout.startswith("joined\n" + want),
                  f"{what} from another thread while a routine runs waits for it (no crash)", p.stdout + p.stderr)

        cache = os.path.join(d, "cache")
        src = os.path.join(d, "mlp.tsr")
        shutil.copy(os.path.join(ROOT, "docs/examples/mlp_lib.tsr"), src)
        c1 = tsr.compile(src, seed=1, tsrc=tsrc, cache=cache)
        built = sorted(os.listdir(cache))
        stamp = os.stat(os.path.join(cache, built[0])).st_mtime_ns
        c2 = tsr.compile(src, seed=1, tsrc=tsrc, cache=cache)
        check(len(built) == 3 and sorted(os.listdir(cache)) == built and
              os.stat(os.path.join(cache, built[0])).st_mtime_ns == stamp and np.array_equal(c1["w1"], c2["w1"]),
              "tsr.compile builds once and reuses the cached library for the same source", built)
        with open(src, "a") as f:
            f.write("(* changed *)\n")
        tsr.compile(src, tsrc=tsrc, cache=cache).close()
        check(len(os.listdir(cache)) == 6, "a changed source is compiled again", os.listdir(cache))
        # Modules the source opens from beside it: the same text in two directories with modules of
        # their own is two libraries, and a changed module compiles afresh (the cache read the first).
        for sub, values in (("a", "1.; 2."), ("b", "10.; 20.; 30.")):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
            with open(os.path.join(d, sub, "consts.tsr"), "w") as f:
                f.write(f"let%op k = {{ k = [ {values} ] }}\n")
            with open(os.path.join(d, sub, "main.tsr"), "w") as f:
                f.write("open Consts\nlet%op y = Consts.k *. 2.\nroutine go = y.forward\n")
        got = []
        for sub in ("a", "b", "a"):
            if sub == "a" and got:
                with open(os.path.join(d, "a", "consts.tsr"), "w") as f:
                    f.write("let%op k = { k = [ 5.; 6. ] }\n")
            m3 = tsr.compile(os.path.join(d, sub, "main.tsr"), tsrc=tsrc, cache=cache)
            m3.go()
            got.append(m3["y"].tolist())
            m3.close()
        check(got == [[2, 4], [20, 40, 60], [10, 12]],
              "tsr.compile tells sources apart by their path and compiles again when a module they open changes", got)
        with open(src, "a") as f:
            f.write("let%op broken = w1 +* \"i; j => k\" w2\n")
        ok, why = raises(tsr.Error, lambda: tsr.compile(src, tsrc=tsrc, cache=cache), "mlp.tsr:")
        check(ok, "a compile error is a tsr.Error with tsrc's located message", why)
        # A compiler that is not one and a cache that cannot be a directory are tsr.Error (they were
        # PermissionError, FileNotFoundError, FileExistsError); options may be one string.
        with open(os.path.join(d, "plain"), "w") as f:
            f.write("x")
        for what, kw, needle in (("tsrc='/etc/passwd'", dict(tsrc="/etc/passwd"), "not an executable"),
                                 ("cache='/proc/x'", dict(cache="/proc/x"), "cache directory"),
                                 ("a cache that is a file", dict(cache=os.path.join(d, "plain")), "not a directory"),
                                 ("options=[3]", dict(options=[3], cache=cache), "not a list of strings")):
            ok, why = raises(tsr.Error, lambda: tsr.compile(big, **dict(dict(tsrc=tsrc), **kw)), needle)
            check(ok, f"tsr.compile with {what} is a tsr.Error", why)
        ran = []
        real_run = subprocess.run
        subprocess.run = lambda *a, **k: ran.append(a[0]) or real_run(*a, **k)
        try:
            tsr.compile(big, tsrc=tsrc, options="--cpu=x86-64 -I " + d, cache=cache).close()
        finally:
            subprocess.run = real_run
        check(ran and ran[0][3:6] == ["--cpu=x86-64", "-I", d], "options given as one string are split as a shell would",
              ran)
        # Names and failures around loading: a source named in another script compiles (its
        # module name made of ASCII), and a missing source, a damaged manifest and a missing
        # library are tsr.Error too.
        accented = os.path.join(d, "mod\u00e8le.tsr")
        shutil.copy(os.path.join(ROOT, "docs/examples/mlp_lib.tsr"), accented)
        try:
            named = tsr.compile(accented, tsrc=tsrc, cache=os.path.join(d, "cache2"))
            check(named.name.isascii() and "predict" in named.routines, "tsr.compile of a file named mod\u00e8le.tsr")
        except tsr.Error as e:
            check(False, "tsr.compile of a file named mod\u00e8le.tsr", e)
        with open(os.path.join(d, "libdamaged.json"), "w") as f:
            f.write("{nope")
        with open(os.path.join(d, "libmissing.json"), "w") as f:
            f.write('{"module": "missing", "routines": [], "tensors": []}')
        for what, fn, needle in (("a missing source", lambda: tsr.compile(os.path.join(d, "none.tsr"), tsrc=tsrc), "cannot read"),
                                 ("a damaged manifest", lambda: tsr.load(os.path.join(d, "libdamaged.so")), "not JSON"),
                                 ("a missing library", lambda: tsr.load(os.path.join(d, "libmissing.so")), "cannot load")):
            ok, why = raises(tsr.Error, fn, needle)
            check(ok, f"{what} is a tsr.Error", why)
        # The manifest must be the library's: another compile of the same module (a second
        # mlp_lib.tsr of other sizes; its buffers were written past their end) and another
        # module's are tsr.Error.
        other = os.path.join(d, "other")
        os.makedirs(other, exist_ok=True)
        with open(os.path.join(other, "mlp_lib.tsr"), "w") as f:
            f.write("input { features; b = [2]; o = [5] }\nlet%op scores = { w; o = [3] } * features\n"
                    "routine predict = scores.forward\n")
        for name in ("libmlp", "libother"):
            subprocess.run([tsrc, "--shared", os.path.join(other, "mlp_lib.tsr"), f"--name={name}",
                            "-o", os.path.join(other, name + ".so")], check=True)
        for what, args, needle in (
                ("a manifest of another compile of the module", (os.path.join(other, "libmlp.so"), os.path.join(d, "libmlp.json")),
                 "another compile of module 'libmlp'"),
                ("a manifest of another module", (os.path.join(other, "libmlp.so"), os.path.join(other, "libother.json")),
                 "has no module 'libother'")):
            ok, why = raises(tsr.Error, lambda: tsr.load(args[0], manifest=args[1]), needle)
            check(ok, f"{what} is a tsr.Error", why)
        # Manifests checked strictly against the library: one without "image_checksum" was taken as
        # an older tsrc's (a mismatched pair then aborted: double free or corruption); a
        # hand-edited buffer number read garbage; a missing "tensors" was a KeyError.
        import json
        with open(os.path.join(d, "libmlp.json")) as f:
            good = json.load(f)
        with open(os.path.join(d, "libsizes.json")) as f:
            good_sizes = json.load(f)

        def edited(base, change, source=lib):
            def load():
                fields = json.loads(json.dumps(base))
                change(fields)
                path = os.path.join(d, "edited.json")
                with open(path, "w") as f:
                    json.dump(fields, f)
                return tsr.load(source, manifest=path)
            return load
        # A library cut short (a copy that stopped): the loader mapped it and the process died of
        # SIGBUS; its ELF headers are now checked against the file's size first.
        cut = os.path.join(d, "libcut.so")
        with open(lib, "rb") as f, open(cut, "wb") as out:
            out.write(f.read(60000))
        ok, why = raises(tsr.Error, lambda: tsr.load(cut, manifest=os.path.join(d, "libmlp.json")), "cut short")
        check(ok, "a library cut short is a tsr.Error, not a SIGBUS", why)
        for what, fn, needle in (
                ("a manifest without image_checksum", edited(good, lambda f: f.pop("image_checksum")), 'no "image_checksum"'),
                ("another compile's manifest without image_checksum",
                 edited(good, lambda f: f.pop("image_checksum"), os.path.join(other, "libmlp.so")), 'no "image_checksum"'),
                ("a tensor's buffer 999", edited(good, lambda f: f["tensors"][0].update(buffer=999)), "names buffer 999"),
                ("a tensor's buffer of another tensor's dims",
                 edited(good, lambda f: f["tensors"][0].update(buffer=f["tensors"][1]["buffer"])), "has dims"),
                ("a tensor's dims", edited(good, lambda f: f["tensors"][0].update(dims=[64, 64])), "has dims"),
                ("a tensor's dtype", edited(good, lambda f: f["tensors"][0].update(dtype="float64")), "is float64 there"),
                ("a size's symbol", edited(good_sizes, lambda f: f["sizes"][0].update(symbol=99), rlib), "names symbol 99"),
                ("a run-time size's length symbol",
                 edited(good_sizes, lambda f: [t.update(length_symbol=t["length_symbol"] + 1) for t in f["tensors"]
                                               if "length_symbol" in t], rlib), "has dims"),
                ("a manifest without tensors", edited(good, lambda f: f.pop("tensors")), 'no list of "tensors"'),
                ("a tensor without a buffer", edited(good, lambda f: f["tensors"][0].pop("buffer")), 'no "buffer" number'),
                ("a routine of no function", edited(good, lambda f: f["routines"][0].update(symbol="nope")), "'nope'"),
                # a routine calling an API function segfaulted when run; a second tensor of a name hid the first
                ("a routine of the API's function MODULE_destroy",
                 edited(good, lambda f: f["routines"][0].update(symbol=f["module"] + "_destroy")), "not a routine's"),
                ("two tensors of one name",
                 edited(good, lambda f: f["tensors"][1].update(name=f["tensors"][0]["name"])), "two tensors are named"),
                ("an empty manifest", edited(good, lambda f: f.clear()), 'no "module"')):
            ok, why = raises(tsr.Error, fn, needle)
            check(ok and "edited.json" in why, f"{what} is a tsr.Error naming the manifest", why)
        # A file named as a facility of the C library (sem.tsr: sem_destroy) compiles as m_sem;
        # a second call loads it from the cache without running tsrc.
        sem = os.path.join(d, "sem.tsr")
        shutil.copy(os.path.join(ROOT, "docs/examples/mlp_lib.tsr"), sem)
        try:
            first = tsr.compile(sem, tsrc=tsrc, cache=os.path.join(d, "cache3"))
            ran = []
            real_run = subprocess.run
            subprocess.run = lambda *a, **k: ran.append(a) or real_run(*a, **k)
            try:
                again = tsr.compile(sem, tsrc=tsrc, cache=os.path.join(d, "cache3"))
            finally:
                subprocess.run = real_run
            check(first.name == "m_sem" and again.name == "m_sem" and not ran, "tsr.compile of sem.tsr makes module m_sem",
                  (first.name, ran))
        except tsr.Error as e:
            check(False, "tsr.compile of sem.tsr makes module m_sem", e)
        # The cache keeps code generated for this machine's CPU apart from another CPU's.
        real_cpu = tsr._host_cpu
        tsr._host_cpu = lambda: b"flags: another machine"
        try:
            tsr.compile(sem, tsrc=tsrc, cache=os.path.join(d, "cache3")).close()
            moved = len([f for f in os.listdir(os.path.join(d, "cache3")) if f.endswith(".so")])
            tsr._host_cpu = real_cpu
            tsr.compile(sem, tsrc=tsrc, cache=os.path.join(d, "cache3")).close()
            back = len([f for f in os.listdir(os.path.join(d, "cache3")) if f.endswith(".so")])
        finally:
            tsr._host_cpu = real_cpu
        check(moved == 2 and back == 2, "tsr.compile compiles afresh for another CPU, and this CPU's stays cached",
              (moved, back))
        shared = np.from_dlpack(c1["w2"])
        check(np.shares_memory(shared, c1["w2"]), "tensors export __dlpack__ (np.from_dlpack shares the buffer)")
        c1.close()
        c2.close()

        # docs/examples/python/train_digits.py: trained from a Python loop, exported to PyTorch.
        digits = os.path.join(d, "digits")
        subprocess.run([sys.executable, os.path.join(ROOT, "tools/digits.py"), digits], capture_output=True)
        env = dict(os.environ, TSRC=tsrc, TSR_CACHE=cache, PYTHONPATH=os.path.join(ROOT, "runtime", "python"),
                   PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "docs/examples/python/train_digits.py"), digits],
                           capture_output=True, text=True, env=env, cwd=d)
        last = [line for line in p.stdout.splitlines() if line.startswith("epoch 8")]
        accuracy = float(last[0].split()[-1].rstrip("%")) if last else 0.0
        check(p.returncode == 0 and accuracy >= 90.0 and ("agree" in p.stdout or "not installed" in p.stdout),
              f"docs/examples/python/train_digits.py trains to {accuracy:.1f}% (at least 90%) and PyTorch's "
              "predictions from its weights agree (where PyTorch is installed)", p.stdout + p.stderr)

        # pip install ./runtime/python, offline, as a user does: in a virtual environment that sees
        # the system's NumPy (Debian's own Python refuses pip installs, PEP 668); then the
        # installed package loads a library and runs it.
        src = os.path.join(d, "pkg")
        shutil.copytree(os.path.join(ROOT, "runtime", "python"), src)
        venv = os.path.join(d, "venv")
        made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
        if made.returncode != 0:
            print("SKIP pip install of runtime/python (python3 -m venv is not available: python3-venv)")
        else:
            py = os.path.join(venv, "bin", "python")
            p = subprocess.run([py, "-m", "pip", "install", "-q", src], capture_output=True, text=True, timeout=300)
            q = subprocess.run([py, "-c", "import sys, tsr; m = tsr.load(sys.argv[1]); m.predict(); "
                                "print(tsr.__file__, m['scores'].shape)", lib],
                               capture_output=True, text=True, cwd=d, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            check(p.returncode == 0 and q.stdout.startswith(venv) and "(32, 3)" in q.stdout,
                  "pip install ./runtime/python works offline (a venv over the system's NumPy), and the installed "
                  "package loads and runs a library", p.stderr + q.stdout + q.stderr)
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
