#!/usr/bin/env python3
"""einsum_diff.py: differential test of tsrc's einsum against NumPy.

This script generates random einsum specs (language.md section 5) with random operand
shapes and values, has `tsrc --run --interp` evaluate them with the reference executor,
and compares what tsrc prints with a NumPy reference.

A case is one einsum with 1 to 3 operands (`++`, `+*` or `einsum3 ~spec:`), each operand a
tensor literal of its own. The generator covers: up to 6 distinct labels, labels shared across
operands and moving between row kinds (batch, input, output), labels summed away, diagonals
(a label repeated in one operand slot, or repeated in the result slot), fixed indices in
operands (read one slice) and in the result (write one position), placeholders `_` (in
operands: summed; in the result, rarely: a new axis that nothing sizes, so of size 1), the
default row variables `...` of all three kinds and named row variables `..v..` (which may
appear in several kinds and move between them), each standing for 0, 1 or 2 axes,
multi-character specs (the usual) and single-character specs (sometimes, when all names allow
it), and the different ways of writing a slot (`b|i->o`, `b|o`, `i->o`, `o`, `|`, `->`).

The reference expands every row variable into the explicit axes it stands for, applies fixed
indices with np.take, contracts with np.einsum (which reads diagonals from repeated
subscripts), and scatters the result into a zero array for result diagonals and fixed indices.
Every tensor is laid out in tsrc's memory order (batch axes, then output, then input). For each
case the printed shape of the result (`batch|input->output`) and all its values (tolerance 1e-4
relative to max(1, max|expected|)) are compared.

With `--dtype f64` every tensor is f64 (docs/language.md section 3.9): each operand is an f64
parameter whose initial value is its literal (`let%op c0_a = { c0_a = [...]; b = [..]; dtype =
"f64" }`), so the einsum and its result are f64 too, and tsrc prints every value in full
(TSR_PRINT_EXACT=1, %.17g). The values are then random floats of [-2, 2] with full 24-bit
significands (a literal is read as f32, so its values are float32's, each written as the shortest
decimal of that double) rather than quarters: products of two of them need 48 bits, so arithmetic
done in f32 anywhere (a narrowed operand, product or sum) is off by about 1e-7 relative, where
double precision is off by about 1e-16. NumPy computes in float64, and every value must lie within
the error bound of double-precision sums of products (Higham, Accuracy and Stability of Numerical
Algorithms, 2nd ed., section 3.1): a result cell is a sum of n products of m factors (n the sizes
of its summed axes multiplied, m the operand count), and any order of evaluation in double
precision is within gamma(n + m - 2) * sum|terms| of the exact value, gamma(k) = k*u / (1 - k*u),
u = 2^-53; tsrc and NumPy each are, so they must agree within

    |tsrc - numpy| <= 2 * gamma(n + m) * sum|terms|      (sum|terms|: the einsum of |operands|)

per cell: at most about 1e-16 * n of the magnitudes (4e-12 at the largest n of 20000), where an
f32 result would be about 6e-8 of them away; a cell that nothing is summed into must be exactly 0.

With `--dtype bf16` or `--dtype f16` every tensor is of that storage type (docs/language.md
section 3.9: computed in f32, a contraction into it accumulating in f32 and rounding each result
cell once, to nearest even): each operand is, half of the time each, a parameter of the type
whose initial value is its literal (`{ c0_a = [...]; dtype = "bf16" }`) or `to_bf16`/`to_f16` of
the literal, and the comparison is exact (TSR_PRINT_EXACT=1 prints a half value as %.9g of its
f32 value, read back as that float32). For that, every value is exact in the type and every sum
exact in f32, in any order: a case whose cells sum n products of m factors has values k * 2^e
with integers |k| < 2^b, b the most bits (at most the type's 8 or 11 significant bits) with
n * 2^(m*b) <= 2^24, so every partial sum is an integer below 2^24 in units of the last place
of its terms (b is 3 or more for every case). The common e puts them in (-4, 4); a quarter of
the operands are scaled by a power of 2 besides (f16: down until the values are multiples of
2^-24, its least subnormal, so results fall among the subnormals or round to 0, or up so that
products pass 65504 and round to infinity; bf16: 2^-20 to 2^20). The reference is NumPy's exact
float64 result rounded once to the type: np.float16 for f16, float32's bit pattern rounded to
nearest even in its top 16 bits for bf16. About half of the result cells are not values of the
type, so the rounding itself is checked, to the bit.

With `--dtype i32` or `--dtype i64` every tensor is that integer type: each operand is `to_i32`
(`to_i64`) of a literal of whole numbers of up to 24 bits (exact in the literal's f32), so the
products of two already overflow an i32 and those of three an i64. tsrc's arithmetic wraps
(two's complement, docs/language.md section 3.9), as NumPy's einsum does on int32 and int64
arrays, and a wrapped sum is the same in every order, so the comparison is exact: tsrc prints
integers in full, and they must equal NumPy's.

Cases are batched, BATCH per .tsr file, and the files are run in parallel. When a file fails
as a whole (tsrc exits with an error or prints something unexpected), each of its cases is run
alone so that the failing case(s) can be named.

Usage:
    python3 tests/einsum/einsum_diff.py --tsrc build/tsrc --count 600 --seed 1 [--keep DIR]
                                        [--verbose] [--jobs N] [--batch N] [--dtype f32|f64|bf16|f16|i32|i64]
                                        [--emit-cases DIR [--target cuda|native] [--arch sm_NN]]

With --emit-cases DIR (tests/gpu/prepare.sh, for `make check-gpu`), the cases are checked against
NumPy as above and then, besides, each batch file is kept in DIR/src/, built into an executable
DIR/bin/einsum_NNN (`tsrc --target=cuda --arch=ARCH`, or for the host CPU with --target native),
its expected output written to DIR/expected/einsum_NNN.out (the reference executor's, every float
in full: TSR_PRINT_EXACT=1 tsrc --run --interp) and a line appended to DIR/cases.txt (name,
executable, expected file, no arguments; tab-separated, paths relative to DIR, executable "-" when
the build failed; tests/gpu/run.sh runs them).  A batch that does not build counts as one failure.

The output is deterministic for a given seed and count. The last line of stdout is
`N passed, N failed` (cases); the exit status is 1 if any case failed, else 0 (2 for a bad
command line or a missing NumPy). Needs only the standard library and NumPy.
"""

