#!/usr/bin/env python3
"""gpt2_weights.py — GPT-2 weights from PyTorch into a tsrc checkpoint.

    python3 tools/gpt2_weights.py STATE_DICT.npz MODEL.json OUT.npz

STATE_DICT.npz holds a GPT-2's parameters under Hugging Face's names, as PyTorch users save
them with NumPy:

    numpy.savez("gpt2.npz", **{k: v.cpu().numpy() for k, v in model.state_dict().items()})

(`transformer.wte.weight`, `transformer.h.0.attn.c_attn.weight`, … ; the `transformer.` prefix
may be absent, `lm_head.weight` — tied to wte — and the attention's `.attn.bias` / `.masked_bias`
buffers are ignored).  MODEL.json is the manifest `tsrc -c` writes for the tsrc program (it
names every parameter and gives its dims).  OUT.npz is a checkpoint the program reads with
`--load OUT.npz` (or MODEL_load).

The program is GPT-2 written with Nn as docs/examples/gpt.tsr writes it: the token table named
`wte` (i = [vocab], o = [dim]), the position table `wpe` (o = [ctx; dim]), the blocks made with
`Nn.gpt_block`, the final `layer_norm` bound to `ln_f`, and no other `Nn.layer_norm`,
`Nn.attention` or `Nn.mlp` made before the blocks.  The blocks' parameters are found from the
manifest, not from names written here: the k-th block made owns the k-th of each of its layers'
parameters (`ln1`, `attn`, `ln2`, and its MLP's `layer` and `rest`: tsrc names the second
`ln1#2`, the third `ln1#3`, …), so the map below holds for any number of layers.

The name and layout map (Hugging Face's Conv1D stores a weight [in, out]; tsrc stores a weight
in memory order output, input, and a head's projection as [heads, head_dim, channels]):

    wte.weight [V, C]                 -> wte [C, V]                transposed
    wpe.weight [P, C]                 -> wpe [T, C]                its first T positions
    h.k.ln_1.weight, .bias            -> ln1(k).gain, ln1(k).bias
    h.k.attn.c_attn.weight [C, 3C]    -> attn(k).wq, wk, wv [H, C/H, C]   each third, transposed
    h.k.attn.c_attn.bias [3C]         -> attn(k).bq, bk, bv [H, C/H]
    h.k.attn.c_proj.weight [C, C]     -> attn(k).wo [C, H, C/H]    transposed
    h.k.attn.c_proj.bias              -> attn(k).bo
    h.k.ln_2.weight, .bias            -> ln2(k).gain, ln2(k).bias
    h.k.mlp.c_fc.weight [C, 4C]       -> layer(k).w [4C, C]        transposed
    h.k.mlp.c_fc.bias                 -> layer(k).b
    h.k.mlp.c_proj.weight [4C, C]     -> rest(k).w [C, 4C]         transposed
    h.k.mlp.c_proj.bias               -> rest(k).b
    ln_f.weight, .bias                -> ln_f.gain, ln_f.bias

Every array's shape is checked against the manifest; a missing name, a shape that does not
fit, a block count that differs or a tsrc parameter left without a value is an error naming
both sides (exit 1), and nothing is written.  The checkpoint holds the parameters only, so a
run that loads it starts training afresh (the optimiser's state at zero).
"""
import json
import os
import re
import sys

import numpy as np


class MapError(Exception):
    pass


BLOCK_LAYERS = ("ln1", "attn", "ln2", "layer", "rest")


def instance(name):
    """'attn#3.wq' -> ('attn', 3, 'wq'); 'ln1.gain' -> ('ln1', 1, 'gain'); 'wte' -> ('wte', 1, '')."""
    head, _, field = name.partition(".")
    m = re.fullmatch(r"(.*)#(\d+)", head)
    return (m.group(1), int(m.group(2)), field) if m else (head, 1, field)


def tsrc_parameters(manifest):
    with open(manifest) as f:
        m = json.load(f)
    params = {t["name"]: tuple(t["dims"]) for t in m["tensors"] if t["kind"] == "parameter"}
    if not params:
        raise MapError(f"{manifest}: the manifest lists no parameter")
    return params


def torch_state(path):
    z = np.load(path)
    state = {}
    for key in z.files:
        name = key[len("transformer."):] if key.startswith("transformer.") else key
        if name == "lm_head.weight" or name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue
        state[name] = np.asarray(z[key], dtype=np.float32)
    return state


