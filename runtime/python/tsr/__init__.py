"""tsr — models compiled by tsrc, in Python (docs/python.md).

    tsrc --shared mlp.tsr -o libmlp.so          # also writes libmlp.json, the manifest
    import tsr
    m = tsr.load("libmlp.so", seed=1)
    m["features"][...] = batch                   # tensors: NumPy arrays over the model's buffers
    m.predict()                                  # routines: methods
    scores = m["scores"].copy()

The library holds the model's code, its image and the tsrc runtime; this module reads the
manifest beside it (libmlp.json) and calls the runtime's C functions with ctypes, so nothing is
compiled at install time.  A model object owns one state (tsr_state): its tensors are views of
the state's buffers, without a copy (float32; float64, int32, float16, uint8 and bool for the
program's f64, i32, f16, u8 and bool tensors; uint16 bit patterns for its bf16 tensors, which NumPy cannot hold otherwise
— tsr.bf16_to_float32 and tsr.float32_to_bf16 convert them; as the manifest's "dtype" says),
valid until the model is closed or a run-time size that shapes them changes (then ask again).  Errors of the runtime are raised as tsr.Error with the
runtime's message.  Libraries compiled from different programs, or the same library loaded
twice, are independent.  tsr.compile("mlp.tsr") runs the installed tsrc and loads the result,
reusing an earlier library when the source, the options and tsrc are the same.
"""
import contextlib
import ctypes
import hashlib
import json
import math
import numbers as numbers_abc
import operator
import os
import re
import shlex
import shutil
import struct
import subprocess
import tempfile
import threading
import weakref

import numpy as np

from .bf16 import bf16_to_float32, float32_to_bf16  # noqa: E402,F401
from .weights import from_gpt2, from_torch, to_gpt2, to_torch  # noqa: E402,F401

__all__ = ["Error", "Model", "bf16_to_float32", "compile", "float32_to_bf16", "from_gpt2", "from_torch",
           "get_num_threads", "load", "set_num_threads", "to_gpt2", "to_torch"]


class Error(Exception):
    """An error reported by the tsrc runtime (its message), or a misuse of a model."""


# A tensor's element type, from the manifest's "dtype" (NumPy's name; the language's word is
# accepted too, and a manifest without the key, from an older tsrc, means float32).  A bf16
# tensor's cells are uint16 bit patterns (NumPy has no bfloat16).
_DTYPES = {"float32": np.float32, "f32": np.float32, "int32": np.int32, "i32": np.int32,
           "float64": np.float64, "f64": np.float64, "float16": np.float16, "f16": np.float16,
           "bfloat16": np.uint16, "bf16": np.uint16, "uint8": np.uint8, "u8": np.uint8, "bool": np.bool_,
           "int64": np.int64, "i64": np.int64}
_BF16 = ("bfloat16", "bf16")
_CELLS = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.int32): ctypes.c_int32, np.dtype(np.float64): ctypes.c_double,
          np.dtype(np.float16): ctypes.c_uint16, np.dtype(np.uint16): ctypes.c_uint16,
          np.dtype(np.uint8): ctypes.c_uint8, np.dtype(np.bool_): ctypes.c_uint8, np.dtype(np.int64): ctypes.c_int64}


class _State(ctypes.Structure):
    # tsr_state's fields (runtime/tsr.h; part of the ABI)
    _fields_ = [("buffers", ctypes.POINTER(ctypes.c_void_p)), ("symbols", ctypes.POINTER(ctypes.c_int64)),
                ("model", ctypes.c_void_p), ("seed", ctypes.c_uint64), ("runs", ctypes.c_uint64)]


def _fields(handle):
    """The tsr_state behind `handle` (a c_void_p), its fields read and written in place."""
    return ctypes.cast(handle, ctypes.POINTER(_State)).contents


class _Api:
    """The C API a library of `tsrc --shared` exports (docs/python.md): MODULE_create, _destroy,
    _last_error, _save, _load, _set_symbol, each the runtime function of the same role."""

    def __init__(self, lib, module):
        def fn(name, restype, argtypes, later=False):
            try:
                f = getattr(lib, f"{module}_{name}")
            except AttributeError:
                why = (f"the library {lib._name} does not export {module}_{name}: it was built by an older tsrc; build "
                       "it again with tsrc --shared")
                if not later:
                    raise Error(why) from None
                return _Missing(why)  # a library of an older tsrc loads; what it lacks fails when used
            f.restype, f.argtypes = restype, argtypes
            return f

        self.create = fn("create", ctypes.c_void_p, [ctypes.c_uint64])
        self.create_data = fn("create_data", ctypes.c_void_p,
                              [ctypes.c_uint64, ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_char_p), ctypes.c_uint32],
                              later=True)
        self.destroy = fn("destroy", None, [ctypes.c_void_p])
        self.last_error = fn("last_error", ctypes.c_char_p, [])
        self.save = fn("save", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p])
        self.load = fn("load", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p])
        self.init_from = fn("init_from", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint32)],
                            later=True)
        self.set_symbol = fn("set_symbol", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int64])
        self.set_option = fn("set_option", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_double], later=True)
        self.option = fn("option", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)],
                         later=True)
        self.set_num_threads = fn("set_num_threads", None, [ctypes.c_int], later=True)
        self.num_threads = fn("num_threads", ctypes.c_int, [], later=True)
        # A GPU model (--target=cuda): a buffer is read and written through its host copy.
        self.gpu = hasattr(lib, f"{module}_host_buffer")
        if self.gpu:
            self.host_buffer = fn("host_buffer", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_uint32])
            self.sync_host = fn("sync_host", ctypes.c_int, [ctypes.c_void_p])
            self.sync_device = fn("sync_device", ctypes.c_int, [ctypes.c_void_p])


class _Missing:
    """A function of the C API a library built by an older tsrc lacks: calling it is a tsr.Error."""

    def __init__(self, why):
        self.why = why

    def __call__(self, *args):
        raise Error(self.why)