import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:  # pragma: no cover - environment problem, not a test failure
    sys.stderr.write("einsum_diff.py: NumPy is required (try /usr/bin/python3 with python3-numpy)\n")
    sys.exit(2)

KINDS = ("b", "i", "o")   # batch, input, output: the order rows are written in a slot
MEM_ORDER = ("b", "o", "i")  # the order axes are laid out in memory
KIND_NAME = {"b": "batch", "i": "input", "o": "output"}

# Label names. Single letters allow single-character mode; the longer ones force multi-character
# mode. Row-variable names are disjoint from labels (a name may not be both in one spec).
SINGLE_LABELS = list("ijklmnpqrstxyzabcdefhABK")
MULTI_LABELS = ["hd", "x1", "ch_2", "seq", "kk", "b0", "Tm", "heads"]
SINGLE_RVARS = ["v", "w", "g", "u"]
MULTI_RVARS = ["grp", "rv2", "spatial"]

MAX_CELLS = 400        # cells per operand or result
MAX_LOOP = 20000       # product of the sizes of all distinct axes of a case
TOLERANCE = 1e-4       # f32: relative to max(1, max|expected|)
# The element type of every tensor (--dtype). f64 is checked against the per-cell bound of the
# header, 2 * gamma(n + m) * sum|terms| with gamma(k) = k*u / (1 - k*u): U64 is the unit
# roundoff of double precision.
DTYPE = "f32"
U64 = 2.0 ** -53
# The significant bits of the half types (--dtype bf16, f16): operand values have at most this
# many, so that they are exact in the type (gen_case).
HALF_BITS = {"bf16": 8, "f16": 11}
# The integer types (--dtype i32, i64) and NumPy's type of each.
INT_TYPES = {"i32": "int32", "i64": "int64"}


# ---------------------------------------------------------------------------------------------
# Spec model
#
# An element of a row is a tuple:
#   ("L", name)   a label
#   ("F", n)      a fixed index
#   ("P", k)      a placeholder, k numbers it within the case (each `_` is its own axis)
#   ("R", key)    a row variable; key is ("...", kind) for the default one of a kind, or
#                 ("..", name) for a named one
# A slot is a dict kind -> list of elements.
# ---------------------------------------------------------------------------------------------


class Case:
    """One generated einsum: spec, operand layouts and values, and the expected result."""

    def __init__(self, index):
        self.index = index
        self.ops = []            # operand slots
        self.result = None       # result slot
        self.spec = ""
        self.single_mode = False
        self.label_size = {}
        self.rvar_sizes = {}     # key -> list of axis sizes
        self.op_axis_sizes = []  # per operand: (kind, position) -> size of F and P elements
        self.values = []         # numpy arrays in memory order, one per operand
        self.op_layout = []      # per operand: its axes in memory order (see expand_slot)
        self.expected = None     # numpy array, memory order
        self.expected_shape = ""
        self.features = set()

    @property
    def prefix(self):
        return "c%d" % self.index

    def op_name(self, j):
        return "%s_%s" % (self.prefix, "abc"[j])

    @property
    def result_name(self):
        return self.prefix + "_r"


def rvar_key_text(key):
    return "..." if key[0] == "..." else "..%s.." % key[1]


def elem_text(e):
    if e[0] == "L":
        return e[1]
    if e[0] == "F":
        return str(e[1])
    if e[0] == "P":
        return "_"
    return rvar_key_text(e[1])


