"""tsr.weights — a model's parameters to and from PyTorch's names and layouts (docs/python.md).

    tsr.from_torch(m, torch_model.state_dict())        # fills m's parameters
    torch_model.load_state_dict(tsr.to_torch(m, torch_model.state_dict()))

The tsrc side is read from the manifest: its parameters grouped into layers by their prefix
(`layer#2.w` and `layer#2.b` are the layer `layer#2`), each layer's kind told by its fields —
`w`, `b`: a linear layer; `kernel` (and `bias`): a convolution; `gain`, `bias`: a layer norm;
`table`: an embedding — in the order the program made them.  The PyTorch side is a state dict
(tensors or NumPy arrays), its layers the prefixes of its `weight`s in the dict's order.  Without
a mapping the i-th PyTorch layer goes to the i-th tsrc layer (so the two models make their
layers in the same order, as nn.Sequential and a chain of Nn layers do); `mapping` pairs them by
name instead ({"features.0": "conv", "classifier": "layer"}), and may name only some.

Layouts (tsrc stores a weight in memory order output, input; convolutions channels-last):
    nn.Linear     weight [out, in]           -> w [out, in]; after a flattening of a
                  channels-first map [out, c*h*w] -> w [out, h, w, c] (Nn.linear ~over:"all"),
                  of a Conv1d's (the layer before it one) [out, c*l] -> w [out, l, c]
    nn.Conv2d     weight [out, in, kh, kw]   -> kernel [out, kh, kw, in] ([out, kh, kw] for one
                  input channel without an axis);  nn.Conv1d [out, in, k] -> [out, k, in]
    nn.Embedding  weight [vocab, dim]        -> table [dim, vocab]
    nn.LayerNorm  weight, bias               -> gain, bias
Every array's shape is checked after its conversion; one that does not fit raises ValueError
naming both sides, before anything is written.  GPT-2's fused attention (c_attn) is
from_gpt2/to_gpt2's: tools/gpt2_weights.py.

Element types: values are written in the precision they come in (float64 stays float64, float16
float16; bfloat16 as float32, exactly), and the model rounds each once into the parameter's type
(to nearest even for f32, bf16 and f16: an f64 parameter takes float64 values exactly, and a
float64 value is never rounded to float32 on its way to f16 or bf16); they are read as the
parameter's values — a bf16 parameter's bit patterns converted to float32 (tsr.bf16_to_float32)."""
import re

import numpy as np

from .bf16 import bf16_to_float32

KINDS = {frozenset(("w", "b")): "linear", frozenset(("w",)): "linear", frozenset(("kernel", "bias")): "conv",
         frozenset(("kernel",)): "conv", frozenset(("gain", "bias")): "norm", frozenset(("table",)): "embedding"}


def _numpy(value):
    """A state dict's entry as a NumPy array that holds its values exactly: float16, float32 and
    float64 arrays as they are (assigning one to a parameter rounds it once, into the
    parameter's type); bfloat16 (a torch tensor, or ml_dtypes' NumPy type) as float32, which
    holds it exactly; integers and bools as float64."""
    if hasattr(value, "detach"):
        value = value.detach().cpu()
        if str(getattr(value, "dtype", "")) == "torch.bfloat16":  # NumPy has no bfloat16
            value = value.float()
        value = value.numpy()
    value = np.asarray(value)
    if value.dtype.kind == "f":
        return value
    if value.dtype.name == "bfloat16":
        return value.astype(np.float32)
    return value.astype(np.float64)


def _values(m, name):
    """Parameter `name` of m as numbers (a copy): float32 for a bf16 parameter, its dtype else."""
    return bf16_to_float32(m[name]) if m.is_bf16(name) else np.array(m[name])