class _Owner:
    """The C state behind a model: freed (MODULE_destroy) when nothing refers to it any more, the
    model closed or collected and no NumPy view of its buffers left, so a view never reads freed
    memory."""

    def __init__(self, api, state):
        self.api, self.state = api, state

    def __del__(self):
        state, self.state = self.state, None
        if state:
            try:
                self.api.destroy(ctypes.c_void_p(state))
            except Exception:  # at interpreter exit ctypes may be gone already
                pass


# Libraries loaded in this process: each distinct file (its path and its identity: device,
# inode, size, modification and change times) is loaded once and its handle reused by every
# later tsr.load of it.  The libraries are linked -z nodelete (their runtime's thread pool
# cannot be unloaded), so a copy per load would pile up code, runtimes and pool threads.  The
# dynamic loader gives a path it has loaded the library it loaded then, so a library rebuilt at
# the same path (a notebook's edit, compile, reload) is loaded from a private copy instead,
# once for each build.
_loaded = {}  # (path, identity) -> ctypes.CDLL
_opened_paths = set()  # paths handed to the loader as they are
_loading = threading.Lock()


def _identity(path):
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _check_elf(library):
    """OSError where `library` is a 64-bit little-endian ELF file shorter than its headers say: the
    loader maps such a file's segments past its end, and the first touch of them kills the
    process with SIGBUS (a copy cut short) instead of failing."""
    size = os.path.getsize(library)
    with open(library, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return  # not one the check reads: the loader says what it is
        phoff, shoff = struct.unpack_from("<QQ", head, 32)
        phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", head, 54)
        need = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
        if need <= size:
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum if phentsize >= 56 and len(table) == phentsize * phnum else 0):
                kind, _, offset, _, _, filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
                if kind == 1:  # PT_LOAD
                    need = max(need, offset + filesz)
    if need > size:
        raise OSError(f"the file is cut short: {size} bytes, where its headers describe {need} (build it again with "
                      f"tsrc --shared)")