def gen_spec(rng, case):
    """Pick the operand and result slots of a case (no sizes yet)."""
    nops = rng.choices([1, 2, 3], [3, 4, 3])[0]
    single_names = rng.random() < 0.6
    pool = SINGLE_LABELS if single_names else SINGLE_LABELS + MULTI_LABELS
    labels = rng.sample(pool, rng.randint(1, 6))
    default_rv = [k for k in KINDS if rng.random() < 0.45]
    rv_pool = SINGLE_RVARS if single_names else SINGLE_RVARS + MULTI_RVARS
    named_rv = rng.sample(rv_pool, rng.choices([0, 1, 2], [5, 4, 1])[0])
    placeholder_count = [0]

    def operand_elem():
        r = rng.random()
        if r < 0.78:
            return ("L", rng.choice(labels))
        if r < 0.89:
            return ("F", rng.choices([0, 1, 2, 3], [5, 3, 2, 1])[0])
        placeholder_count[0] += 1
        return ("P", placeholder_count[0])

    ops = []
    for _ in range(nops):
        slot = {}
        for k in KINDS:
            row = [operand_elem() for _ in range(rng.choices([0, 1, 2, 3], [4, 4, 3, 1])[0])]
            cands = ([("...", k)] if k in default_rv else []) + [("..", n) for n in named_rv]
            if cands and rng.random() < 0.5:
                row.insert(rng.randint(0, len(row)), ("R", rng.choice(cands)))
            slot[k] = row
        # Sometimes force a diagonal: repeat one of the slot's labels somewhere in the slot.
        present = [e for k in KINDS for e in slot[k] if e[0] == "L"]
        if present and rng.random() < 0.12:
            k = rng.choice(KINDS)
            slot[k].insert(rng.randint(0, len(slot[k])), rng.choice(present))
        ops.append(slot)
    # Half of the time, use every label of the pool somewhere (so up to 6 distinct labels).
    if rng.random() < 0.5:
        for name in labels:
            if not any(e == ("L", name) for slot in ops for k in KINDS for e in slot[k]):
                row = rng.choice(ops)[rng.choice(KINDS)]
                row.insert(rng.randint(0, len(row)), ("L", name))

    op_labels = []
    op_rvars = []
    for slot in ops:
        for k in KINDS:
            for e in slot[k]:
                if e[0] == "L" and e[1] not in op_labels:
                    op_labels.append(e[1])
                if e[0] == "R" and e[1] not in op_rvars:
                    op_rvars.append(e[1])

    # The result: only labels and row variables that some operand has (a result-only label or
    # row variable would be sized by nothing), plus fixed indices and, rarely, placeholders.
    res = {k: [] for k in KINDS}
    res_has_rv = {k: False for k in KINDS}
    for key in op_rvars:
        if rng.random() < 0.7:
            kinds = [key[1]] if key[0] == "..." else list(KINDS)
            kinds = [k for k in kinds if not res_has_rv[k]]
            if not kinds:
                continue
            times = 2 if key[0] == ".." and len(kinds) >= 2 and rng.random() < 0.12 else 1
            for k in rng.sample(kinds, times):   # twice: a diagonal written over its axes
                res[k].append(("R", key))
                res_has_rv[k] = True
    for name in op_labels:
        if rng.random() < 0.6:
            res[rng.choice(KINDS)].append(("L", name))
    carried = [e for k in KINDS for e in res[k] if e[0] == "L"]
    if carried and rng.random() < 0.15:
        res[rng.choice(KINDS)].append(rng.choice(carried))          # result diagonal
    if rng.random() < 0.15:
        # Nothing else sizes a result's fixed index n: it closes to size n + 1. Indices of two
        # digits are one token in multi-character mode.
        n = rng.choices([0, 1, 2, 3, rng.randint(4, 11)], [5, 3, 2, 1, 1])[0]
        res[rng.choice(KINDS)].append(("F", n))
    if rng.random() < 0.05:
        placeholder_count[0] += 1
        res[rng.choice(KINDS)].append(("P", placeholder_count[0]))
    for k in KINDS:
        rng.shuffle(res[k])

    case.ops = ops
    case.result = res


def choose_sizes(rng, case):
    """Give every label, row-variable axis, fixed index and placeholder a size (1..4).

    An axis that lands in an operand's input row is written as a tuple in the literal, and a
    tuple needs at least 2 elements, so such axes get size >= 2. Small sizes are likelier."""
    def size(lo):
        return rng.choices(range(lo, 5), [4, 4, 2, 1][lo - 1:])[0]

    in_input = {e for slot in case.ops for e in slot["i"] if e[0] in ("L", "R")}
    case.label_size = {}
    case.rvar_sizes = {}
    for slot in case.ops:
        for k in KINDS:
            for e in slot[k]:
                lo = 2 if e in in_input else 1
                if e[0] == "L" and e[1] not in case.label_size:
                    case.label_size[e[1]] = size(lo)
                elif e[0] == "R" and e[1] not in case.rvar_sizes:
                    case.rvar_sizes[e[1]] = [size(lo) for _ in range(rng.choice([0, 1, 2]))]
    # A fixed index or placeholder of an operand is an axis of its own, sized by position
    # (the element tuples themselves may repeat, e.g. two ("F", 0) in one slot).
    pick_pinned_sizes(case, rng)


