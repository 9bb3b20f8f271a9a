#!/usr/bin/env python3
"""nn_gradcheck.py -- the gradients of stdlib/nn.tsr against central finite differences.

The harness of gradcheck.py (same tolerance, |grad - fd| <= 1e-3 * max(|fd|, 0.1), same
options) over programs that `open Nn`: activations, softmax and log-softmax, every loss, one-hot
and embedding, linear and mlp (also over the last axis of a sequence), layer norm, attention
(plain and causal, with its biases; also fused), a GPT-2 block, conv2d and conv1d (random stride,
dilation and padding; plain, and grouped with random groups), the two pools, concat, split,
pad, interleave, deinterleave and rope, at random shapes with random batch axes.  The forward
value of each case is compared with NumPy's as well (gradcheck.py).
The layers' own parameters (w, b, gain, table, wq, …) are read back from what tsrc prints and
their gradients are checked as well.  Inputs avoid the kinks of relu and abs (hinge: 1 - y s,
binary cross-entropy: the logits) by at least 0.1.  The last line is "N passed, N failed"."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gradcheck  # noqa: E402
from gradcheck import away, literal, rand_shape  # noqa: E402


def softmax(a):
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax(a):
    z = a - a.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def mean(per_cell):
    """The mean over every cell, as one cell (the losses' result)."""
    return np.array([per_cell.mean()])


def layer_norm(x, gain, bias, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gain + bias


def attention(x, wq, bq, wk, bk, wv, bv, wo, bo, causal=False):
    """x: b, t, d; wq wk wv: h, k, d (memory order of d -> h, k); bq bk bv: h, k; wo: d, h, k;
    bo: d.  Causal: position t sees the positions s <= t only."""
    q, k, v = (np.einsum("btd,hkd->bthk", x, w) + b for w, b in ((wq, bq), (wk, bk), (wv, bv)))
    scores = np.einsum("bthk,bshk->bhts", q, k) / np.sqrt(wq.shape[1])
    if causal:
        t = x.shape[1]
        scores = np.where(np.tril(np.ones((t, t), dtype=bool)), scores, -1e30)
    mixed = np.einsum("bhts,bshk->bthk", softmax(scores), v)
    return np.einsum("bthk,dhk->btd", mixed, wo) + bo


def windows(x, k, stride, dilation, padding, fill, kw=None):
    """x : n, h, w, c -> n, oh, ow, c, k, kw: the k x kw (kw = k by default) windows of the
    convolutions and the pools (docs/language.md §5.6), cells in the padding of "same" set to
    `fill`.  conv1d is a conv2d over n, l, 1, c with kw = 1."""
    kw = k if kw is None else kw
    n, h, w, c = x.shape
    sizes, lefts = [], []
    for size, kk in ((h, k), (w, kw)):
        span = dilation * (kk - 1)
        sizes.append(-(-size // stride) if padding == "same" else (size - span - 1) // stride + 1)
        lefts.append(span // 2 if padding == "same" else 0)
    out = np.full((n, sizes[0], sizes[1], c, k, kw), fill, dtype=x.dtype)
    for a, b, i, j in np.ndindex(sizes[0], sizes[1], k, kw):
        r, q = stride * a + dilation * i - lefts[0], stride * b + dilation * j - lefts[1]
        if 0 <= r < h and 0 <= q < w:
            out[:, a, b, :, i, j] = x[:, r, q, :]
    return out


def nn_cases(rng):
    u = lambda s: rng.uniform(-2, 2, size=s)

    def shaped():
        """A random shape with a batch axis in front half of the time, and its kinds."""
        s = rand_shape(rng, int(rng.integers(1, 3)))
        kinds = "o" * len(s)
        if rng.uniform() < 0.5:
            s, kinds = rand_shape(rng, 1) + s, "b" + kinds
        return s, kinds

    def probabilities(s):
        p = rng.uniform(0.1, 1, size=s)
        return p / p.sum(axis=-1, keepdims=True)

    cases = []
    for name, fn in [("silu", lambda a: a / (1 + np.exp(-a))),
                     ("gelu", lambda a: 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3)))),
                     ("softmax", softmax), ("log_softmax", log_softmax)]:
        s, k = shaped()
        cases.append(("Nn." + name, "%s p0" % name, fn, [(u(s), k)], [], k))

    s, k = shaped()
    tm = u(s)
    cases.append(("Nn.mse", "mse p0 %s" % literal(tm, k), lambda a: mean((a - tm) ** 2), [(u(s), k)], [], "o"))
    s, k = shaped()
    tp = probabilities(s)
    cases.append(("Nn.cross_entropy", "cross_entropy p0 %s" % literal(tp, k),
                  lambda a: mean(-(tp * log_softmax(a)).sum(axis=-1)), [(u(s), k)], [], "o"))
    s, k = shaped()
    tn = probabilities(s)
    cases.append(("Nn.nll", "nll p0 %s" % literal(tn, k),
                  lambda a: mean(-(tn * a).sum(axis=-1)), [(u(s), k)], [], "o"))
    s, k = shaped()
    labels = rng.choice([-1.0, 1.0], size=s)
    cases.append(("Nn.hinge", "hinge p0 %s" % literal(labels, k),
                  lambda a: mean(np.maximum(0, 1 - labels * a)),
                  [(away(rng, s, -2, 2, [-1, 1], 0.1), k)], [], "o"))
    s, k = shaped()
    tb = rng.uniform(0, 1, size=s)
    cases.append(("Nn.bce_with_logits", "bce_with_logits p0 %s" % literal(tb, k),
                  lambda a: mean(np.maximum(a, 0) - a * tb + np.log1p(np.exp(-np.abs(a)))),
                  [(away(rng, s, -3, 3, [0], 0.1), k)], [], "o"))

    # cross-entropy against class ids (a gather of the logits), and the gather itself.
    n_ce, c_ce = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    cls = rng.integers(0, c_ce, size=n_ce).astype(np.float64)
    picked = cls.astype(int)
    cases.append(("Nn.cross_entropy_ids", "cross_entropy_ids p0 %s" % literal(cls, "b"),
                  lambda a: mean(np.log(np.exp(a - a.max(axis=-1, keepdims=True)).sum(axis=-1)) +
                                 a.max(axis=-1) - a[np.arange(n_ce), picked]),
                  [(u((n_ce, c_ce)), "bo")], [], "o"))
    cases.append(("Nn.pick_last", "pick_last p0 %s" % literal(cls, "b"), lambda a: a[np.arange(n_ce), picked],
                  [(u((n_ce, c_ce)), "bo")], [], "b"))

    # one_hot of fixed ids scales a parameter; embedding reads its table.
    n, classes = int(rng.integers(2, 5)), int(rng.integers(2, 6))
    ids = rng.integers(0, classes, size=n).astype(np.float64)
    onehot = np.eye(classes)[ids.astype(int)]
    cases.append(("Nn.one_hot", "p0 *. one_hot ~classes:%d %s" % (classes, literal(ids, "b")),
                  lambda a: a * onehot, [(u((n, classes)), "bo")], [], "bo"))
    d = int(rng.integers(2, 4))
    cases.append(("Nn.embedding", "p0 *. embedding ~vocab:%d ~dim:%d () %s" % (classes, d, literal(ids, "b")),
                  lambda a, table: a * table.T[ids.astype(int)],
                  [(u((n, d)), "bo")], [("embedding.table", (d, classes))], "bo"))
    # tied weights: one table (vocab -> d, memory order d, vocab) read by the embedding and by the
    # output head (unembed); its gradient is the sum of both uses.
    tied = u((d, classes))
    cases.append(("Nn.embedding + unembed (tied)",
                  "unembed p0 (embedding ~vocab:%d ~dim:%d ~table:p0 () %s)" % (classes, d, literal(ids, "b")),
                  lambda tab: onehot @ tab.T @ tab, [(tied, "oi")], [], "bo"))

    # linear and mlp: x : n | i.
    i, o = rand_shape(rng, 2)
    h = int(rng.integers(2, 5))
    cases.append(("Nn.linear", "linear ~out:%d () p0" % o, lambda x, w, b: x @ w.T + b,
                  [(u((n, i)), "bo")], [("linear.w", (o, i)), ("linear.b", (o,))], "bo"))
    cases.append(("Nn.mlp", "(mlp ~hidden:[%d] ~out:%d ~act:tanh ()) p0" % (h, o),
                  lambda x, w1, b1, w2, b2: np.tanh(x @ w1.T + b1) @ w2.T + b2,
                  [(u((n, i)), "bo")], [("layer.w", (h, i)), ("layer.b", (h,)), ("rest.w", (o, h)), ("rest.b", (o,))],
                  "bo"))

    # layer norm over the last axis of n | t, f, with its gain and bias.
    t, f = rand_shape(rng, 2)
    cases.append(("Nn.layer_norm", "layer_norm () p0", layer_norm, [(u((n, t, f)), "boo")],
                  [("layer_norm.gain", (f,)), ("layer_norm.bias", (f,))], "boo"))

    # attention on n | t, d.
    heads, hd = int(rng.integers(1, 3)), int(rng.integers(2, 4))
    attention_params = [("attention.wq", (heads, hd, f)), ("attention.bq", (heads, hd)),
                        ("attention.wk", (heads, hd, f)), ("attention.bk", (heads, hd)),
                        ("attention.wv", (heads, hd, f)), ("attention.bv", (heads, hd)),
                        ("attention.wo", (f, heads, hd)), ("attention.bo", (f,))]
    cases.append(("Nn.attention", "attention ~heads:%d ~head_dim:%d () p0" % (heads, hd), attention,
                  [(u((n, t, f)) * 0.5, "boo")], attention_params, "boo"))
    cases.append(("Nn.attention (causal)", "attention ~heads:%d ~head_dim:%d ~causal:true () p0" % (heads, hd),
                  lambda *a: attention(*a, causal=True), [(u((n, t + 1, f)) * 0.5, "boo")],
                  [(name.replace("attention.", "attention#2."), shape) for name, shape in attention_params], "boo"))
    # the same two through the fused kernel (core.tsr attend: an online softmax, the weights
    # recomputed by the gradients), which stores no t x t scores.
    cases.append(("Nn.attention (fused)", "attention ~heads:%d ~head_dim:%d ~fused:true () p0" % (heads, hd),
                  attention, [(u((n, t, f)) * 0.5, "boo")],
                  [(name.replace("attention.", "attention#3."), shape) for name, shape in attention_params], "boo"))
    cases.append(("Nn.attention (fused, causal)",
                  "attention ~heads:%d ~head_dim:%d ~causal:true ~fused:true () p0" % (heads, hd),
                  lambda *a: attention(*a, causal=True), [(u((n, t + 1, f)) * 0.5, "boo")],
                  [(name.replace("attention.", "attention#4."), shape) for name, shape in attention_params], "boo"))
    # linear and mlp over the last axis of a sequence n | t, f (the others kept).
    cases.append(("Nn.linear (over last)", 'linear ~out:%d ~over:"last" () p0' % o, lambda x, w, b: x @ w.T + b,
                  [(u((n, t, f)), "boo")], [("linear#2.w", (o, f)), ("linear#2.b", (o,))], "boo"))
    cases.append(("Nn.mlp (over last)", '(mlp ~hidden:[%d] ~out:%d ~act:tanh ~over:"last" ()) p0' % (h, o),
                  lambda x, w1, b1, w2, b2: np.tanh(x @ w1.T + b1) @ w2.T + b2,
                  [(u((n, t, f)), "boo")],
                  [("layer#2.w", (h, f)), ("layer#2.b", (h,)), ("rest#2.w", (o, h)), ("rest#2.b", (o,))],
                  "boo"))
    # a GPT-2 block (pre-norm, causal attention, GELU MLP of 4 f) on n | t, f, all its parameters.
    def gelu(a):
        return 0.5 * a * (1 + np.tanh(0.7978845608028654 * (a + 0.044715 * a ** 3)))

    def gpt_block(x, g1, c1, wq, bq, wk, bk, wv, bv, wo, bo, g2, c2, w1, b1, w2, b2):
        h = x + attention(layer_norm(x, g1, c1), wq, bq, wk, bk, wv, bv, wo, bo, causal=True)
        return h + gelu(layer_norm(h, g2, c2) @ w1.T + b1) @ w2.T + b2
    bf = heads * int(rng.integers(1, 3))
    cases.append(("Nn.gpt_block", "(gpt_block ~dim:%d ~heads:%d ()) p0" % (bf, heads), gpt_block,
                  [(u((n, t, bf)) * 0.5, "boo")],
                  [("ln1.gain", (bf,)), ("ln1.bias", (bf,)),
                   ("attn.wq", (heads, bf // heads, bf)), ("attn.bq", (heads, bf // heads)),
                   ("attn.wk", (heads, bf // heads, bf)), ("attn.bk", (heads, bf // heads)),
                   ("attn.wv", (heads, bf // heads, bf)), ("attn.bv", (heads, bf // heads)),
                   ("attn.wo", (bf, heads, bf // heads)), ("attn.bo", (bf,)),
                   ("ln2.gain", (bf,)), ("ln2.bias", (bf,)),
                   ("layer#3.w", (4 * bf, bf)), ("layer#3.b", (4 * bf,)), ("rest#3.w", (bf, 4 * bf)), ("rest#3.b", (bf,))],
                  "boo"))

    # conv2d (stride, dilation, padding drawn) with its kernel (memory order oc, kh, kw, c) and
    # bias on n | h, w, c; the pools on cells 0.05 apart (no ties in a window's maximum).
    k, stride, dilation = int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    padding = str(rng.choice(["same", "valid"]))
    h, w = (int(v) for v in rng.integers(dilation * (k - 1) + 1, 8, size=2))
    c, oc = rand_shape(rng, 2)
    cases.append(("Nn.conv2d", 'conv2d ~out:%d ~k:%d ~stride:%d ~dilation:%d ~padding:"%s" () p0'
                  % (oc, k, stride, dilation, padding),
                  lambda x, kern, bias: np.einsum("nabcij,ocij->nabo", windows(x, k, stride, dilation, padding, 0.0),
                                                  kern.transpose(0, 3, 1, 2)) + bias,
                  [(u((n, h, w, c)), "booo")], [("conv2d.kernel", (oc, k, k, c)), ("conv2d.bias", (oc,))], "booo"))
    # conv1d on n | l, c: kernel memory order oc, k, c.
    cases.append(("Nn.conv1d", 'conv1d ~out:%d ~k:%d ~stride:%d ~dilation:%d ~padding:"%s" () p0'
                  % (oc, k, stride, dilation, padding),
                  lambda x, kern, bias: np.einsum("nacj,ocj->nao", windows(x[:, :, None, :], k, stride, dilation,
                                                                          padding, 0.0, kw=1)[:, :, 0, :, :, 0],
                                                  kern.transpose(0, 2, 1)) + bias,
                  [(u((n, h, c)), "boo")], [("conv1d.kernel", (oc, k, c)), ("conv1d.bias", (oc,))], "boo"))
    # Grouped: groups G, cpg input and opg output channels per group (torch.nn.Conv2d's groups);
    # the kernel's memory order is out, kh, kw, cpg and output channel o sees the input channels
    # of its group o // opg.  Checked group by group.
    groups, cpg, opg = int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    gk, gstride, gdil = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    gpad = str(rng.choice(["same", "valid"]))
    gh, gw = (int(v) for v in rng.integers(gdil * (gk - 1) + 1, 7, size=2))

    def grouped(wins, kern, bias):
        out = np.zeros(wins.shape[:3] + (groups * opg,))
        for g in range(groups):
            o, c = slice(g * opg, (g + 1) * opg), slice(g * cpg, (g + 1) * cpg)
            out[..., o] = np.einsum("nabcij,ocij->nabo", wins[:, :, :, c], kern[o].transpose(0, 3, 1, 2))
        return out + bias
    cases.append(("Nn.conv2d (groups)", 'conv2d ~out:%d ~k:%d ~stride:%d ~dilation:%d ~padding:"%s" ~groups:%d () p0'
                  % (groups * opg, gk, gstride, gdil, gpad, groups),
                  lambda x, kern, bias: grouped(windows(x, gk, gstride, gdil, gpad, 0.0), kern, bias),
                  [(u((n, gh, gw, groups * cpg)), "booo")],
                  [("conv2d#2.kernel", (groups * opg, gk, gk, cpg)), ("conv2d#2.bias", (groups * opg,))], "booo"))
    cases.append(("Nn.conv1d (groups)", 'conv1d ~out:%d ~k:%d ~stride:%d ~dilation:%d ~padding:"%s" ~groups:%d () p0'
                  % (groups * opg, gk, gstride, gdil, gpad, groups),
                  lambda x, kern, bias: grouped(windows(x[:, :, None, :], gk, gstride, gdil, gpad, 0.0, kw=1),
                                                kern[:, :, None, :], bias)[:, :, 0, :],
                  [(u((n, gh, groups * cpg)), "boo")],
                  [("conv1d#2.kernel", (groups * opg, gk, cpg)), ("conv1d#2.bias", (groups * opg,))], "boo"))
    pk, pstride = int(rng.integers(2, 4)), int(rng.integers(1, 3))
    ppad = str(rng.choice(["same", "valid"]))
    h, w = max(h, pk), max(w, pk)  # at least one valid window
    size = n * h * w * c
    distinct = (rng.permutation(size).reshape(n, h, w, c) - size / 2) * 0.05
    cases.append(("Nn.max_pool2d", 'max_pool2d ~k:%d ~stride:%d ~padding:"%s" () p0' % (pk, pstride, ppad),
                  lambda x: windows(x, pk, pstride, 1, ppad, -np.inf).max(axis=(4, 5)),
                  [(distinct, "booo")], [], "booo"))
    cases.append(("Nn.avg_pool2d", 'avg_pool2d ~k:%d ~stride:%d ~padding:"%s" () p0' % (pk, pstride, ppad),
                  lambda x: windows(x, pk, pstride, 1, ppad, 0.0).sum(axis=(4, 5)) / (pk * pk),
                  [(u((n, h, w, c)), "booo")], [], "booo"))

    # concat, split, pad, interleave, deinterleave and rope on the last axis of n | t, f.
    t, f1, f2, f3 = rand_shape(rng, 4)
    cases.append(("Nn.concat", "concat ~parts:[p0; p1; p2]", lambda a, b, c: np.concatenate([a, b, c], axis=-1),
                  [(u((n, t, f1)), "boo"), (u((n, t, f2)), "boo"), (u((n, t, f3)), "boo")], [], "boo"))
    parts = [f1, f2, f3, f1, f2]
    cases.append(("Nn.concat (five)", "concat ~parts:[p0; p1; p2; p0; p1]",
                  lambda a, b, c: np.concatenate([a, b, c, a, b], axis=-1),
                  [(u((n, f1)), "bo"), (u((n, f2)), "bo"), (u((n, f3)), "bo")], [], "bo"))
    total = sum(parts[:3])
    which = int(rng.integers(0, 3))
    lo = sum(parts[:which])
    cases.append(("Nn.split", "nth (split ~sizes:[%d; %d; %d] p0) %d" % (f1, f2, f3, which),
                  lambda a: a[..., lo:lo + parts[which]], [(u((n, t, total)), "boo")], [], "boo"))
    before, after = int(rng.integers(0, 3)), int(rng.integers(0, 3))
    cases.append(("Nn.pad", "pad ~before:%d ~after:%d () p0" % (before, after),
                  lambda a: np.pad(a, [(0, 0), (0, 0), (before, after)]), [(u((n, t, f1)), "boo")], [], "boo"))

    def interleave(a, b):
        out = np.zeros(a.shape[:-1] + (2 * a.shape[-1],))
        out[..., 0::2], out[..., 1::2] = a, b
        return out
    cases.append(("Nn.interleave", "interleave p0 p1", interleave, [(u((n, t, f1)), "boo"), (u((n, t, f1)), "boo")],
                  [], "boo"))
    cases.append(("Nn.deinterleave", "(nth (deinterleave p0) 0) + (nth (deinterleave p0) 1) *. 3.",
                  lambda a: a[..., 0::2] + 3 * a[..., 1::2], [(u((n, t, 2 * f1)), "boo")], [], "boo"))
    heads, half = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    base = float(rng.choice([100.0, 10000.0]))

    def rope(x):
        d = 2 * half
        angle = np.arange(x.shape[1])[:, None] * base ** (-2 * np.arange(half) / d)[None, :]
        c, s = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
        e, o = x[..., 0::2], x[..., 1::2]
        return interleave(e * c - o * s, e * s + o * c)
    cases.append(("Nn.rope", "rope ~base:%r () p0" % base, rope, [(u((n, t + 2, heads, 2 * half)), "booo")], [], "booo"))
    return cases


if __name__ == "__main__":
    sys.exit(gradcheck.main(nn_cases, "open Nn", __doc__))