def _open(library):
    """ctypes.CDLL of `library`, as the file is now (the handle of an earlier load of it reused)."""
    with _loading:
        key = (library, _identity(library))
        if key in _loaded:
            return _loaded[key]
        _check_elf(library)
        if library not in _opened_paths:
            lib = ctypes.CDLL(library, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            _opened_paths.add(library)
        else:
            fd, copy = tempfile.mkstemp(prefix="tsr-", suffix="-" + os.path.basename(library))
            try:
                with os.fdopen(fd, "wb") as out, open(library, "rb") as src:
                    shutil.copyfileobj(src, out)
                lib = ctypes.CDLL(copy, mode=os.RTLD_LOCAL | os.RTLD_NOW)
            finally:
                os.unlink(copy)  # the loaded copy stays mapped
        _loaded[key] = lib
        return lib


# Each library's runtime has a thread pool of its own (docs/runtime.md §8): set_num_threads
# reaches every library loaded, and those loaded later get the count when they load.
_libraries = {}  # (id of the ctypes.CDLL, module) -> _Api
_threads = 0  # the count set_num_threads gave (0: each runtime's default)


def _register(api, key):
    if isinstance(api.set_num_threads, _Missing):
        return  # an older tsrc's library: its pool keeps its own count (TSR_NUM_THREADS)
    with _loading:
        if key not in _libraries:
            _libraries[key] = api
            api.set_num_threads(_threads)


def set_num_threads(n):
    """The number of threads (the caller's included) every model's parallel loops use, as the
    runtime's tsr_set_num_threads: for each library loaded and each loaded later.  0 returns to
    the default, $TSR_NUM_THREADS or else the number of online CPUs; at most 256 are used.
    Results are the same bits for every count."""
    global _threads
    n = _whole_number("the number of threads", n, 0, 2**31 - 1)
    with _loading:
        _threads = n
        for api in _libraries.values():
            api.set_num_threads(n)


def get_num_threads():
    """The number of threads the models' parallel loops use (tsr_num_threads): as set_num_threads
    gave, else $TSR_NUM_THREADS, else the number of online CPUs; at most 256."""
    with _loading:
        for api in _libraries.values():
            return api.num_threads()
    if _threads:
        return min(_threads, 256)
    digits = re.fullmatch(r"[ \t]*(\d+)[ \t]*", os.environ.get("TSR_NUM_THREADS", ""))  # as the runtime reads it
    n = int(digits.group(1)) if digits else 0  # past 256, however far: 256
    return min(n if n > 0 else max(os.sysconf("SC_NPROCESSORS_ONLN"), 1), 256)


def _path(what, path):
    """`path` as bytes for the C API, or tsr.Error for a NUL byte, which C would end it at."""
    encoded = os.fsencode(path)
    if b"\0" in encoded:
        raise Error(f"the path of {what} {path!r} holds a NUL byte")
    return encoded


class _Sizes:
    """A model's run-time sizes (`?` in the program) or index symbols, by name: read and set.
    It refers to its model weakly: a strong reference would make a cycle (model -> sizes ->
    model), and a model dropped with `del m` would keep its state until the cyclic collector ran."""

    def __init__(self, model, entries):
        object.__setattr__(self, "_ref", weakref.ref(model))
        object.__setattr__(self, "_entries", {e["name"]: e for e in entries})

    @property
    def _model(self):
        model = self._ref()
        if model is None:
            raise Error("the model of these sizes is closed (it was dropped)")
        return model

    def _open(self):
        if self._model.closed:
            raise Error(f"the model {self._model.name} is closed")
        return self._entries

    def __iter__(self):
        return iter(self._open())

    def __len__(self):
        return len(self._open())

    def __contains__(self, name):
        return name in self._open()

    def __getitem__(self, name):
        symbol = self._entry(name)["symbol"]
        with self._model._using() as state:
            return int(_fields(state).symbols[symbol])

    def __setitem__(self, name, value):
        symbol = self._entry(name)["symbol"]
        value = _whole_number(f"{name!r}", value, -2**63, 2**63 - 1)
        model = self._model
        with model._using() as state:  # a routine running on another thread finishes first
            # A new length gives the tensors it sizes new storage and frees the old, under any view.
            viewed = model._viewed(symbol) if value != self[name] else []
            if viewed:
                raise Error(f"setting {name!r} to {value} gives {', '.join(map(repr, viewed))} new storage, but NumPy "
                            "views of the old are left: delete them (or copy them) first, then ask for the tensors again")
            model._call(model._api.set_symbol, state, ctypes.c_uint32(symbol), ctypes.c_int64(value))

    def __setattr__(self, name, value):
        raise Error(f"set one by name: [{name!r}] = {value!r} (an attribute would set nothing)")

    def _entry(self, name):
        if name not in self._open():
            known = ", ".join(sorted(self._entries)) or "none"
            raise KeyError(f"{name!r} is not one of the model's names here ({known})")
        return self._entries[name]

    def __repr__(self):
        return "{" + ", ".join(f"{n!r}: {self[n]}" for n in self._open()) + "}"


class _Options(_Sizes):
    """A model's options (`option lr = 0.1` in the program), by name: read and set, as an
    executable's command line sets them (MODULE_set_option: an integer option takes a whole
    number; a value the option cannot take is a tsr.Error and changes nothing)."""

    def __getitem__(self, name):
        integer = self._entry(name)["kind"] == "integer"
        model, value = self._model, ctypes.c_double()
        with model._using() as state:
            model._call(model._api.option, state, name.encode(), ctypes.byref(value))
        return int(value.value) if integer else value.value

    def __setitem__(self, name, value):
        integer = self._entry(name)["kind"] == "integer"
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise Error(f"option {name!r} takes {'an integer' if integer else 'a number'}, not {value!r}")
        if integer and isinstance(value, (int, np.integer)):
            value = _whole_number(f"option {name!r}", value, -2**53, 2**53)
        try:
            number = float(value)  # a whole float for an integer option, as the C setter takes it
        except OverflowError:
            raise Error(f"option {name!r} = {str(value)[:24]}… is beyond the doubles' range") from None
        model = self._model
        with model._using() as state:
            model._call(model._api.set_option, state, name.encode(), ctypes.c_double(number))


class Model:
    """One compiled model and one state of it (tsr.load makes it)."""

    def __init__(self, library, manifest=None, seed=0, data=None):
        library = os.path.abspath(library)
        if manifest is None:
            stem = library[:-3] if library.endswith(".so") else library
            manifest = stem + ".json"
        try:
            with open(manifest) as f:
                self._manifest = json.load(f)
        except OSError as e:
            if not os.path.exists(library):  # neither is there: the library is what was named
                raise Error(f"cannot load {library}: there is no such file (tsrc --shared PROGRAM.tsr -o {library} "
                            f"makes it and its manifest)") from None
            raise Error(f"cannot read the manifest of {library}: {e} (tsrc --shared writes it beside the library)")
        except ValueError as e:
            raise Error(f"the manifest {manifest} is not JSON ({e}): write it again with tsrc --shared")
        _validate_manifest(manifest, self._manifest)
        self.name = self._manifest["module"]
        try:
            self._lib = _open(library)
        except OSError as e:
            raise Error(f"cannot load {library}: {e}")
        _check_manifest(self._lib, library, manifest, self._manifest)
        self._api = _Api(self._lib, self.name)
        _register(self._api, (id(self._lib), self.name))
        self._views = {}  # by buffer: weak references to the arrays __getitem__ made
        # Every use of the C state holds this lock (_using): a call from a second thread waits for
        # the first's to return, so close() or a new run-time size never frees what a routine
        # running on another thread (ctypes releases the GIL) is using.
        self._lock = threading.RLock()
        seed = _whole_number("the seed", seed, 0, 2**64 - 1)
        if data is not None:
            if not isinstance(data, dict) or not all(isinstance(k, str) and k and "\0" not in k for k in data):
                raise Error(f"data is a dict of data item names (strings) and file paths, not {data!r}")
            if not all(isinstance(v, (str, bytes, os.PathLike)) for v in data.values()):
                raise Error(f"data: each file is a path (a string or a path-like object), not {data!r}")
            names = [k.encode() for k in data]
            paths = [_path(f"data {k!r}", v) for k, v in data.items()]
            n = len(names)
        if data:
            self._state = self._api.create_data(seed, (ctypes.c_char_p * n)(*names), (ctypes.c_char_p * n)(*paths), n)
        else:
            self._state = self._api.create(seed)
        if not self._state:
            raise Error(self._last_error())
        self._owner = _Owner(self._api, self._state)
        self._tensors = {t["name"]: t for t in self._manifest["tensors"]}
        self.sizes = _Sizes(self, self._manifest.get("sizes", []))
        self.indexes = _Sizes(self, self._manifest.get("indexes", []))
        self.options = _Options(self, self._manifest.get("options", []))
        self._routines = {}
        for r in self._manifest["routines"]:
            fn = getattr(self._lib, r["symbol"])
            fn.argtypes = [ctypes.c_void_p]
            fn.restype = ctypes.c_int
            self._routines[r["name"]] = fn

    # ---- the state ------------------------------------------------------------------------------

    def _last_error(self):
        return (self._api.last_error() or b"unknown error").decode("utf-8", "replace")

    def _handle(self):
        if not self._state:
            raise Error(f"the model {self.name} is closed")
        return ctypes.c_void_p(self._state)

    @contextlib.contextmanager
    def _using(self):
        """The state's handle, held for a use of the C state: the model's lock taken (a call
        running on another thread finishes first) and the state kept alive until the use ends."""
        with self._lock:
            owner = self._owner  # a reference of this frame's: the state lives while it runs
            handle = self._handle()
            yield handle
            del owner

    def _call(self, fn, *args):
        if fn(*args) != 0:
            raise Error(self._last_error())

    @property
    def seed(self):
        """The state's seed (tsr_state.seed): it keys parameter initialisation and the random numbers
        routines draw (dropout); load() of a checkpoint that resumes a run takes the run's."""
        with self._using() as state:
            return _fields(state).seed

    @seed.setter
    def seed(self, value):
        value = _whole_number("the seed", value, 0, 2**64 - 1)
        with self._using() as state:
            _fields(state).seed = value

    @property
    def runs(self):
        """The routine runs the state has started (tsr_state.runs): with the seed, the key of the
        random numbers a run draws; set it back to replay a run's numbers."""
        with self._using() as state:
            return _fields(state).runs

    @runs.setter
    def runs(self, value):
        value = _whole_number("runs", value, 0, 2**64 - 1)
        with self._using() as state:
            _fields(state).runs = value

    def close(self):
        """Close the model: every use of it raises tsr.Error from now on (its routines, tensors,
        shapes, dtypes, sizes, indexes, seed, runs, checkpoints, and the manifest's tensors,
        routines and manifest), all but m.name, m.closed and repr(m).  A call running
        on another thread (a routine, a checkpoint) finishes first; then the state is freed at
        once, or, while NumPy views of its tensors are left, when the last goes."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before the state was made
            self._state = self._owner = None
            return
        with lock:
            self._state = None
            self._owner = None

    def _described(self, what):
        if self.closed:
            raise Error(f"the model {self.name} is closed (its {what} too)")
        return self.__dict__["_" + what]

    @property
    def tensors(self):
        """{name: the manifest's entry} for every tensor the manifest lists."""
        return self._described("tensors")

    @property
    def routines(self):
        """{name: the C function} for every routine."""
        return self._described("routines")

    @property
    def manifest(self):
        """The manifest (the .json beside the library), as read."""
        return self._described("manifest")

    @property
    def closed(self):
        """Whether the model is closed (close(), or the end of its `with` block)."""
        return not self.__dict__.get("_state")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    # ---- routines -------------------------------------------------------------------------------

    def run(self, routine):
        """Run the routine named `routine`; a failure raises tsr.Error with the runtime's message."""
        if routine not in self.routines:
            raise Error(f"{self.name} has no routine {routine!r} (routines: {', '.join(self.routines) or 'none'})")
        with self._using() as state:
            self._call(self._routines[routine], state)
            if self._api.gpu:
                self._refresh_views(state)

    def _refresh_views(self, state):
        """A GPU model: every buffer that a NumPy view still shows is brought back to the host
        (what the routine wrote on the GPU) and marked host-newer, so that the views show the
        tensors as they are and what is written through them goes to the GPU before the next
        routine, as on the CPU (the C accessors' pointer must be taken again instead)."""
        for buffer, views in self._views.items():
            if any(v() is not None for v in views) and not self._api.host_buffer(state, buffer):
                raise Error(self._last_error())

    def __getattr__(self, name):
        routines = self.__dict__.get("_routines", {})
        if name in routines:
            return lambda: self.run(name)
        raise AttributeError(f"{type(self).__name__} {self.__dict__.get('name', '?')!r} has no attribute or routine {name!r}")

    # ---- tensors ---------------------------------------------------------------------------------

    def shape(self, name):
        """The dims of tensor `name` in memory order (a run-time size as it is set now)."""
        t = self._tensor(name)
        dims = list(t["dims"])
        with self._using() as state:
            if "length_symbol" in t:
                dims[0] = int(_fields(state).symbols[t["length_symbol"]])
        return tuple(int(d) for d in dims)

    def __contains__(self, name):
        """Whether the model has a tensor named `name` (`"w1" in m`)."""
        return name in self.tensors

    def __iter__(self):
        """The names of the model's tensors, in the manifest's order (`list(m)`)."""
        return iter(self.tensors)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.__dict__.get("_routines", {})))

    def _tensor(self, name):
        if name not in self.tensors:
            raise KeyError(f"{self.name} has no tensor {name!r}")
        return self.tensors[name]

    def dtype(self, name):
        """The NumPy dtype of tensor `name`'s cells: float32, float64 for an f64 tensor, int32 for
        an i32 tensor, float16 for an f16 tensor, uint16 (bit patterns) for a bf16 tensor, uint8
        for a u8 tensor, bool for a bool tensor."""
        word = self._tensor(name).get("dtype", "float32")
        if word not in _DTYPES:
            raise Error(f"tensor {name!r} has element type {word!r}, which this version of tsr does not know")
        return np.dtype(_DTYPES[word])

    def is_bf16(self, name):
        """Whether tensor `name` is bf16: its view holds uint16 bit patterns (tsr.bf16_to_float32)."""
        return self._tensor(name).get("dtype") in _BF16

    def __getitem__(self, name):
        """Tensor `name` as a NumPy array over the state's buffer (no copy): float32, float64 for
        an f64 tensor, int32 for an i32 tensor, float16 for an f16 tensor, the uint16 bit
        patterns of a bf16 tensor, uint8 for a u8 tensor, bool for a bool tensor."""
        t = self._tensor(name)
        dtype = self.dtype(name)
        with self._using() as state:  # a routine or a new size on another thread finishes first
            shape = self.shape(name)
            if self._api.gpu:  # the host copy, brought from the GPU; writes go back before the next routine
                pointer = self._api.host_buffer(state, t["buffer"])
            else:
                pointer = _fields(state).buffers[t["buffer"]]
            if not pointer:
                if self._api.gpu:
                    raise Error(self._last_error())
                raise Error(f"tensor {name!r} has no storage yet (is its run-time size set?)")
            count = int(np.prod(shape, dtype=np.int64))
            memory = (_CELLS[dtype] * count).from_address(pointer)
            memory._owner = self._owner  # the view keeps the state, and so its buffer, alive
            cells = np.ctypeslib.as_array(memory)  # every view made from this one refers to it
            views = [v for v in self._views.get(t["buffer"], []) if v() is not None]
            self._views[t["buffer"]] = views + [weakref.ref(cells)]
        return cells.view(dtype).reshape(shape)

    def _viewed(self, symbol):
        """The tensors sized by run-time size `symbol` that NumPy views still show."""
        return [t["name"] for t in self._manifest["tensors"] if t.get("length_symbol") == symbol and
                any(v() is not None for v in self._views.get(t["buffer"], []))]

    def __setitem__(self, name, value):
        """Copy `value` into tensor `name`; its shape must be the tensor's (or broadcast to it).
        An i32 (u8) tensor takes integers: floats with a fraction, NaN or values beyond int32
        (0..255) raise tsr.Error rather than being rounded or wrapped; a bool tensor takes
        anything NumPy's astype(bool) does (non-zero is True).  An f16 tensor's values are rounded to
        float16 as NumPy rounds; a bf16 tensor takes numbers, rounded to nearest even
        (tsr.float32_to_bf16), or, as an array of dtype uint16, bit patterns as they are."""
        target = self[name]
        numbers = _numbers(name, value)
        if target.dtype in (np.int32, np.uint8, np.int64):
            value = _integers(name, value, target.dtype, numbers)
        elif target.dtype == np.bool_:
            value = numbers.astype(np.bool_)
        elif self.is_bf16(name):
            value = numbers if numbers.dtype == np.uint16 else float32_to_bf16(_floats(numbers))
        else:
            with np.errstate(over="ignore"):  # beyond the type's range: infinity, as rounding says
                value = _floats(numbers).astype(target.dtype)
        try:
            np.copyto(target, np.broadcast_to(value, target.shape))
        except ValueError:
            raise ValueError(f"tensor {name!r} is {list(target.shape)}; a value of shape {list(value.shape)} does not fit")

    # ---- checkpoints -----------------------------------------------------------------------------

    def save(self, path):
        """Write every parameter (and the training state) to a .npz checkpoint (tsr_state_save)."""
        path = _path("the checkpoint", path)
        with self._using() as state:
            self._call(self._api.save, state, path)

    def load(self, path):
        """Read a checkpoint written by save, an executable's --save or numpy.savez."""
        path = _path("the checkpoint", path)
        with self._using() as state:
            self._call(self._api.load, state, path)

    def init_from(self, path):
        """Start from another model's weights, as an executable's --init-from: read each parameter
        this model trains that the checkpoint holds, leave the others as initialised and the
        training state, seed and counters as they are (tsr_state_init_from).  Returns the number
        of parameters read; a file holding none of them is a tsr.Error that changes nothing."""
        path = _path("the checkpoint", path)
        read = ctypes.c_uint32(0)
        with self._using() as state:
            self._call(self._api.init_from, state, path, ctypes.byref(read))
        return read.value

    def __repr__(self):
        return (f"<tsr.Model {self.__dict__.get('name', '?')}: routines {', '.join(self.__dict__.get('_routines', {}))}; "
                f"{len(self.__dict__.get('_tensors', {}))} tensors{'; closed' if self.closed else '; open'}>")

    def __copy__(self):
        raise Error(f"a model cannot be copied (its copy would share the C state of {self.__dict__.get('name', '?')}): "
                    "tsr.load the library again for a second state, and save() / load() a checkpoint to give it "
                    "this one's parameters")

    def __deepcopy__(self, memo):
        self.__copy__()

    def __reduce_ex__(self, protocol):
        raise Error("a model cannot be pickled: save() a checkpoint, and tsr.load the library and load() it there")