def expand_slot(case, slot, sizes=None, operand=True):
    """The axes of a slot in memory order: list of (kind, element, axis id, size).

    Axis ids: ("L", name), ("R", key, t) for axis t of a row variable; a fixed index or a
    placeholder gets an id of its own, as it relates to nothing (fixed indices are taken out
    before the contraction, so theirs only has to differ from the others).
    The result's fixed index n has size n + 1 and its placeholders size 1: nothing else
    sizes them, and closing gives them the least size allowed."""
    out = []
    for k in MEM_ORDER:
        for pos, e in enumerate(slot[k]):
            if e[0] == "L":
                out.append((k, e, ("L", e[1]), case.label_size[e[1]]))
            elif e[0] == "R":
                for t, s in enumerate(case.rvar_sizes[e[1]]):
                    out.append((k, e, ("R", e[1], t), s))
            elif e[0] == "F":
                s = sizes[k, pos] if operand else e[1] + 1
                out.append((k, e, ("F", id(slot), k, pos), s))
            else:
                s = sizes[k, pos] if operand else 1
                out.append((k, e, ("P", e[1]), s))
    return out


def shape_text(axes):
    """tsrc's printed shape `batch|input->output` for a memory-order axis list."""
    rows = {k: [str(a[3]) for a in axes if a[0] == k] for k in KINDS}
    text = ""
    if rows["b"]:
        text += ",".join(rows["b"]) + "|"
    if rows["i"]:
        text += ",".join(rows["i"]) + "->"
    text += ",".join(rows["o"])
    return text or "1"


def render_spec(rng, case):
    """The spec string; multi-character mode unless single-character mode was chosen."""
    slots = case.ops + [case.result]
    all_elems = [e for s in slots for k in KINDS for e in s[k]]
    can_single = all(
        (e[0] != "L" or len(e[1]) == 1)
        and (e[0] != "F" or e[1] < 10)
        and (e[0] != "R" or e[1][0] == "..." or len(e[1][1]) == 1)
        for e in all_elems)
    single = can_single and rng.random() < 0.15
    sep_row = (lambda: rng.choice(["", " "])) if single else (lambda: rng.choice([", ", ","]))
    sp = lambda: rng.choice(["", " "])

    def row_text(row, comma):
        text = ""
        for n, e in enumerate(row):
            text += (sep_row() if n else "") + elem_text(e)
        return text + ("," if comma else "")

    def slot_text(slot, comma_kind):
        b, i, o = (row_text(slot[k], k == comma_kind) for k in KINDS)
        full = rng.random() < 0.2      # sometimes write empty rows explicitly
        if not b and not i and not o:
            return rng.choice(["|", "->", "|->"])
        if not b and not i and not full:
            return o
        if not i and not full:
            return b + sp() + "|" + sp() + o
        if not b and not full:
            return i + sp() + "->" + sp() + o
        return b + sp() + "|" + sp() + i + sp() + "->" + sp() + o

    def build(comma_at=(None, None)):
        texts = [slot_text(s, comma_at[1] if n == comma_at[0] else None)
                 for n, s in enumerate(slots)]
        return (";" + sp()).join(texts[:-1]) + sp() + "=>" + sp() + texts[-1]

    text = build()
    if single:
        assert not re.search(r"[,*+^&<]|=(?!>)", text), text
    elif "," not in text:
        # No row has two elements: a trailing comma after some written row selects
        # multi-character mode ("abc, => abc").
        text = build(rng.choice([(n, k) for n, s in enumerate(slots) for k in KINDS if s[k]]))
    case.single_mode = single
    case.spec = text


def compute_expected(case):
    """The NumPy reference: the expected result and, for f64, each cell's error bound."""
    values = case.values
    if DTYPE in INT_TYPES:   # NumPy's wrapping integer arithmetic (the values are whole numbers)
        values = [v.astype(INT_TYPES[DTYPE]) for v in values]
    case.expected, terms = contract(case, values)
    case.expected_shape = shape_text(expand_slot(case, case.result, operand=False))
    if DTYPE in HALF_BITS:
        # The sums are exact in f32 (gen_case's values), so the one rounding of each cell to
        # the type is all that happens: NumPy's exact double, rounded once.
        case.expected = round_half(case.expected, DTYPE)
    if DTYPE == "f64":
        magnitude, _ = contract(case, [np.abs(v) for v in case.values])
        k = terms + len(case.ops)
        case.bound = 2 * (k * U64 / (1 - k * U64)) * magnitude


def round_half(values, dtype):
    """Exact doubles (f32 values: gen_case keeps them so) rounded to nearest even into bf16 or
    f16, as doubles: f16 through np.float16 (past 65504 infinity, subnormals below 2^-14), bf16
    by rounding float32's bit pattern to its top 16 bits (f32's range, so no new overflow)."""
    a = np.asarray(values, dtype=np.float64)
    f = a.astype(np.float32)
    assert np.array_equal(f.astype(np.float64), a, equal_nan=True), "not an f32 value"
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return f.astype(np.float16).astype(np.float64)
    u = f.view(np.uint32).astype(np.uint64)
    sh = np.uint64(16)
    u = (u + np.uint64(0x7FFF) + ((u >> sh) & np.uint64(1))) >> sh << sh
    return u.astype(np.uint32).view(np.float32).astype(np.float64)


