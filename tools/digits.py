"""digits.py — writes the synthetic ten-class data set of docs/examples/digits.tsr.

Usage: python3 tools/digits.py DIR      (NumPy only; the same bytes every time)

Each example is a 28x28 image (784 values in [0, 1]) of one of the digits 0-9 drawn as
seven-segment strokes: the class's segments, each stroke 3 pixels wide, the whole glyph shifted
by up to 1 pixel each way, each segment's brightness between 0.6 and 1, in one example of
twenty one segment drawn at random dropped or added (so a few examples are ambiguous), and
Gaussian pixel noise of standard deviation 0.25, then clipped to [0, 1].  Classes cycle 0, 1, ..., 9, so every batch
holds every class.  Files, batched as the program reads them (batches, batch, ...):

  digits_train_x.npy  float32 (10, 30, 784)    digits_train_y.npy  int64 (10, 30)  300 examples
  digits_test_x.npy   float32 (200, 784)       digits_test_y.npy   int64 (200,)    200 examples

and the same images as 28x28 arrays, for the convolutional net of docs/examples/lenet.tsr:

  digits_train_img.npy  float32 (10, 30, 28, 28)    digits_test_img.npy  float32 (200, 28, 28)
"""
import os
import sys

import numpy as np

# Segments: a top, b top right, c bottom right, d bottom, e bottom left, f top left, g middle.
DIGITS = ["abcdef", "bc", "abdeg", "abcdg", "bcfg", "acdfg", "acdefg", "abc", "abcdefg", "abcdfg"]
LEFT, RIGHT, TOP, MID, BOTTOM = 9, 18, 5, 13, 21   # the glyph's box before the shift


def segment_mask(seg):
    m = np.zeros((28, 28), dtype=np.float64)
    if seg in "adg":                                  # horizontal strokes
        row = {"a": TOP, "g": MID, "d": BOTTOM}[seg]
        m[row:row + 3, LEFT:RIGHT + 3] = 1
    else:                                             # vertical strokes
        col = LEFT if seg in "ef" else RIGHT
        lo, hi = (TOP, MID + 2) if seg in "bf" else (MID, BOTTOM + 2)
        m[lo:hi + 1, col:col + 3] = 1
    return m


MASKS = {s: segment_mask(s) for s in "abcdefg"}


def examples(rng, count):
    xs = np.zeros((count, 28, 28))
    ys = np.arange(count) % 10
    for n, digit in enumerate(ys):
        segs = set(DIGITS[digit])
        if rng.random() < 0.05:                       # one segment flipped
            segs ^= {rng.choice(list("abcdefg"))}
        img = sum((rng.uniform(0.6, 1.0) * MASKS[s] for s in sorted(segs)), np.zeros((28, 28)))
        dy, dx = rng.integers(-1, 2, size=2)
        img = np.roll(np.roll(img, dy, axis=0), dx, axis=1)
        xs[n] = np.clip(img + rng.normal(0, 0.25, size=(28, 28)), 0, 1)
    return xs.reshape(count, 784).astype(np.float32), ys.astype(np.int64)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: digits.py DIR")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2024)
    train_x, train_y = examples(rng, 300)
    test_x, test_y = examples(rng, 200)
    np.save(os.path.join(out, "digits_train_x.npy"), train_x.reshape(10, 30, 784))
    np.save(os.path.join(out, "digits_train_y.npy"), train_y.reshape(10, 30))
    np.save(os.path.join(out, "digits_test_x.npy"), test_x)
    np.save(os.path.join(out, "digits_test_y.npy"), test_y)
    np.save(os.path.join(out, "digits_train_img.npy"), train_x.reshape(10, 30, 28, 28))
    np.save(os.path.join(out, "digits_test_img.npy"), test_x.reshape(200, 28, 28))


if __name__ == "__main__":
    main()