def _whole_number(what, value, lo, hi):
    """`value` as a Python int in lo..hi, or tsr.Error: an int or a NumPy integer, not a float, a
    bool or a string (the C setters take int64_t and check the value; a conversion here would
    round 2.9 to 2 and wrap 2**64 + 3 to 3 before they could)."""
    if isinstance(value, (bool, np.bool_)):
        raise Error(f"{what} takes an integer, not {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise Error(f"{what} takes an integer, not {value!r}") from None
    if not lo <= number <= hi:
        raise Error(f"{what} = {number} is out of the range {lo}..{hi}")
    return number


def _numbers(name, value):
    """`value` as a NumPy array of numbers (bools, integers, floats; an object array of Python
    numbers where an integer is beyond every NumPy type, 2**70), or tsr.Error: None, strings and
    other objects (NumPy would make them NaN or parse the text) and ragged lists."""
    if hasattr(value, "detach") and str(getattr(value, "dtype", "")) == "torch.bfloat16":
        value = value.detach().cpu().float()  # NumPy has no bfloat16; float32 holds each value exactly
    try:
        numbers = np.asarray(value)
    except (ValueError, TypeError, OverflowError) as e:  # [[1, 2, 3], [1]]
        raise Error(f"tensor {name!r} takes numbers in a rectangular array, not {str(value)[:60]!r} ({e})") from None
    if numbers.dtype.kind in "biuf":
        return numbers
    if numbers.dtype.kind == "O" and all(isinstance(x, numbers_abc.Real) for x in numbers.flat):
        return numbers  # Python integers beyond int64 and uint64, kept exact
    raise Error(f"tensor {name!r} takes numbers, not {type(value).__name__} {str(value)[:60]!r}")


def _floats(numbers):
    """An array of `_numbers` as floats: Python integers beyond float64's range become infinity
    of their sign, as rounding to a float type says."""
    if numbers.dtype.kind != "O":
        return numbers
    def one(x):
        try:
            return float(x)
        except OverflowError:
            return math.inf if x > 0 else -math.inf
    return np.array([one(x) for x in numbers.flat], dtype=np.float64).reshape(numbers.shape)


def _integers(name, value, dtype=np.int32, numbers=None):
    """`value` as `dtype` (int32, int64 or uint8) for integer tensor `name`, or tsr.Error when a
    number is not an integer of that type (compared exactly: Python's integers as they are)."""
    original = value
    value, limits = _numbers(name, value) if numbers is None else numbers, np.iinfo(dtype)
    word = {np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.uint8): "u8"}[np.dtype(dtype)]
    if value.dtype.kind == "f" and not isinstance(original, (np.ndarray, np.generic)):
        # Python numbers NumPy made floats ([2**63, 1], [2**53 + 1, 1.0]): taken as they are
        value = np.array(original, dtype=object)
    if value.dtype.kind == "O":  # Python numbers beyond NumPy's integers: each checked exactly
        cells = []
        for x in value.flat:
            if isinstance(x, np.generic):  # a NumPy scalar among Python numbers (np.float32(2)): its value
                x = x.item()
            if not isinstance(x, numbers_abc.Integral) and (not math.isfinite(x) or x != math.trunc(x)):
                raise Error(f"tensor {name!r} is {word}, but the value holds {x}, which is not an integer")
            x = int(x)
            if not limits.min <= x <= limits.max:
                raise Error(f"tensor {name!r} is {word}, but the value holds {x}, which does not fit {np.dtype(dtype).name}")
            cells.append(x)
        return np.array(cells, dtype=dtype).reshape(value.shape)
    if value.dtype.kind == "f" and value.size:
        bad = ~np.isfinite(value) | (value != np.trunc(value))
        if bad.any():
            raise Error(f"tensor {name!r} is {word}, but the value holds {value[bad].flat[0]}, which is not an integer")
    if value.size and value.dtype.kind in "iuf":
        lo, hi = value.min().item(), value.max().item()  # Python's numbers compare exactly (2^63 > int64's top)
        if lo < limits.min or hi > limits.max:
            raise Error(f"tensor {name!r} is {word}, but the value holds {lo if lo < limits.min else hi}, "
                        f"which does not fit {np.dtype(dtype).name}")
    return value.astype(dtype)