def half_value_bits(case, dtype):
    """The significant bits an operand value of a half-type case may have: at most the type's,
    and few enough that every sum is exact in f32, where tsrc accumulates (docs/language.md
    section 3.9): a cell sums `terms` products of m factors, each factor an integer below 2^b
    in magnitude times a power of 2, so every partial sum is one below terms * 2^(m*b) <= 2^24
    in units of its last place."""
    shapes = [[a[3] for a in lay] for lay in case.op_layout]
    _, terms = contract(case, [np.zeros(s) for s in shapes])
    m = len(case.ops)
    b = HALF_BITS[dtype]
    while b > 2 and terms << (m * b) > 1 << 24:
        b -= 1
    return b


def half_exponent(rng, bits):
    """A power of 2 for a half-type operand's values (integers below 2^bits over 2^(bits-2)),
    usually 0: sometimes smaller, down to where each value is still a multiple of the type's
    least subnormal (f16: 2^-24, so results fall among f16's subnormals or round to 0), and
    sometimes larger, up to where |value| < 2^15 < 65504 (f16: products round to infinity).
    bf16 has f32's exponents and goes 20 either way. Powers of 2 keep every sum exact in f32:
    nothing of three factors is near f32's least normal 2^-126 or its largest finite."""
    r = rng.random()
    if r < 0.75:
        return 0
    if DTYPE == "f16":
        return -rng.randint(1, 26 - bits) if r < 0.9 else rng.randint(1, 13)
    return -rng.randint(1, 20) if r < 0.9 else rng.randint(1, 20)


def contract(case, values):
    """Contract `values` (the operands, memory order) into the result's distinct axes, then
    scatter into the result; returns it and the number of terms summed into each cell."""
    letters = {}

    def letter(axis_id):
        if axis_id not in letters:
            letters[axis_id] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[len(letters)]
        return letters[axis_id]

    arrays, subs = [], []
    kept_sizes = {}
    for arr, layout in zip(values, case.op_layout):
        a = arr
        keep = []
        # Fixed indices read one slice; take them from the last axis back so positions hold.
        for pos in reversed(range(len(layout))):
            kind, e, aid, size = layout[pos]
            if e[0] == "F":
                a = np.take(a, e[1], axis=pos)
            else:
                keep.append(aid)
                kept_sizes[aid] = size
        keep.reverse()
        arrays.append(a)
        subs.append("".join(letter(aid) for aid in keep))

    res_axes = expand_slot(case, case.result, operand=False)
    distinct = []
    for kind, e, aid, size in res_axes:
        if e[0] in ("L", "R") and aid not in distinct:
            distinct.append(aid)
    contracted = np.einsum(",".join(subs) + "->" + "".join(letter(a) for a in distinct),
                           *arrays)
    full = np.zeros([a[3] for a in res_axes], dtype=contracted.dtype if DTYPE in INT_TYPES else np.float64)
    for idx in np.ndindex(*full.shape):
        seen = {}
        ok = True
        for (kind, e, aid, size), x in zip(res_axes, idx):
            if e[0] == "F":
                ok = ok and x == e[1]
            elif e[0] in ("L", "R"):
                if aid in seen and seen[aid] != x:
                    ok = False
                seen[aid] = x
        if ok:
            full[idx] = contracted[tuple(seen[a] for a in distinct)]
    terms = 1
    for aid, size in kept_sizes.items():
        if aid not in distinct:
            terms *= size
    return full, terms


def number_text(x):
    """A number of a literal: quarters as %.2f, other values as the shortest decimal of the
    double (a float32's value, for f64 cases, which the literal reads back exactly)."""
    x = float(x)
    return "%.2f" % x if x * 4 == int(x * 4) and abs(x) < 1e6 else repr(x)


def literal_text(arr, kinds):
    """A tensor literal for `arr` whose axes (memory order) have the given kinds."""
    if not kinds:
        return number_text(arr)
    inner = [literal_text(arr[t], kinds[1:]) for t in range(arr.shape[0])]
    if kinds[0] == "b":
        return "[| " + "; ".join(inner) + " |]"
    if kinds[0] == "o":
        return "[ " + "; ".join(inner) + " ]"
    return "(" + ", ".join(inner) + ")"


def collect_features(case):
    """Name what a case exercises, for the coverage table of --verbose."""
    f = case.features
    f.add("operands=%d" % len(case.ops))
    occ = {}     # label or row-variable key -> [(slot index, kind)] of its occurrences
    slots = case.ops + [case.result]
    for si, slot in enumerate(slots):
        for k in KINDS:
            for e in slot[k]:
                where = "result" if si == len(case.ops) else "operand"
                if e[0] == "L":
                    occ.setdefault(e[1], []).append((si, k))
                elif e[0] == "F":
                    f.add("fixed index in " + where)
                elif e[0] == "P":
                    f.add("placeholder in " + where)
                else:
                    key = e[1]
                    n = len(case.rvar_sizes[key])
                    if key[0] == "...":
                        f.add("'...' in %s rows" % KIND_NAME[key[1]])
                    else:
                        f.add("named row variable")
                    f.add("row variable of %d axes" % n)
                    occ.setdefault(key, []).append((si, k))
    nres = len(case.ops)
    for name, places in occ.items():
        per_slot = {}
        for si, k in places:
            per_slot[si] = per_slot.get(si, 0) + 1
        is_rv = isinstance(name, tuple)
        for si, cnt in per_slot.items():
            if cnt > 1:
                f.add(("row variable " if is_rv else "") + "diagonal in " +
                      ("result" if si == nres else "operand"))
        if len([si for si in per_slot if si != nres]) > 1:
            f.add("label shared across operands" if not is_rv else
                  "row variable shared across operands")
        if nres not in per_slot:
            f.add("label summed" if not is_rv else "row variable summed")
        if len({k for _, k in places}) > 1:
            f.add("label in several kinds" if not is_rv else "row variable in several kinds")
    f.add("single-character mode" if case.single_mode else "multi-character mode")
    if len(case.label_size) == 6:
        f.add("6 distinct labels")


