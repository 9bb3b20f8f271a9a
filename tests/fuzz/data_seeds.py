"""data_seeds.py — seed inputs for the data-loader fuzz target (fuzz_data.c), written by
tools/fuzz.sh into the target's corpus directory.

Each seed is fuzz_data.c's 8-byte header (loader, ranks, dims) followed by a file that the
loader accepts for that shape, or one of the project's bad test files: .npy files in format
versions 1, 2 and 3 and the four dtypes; CSV files with headers, comments, blanks and commas;
.npz archives of stored members as numpy.savez writes them (with and without zip64 local
headers), one with a member missing.  Standard library only (no NumPy needed).
usage: data_seeds.py OUT_DIR [EXTRA_FILE…]  (extra files, of shape 4×3, are added as .npy and CSV seeds)"""
import io
import os
import struct
import sys
import zipfile

NPY, CSV, NPZ = 0, 1, 2
FORMATS = {"<f4": "f", "<f8": "d", "<i4": "i", "<i8": "q"}


def header(loader, dims_a, dims_b=(), only_b=False):
    a = list(dims_a) + [0] * (3 - len(dims_a))
    b = list(dims_b) + [0] * (3 - len(dims_b))
    flags = len(dims_a) | len(dims_b) << 2 | (0x10 if only_b else 0)
    return bytes([loader, flags] + a + b)


def npy(dims, descr="<f4", version=1):
    cells = 1
    for d in dims:
        cells *= d
    shape = "(" + "".join("%d, " % d for d in dims)[:-2] + ("," if len(dims) == 1 else "") + ")"
    text = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape)
    size_bytes = 2 if version == 1 else 4
    pad = (-(6 + 2 + size_bytes + len(text) + 1)) % 64
    text = text + " " * pad + "\n"
    encoded = text.encode("latin1" if version < 3 else "utf8")
    length = struct.pack("<H" if version == 1 else "<I", len(encoded))
    body = struct.pack("<%d%s" % (cells, FORMATS[descr]), *[(k % 7) - 3 for k in range(cells)])
    return b"\x93NUMPY" + bytes([version, 0]) + length + encoded + body


def npz(arrays, force_zip64=False):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as z:
        for name, data in arrays:
            with z.open(zipfile.ZipInfo(name + ".npy", (1980, 1, 1, 0, 0, 0)), "w", force_zip64=force_zip64) as f:
                f.write(data)
    return out.getvalue()


def seeds():
    shapes = [(), (1,), (5,), (2, 3), (4, 1), (2, 3, 4), (1, 1, 2)]
    for i, dims in enumerate(shapes):
        for descr in FORMATS:
            yield header(NPY, dims) + npy(dims, descr, 1 + i % 3)
    for dims, text in [((2, 3), "1,2,3\n4,5,6\n"), ((2, 3), "a b c\n# note\n1 2 3\n4 5 6\n"),
                       ((3,), "1.5e3, -2, nan\n"), ((6,), "1\n2\n3\n4\n5\n6\n"), ((2, 2), "x,y\n1,2\n3,4\n")]:
        yield header(CSV, dims) + text.encode()
    for a, b in [((2, 3), (4,)), ((), (1,)), ((3, 1, 2), (2, 2))]:
        members = [("a", npy(a)), ("b", npy(b, "<f8"))]
        yield header(NPZ, a, b) + npz(members)
        yield header(NPZ, a, b) + npz(members, force_zip64=True)
        yield header(NPZ, a, b, only_b=True) + npz(members[1:])
        yield header(NPZ, a, b) + npz(members[:1])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for k, seed in enumerate(seeds()):
        with open(os.path.join(out, "seed_%03d" % k), "wb") as f:
            f.write(seed)
    for path in sys.argv[2:]:
        with open(path, "rb") as f:
            data = f.read()
        base = os.path.basename(path)
        for loader in (NPY, CSV):
            with open(os.path.join(out, "file_%d_%s" % (loader, base)), "wb") as f:
                f.write(header(loader, (4, 3)) + data)


main()