def _malformed(manifest, what):
    return Error(f"the manifest {manifest} is malformed: {what} (write the library and its manifest again "
                 f"with tsrc --shared)")


# The functions of the C API a library exports besides its routines and tensors (compiler/cg/abi.c
# abi_reserved), after MODULE_; MODULE_set_* are the setters of index symbols and sizes.
_API_FUNCTIONS = frozenset(("create", "destroy", "last_error", "state", "image", "image_size", "save", "load",
                            "host_buffer", "sync_host", "sync_device", "profile_report", "profile_reset", "_image",
                            "_image_size", "set_option", "option", "create_data", "init_from", "set_num_threads",
                            "num_threads"))


def _validate_manifest(manifest, fields):
    """Refuse a manifest whose form is not tsrc's: the fields the package reads, of their types."""
    def need(ok, what):
        if not ok:
            raise _malformed(manifest, what)

    def integer(x):
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    need(isinstance(fields, dict) and isinstance(fields.get("module"), str) and fields["module"].isidentifier(),
         'no "module" name')
    for key in ("routines", "tensors"):
        need(isinstance(fields.get(key), list), f'no list of "{key}"')
    for key in ("sizes", "indexes", "options"):
        need(isinstance(fields.get(key, []), list), f'"{key}" is not a list')
    module, names = fields["module"], set()
    for r in fields["routines"]:
        need(isinstance(r, dict) and isinstance(r.get("name"), str) and isinstance(r.get("symbol"), str),
             f"a routine without a name and a symbol: {str(r)[:80]}")
        # a routine's function is MODULE_name, never one of the API's (called as a routine, MODULE_destroy
        # would free the state it is given)
        own = r["symbol"][len(module) + 1:] if r["symbol"].startswith(module + "_") else ""
        need(own and own.lower() not in _API_FUNCTIONS and not own.startswith("set_"),
             f"routine {r['name']!r} names the function {r['symbol']!r}, which is not a routine's")
        need(r["name"] not in names, f"two routines are named {r['name']!r}")
        names.add(r["name"])
    names = set()
    for t in fields["tensors"]:
        need(isinstance(t, dict) and isinstance(t.get("name"), str), f"a tensor without a name: {str(t)[:80]}")
        what = f"tensor {t['name']!r}"
        need(t["name"] not in names, f"two tensors are named {t['name']!r}")
        names.add(t["name"])
        need(integer(t.get("buffer")), f'{what} has no "buffer" number')
        need(isinstance(t.get("kind"), str), f'{what} has no "kind"')
        need(isinstance(t.get("dtype", "float32"), str), f'{what} has a "dtype" that is not a name')
        dims = t.get("dims")
        need(isinstance(dims, list), f'{what} has no list of "dims"')
        if "length_symbol" in t:
            need(integer(t["length_symbol"]) and len(dims) > 0, f'{what} has a bad "length_symbol"')
        need(all(integer(d) for d in dims[1 if "length_symbol" in t else 0:]), f'{what} has dims that are not sizes')
    for key in ("sizes", "indexes"):
        for e in fields.get(key, []):
            need(isinstance(e, dict) and isinstance(e.get("name"), str) and integer(e.get("symbol")),
                 f'an entry of "{key}" without a name and a symbol number: {str(e)[:80]}')
    for e in fields.get("options", []):
        need(isinstance(e, dict) and isinstance(e.get("name"), str) and e.get("kind") in ("integer", "number"),
             f'an entry of "options" without a name and a kind: {str(e)[:80]}')


