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
fit, a block count that differs or a tsrc parameter left without a value (but the program's own
state, which the manifest marks "state": the sample's text, the KV caches) is an error naming
both sides (exit 1), and nothing is written.  The map itself is the Python package's
(runtime/python/tsr/weights.py: tsr.from_gpt2 and tsr.to_gpt2 do the same on a loaded model).  The checkpoint holds the parameters only, so a
run that loads it starts training afresh (the optimiser's state at zero).
"""
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
# The package beside this script: runtime/python in the source tree, python/ in an installed
# share/tsrc (make install puts this script in share/tsrc/tools).
for _package in ("runtime/python", "python"):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), _package))
from tsr.weights import gpt2_to_tsrc, trained_parameters  # noqa: E402  (the map: runtime/python/tsr/weights.py)


def tsrc_parameters(manifest):
    """The parameters a checkpoint of GPT-2's weights must give: every parameter of the manifest
    but the program's own state ("state": true, a sample's text or a KV cache the program writes
    itself, which a checkpoint may lack)."""
    try:
        with open(manifest) as f:
            m = json.load(f)
        params = trained_parameters(m)
    except json.JSONDecodeError as e:
        raise ValueError(f"{manifest}: not a manifest of tsrc -c (not JSON: {e})")
    except (KeyError, TypeError, AttributeError):
        raise ValueError(f"{manifest}: not a manifest of tsrc -c (no list of tensors with names, kinds and dims)")
    if not params:
        raise ValueError(f"{manifest}: the manifest lists no parameter")
    return params


def main(argv):
    if len(argv) != 4:
        sys.stderr.write("usage: gpt2_weights.py STATE_DICT.npz MODEL.json OUT.npz\n")
        return 2
    source, manifest, target = argv[1:]
    try:
        z = np.load(source)
        out = gpt2_to_tsrc({k: z[k] for k in z.files}, tsrc_parameters(manifest))
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write(f"gpt2_weights.py: error: {e}\n")
        return 1
    partial = target + ".partial"
    try:
        with open(partial, "wb") as f:
            np.savez(f, **out)
        os.replace(partial, target)
    except OSError as e:
        sys.stderr.write(f"gpt2_weights.py: error: cannot write {target}: {e.strerror or e}\n")
        try:
            os.remove(partial)
        except OSError:
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
