#!/usr/bin/env python3
"""compare.py: compares a program's output on the GPU with the reference executor's.

Usage:
    python3 tests/gpu/compare.py [--rel-tol R] EXPECTED ACTUAL
                                                    exit 0 when they match, 1 when not (the
                                                    first differences on stderr), 2 for a bad
                                                    command line or an unreadable file; R
                                                    replaces the 1e-5 below (prepare.sh gives
                                                    1e-2 to programs whose products run on the
                                                    tensor cores, which add in an order of their
                                                    own, so a bf16 result may round one unit of
                                                    its last place, 2^-8, apart)
    python3 tests/gpu/compare.py --self-test        checks the rules below; exit 0 when they hold
                                                    (last line: "N passed, N failed")

The rules (`make check-gpu`, tests/gpu/run.sh):
  * Both files are read as text and compared line by line: they must have the same number of
    lines, and each line the same number of pieces.
  * A line is split at whitespace into tokens (so spacing is not compared), and each token into
    numbers and the text between them.  A number is an optional sign, digits with an optional
    fraction (or a fraction alone) and an optional exponent, neither preceded nor followed by a
    letter, digit, underscore or dot (so `x1`, `c12_r` and `1e5abc` are text).  `nan`, `inf`,
    `-inf` are text: they must be printed the same.
  * Text must be equal.  A number written as an integer (3, -2, 9007199254740993: digits alone)
    must be the same integer, compared exactly at any size (i64 values past 2^53 too).  A number
    whose expected value is an integer below 2^53 in magnitude (1.000, 2e3) must be equal in
    value, except under a --rel-tol above 1e-5: there a float whose reference value happens to
    be whole (a tf32 sum printed as 3200) is held to the tolerance, without the last digit's
    unit below (the GPU's 3199.99951), and only digit-only integers on both sides stay exact.  Any other
    expected number e (beyond 2^53 every float is an integer in value, so
    4.3018481341670615e+49 is such a number) admits an actual a with
        |a - e| <= 1e-5 * max(1, |e|) + u
    where u is one unit in the last digit printed in the expected token (0.0716 -> 1e-4,
    1.2345678e-03 -> 1e-10): the printed value is rounded, and a difference far below 1e-5 can
    still change its last digit.  Under TSR_PRINT_EXACT=1 (%.9g, what run.sh uses) u is at most
    1e-8 of |e|; it matters only for numbers a program formats itself with few digits.
"""

import math
import re
import sys

REL_TOL = 1e-5
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![A-Za-z0-9_.])")


def pieces(line):
    """The pieces of a line: ('n', text) for numbers, ('t', text) for the rest."""
    out = []
    for tok in line.split():
        pos = 0
        for m in NUMBER.finditer(tok):
            if m.start() > pos:
                out.append(("t", tok[pos:m.start()]))
            out.append(("n", m.group(0)))
            pos = m.end()
        if pos < len(tok):
            out.append(("t", tok[pos:]))
    return out


def last_digit_unit(text):
    """One unit in the last digit printed in a number's text."""
    m = re.match(r"^[-+]?(\d*)(?:\.(\d*))?(?:[eE]([-+]?\d+))?$", text)
    frac = m.group(2) or ""
    exp = int(m.group(3) or 0)
    return 10.0 ** (exp - len(frac))


INTEGER = re.compile(r"^[-+]?\d+$")
EXACT_FLOAT_LIMIT = 2.0 ** 53  # past this every double is an integer in value


def number_ok(exp_text, act_text, rel_tol=REL_TOL):
    if INTEGER.match(exp_text) and INTEGER.match(act_text):
        return int(exp_text) == int(act_text)
    e, a = float(exp_text), float(act_text)
    if math.isinf(e) or math.isinf(a):        # out of float range as text: compare as text
        return exp_text == act_text
    if e.is_integer() and abs(e) < EXACT_FLOAT_LIMIT:
        # whole: exact, or under a case's tolerance within it (no unit of a last digit: a
        # whole number printed by %.9g is the value itself)
        return a == e if rel_tol <= REL_TOL else abs(a - e) <= rel_tol * max(1.0, abs(e))
    return abs(a - e) <= rel_tol * max(1.0, abs(e)) + last_digit_unit(exp_text)


def compare_text(expected, actual, limit=10, rel_tol=REL_TOL):
    """A list of differences (empty when the texts match)."""
    problems = []
    el, al = expected.splitlines(), actual.splitlines()
    if len(el) != len(al):
        problems.append("%d lines expected, %d printed" % (len(el), len(al)))
    for n, (e, a) in enumerate(zip(el, al), 1):
        if len(problems) >= limit:
            break
        ep, ap = pieces(e), pieces(a)
        bad = len(ep) != len(ap)
        if not bad:
            for (ek, et), (ak, at) in zip(ep, ap):
                if ek != ak or (ek == "t" and et != at) or (ek == "n" and not number_ok(et, at, rel_tol)):
                    bad = True
                    break
        if bad:
            problems.append("line %d: expected %r, got %r" % (n, e, a))
    return problems