# The model image (runtime/image_format.h) as far as the manifest's numbers need it: its
# symbols and buffers.  Versions 19 to 23 lay these out alike (a buffer's values as f64s; 23 puts the
# program's hash after the module's name).
_IMAGE_VERSIONS = range(19, 24)
_IMAGE_DTYPES = ("float32", "int32", "float64", "bfloat16", "float16", "uint8", "bool", "int64")


def _image_tables(image, size, version):
    """[(is_size, leader)] per symbol and [(name, is_virtual, dtype, dims)] per buffer of the model
    image at `image` (`size` bytes), or None where it is not an image the package can read."""
    data = (ctypes.c_ubyte * size).from_address(image)
    at = [16]

    def take(fmt):
        n = struct.calcsize(fmt)
        if at[0] + n > size:
            raise ValueError("cut short")
        value = struct.unpack_from(fmt, data, at[0])
        at[0] += n
        return value

    def text():
        (n,) = take("<I")
        if at[0] + n > size:
            raise ValueError("cut short")
        at[0] += n
        return bytes(data[at[0] - n:at[0]]).decode("utf-8", "replace")

    text()  # module
    if version >= 23:
        take("<Q")  # the program's hash
    take("<I"), text()  # cpu features, cpu name
    symbols = []
    for _ in range(take("<I")[0]):
        text()
        _, is_size, leader = take("<qBI")
        symbols.append((is_size, leader))
    buffers = []
    for _ in range(take("<I")[0]):
        name = text()
        text()
        _, _, is_virtual, _, dtype, rank = take("<BBBBBI")
        dims = take(f"<{rank}q") if rank else ()
        _, _, count = take("<ddQ")
        if count > (size - at[0]) // 8:
            raise ValueError("cut short")
        at[0] += 8 * count
        buffers.append((name, is_virtual, dtype, dims))
    return symbols, buffers


