"""gpt_data.py — writes the token files of docs/examples/gpt.tsr from licence texts Debian ships.

Usage: python3 tools/gpt_data.py DIR      (NumPy only; the same bytes every time, no download)

The text is /usr/share/common-licenses/GPL-3 followed by Apache-2.0 (present on every Debian
system: base-files installs them).  Characters become tokens 0-95: a newline is 0, the printable
ASCII characters 32-126 are 1-95, anything else (a tab, a form feed) is a space.  The token
stream is cut into windows of T + 1 = 65 tokens that overlap by one (window k is tokens
64k … 64k + 64), so a window's first 64 tokens are the inputs and its last 64 the targets, and
every pair of neighbouring characters of the text is a target once.  The first 512 windows
are for training, the next 64 for validation:

  gpt_train.npy  int64 (64, 8, 65)   64 batches of 8 windows
  gpt_val.npy    int64 (64, 65)      the held-out windows

The example reads them with `npy` (integers become the float ids the one-hot embedding takes).
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


def windows(tokens, first, count):
    starts = (first + np.arange(count)) * T
    return np.stack([tokens[s:s + T + 1] for s in starts])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tools/gpt_data.py DIR")
    out = sys.argv[1]
    tokens = text_tokens()
    train_count = TRAIN_BATCHES * BATCH
    if (train_count + VAL_WINDOWS) * T + 1 > len(tokens):
        sys.exit("gpt_data.py: the licence texts are shorter than expected (%d characters)" % len(tokens))
    assert tokens.max() < VOCAB
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "gpt_train.npy"), windows(tokens, 0, train_count).reshape(TRAIN_BATCHES, BATCH, T + 1))
    np.save(os.path.join(out, "gpt_val.npy"), windows(tokens, train_count, VAL_WINDOWS))
    print("gpt_data.py: %d training windows, %d validation windows of %d tokens in %s"
          % (train_count, VAL_WINDOWS, T + 1, out))


if __name__ == "__main__":
    main()