def trained_parameters(manifest):
    """{name: dims} of the parameters a manifest lists, but the program's own state ("state":
    true: a KV cache, a sample's text, a running sum the program writes and no gradient trains),
    which no PyTorch model holds."""
    return {t["name"]: tuple(t["dims"]) for t in manifest["tensors"]
            if t["kind"] == "parameter" and not t.get("state", False)}


def tsrc_layers(m):
    """[(prefix, kind, {field: parameter name})] in the order the program made them."""
    layers, order = {}, []
    for t in m.manifest["tensors"]:
        if t["kind"] != "parameter" or t.get("state", False) or "." not in t["name"]:
            continue
        prefix, field = t["name"].rsplit(".", 1)
        if prefix not in layers:
            layers[prefix] = {}
            order.append(prefix)
        layers[prefix][field] = t["name"]
    return [(p, KINDS.get(frozenset(layers[p]), "other"), layers[p]) for p in order]


def torch_layers(state_dict):
    """[(prefix, {'weight': key, 'bias': key?})] in the dict's order."""
    out = []
    for key in state_dict:
        if key.endswith(".weight") or key == "weight":
            prefix = key[:-len(".weight")] if key != "weight" else ""
            entry = {"weight": key}
            bias = (prefix + "." if prefix else "") + "bias"
            if bias in state_dict:
                entry["bias"] = bias
            out.append((prefix, entry))
    return out


def _pairs(m, state_dict, mapping):
    ours = [layer for layer in tsrc_layers(m) if layer[1] != "other"]
    theirs = torch_layers(state_dict)
    by_ours = {p: (p, k, f) for p, k, f in ours}
    by_theirs = dict(theirs)
    if mapping:
        pairs = []
        for t, o in mapping.items():
            if t not in by_theirs:
                raise KeyError(f"the state dict has no layer {t!r} (its layers: {', '.join(p for p, _ in theirs)})")
            if o not in by_ours:
                raise KeyError(f"the tsrc model has no layer {o!r} (its layers: {', '.join(p for p, _, _ in ours)})")
            pairs.append((t, by_theirs[t], by_ours[o]))
        return pairs
    if len(ours) != len(theirs):
        raise ValueError(f"the state dict has {len(theirs)} layers ({', '.join(p for p, _ in theirs)}), the tsrc "
                         f"model {len(ours)} ({', '.join(p for p, _, _ in ours)}): pass mapping= to pair them")
    return [(t, e, o) for (t, e), o in zip(theirs, ours)]


def _to_tsrc(kind, torch_weight, dims):
    """torch_weight in tsrc's layout for a parameter of `dims` (the weight of `kind`)."""
    w = torch_weight
    if kind == "linear" and w.ndim == 2 and len(dims) == 4 and w.shape[1] == dims[1] * dims[2] * dims[3]:
        h, wd, c = dims[1:]
        return w.reshape(w.shape[0], c, h, wd).transpose(0, 2, 3, 1)   # CHW flattening -> h, w, c
    if kind == "linear_after_conv1d" and w.ndim == 2 and len(dims) == 3 and w.shape[1] == dims[1] * dims[2]:
        length, c = dims[1:]
        return w.reshape(w.shape[0], c, length).transpose(0, 2, 1)   # CL flattening -> l, c
    if kind.startswith("linear") and w.ndim == 2 and len(dims) > 2 and w.shape[1] == int(np.prod(dims[1:])):
        return w.reshape(dims)
    if kind == "conv" and w.ndim == 4:
        k = w.transpose(0, 2, 3, 1)
        return k[..., 0] if len(dims) == 3 and w.shape[1] == 1 else k
    if kind == "conv" and w.ndim == 3:
        k = w.transpose(0, 2, 1)
        return k[..., 0] if len(dims) == 2 and w.shape[1] == 1 else k
    if kind == "embedding":
        return w.T
    return w