def cells(axes):
    return int(np.prod([a[3] for a in axes])) if axes else 1


def gen_case(rng, index):
    """A valid case with sizes, values and the expected result."""
    while True:
        case = Case(index)
        gen_spec(rng, case)
        for _attempt in range(10):
            choose_sizes(rng, case)
            layouts = [expand_slot(case, s, sz) for s, sz in zip(case.ops, case.op_axis_sizes)]
            res_axes = expand_slot(case, case.result, operand=False)
            all_ids = {}
            for lay in layouts:
                for a in lay:
                    all_ids[a[2]] = a[3]
            loop = int(np.prod(list(all_ids.values()))) if all_ids else 1
            if (all(1 <= len(l) and cells(l) <= MAX_CELLS for l in layouts)
                    and cells(res_axes) <= MAX_CELLS and loop <= MAX_LOOP):
                break
        else:
            continue     # an operand without axes (not writable as a literal) or too big
        case.op_layout = layouts
        render_spec(rng, case)
        case.values = []
        case.convert = []    # bf16, f16: per operand, True for `to_bf16 LITERAL`, False for `{ … }`
        bits = half_value_bits(case, DTYPE) if DTYPE in HALF_BITS else 0
        for lay in layouts:
            shape = [a[3] for a in lay]
            if DTYPE == "f64":    # float32's (what a literal holds) of 24 significant bits
                vals = [float(np.float32(rng.uniform(-2.0, 2.0))) for _ in range(cells(lay))]
            elif DTYPE in INT_TYPES:  # whole numbers of up to 24 bits (exact in f32)
                vals = [float(rng.randint(-2**23, 2**23)) for _ in range(cells(lay))]
            elif bits:            # integers of up to `bits` bits over 2^(bits-2): in (-4, 4)
                top = (1 << bits) - 1
                scale = 2.0 ** (half_exponent(rng, bits) - (bits - 2))
                vals = [rng.randint(-top, top) * scale for _ in range(cells(lay))]
                case.convert.append(rng.random() < 0.5)
            else:
                vals = [rng.randint(-8, 8) / 4.0 for _ in range(cells(lay))]
            case.values.append(np.array(vals, dtype=np.float64).reshape(shape))
        compute_expected(case)
        collect_features(case)
        return case


def f64_param(name, text, layout, dtype="f64"):
    """An f64 parameter `{ NAME = TEXT; b = [...]; dtype = "f64" }` with the batch sizes of
    `layout` (a parameter has batch axes only when given; its other rows come from TEXT); with
    `dtype`, a parameter of that type."""
    batch = [str(a[3]) for a in layout if a[0] == "b"]
    sizes = "; b = [%s]" % "; ".join(batch) if batch else ""
    return '{ %s = %s%s; dtype = "%s" }' % (name, text, sizes, dtype)


def case_program(case):
    """The .tsr lines of one case: its operand literals (f64 parameters with --dtype f64; with
    bf16 or f16, such parameters or `to_bf16`/`to_f16` of the literal) and the einsum."""
    lines = []
    for j, (arr, lay) in enumerate(zip(case.values, case.op_layout)):
        text = literal_text(arr, [a[0] for a in lay])
        if DTYPE == "f64":
            text = f64_param(case.op_name(j), text, lay)
        elif (DTYPE in HALF_BITS and case.convert[j]) or DTYPE in INT_TYPES:
            text = "to_%s %s" % (DTYPE, text)
        elif DTYPE in HALF_BITS:
            text = f64_param(case.op_name(j), text, lay, DTYPE)
        lines.append("let%%op %s = %s" % (case.op_name(j), text))
    lines.append(einsum_line(case))
    return "\n".join(lines) + "\n"


def pick_pinned_sizes(case, rng):
    """Sizes of the operand axes that fixed indices (F) and placeholders (P) pin, per slot."""
    case.op_axis_sizes = []
    for slot in case.ops:
        sizes = {}
        for k in KINDS:
            lo = 2 if k == "i" else 1
            for pos, e in enumerate(slot[k]):
                if e[0] == "F":
                    sizes[k, pos] = rng.randint(max(lo, e[1] + 1), 4)
                elif e[0] == "P":
                    sizes[k, pos] = rng.randint(lo, 3)
        case.op_axis_sizes.append(sizes)