def _check_manifest(lib, library, manifest, fields):
    """Refuse a manifest that does not describe `library`: another module's (its symbols are not
    there), another compile of the same module (its "image_checksum", the checksum in the header
    of the model image it was written with, is not the library's image's), or one whose buffer
    and symbol numbers, element types and dims are not the image's (a hand-edited one).  The
    model would otherwise read and write buffers of the sizes the wrong manifest gives."""
    name = fields["module"]
    try:
        image = ctypes.c_ubyte.in_dll(lib, f"{name}__image")
        image_size = ctypes.c_uint64.in_dll(lib, f"{name}__image_size").value
        getattr(lib, f"{name}_create")
    except (AttributeError, ValueError):
        raise Error(f"{library} is not the library of the manifest {manifest}: it has no module {name!r} "
                    f"(tsrc --shared writes the library and its manifest together)") from None
    want = fields.get("image_checksum")
    if want is None:
        raise Error(f"the manifest {manifest} has no \"image_checksum\" (an older tsrc wrote it), so it cannot be "
                    f"checked against {library}: write the library and its manifest again with tsrc --shared")
    header = ctypes.string_at(ctypes.addressof(image), 16) if image_size >= 16 else b""
    if header[:4] != b"TSRI":
        raise Error(f"{library} holds no model image the package can read (module {name!r})")
    version = int.from_bytes(header[4:8], "little")
    have = int.from_bytes(header[8:16], "little")
    try:
        same = isinstance(want, str) and int(want, 16) == have
    except ValueError:
        same = False
    if not same:
        raise Error(f"the manifest {manifest} is not that of {library}: it describes another compile of module "
                    f"{name!r} (the model image's checksum is {have:016x}, the manifest's {want}); write both "
                    f"again with tsrc --shared")
    if version not in _IMAGE_VERSIONS:
        raise Error(f"{library} holds a model image of version {version}, which this tsr package does not read "
                    f"(it reads versions {_IMAGE_VERSIONS[0]} to {_IMAGE_VERSIONS[-1]}): use the package of the tsrc "
                    f"that compiled it")
    try:
        symbols, buffers = _image_tables(ctypes.addressof(image), image_size, version)
    except (ValueError, struct.error):
        raise Error(f"the model image in {library} is malformed (it ends inside its tables)") from None

    def refuse(what):
        raise Error(f"the manifest {manifest} does not match {library}: {what} (write the library and its "
                    f"manifest again with tsrc --shared)")
    for t in fields["tensors"]:
        b = t["buffer"]
        if b >= len(buffers) or buffers[b][1]:
            refuse(f"tensor {t['name']!r} names buffer {b}, which the model has no storage for "
                   f"(it has {len(buffers)} buffers)")
        _, _, dtype, dims = buffers[b]
        word = np.dtype(_DTYPES.get(t.get("dtype", "float32"), np.void)).name
        ours = _IMAGE_DTYPES[dtype] if dtype < len(_IMAGE_DTYPES) else f"type {dtype}"
        if word != np.dtype(_DTYPES.get(ours, np.void)).name or (t.get("dtype") in _BF16) != (ours == "bfloat16"):
            refuse(f"tensor {t['name']!r} is {t.get('dtype', 'float32')} there, buffer {b} is {ours}")
        expect = list(t["dims"])
        if "length_symbol" in t:
            expect[0] = -1 - t["length_symbol"]
        if list(dims) != expect:
            refuse(f"tensor {t['name']!r} has dims {t['dims']} there, buffer {b} {list(dims)} "
                   f"(a negative dim: the run-time size of symbol -1 - dim)")
    for key, is_size in (("sizes", 1), ("indexes", 0)):
        for e in fields.get(key, []):
            if e["symbol"] >= len(symbols) or symbols[e["symbol"]][0] != is_size:
                refuse(f"{key[:-1] if key == 'sizes' else 'index'} {e['name']!r} names symbol {e['symbol']}, which "
                       f"is not {'a run-time size' if is_size else 'an index symbol'} of the model "
                       f"(it has {len(symbols)} symbols)")
    for r in fields["routines"]:
        if not hasattr(lib, r["symbol"]):
            refuse(f"routine {r['name']!r} is the function {r['symbol']!r}, which the library does not have")


def load(library, manifest=None, seed=0, data=None):
    """The model compiled into `library` (tsrc --shared), with a fresh state: parameters drawn
    from `seed`, as an executable's --seed would draw them; `data` ({"xs": "other.npy"}) reads
    data items from other files, as an executable's --data NAME=PATH."""
    return Model(library, manifest, seed, data)