def _from_tsrc(kind, ours, like):
    """The inverse of _to_tsrc: our array in the layout of the PyTorch array `like`."""
    if kind == "linear" and like.ndim == 2 and ours.ndim == 4:
        return ours.transpose(0, 3, 1, 2).reshape(like.shape)
    if kind == "linear_after_conv1d" and like.ndim == 2 and ours.ndim == 3:
        return ours.transpose(0, 2, 1).reshape(like.shape)
    if kind.startswith("linear") and like.ndim == 2:
        return ours.reshape(like.shape)
    if kind == "conv" and like.ndim == 4:
        k = ours[..., None] if ours.ndim == 3 else ours
        return k.transpose(0, 3, 1, 2)
    if kind == "conv" and like.ndim == 3:
        k = ours[..., None] if ours.ndim == 2 else ours
        return k.transpose(0, 2, 1)
    if kind == "embedding":
        return ours.T
    return ours


def _plan(m, state_dict, mapping):
    """[(tsrc parameter, torch key, kind)] for every weight and bias the pairs give; a linear
    layer after a Conv1d (in the state dict's order, norms between them passed over: their
    weights have one axis) is "linear_after_conv1d": its input is the convolution's
    channels-first output, flattened."""
    plan = []
    layers = torch_layers(state_dict)
    ranks = [_numpy(state_dict[entry["weight"]]).ndim for _, entry in layers]
    before = {}
    for i, (p, _) in enumerate(layers):
        j = i - 1
        while j >= 0 and ranks[j] == 1:  # a BatchNorm1d or LayerNorm between
            j -= 1
        before[p] = ranks[j] if j >= 0 else 0
    for t, entry, (prefix, kind, fields) in _pairs(m, state_dict, mapping):
        weight_field = {"linear": "w", "conv": "kernel", "norm": "gain", "embedding": "table"}[kind]
        weight_kind = "linear_after_conv1d" if kind == "linear" and before.get(t) == 3 else kind
        plan.append((fields[weight_field], entry["weight"], weight_kind))
        bias_field = {"linear": "b", "conv": "bias", "norm": "bias"}.get(kind)
        if bias_field in fields or "bias" in entry:
            if bias_field not in fields or "bias" not in entry:
                raise ValueError(f"{t!r} {'has' if 'bias' in entry else 'has no'} bias, the tsrc layer {prefix!r} "
                                 f"{'has' if bias_field in fields else 'has no'} bias")
            plan.append((fields[bias_field], entry["bias"], "bias"))
    return plan


def _state_dict(value, what):
    """A state dict: `value` itself, or a torch module's state_dict() (an easy slip to pass the
    module); anything else is a TypeError saying what is taken."""
    if not hasattr(value, "keys") and callable(getattr(value, "state_dict", None)):
        value = value.state_dict()
    if not hasattr(value, "keys") or not hasattr(value, "__getitem__"):
        raise TypeError(f"{what} is a state dict (torch_model.state_dict(), or a dict of arrays), not "
                        f"{type(value).__name__}")
    return value


def from_torch(m, state_dict, mapping=None):
    """Fill m's parameters from a PyTorch state dict, or a torch module's (docstring of this module)."""
    state_dict = _state_dict(state_dict, "from_torch's second argument")
    values = {}
    for ours, key, kind in _plan(m, state_dict, mapping):
        dims = m.shape(ours)
        v = _to_tsrc(kind, _numpy(state_dict[key]), dims)
        if tuple(v.shape) != tuple(dims):
            raise ValueError(f"{key!r} is {list(_numpy(state_dict[key]).shape)} in PyTorch, which does not fit "
                             f"{ours!r}, {list(dims)} in the tsrc model")
        values[ours] = v
    for ours, v in values.items():
        m[ours] = v