def einsum_line(case):
    """`let%op RESULT = …`: the case's einsum over its operands (`++`, `+*` or `einsum3`)."""
    names = [case.op_name(j) for j in range(len(case.ops))]
    spec = '"%s"' % case.spec
    if len(names) == 1:
        expr = "%s ++ %s" % (names[0], spec)
    elif len(names) == 2:
        expr = "%s +* %s %s" % (names[0], spec, names[1])
    else:
        expr = "einsum3 ~spec:%s %s" % (spec, " ".join(names))
    return "let%%op %s = %s" % (case.result_name, expr)


def parse_output(text):
    """tsrc --run output -> {name: (shape text, [floats])}; raises ValueError if malformed."""
    tensors = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^(\S+) : (\S+)$", line)
        if m:
            current = m.group(1)
            tensors[current] = (m.group(2), [])
        elif not line.strip() or line.startswith("  ["):
            continue
        elif current is None:
            raise ValueError("value line before any header: %r" % line)
        else:
            tensors[current][1].extend((int(x) if DTYPE in INT_TYPES else float(x)) for x in line.split())
    return tensors


def describe_case(case):
    lines = ["case %d: spec \"%s\"" % (case.index, case.spec)]
    for j, lay in enumerate(case.op_layout):
        lines.append("  operand %s : %s" % (case.op_name(j), shape_text(lay)))
    lines.append("  expected result %s : %s" % (case.result_name, case.expected_shape))
    return lines


def check_case(case, tensors):
    """None if tsrc's result matches, else a description of the mismatch."""
    if case.result_name not in tensors:
        return "tsrc printed no tensor %s" % case.result_name
    shape, vals = tensors[case.result_name]
    problems = []
    if shape != case.expected_shape:
        problems.append("shape: tsrc %s, expected %s" % (shape, case.expected_shape))
    exp = case.expected.reshape(-1)
    if len(vals) != exp.size:
        problems.append("tsrc printed %d values, expected %d" % (len(vals), exp.size))
        return "; ".join(problems)
    got = np.array(vals)
    if DTYPE in HALF_BITS:   # printed as %.9g of its f32 value, which reads back as that f32
        got = got.astype(np.float32).astype(np.float64)
    if DTYPE == "f64":
        tol = case.bound.reshape(-1)
    elif DTYPE in HALF_BITS or DTYPE in INT_TYPES:
        tol = 0.0      # exact: the same rounding of the same exact sums (an infinity included)
    else:
        tol = TOLERANCE * max(1.0, float(np.max(np.abs(exp))) if exp.size else 1.0)
    with np.errstate(invalid="ignore"):
        bad = np.nonzero(~((got == exp) | (np.abs(got - exp) <= tol)))[0]
    if bad.size:
        dims = case.expected.shape
        shown = []
        for flat in bad[:8]:
            idx = np.unravel_index(flat, dims) if dims else ()
            if DTYPE in INT_TYPES:
                shown.append("%s: tsrc %d, expected %d" % (list(map(int, idx)), int(got[flat]), int(exp[flat])))
            elif DTYPE in HALF_BITS:
                shown.append("%s: tsrc %r, expected %r" % (
                    list(map(int, idx)), float(got[flat]), float(exp[flat])))
            elif DTYPE == "f64":
                shown.append("%s: tsrc %r, expected %r (bound %.3g)" % (
                    list(map(int, idx)), float(got[flat]), float(exp[flat]), float(tol[flat])))
            else:
                shown.append("%s: tsrc %g, expected %g" % (list(map(int, idx)), got[flat],
                                                          exp[flat]))
        problems.append("%d of %d values differ (memory order): %s%s" % (
            bad.size, exp.size, "; ".join(shown), " ..." if bad.size > 8 else ""))
    return "; ".join(problems) or None


def run_tsrc(tsrc, path):
    # f64 values are compared to within a few units in the last place, bf16 and f16 ones
    # exactly: print every value in full (%.17g; a half type's f32 value as %.9g).
    env = dict(os.environ, TSR_PRINT_EXACT="1") if DTYPE != "f32" else None
    try:
        p = subprocess.run([tsrc, "--run", "--interp", path], capture_output=True, text=True,
                           timeout=120, env=env)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out after 120 s"
    except OSError as exc:
        return -1, "", "cannot run %s: %s" % (tsrc, exc)


def run_batch(tsrc, workdir, batch_no, cases):
    """Run one batch file; returns [(case, None | failure text, program path or text)]."""
    path = os.path.join(workdir, "batch%03d.tsr" % batch_no)
    with open(path, "w") as fh:
        fh.write("".join(case_program(c) for c in cases))
    rc, out, err = run_tsrc(tsrc, path)
    results = []
    tensors = None
    if rc == 0:
        try:
            tensors = parse_output(out)
        except ValueError:
            tensors = None
    if tensors is not None:
        checks = [check_case(c, tensors) for c in cases]
        if all(ch is None for ch in checks):
            return [(c, None, path) for c in cases]
    # Something went wrong: run every case alone to find out which one(s).
    for c in cases:
        single = os.path.join(workdir, "case%05d.tsr" % c.index)
        with open(single, "w") as fh:
            fh.write(case_program(c))
        rc, out, err = run_tsrc(tsrc, single)
        if rc != 0:
            results.append((c, "tsrc exited with status %d:\n%s" % (rc, err.rstrip()), single))
            continue
        try:
            problem = check_case(c, parse_output(out))
        except ValueError as exc:
            problem = "unparsable output: %s" % exc
        results.append((c, problem, single))
    return results