def self_test():
    ok = True
    counts = [0, 0]

    def check(name, expected, actual, want, rel_tol=REL_TOL):
        nonlocal ok
        got = not compare_text(expected, actual, rel_tol=rel_tol)
        counts[got != want] += 1
        if got != want:
            ok = False
            print("FAIL %s: %r vs %r: %s, expected %s" % (name, expected, actual,
                                                       "match" if got else "differ",
                                                       "match" if want else "differ"))
        else:
            print("PASS %s" % name)

    check("identical", "w : 3\n    0.75 1.5 2.25\n", "w : 3\n    0.75 1.5 2.25\n", True)
    check("spacing is not compared", "a  b\t1.5\n", "a b 1.5\n", True)
    check("text differs", "loss 0.5\n", "lost 0.5\n", False)
    check("shape text differs", "x : 4|3\n", "x : 4|2\n", False)
    check("integer exact", "epoch 3\n", "epoch 3\n", True)
    check("integer off by one", "epoch 3\n", "epoch 4\n", False)
    check("integer-valued float must be exact", "    2 1.000\n", "    2 1.0000001\n", False)
    check("integer-valued float equal in value", "    1.000 2e3\n", "    1 2000\n", True)
    check("integers exact past 2^53", "    9007199254740993\n", "    9007199254740992\n", False)
    check("integers equal past 2^53", "    -9223372036854775808\n", "    -9223372036854775808\n", True)
    check("a double past 2^53 within tolerance", "    4.3018481341670615e+49\n", "    4.301848134167062e+49\n", True)
    check("a double past 2^53 off by 1e-4", "    4.3018481341670615e+49\n", "    4.3022e+49\n", False)
    check("float within 1e-5", "    0.123456789\n", "    0.123457\n", True)
    check("float within 1e-5 relative", "    12345.6789\n", "    12345.7\n", True)
    check("float beyond 1e-5", "    0.123456789\n", "    0.1235\n", False)
    check("float beyond 1e-5 relative", "    12345.6789\n", "    12345.9\n", False)
    check("small floats: absolute 1e-5", "    1.5e-07\n", "    -2.5e-06\n", True)
    check("small floats beyond 1e-5", "    1.5e-07\n", "    2e-05\n", False)
    check("last printed digit may flip", "loss 0.0716\n", "loss 0.0717\n", True)
    check("two digits is too much", "loss 0.0716\n", "loss 0.0718\n", False)
    check("nan is text", "    nan 1.5\n", "    nan 1.5\n", True)
    check("nan against a number", "    nan\n", "    0.5\n", False)
    check("a number against nan", "    0.5\n", "    nan\n", False)
    check("inf sign", "    -inf\n", "    inf\n", False)
    check("inf is text", "    -inf inf\n", "    -inf inf\n", True)
    check("identifiers with digits are text", "c12_r : 2\n", "c13_r : 2\n", False)
    check("numbers inside punctuation", "(1.5, 2)\n", "(1.500001, 2)\n", True)
    check("missing line", "a\nb\n", "a\n", False)
    check("extra value", "    1 2\n", "    1 2 3\n", False)
    check("a number for text", "step x\n", "step 1\n", False)
    check("negative zero", "    -0 0\n", "    0 -0\n", True)
    check("--rel-tol 1e-2 admits 0.5 %", "    12.5625\n", "    12.625\n", True, 1e-2)
    check("--rel-tol 1e-2 refuses 2 %", "    12.5625\n", "    12.8125\n", False, 1e-2)
    check("--rel-tol keeps integers exact", "    3200\n", "    3201\n", False, 1e-2)
    check("--rel-tol: a whole float within it", "    3200\n", "    3199.99951\n", True, 1e-2)
    check("--rel-tol: a whole float beyond it", "    3\n", "    3.1\n", False, 1e-2)
    check("a whole float exact by default", "    3200\n", "    3199.99951\n", False)
    print("self-test: %s" % ("ok" if ok else "FAILED"))
    print("%d passed, %d failed" % (counts[0], counts[1]))
    return 0 if ok else 1


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    rel_tol = REL_TOL
    if len(argv) == 5 and argv[1] == "--rel-tol":
        try:
            rel_tol = float(argv[2])
        except ValueError:
            rel_tol = -1.0
        if not rel_tol >= 0:
            sys.stderr.write("compare.py: --rel-tol needs a number >= 0, not %r\n" % argv[2])
            return 2
        argv = argv[:1] + argv[3:]
    if len(argv) != 3:
        sys.stderr.write("usage: compare.py [--rel-tol R] EXPECTED ACTUAL | --self-test\n")
        return 2
    try:
        with open(argv[1], errors="replace") as fh:
            expected = fh.read()
        with open(argv[2], errors="replace") as fh:
            actual = fh.read()
    except OSError as exc:
        sys.stderr.write("compare.py: %s\n" % exc)
        return 2
    problems = compare_text(expected, actual, rel_tol=rel_tol)
    for p in problems:
        sys.stderr.write(p + "\n")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