def to_torch(m, like, mapping=None):
    """m's parameters as a dict in the names and layouts of the state dict `like` (NumPy arrays;
    torch's load_state_dict takes them through torch.from_numpy).  Entries of `like` that no
    pair covers are left out."""
    like = _state_dict(like, "to_torch's second argument")
    out = {}
    for ours, key, kind in _plan(m, like, mapping):
        target = _numpy(like[key])
        v = _from_tsrc(kind, _values(m, ours), target)
        if v.shape != target.shape:
            raise ValueError(f"{ours!r}, {list(m.shape(ours))} in the tsrc model, does not fit {key!r}, "
                             f"{list(target.shape)} in PyTorch")
        out[key] = np.ascontiguousarray(v)
    return out


# ---- GPT-2 (Nn.gpt_block) ------------------------------------------------------------------------

BLOCK_LAYERS = ("ln1", "attn", "ln2", "layer", "rest")


def _instance(name):
    head, _, field = name.partition(".")
    match = re.fullmatch(r"(.*)#(\d+)", head)
    return (match.group(1), int(match.group(2)), field) if match else (head, 1, field)


def gpt2_map(params):
    """The GPT-2 map for a program of Nn.gpt_blocks: [(tsrc name, GPT-2 key, to_tsrc, from_tsrc)],
    params being {tsrc parameter: dims}.  Keys are Hugging Face's without `transformer.`."""
    def need(name):
        if name not in params:
            raise ValueError(f"the tsrc program has no parameter '{name}' (docs/stdlib.md, 'Weights from GPT-2')")
        return params[name]

    dim, vocab = need("wte")
    ctx = need("wpe")[0]
    heads = need("attn.wq")[0]
    hd = dim // heads
    blocks = max((_instance(n)[1] for n in params if _instance(n)[0] in BLOCK_LAYERS), default=0)
    same = (lambda a: a, lambda a, like: a)
    transpose = (lambda a: a.T, lambda a, like: a.T)
    rows = [("wte", "wte.weight", *transpose),
            ("wpe", "wpe.weight", lambda a: a[:ctx], lambda a, like: np.concatenate([a, like[ctx:]])),
            ("ln_f.gain", "ln_f.weight", *same), ("ln_f.bias", "ln_f.bias", *same)]
    for k in range(blocks):
        s = "" if k == 0 else f"#{k + 1}"
        h = f"h.{k}."
        rows += [(f"ln1{s}.gain", h + "ln_1.weight", *same), (f"ln1{s}.bias", h + "ln_1.bias", *same),
                 (f"ln2{s}.gain", h + "ln_2.weight", *same), (f"ln2{s}.bias", h + "ln_2.bias", *same),
                 (f"attn{s}.wo", h + "attn.c_proj.weight", lambda a: a.T.reshape(dim, heads, hd),
                  lambda a, like: a.reshape(dim, dim).T),
                 (f"attn{s}.bo", h + "attn.c_proj.bias", *same),
                 (f"layer{s}.w", h + "mlp.c_fc.weight", *transpose), (f"layer{s}.b", h + "mlp.c_fc.bias", *same),
                 (f"rest{s}.w", h + "mlp.c_proj.weight", *transpose), (f"rest{s}.b", h + "mlp.c_proj.bias", *same)]
        for part, letter in enumerate("qkv"):
            cols = slice(part * dim, (part + 1) * dim)
            rows.append((f"attn{s}.w{letter}", h + "attn.c_attn.weight",
                         lambda a, c=cols: a[:, c].T.reshape(heads, hd, dim),
                         lambda a, like, c=cols: _put(like, (slice(None), c), a.reshape(dim, dim).T)))
            rows.append((f"attn{s}.b{letter}", h + "attn.c_attn.bias", lambda a, c=cols: a[c].reshape(heads, hd),
                         lambda a, like, c=cols: _put(like, (c,), a.reshape(dim))))
    return rows, blocks


def _put(like, index, value):
    out = np.array(like, dtype=np.result_type(like, value), copy=True)
    out[index] = value
    return out


def _gpt2_state(state_dict):
    state = {}
    for key, value in state_dict.items():
        name = key[len("transformer."):] if key.startswith("transformer.") else key
        if name == "lm_head.weight" or name.endswith(".attn.bias") or name.endswith(".attn.masked_bias"):
            continue
        state[name] = _numpy(value)
    return state