def emit_batch(args, workdir, batch_no, out_dir):
    """--emit-cases: the expected output and the executable of one batch file; None or a failure."""
    path = os.path.join(workdir, "batch%03d.tsr" % batch_no)
    name = "einsum_%03d" % batch_no
    env = dict(os.environ, TSR_PRINT_EXACT="1")
    try:
        p = subprocess.run([args.tsrc, "--run", "--interp", path], capture_output=True, text=True,
                           timeout=120, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return name, "-", "reference run failed: %s" % exc
    if p.returncode != 0:
        return name, "-", "reference run exited with status %d:\n%s" % (p.returncode, p.stderr)
    with open(os.path.join(out_dir, "expected", name + ".out"), "w") as fh:
        fh.write(p.stdout)
    target = ["--target=cuda", "--arch=" + args.arch] if args.target == "cuda" else []
    try:
        p = subprocess.run([args.tsrc] + target + [path, "-o", os.path.join(out_dir, "bin", name)],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return name, "-", "build failed: %s" % exc
    if p.returncode != 0:
        return name, "-", "build failed (tsrc exited with status %d):\n%s" % (
            p.returncode, (p.stdout + p.stderr)[-2000:])
    return name, "bin/" + name, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tsrc", default="build/tsrc")
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", metavar="DIR", help="write the .tsr files here and keep them")
    ap.add_argument("--verbose", action="store_true", help="list every case and the coverage")
    ap.add_argument("--jobs", type=int, default=max(2, min(8, os.cpu_count() or 2)))
    ap.add_argument("--batch", type=int, default=30, help="cases per .tsr file")
    ap.add_argument("--emit-cases", metavar="DIR",
                    help="also build each batch and its expected output into DIR (tests/gpu)")
    ap.add_argument("--target", choices=("native", "cuda"), default="native",
                    help="with --emit-cases: build for the host CPU or for the GPU")
    ap.add_argument("--arch", default="sm_80", help="with --emit-cases --target cuda: --arch")
    ap.add_argument("--dtype", choices=("f32", "f64", "bf16", "f16") + tuple(INT_TYPES), default="f32",
                    help="the element type of every tensor (f64: checked to double precision; "
                    "bf16, f16: exactly)")
    args = ap.parse_args()
    global DTYPE
    DTYPE = args.dtype
    if not args.emit_cases and (args.target != "native" or args.arch != "sm_80"):
        sys.stderr.write("einsum_diff.py: --target and --arch go with --emit-cases\n")
        return 2
    if not os.access(args.tsrc, os.X_OK):
        sys.stderr.write("einsum_diff.py: %s is not an executable\n" % args.tsrc)
        return 2

    rng = random.Random(args.seed)
    cases = [gen_case(rng, i) for i in range(args.count)]

    if args.emit_cases:
        workdir = os.path.join(args.emit_cases, "src")
        for sub in ("src", "bin", "expected"):
            os.makedirs(os.path.join(args.emit_cases, sub), exist_ok=True)
    elif args.keep:
        workdir = args.keep
        os.makedirs(workdir, exist_ok=True)
    else:
        workdir = tempfile.mkdtemp(prefix="einsum_diff.")
    try:
        batches = [cases[i:i + args.batch] for i in range(0, len(cases), args.batch)]
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_batch, args.tsrc, workdir, n, b)
                       for n, b in enumerate(batches)]
            results = [r for fut in futures for r in fut.result()]
        passed = failed = 0
        for case, problem, path in results:
            if problem is None:
                passed += 1
                if args.verbose:
                    print("ok   case %d: \"%s\" -> %s" % (case.index, case.spec,
                                                          case.expected_shape))
                continue
            failed += 1
            print("FAIL " + "\n".join(describe_case(case)))
            print("  " + problem.replace("\n", "\n  "))
            if args.keep:
                print("  program: %s" % path)
            else:
                print("  program:")
                print("    " + case_program(case).rstrip().replace("\n", "\n    "))
        if args.emit_cases:
            with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
                emitted = list(pool.map(lambda n: emit_batch(args, workdir, n, args.emit_cases),
                                        range(len(batches))))
            with open(os.path.join(args.emit_cases, "cases.txt"), "a") as fh:
                for name, exe, problem in emitted:
                    fh.write("%s\t%s\texpected/%s.out\t\n" % (name, exe, name))
                    if problem:
                        failed += 1
                        print("FAIL %s (%s/batch%s.tsr): %s" % (
                            name, workdir, name[-3:], problem.rstrip().replace("\n", "\n  ")))
        if args.verbose:
            counts = {}
            for c in cases:
                for f in c.features:
                    counts[f] = counts.get(f, 0) + 1
            print("coverage (cases with each feature):")
            for f in sorted(counts):
                print("  %-40s %d" % (f, counts[f]))
        print("%d passed, %d failed" % (passed, failed))
        return 1 if failed else 0
    finally:
        if not args.keep and not args.emit_cases:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