def convert(state, params):
    def take(name, shape=None):
        if name not in state:
            raise MapError(f"the state dict has no '{name}' (GPT-2's names: transformer.h.0.ln_1.weight, ...)")
        a = state[name]
        if shape is not None and a.shape != tuple(shape):
            raise MapError(f"'{name}' is {list(a.shape)}, where GPT-2 of this size has {list(shape)}")
        return a

    def need(name):
        if name not in params:
            raise MapError(f"the tsrc program has no parameter '{name}' (docs/stdlib.md, 'Weights from GPT-2')")
        return params[name]

    out = {}

    def put(name, value):
        dims = need(name)
        if value.shape != dims:
            raise MapError(f"'{name}' is {list(dims)} in the tsrc program, but GPT-2's gives {list(value.shape)}")
        out[name] = np.ascontiguousarray(value, dtype=np.float32)

    dim, vocab = need("wte")
    wte = take("wte.weight")
    if wte.shape != (vocab, dim):
        raise MapError(f"'wte.weight' is {list(wte.shape)}, but the tsrc program's wte is "
                       f"{vocab} tokens of {dim} channels ([{dim}, {vocab}] in memory order)")
    put("wte", wte.T)
    ctx = need("wpe")[0]
    wpe = take("wpe.weight")
    if wpe.ndim != 2 or wpe.shape[0] < ctx or wpe.shape[1] != dim:
        raise MapError(f"'wpe.weight' is {list(wpe.shape)}: the tsrc program needs {ctx} positions of {dim} channels")
    put("wpe", wpe[:ctx])
    put("ln_f.gain", take("ln_f.weight", (dim,)))
    put("ln_f.bias", take("ln_f.bias", (dim,)))

    layers = sorted({int(m.group(1)) for k in state for m in [re.match(r"h\.(\d+)\.", k)] if m})
    blocks = max((instance(n)[1] for n in params if instance(n)[0] in BLOCK_LAYERS), default=0)
    if len(layers) != blocks or layers != list(range(blocks)):
        raise MapError(f"the state dict has {len(layers)} blocks (h.0 ...), the tsrc program {blocks} gpt_blocks")
    heads = need("attn.wq")[0]
    hd = dim // heads
    for k in layers:
        h = f"h.{k}."

        def name(layer, field):
            return f"{layer}{'' if k == 0 else '#' + str(k + 1)}.{field}"

        put(name("ln1", "gain"), take(h + "ln_1.weight", (dim,)))
        put(name("ln1", "bias"), take(h + "ln_1.bias", (dim,)))
        w = take(h + "attn.c_attn.weight", (dim, 3 * dim))
        b = take(h + "attn.c_attn.bias", (3 * dim,))
        for part, letter in enumerate("qkv"):
            put(name("attn", "w" + letter), w[:, part * dim:(part + 1) * dim].T.reshape(heads, hd, dim))
            put(name("attn", "b" + letter), b[part * dim:(part + 1) * dim].reshape(heads, hd))
        put(name("attn", "wo"), take(h + "attn.c_proj.weight", (dim, dim)).T.reshape(dim, heads, hd))
        put(name("attn", "bo"), take(h + "attn.c_proj.bias", (dim,)))
        put(name("ln2", "gain"), take(h + "ln_2.weight", (dim,)))
        put(name("ln2", "bias"), take(h + "ln_2.bias", (dim,)))
        put(name("layer", "w"), take(h + "mlp.c_fc.weight", (dim, 4 * dim)).T)
        put(name("layer", "b"), take(h + "mlp.c_fc.bias", (4 * dim,)))
        put(name("rest", "w"), take(h + "mlp.c_proj.weight", (4 * dim, dim)).T)
        put(name("rest", "b"), take(h + "mlp.c_proj.bias", (dim,)))
    left = sorted(set(params) - set(out))
    if left:
        raise MapError(f"no GPT-2 weight for the tsrc parameter{'s' if len(left) > 1 else ''} {', '.join(left)}")
    return out


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: gpt2_weights.py STATE_DICT.npz MODEL.json OUT.npz\n")
        return 2
    source, manifest, target = argv[1:]
    try:
        out = convert(torch_state(source), tsrc_parameters(manifest))
    except (MapError, OSError, ValueError, KeyError) as e:
        sys.stderr.write(f"gpt2_weights.py: error: {e}\n")
        return 1
    partial = target + ".partial"
    with open(partial, "wb") as f:
        np.savez(f, **out)
    os.replace(partial, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
