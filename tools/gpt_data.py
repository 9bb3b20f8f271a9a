"""gpt_data.py — writes the token files of docs/examples/gpt.tsr from licence texts Debian ships.

Usage: python3 tools/gpt_data.py DIR      (NumPy only; the same bytes every time, no download)
       python3 tools/gpt_data.py --decode   (stdin: the example's printed samples; stdout: their text)

The text is /usr/share/common-licenses/GPL-3 followed by Apache-2.0 (present on every Debian
system: base-files installs them).  Characters become tokens 0-95: a newline is 0, the printable
ASCII characters 32-126 are 1-95, anything else (a tab, a form feed) is a space.  The token
stream is written as two token files in the format llm.c and nanoGPT use (a header of 256
little-endian int32: 20240520, version 1, the token count; then the tokens as uint16):

  gpt_train.bin  the first 64 * 512 + 1 tokens (the example draws random windows of 65 from it)
  gpt_val.bin    the next 64 * 64 + 1 tokens: 64 windows of 65 that overlap by one token, so a
                 window's first 64 tokens are the inputs and its last 64 the targets

The example reads them with `tokens` (docs/language.md §3.2.6) as i32 token ids.  With
--decode, each `text : 64` grid the example prints (its samples: character numbers) becomes a
line of text, tokens turned back into characters (0 a newline, shown as ⏎).
"""
import os
import sys

import numpy as np

SOURCES = ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0"]
T = 64
BATCH = 8
TRAIN_BATCHES = 64
VAL_WINDOWS = 64
VOCAB = 96


def token(ch):
    if ch == "\n":
        return 0
    code = ord(ch)
    return code - 31 if 32 <= code <= 126 else 1  # 1 is the space


def text_tokens():
    text = ""
    for path in SOURCES:
        if not os.path.isfile(path):
            sys.exit("gpt_data.py: %s is missing (it comes with Debian's base-files package)" % path)
        with open(path, encoding="utf-8", errors="replace") as f:
            text += f.read()
    return np.array([token(c) for c in text], dtype=np.int64)


def write_tokens(path, tokens):
    """A token file as llm.c writes it: 256 int32 of header, then uint16 tokens."""
    header = np.zeros(256, dtype="<i4")
    header[0], header[1], header[2] = 20240520, 1, len(tokens)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(tokens.astype("<u2").tobytes())


def character(tok):
    tok = int(round(tok))
    if not 0 <= tok < VOCAB:
        return "?"
    return "\u23ce" if tok == 0 else chr(tok + 31)


def decode(lines):
    """The text of every `text : N` grid in the printed lines (one line of numbers each)."""
    out, grid = [], None
    for line in lines:
        if line.startswith("text : "):
            grid = []
            out.append(grid)
        elif grid is not None and line.startswith("    "):
            grid.extend(float(v) for v in line.split())
        else:
            grid = None
    return ["".join(character(t) for t in g) for g in out]


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--decode":
        for text in decode(sys.stdin.read().splitlines()):
            print(text)
        return
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tools/gpt_data.py DIR  |  python3 tools/gpt_data.py --decode")
    out = sys.argv[1]
    tokens = text_tokens()
    train_tokens = TRAIN_BATCHES * BATCH * T
    val_tokens = VAL_WINDOWS * T
    if train_tokens + val_tokens + 1 > len(tokens):
        sys.exit("gpt_data.py: the licence texts are shorter than expected (%d characters)" % len(tokens))
    assert tokens.max() < VOCAB
    try:
        os.makedirs(out, exist_ok=True)
        write_tokens(os.path.join(out, "gpt_train.bin"), tokens[:train_tokens + 1])
        write_tokens(os.path.join(out, "gpt_val.bin"), tokens[train_tokens:train_tokens + val_tokens + 1])
    except OSError as e:
        sys.exit("gpt_data.py: cannot write the token files into %s: %s" % (out, e.strerror or e))
    print("gpt_data.py: %d training tokens, %d validation windows of %d tokens in %s"
          % (train_tokens + 1, VAL_WINDOWS, T + 1, out))


if __name__ == "__main__":
    main()