def _cache_dir():
    return os.environ.get("TSR_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "tsr")


def compile(source, seed=0, tsrc=None, options=(), cache=None, data=None):  # noqa: A001 (the natural name)
    """Compile the .tsr file `source` with `tsrc --shared` and load it (tsr.load).

    `tsrc` is the compiler to run (default: $TSRC, else `tsrc` on PATH); `options` are more of
    its options (["--cpu=x86-64-v3"], ["-I", "lib"]).  The library is kept in `cache` (default
    $TSR_CACHE, else $XDG_CACHE_HOME/tsr or ~/.cache/tsr) under a name made from the hash of
    the source's path and text, the options and the compiler's own file, so a second call with
    nothing changed loads it without compiling; the modules the source `open`s (beside it, or
    from -I directories: the manifest's "sources") are checked too, and a change in any of them
    compiles afresh (`data` as tsr.load's).  `options` may be one string, split as a shell would (shlex.split:
    "-I lib --cpu=x86-64-v3").  Compile errors raise tsr.Error with tsrc's messages; so do a
    compiler that is not an executable file and a cache directory that cannot be made."""
    if tsrc and not os.path.exists(tsrc):
        raise Error(f"tsrc={tsrc!r} does not exist")
    tsrc = tsrc or os.environ.get("TSRC") or shutil.which("tsrc")
    if not tsrc or not os.path.exists(tsrc):
        raise Error("cannot find tsrc (pass tsrc=..., set $TSRC or put it on PATH)")
    tsrc = os.path.abspath(tsrc)
    if not os.path.isfile(tsrc) or not os.access(tsrc, os.X_OK):
        raise Error(f"tsrc={tsrc!r} is not an executable file")
    if isinstance(options, (str, bytes)):  # one string: split as a shell would, not into characters
        options = shlex.split(os.fsdecode(options))
    try:
        options = [os.fspath(o) for o in options]
    except TypeError:
        raise Error(f"options={options!r} is not a list of strings (or one string)") from None
    if not all(isinstance(o, str) for o in options):
        raise Error(f"options={options!r} is not a list of strings (or one string)")
    try:
        with open(source, "rb") as f:
            text = f.read()
    except OSError as e:
        raise Error(f"cannot read {source}: {e}") from None
    st = os.stat(tsrc)
    key = hashlib.sha256()
    where = os.path.realpath(source).encode("utf-8", "surrogateescape")
    # Code generated for this machine's CPU (no --cpu given) is kept apart from another CPU's: a
    # cache shared between machines (a home directory over NFS) must not hand a library that
    # uses AVX-512 to one without it.
    cpu = b"" if any(o.startswith("--cpu") for o in options) else _host_cpu()
    for part in (where, text, "\0".join(options).encode(), f"{tsrc}:{st.st_size}:{st.st_mtime_ns}".encode(), cpu):
        key.update(part)
        key.update(b"\0")
    stem = os.path.splitext(os.path.basename(source))[0]
    name = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in stem) or "model"
    if name[0].isdigit() or name[0] == "_" or name.lower() == "tsr" or name.lower().startswith("tsr_"):
        name = "m_" + name  # a C identifier outside the runtime's tsr_ names
    directory = _cache_dir() if cache in (None, True) else (cache or None)
    try:
        if directory is None:  # cache=False: a fresh directory per call, left for the caller's process
            directory = tempfile.mkdtemp(prefix="tsr-")
        if os.path.exists(directory) and not os.path.isdir(directory):
            raise NotADirectoryError(0, "it is not a directory")
        os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError("not writable")
    except OSError as e:
        raise Error(f"cannot use {directory or tempfile.gettempdir()!r} as tsr.compile's cache directory: "
                    f"{e.strerror or e}") from None

    def library_of(name):
        return os.path.join(directory, f"lib{name}-{key.hexdigest()[:16]}.so")

    def cached(library):  # sources: the hash of every file the library was compiled from
        return (os.path.exists(library) and os.path.exists(library[:-3] + ".json") and
                _sources_unchanged(library[:-3] + ".sources"))

    if not cached(library_of(name)) and cached(library_of("m_" + name)):
        name = "m_" + name  # compiled under m_ before (below)
    while True:
        library = library_of(name)
        sources = library[:-3] + ".sources"
        if cached(library):
            break
        try:
            p = subprocess.run([tsrc, "--shared", f"--name={name}", *options, source, "-o", library],
                               capture_output=True, text=True)
        except OSError as e:
            raise Error(f"cannot run tsrc={tsrc!r}: {e}") from None
        if p.returncode == 0:
            _record_sources(library[:-3] + ".json", sources)
            break
        # A name whose header functions the C library has (sem.tsr: sem_destroy) gets m_ too.
        if f"the module name '{name}' would make the header's function" in p.stderr and not name.startswith("m_"):
            name = "m_" + name
            continue
        said = p.stderr.rstrip() or p.stdout.rstrip()
        raise Error(f"tsrc could not compile {source}: " +
                    (f"\n{said}" if said else f"{tsrc!r} ended with status {p.returncode} and said nothing "
                     "(is it tsrc? tsr.compile runs $TSRC, else tsrc on the PATH)"))
    return Model(library, None, seed, data)


def _host_cpu():
    """What tells this machine's CPU apart for code generated for it: /proc/cpuinfo's model name
    and feature flags (the first processor's), else the platform's processor string."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            block = f.read().split(b"\n\n", 1)[0]
        return b"\n".join(line for line in block.splitlines()
                          if line.startswith((b"model name", b"flags", b"vendor_id", b"cpu family", b"model\t")))
    except OSError:
        import platform
        return platform.processor().encode()


def _file_hash(path):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _record_sources(manifest, sources):
    """Write beside a compiled library the hash of each file its manifest lists in "sources"."""
    try:
        with open(manifest) as f:
            files = json.load(f).get("sources", [])
    except (OSError, ValueError):
        return
    lines = [f"{_file_hash(path) or '-'} {path}\n" for path in files]
    temporary = f"{sources}.{os.getpid()}"
    with open(temporary, "w") as f:
        f.writelines(lines)
    os.replace(temporary, sources)


def _sources_unchanged(sources):
    """Whether every file a cached library was compiled from still has the hash it had."""
    try:
        with open(sources) as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        digest, _, path = line.partition(" ")
        if not path or _file_hash(path) != digest:
            return False
    return True