def gpt2_to_tsrc(state_dict, params):
    """{tsrc parameter: array} from a GPT-2 state dict, for a program whose parameters are
    `params` ({name: dims}); ValueError naming both sides when something does not fit."""
    state = _gpt2_state(state_dict)
    rows, blocks = gpt2_map(params)
    layers = sorted({int(x.group(1)) for k in state for x in [re.match(r"h\.(\d+)\.", k)] if x})
    if layers != list(range(blocks)):
        raise ValueError(f"the state dict has {len(layers)} blocks (h.0 ...), the tsrc program {blocks} gpt_blocks")
    out = {}
    for ours, key, forward, _ in rows:
        if key not in state:
            raise ValueError(f"the state dict has no '{key}' (GPT-2's names: transformer.h.0.ln_1.weight, ...)")
        try:
            v = forward(state[key])
        except (ValueError, IndexError):
            v = None
        if v is None or tuple(v.shape) != tuple(params[ours]):
            raise ValueError(f"'{key}' is {list(state[key].shape)}, which does not fit '{ours}', "
                             f"{list(params[ours])} in the tsrc program")
        out[ours] = np.ascontiguousarray(v)  # the dict's precision: rounded once, into the parameter's type
    left = sorted(set(params) - set(out))
    if left:
        raise ValueError(f"no GPT-2 weight for the tsrc parameter{'s' if len(left) > 1 else ''} {', '.join(left)}")
    return out


def from_gpt2(m, state_dict):
    """Fill m (a program of Nn.gpt_blocks, written as docs/examples/gpt.tsr) from a GPT-2 state dict."""
    for name, value in gpt2_to_tsrc(state_dict, trained_parameters(m.manifest)).items():
        m[name] = value


def to_gpt2(m, like=None):
    """m's parameters as a GPT-2 state dict (Hugging Face's names, NumPy arrays).  With `like`
    (a GPT-2 state dict) in its keys and shapes: positions past the program's context and the
    tied lm_head are taken from it; without, the dict is built from m alone (`transformer.`
    names, wpe of the program's positions, lm_head tied to wte)."""
    params = trained_parameters(m.manifest)
    rows, blocks = gpt2_map(params)
    if like is None:
        dim, vocab = params["wte"]
        ctx = params["wpe"][0]
        shapes = {"wte.weight": (vocab, dim), "wpe.weight": (ctx, dim), "ln_f.weight": (dim,), "ln_f.bias": (dim,)}
        for k in range(blocks):
            h = f"h.{k}."
            shapes.update({h + "ln_1.weight": (dim,), h + "ln_1.bias": (dim,), h + "ln_2.weight": (dim,),
                           h + "ln_2.bias": (dim,), h + "attn.c_attn.weight": (dim, 3 * dim),
                           h + "attn.c_attn.bias": (3 * dim,), h + "attn.c_proj.weight": (dim, dim),
                           h + "attn.c_proj.bias": (dim,), h + "mlp.c_fc.weight": (dim, 4 * dim),
                           h + "mlp.c_fc.bias": (4 * dim,), h + "mlp.c_proj.weight": (4 * dim, dim),
                           h + "mlp.c_proj.bias": (dim,)})
        like = {"transformer." + k: np.zeros(v, np.float32) for k, v in shapes.items()}
        like["lm_head.weight"] = like["transformer.wte.weight"]
    prefix = "transformer." if any(k.startswith("transformer.") for k in like) else ""
    current = {k: _numpy(v) for k, v in like.items()}
    for ours, key, _, backward in rows:
        full = prefix + key
        current[full] = np.ascontiguousarray(backward(_values(m, ours), current[full]))
    if "lm_head.weight" in current:
        current["lm_head.weight"] = current[prefix + "wte.weight"]
    return current
