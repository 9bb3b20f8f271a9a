"""weights.py — tsr.from_torch / to_torch and tsr.from_gpt2 / to_gpt2 (runtime/python/tsr/weights.py,
docs/python.md), run by tests/run.sh:

    python3 tests/python/weights.py --tsrc build/tsrc

With NumPy alone: state dicts in PyTorch's names and layouts for an MLP (nn.Sequential of
Linear, ReLU, Linear), a small LeNet (tests/python/lenet_valid.tsr: Conv2d, MaxPool2d, Conv2d,
Flatten, Linear — channels-first kernels and a CHW flattening against tsrc's channels-last), a
Conv1d, Flatten, Linear (tests/python/conv1d_valid.tsr, with PyTorch: its CL flattening) and
a two-block GPT-2 (Hugging Face's names, fused c_attn) are loaded into the compiled models; the
models' outputs equal a float64 NumPy forward pass written in PyTorch's conventions (1e-5), and
to_torch / to_gpt2 give back the state dicts bit for bit.  Where PyTorch is installed, the same
with real torch.nn models and GPT-2 written with torch's ops, all float32: PyTorch -> tsrc ->
PyTorch, outputs within 1e-6 of the largest (MLP 7.5e-7, LeNet 2.1e-7) and 1e-5 for GPT-2
(2.7e-6: two blocks of large random weights; 2.4e-7, within 1e-6, at GPT-2's initial scale), and
the GPT example's model itself (4 blocks of 256 channels) with its initial weights, PyTorch ->
tsrc -> PyTorch, logits equal to 1e-5 by numpy.allclose (rtol = atol = 1e-5, issue 27's bound
for imported weights; 1.0e-6 of the largest logit on an AVX2 VM and on an AVX-512 Intel VM, where
an element just missed rtol = atol = 1e-6: PyTorch's float32 sums differ in order per CPU), and
the GPT example's own initial weights through
torch and back (tsrc -> PyTorch -> tsrc: 3.8e-7, within 1e-6), the weights returned exactly (a
SKIP line otherwise).  A state dict that does not fit is a ValueError naming
both sides, and changes nothing.  Prints PASS/FAIL/SKIP lines and "N passed, N failed"."""
import argparse
import copy
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "runtime", "python"))
import tsr  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "tests", "native"))
from gpt2_import import gpt2_forward, gpt2_weights  # noqa: E402  (GPT-2's definition in NumPy)

counts = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    counts["passed" if ok else "failed"] += 1
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else "\n    " + str(detail)[:500]))


def same_dicts(a, b):
    return sorted(a) == sorted(b) and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def conv_valid(x, w, b):
    """NCHW cross-correlation as torch.nn.functional.conv2d (stride 1, no padding), float64."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + h - kh + 1, j:j + wd - kw + 1], w[:, :, i, j])
    return out + b[None, :, None, None]


def lenet_forward(sd, x):
    a = np.maximum(conv_valid(x[:, None].astype(np.float64), sd["0.weight"], sd["0.bias"]), 0)
    n, c, h, w = a.shape
    a = a.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))
    a = np.maximum(conv_valid(a, sd["3.weight"], sd["3.bias"]), 0)
    return a.reshape(n, -1) @ sd["6.weight"].T.astype(np.float64) + sd["6.bias"]


def loaded_run(label, m, load, unload, sd, inputs, routine, out, want, tol):
    """Load `sd` into m (load), fill `inputs`, run `routine`: m[out] must be `want` to `tol`, and
    unload(m, sd) must give `sd` back bit for bit."""
    load(m, sd)
    for name, value in inputs.items():
        if name in m.sizes:
            m.sizes[name] = value
        else:
            m[name] = value
    m.run(routine)
    check(np.allclose(m[out], want, rtol=tol, atol=tol), f"{label}, then tsrc's outputs are the reference's "
          "(NumPy, PyTorch's conventions)", np.abs(m[out] - want).max())
    check(same_dicts(unload(m, sd), sd), f"{label}: the state dict comes back bit for bit")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", required=True)
    tsrc = os.path.abspath(ap.parse_args().tsrc)
    rng = np.random.default_rng(3)
    f32 = lambda *shape, s=0.3: rng.normal(0, s, shape).astype(np.float32)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="tsrc-weights.") as d:
        def build(path, seed=0):
            return tsr.compile(os.path.join(ROOT, path), seed=seed, tsrc=tsrc, cache=os.path.join(d, "cache"))

        # ---- Precision: f64, f16 and bf16 parameters from float64 (and float16) arrays ----------
        # Values were made float32 first: an f64 parameter lost its low bits, and an f16 or bf16
        # one was rounded twice (1 + 2^-11 + 2^-40 became the tie 1 + 2^-11 in float32, then 1.0
        # in float16, where rounding once gives 1 + 2^-10).
        prec = os.path.join(d, "prec.tsr")
        with open(prec, "w") as f:
            f.write('open Nn\ninput { x; b = [2]; o = [3] }\nlet n64 = mlp ~hidden:[2] ~out:2 ~dtype:"f64" ()\n'
                    'let n16 = mlp ~hidden:[2] ~out:2 ~dtype:"f16" ()\nlet nb = mlp ~hidden:[2] ~out:2 ~dtype:"bf16" ()\n'
                    'let%op y = n64 x + to_f32 (n16 x) + to_f32 (nb x)\nroutine go = y.forward\n')
        pm = tsr.compile(prec, tsrc=tsrc, cache=os.path.join(d, "cache"))
        fine = 0.1 + np.arange(6).reshape(2, 3) * 1e-12  # float64 values float32 cannot hold
        tie16, tie_bf16 = 1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-8 + 2.0**-40
        psd = {"a.0.weight": fine, "a.0.bias": np.array([0.1, 0.2]), "a.2.weight": np.full((2, 2), 1 / 3), "a.2.bias": np.zeros(2),
               "b.0.weight": np.full((2, 3), tie16), "b.0.bias": np.array([0.1, 1 / 3], np.float16),
               "b.2.weight": np.full((2, 2), tie16), "b.2.bias": np.zeros(2),
               "c.0.weight": np.full((2, 3), tie_bf16), "c.0.bias": np.zeros(2), "c.2.weight": np.ones((2, 2)),
               "c.2.bias": np.full(2, -tie_bf16)}
        tsr.from_torch(pm, psd)
        check(pm.dtype("layer.w") == np.float64 and np.array_equal(pm["layer.w"], fine) and
              np.array_equal(pm["rest.w"], psd["a.2.weight"]),
              "from_torch keeps float64 values exactly in f64 parameters", np.abs(pm["layer.w"] - fine).max())
        check(np.all(pm["layer#2.w"] == np.float16(1 + 2.0**-10)) and np.array_equal(pm["layer#2.b"], psd["b.0.bias"]),
              "from_torch rounds float64 once into f16 parameters (1 + 2^-11 + 2^-40 -> 1 + 2^-10), float16 kept",
              pm["layer#2.w"].tolist())
        check(np.all(tsr.bf16_to_float32(pm["layer#3.w"]) == 1 + 2.0**-7) and
              np.all(tsr.bf16_to_float32(pm["rest#3.b"]) == -(1 + 2.0**-7)),
              "from_torch rounds float64 once into bf16 parameters (1 + 2^-8 + 2^-40 -> 1 + 2^-7)",
              tsr.bf16_to_float32(pm["layer#3.w"]).tolist())
        back = tsr.to_torch(pm, psd)
        check(back["a.0.weight"].dtype == np.float64 and np.array_equal(back["a.0.weight"], fine),
              "to_torch gives an f64 parameter back as float64, exactly", back["a.0.weight"].dtype)
        pm.close()

        # ---- MLP -------------------------------------------------------------------------
        mlp = build("docs/examples/python/digits_mlp.tsr")
        sd = {"0.weight": f32(16, 784, s=0.05), "0.bias": f32(16), "2.weight": f32(10, 16), "2.bias": f32(10)}
        x = rng.random((7, 784)).astype(np.float32)
        want = np.maximum(x @ sd["0.weight"].T.astype(np.float64) + sd["0.bias"], 0) @ sd["2.weight"].T + sd["2.bias"]
        loaded_run("MLP: from_torch", mlp, tsr.from_torch, tsr.to_torch, sd, {"test_x.b": 7, "test_x": x},
                   "predict", "logits", want, 1e-5)
        before = np.array(mlp["layer.w"])
        bad = dict(sd, **{"2.weight": f32(10, 15)})
        try:
            tsr.from_torch(mlp, bad)
            ok, why = False, "no error"
        except ValueError as e:
            ok, why = "'2.weight' is [10, 15]" in str(e) and "'rest.w', [10, 16]" in str(e), str(e)
        check(ok and np.array_equal(before, mlp["layer.w"]), "a weight that does not fit is a ValueError naming both "
              "sides, and nothing is written", why)

        # ---- LeNet -------------------------------------------------------------------------
        lenet = build("tests/python/lenet_valid.tsr")
        conv1d = build("tests/python/conv1d_valid.tsr")
        conv1d.sizes["x.b"] = 3
        sd = {"0.weight": f32(4, 1, 3, 3), "0.bias": f32(4), "3.weight": f32(6, 4, 3, 3), "3.bias": f32(6),
              "6.weight": f32(5, 54), "6.bias": f32(5)}
        imgs = rng.random((3, 12, 12)).astype(np.float32)
        loaded_run("LeNet: from_torch of channels-first kernels and a CHW flattening", lenet, tsr.from_torch,
                   tsr.to_torch, sd, {"x.b": 3, "x": imgs}, "predict", "y", lenet_forward(sd, imgs), 1e-5)

        # ---- Rotary attention (Nn.attention ~rope:true) against NumPy ------------------------
        ra = build("tests/python/rope_attention.tsr")
        rng = np.random.default_rng(7)
        for name in ra.tensors:
            if name.startswith("attn."):
                ra[name] = rng.normal(size=ra.shape(name)).astype(np.float32) * 0.5
        x = rng.normal(size=(2, 5, 8)).astype(np.float32)
        ra["x"] = x
        ra.go()
        P = {n: np.array(ra[n], dtype=np.float64) for n in ra.tensors if n.startswith("attn.")}
        X = x.astype(np.float64)
        q, k, v = (np.einsum("btd,hkd->bthk", X, P["attn.w" + c]) + P["attn.b" + c] for c in "qkv")

        def rotate(a):  # features (2i, 2i+1) at position t turned by t * 10000^(-2i/d)
            angle = np.arange(a.shape[1])[:, None] * 10000.0 ** (-2 * np.arange(a.shape[-1] // 2) / a.shape[-1])
            c, s = np.cos(angle)[None, :, None, :], np.sin(angle)[None, :, None, :]
            out = np.empty_like(a)
            out[..., 0::2] = a[..., 0::2] * c - a[..., 1::2] * s
            out[..., 1::2] = a[..., 0::2] * s + a[..., 1::2] * c
            return out
        scores = np.einsum("bthk,bshk->bhts", rotate(q), rotate(k)) / 2.0
        scores = np.where(np.tril(np.ones((5, 5), bool)), scores, -np.inf)
        w = np.exp(scores - scores.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        want = np.einsum("bthk,dhk->btd", np.einsum("bhts,bshk->bthk", w, v), P["attn.wo"]) + P["attn.bo"]
        diff = np.abs(ra["y"] - want).max() / np.abs(want).max()
        check(diff <= 1e-6, "Nn.attention ~rope:true is NumPy's rotary causal attention", diff)

        # ---- GPT-2 -------------------------------------------------------------------------
        gpt = build("tests/python/gpt_small.tsr")
        state = gpt2_weights(np.random.default_rng(5))
        ids = np.random.default_rng(6).integers(0, 16, (3, 8))
        loaded_run("GPT-2: from_gpt2", gpt, tsr.from_gpt2, tsr.to_gpt2, state, {"ids": ids}, "forward", "logits",
                   gpt2_forward(state, ids), 2e-5)

        # ---- with PyTorch --------------------------------------------------------------------
        try:
            import torch
        except ImportError:
            print("SKIP the round trips through torch.nn (PyTorch is not installed)")
            torch = None
        if torch is not None:
            torch.manual_seed(0)
            nets = {"MLP": (mlp, torch.nn.Sequential(torch.nn.Linear(784, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10)),
                            "test_x", "logits", "predict", torch.rand(7, 784), lambda d: d),
                    "LeNet": (lenet, torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                                                         torch.nn.Conv2d(4, 6, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                                         torch.nn.Linear(54, 5)),
                              "x", "y", "predict", torch.rand(3, 12, 12), lambda d: d[:, None]),  # NCHW
                    "Conv1d": (conv1d, torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                                           torch.nn.Linear(32, 5)),
                               "x", "y", "predict", torch.rand(3, 10, 3), lambda d: d.transpose(1, 2))}  # NCL
            for label, (m, net, inp, out, routine, data, as_torch) in nets.items():
                tsr.from_torch(m, net.state_dict())
                m[inp] = data.numpy()
                m.run(routine)
                with torch.no_grad():
                    theirs = net(as_torch(data)).numpy()
                back = copy.deepcopy(net)  # the same architecture, its weights zeroed, then tsrc's
                back.load_state_dict({k: torch.zeros_like(v) for k, v in net.state_dict().items()})
                back.load_state_dict({k: torch.from_numpy(v) for k, v in tsr.to_torch(m, back.state_dict()).items()})
                with torch.no_grad():
                    again = back(as_torch(data)).numpy()
                diff = np.abs(m[out] - theirs).max() / np.abs(theirs).max()
                print(f"    {label}: largest difference {diff:.1e} of the largest output")
                check(diff <= 1e-6 and np.array_equal(again, theirs),
                      f"{label}: PyTorch -> tsrc -> PyTorch: tsrc's outputs are PyTorch's within 1e-6 of the largest, "
                      "and the weights come back exactly", f"{diff}")
            # A BatchNorm1d between the Conv1d and the Linear (its weight of one axis passed over, as
            # mapping= leaves it out): the Linear still reads the convolution's channels-first output.
            bn = torch.nn.Sequential(torch.nn.Conv1d(3, 4, 3), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Flatten(),
                                     torch.nn.Linear(32, 5)).eval()
            tsr.from_torch(conv1d, bn.state_dict(), mapping={"0": "c1", "4": "head"})
            data = torch.rand(3, 10, 3)
            conv1d["x"] = data.numpy()
            conv1d.predict()
            with torch.no_grad():  # a fresh BatchNorm1d in eval mode: x / sqrt(1 + 1e-5)
                theirs = bn(data.transpose(1, 2)).numpy()
            diff = np.abs(conv1d["y"] * np.float32(1 / np.sqrt(1 + 1e-5)) - theirs).max() / np.abs(theirs).max()
            check(diff <= 1e-5, "Conv1d, BatchNorm1d, Flatten, Linear: the Linear's weight is taken channels-first "
                  "past the norm", diff)
            # The module itself where its state dict belongs (an AttributeError before), and a bf16
            # torch tensor assigned to an f32 input (refused: NumPy has no bfloat16).
            m, net = nets["MLP"][0], nets["MLP"][1]
            tsr.from_torch(m, net)
            back = tsr.to_torch(m, net)
            m["test_x"] = torch.full((7, 784), 0.5, dtype=torch.bfloat16)
            check(all(np.array_equal(back[k], v.numpy()) for k, v in net.state_dict().items()) and
                  np.all(m["test_x"] == 0.5),
                  "from_torch and to_torch take a torch module for its state dict; a bf16 tensor assigns exactly")
            # GPT-2 in torch (float32, GPT-2's definition with torch's ops)
            F = torch.nn.functional

            def torch_gpt2(sd, ids, heads=2):
                w = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items()}
                B, T = ids.shape
                C = w["transformer.wte.weight"].shape[1]
                layers = len({k.split(".")[2] for k in w if k.startswith("transformer.h.")})
                h = w["transformer.wte.weight"][torch.from_numpy(ids)] + w["transformer.wpe.weight"][:T]
                for k in range(layers):
                    p = f"transformer.h.{k}."
                    a = F.layer_norm(h, (C,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], 1e-5)
                    q, kk, v = (a @ w[p + "attn.c_attn.weight"] + w[p + "attn.c_attn.bias"]).split(C, dim=2)
                    q, kk, v = (z.view(B, T, heads, C // heads).transpose(1, 2) for z in (q, kk, v))
                    att = (q @ kk.transpose(-2, -1)) / (C // heads) ** 0.5
                    att = att.masked_fill(torch.ones(T, T, dtype=torch.bool).tril().logical_not(), float("-inf"))
                    y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, C)
                    h = h + y @ w[p + "attn.c_proj.weight"] + w[p + "attn.c_proj.bias"]
                    a = F.layer_norm(h, (C,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], 1e-5)
                    h = h + F.gelu(a @ w[p + "mlp.c_fc.weight"] + w[p + "mlp.c_fc.bias"], approximate="tanh") \
                        @ w[p + "mlp.c_proj.weight"] + w[p + "mlp.c_proj.bias"]
                return (F.layer_norm(h, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], 1e-5)
                        @ w["transformer.wte.weight"].T).numpy()

            def largest_difference(ours, theirs):
                return np.abs(ours - theirs).max() / np.abs(theirs).max()

            theirs = torch_gpt2(state, ids)
            diff = largest_difference(gpt["logits"], theirs)
            print(f"    GPT-2 (large random weights): largest difference {diff:.1e} of the largest logit")
            check(diff <= 1e-5 and same_dicts(tsr.to_gpt2(gpt, state), state),
                  "GPT-2: torch -> tsrc -> torch: tsrc's logits are torch's within 1e-5 of their largest, and the "
                  "weights come back exactly", diff)
            # Weights at GPT-2's initial scale (tables and projections about 0.02, norms about 1):
            # PyTorch -> tsrc -> PyTorch.
            scaled = {k: v if "ln_" in k else v * np.float32(0.05) for k, v in state.items()}
            tsr.from_gpt2(gpt, {k: torch.from_numpy(v) for k, v in scaled.items()})
            gpt.forward()
            diff = largest_difference(gpt["logits"], torch_gpt2(scaled, ids))
            print(f"    GPT-2 (GPT-2's initial scale): largest difference {diff:.1e} of the largest logit")
            check(diff <= 1e-6 and same_dicts(tsr.to_gpt2(gpt, scaled), scaled),
                  "GPT-2 at GPT-2's initial scale: PyTorch -> tsrc -> PyTorch, logits within 1e-6 of the largest, "
                  "the weights back exactly", diff)
            # The GPT example's own initial weights (normal 0.02 tables, ±1/sqrt(fan_in) layers):
            # tsrc -> torch -> tsrc.
            fresh = build("tests/python/gpt_small.tsr")
            fresh["ids"] = ids
            fresh.forward()
            exported = tsr.to_gpt2(fresh, state)
            diff = largest_difference(fresh["logits"], torch_gpt2(exported, ids))
            again = build("tests/python/gpt_small.tsr", seed=9)  # other initial weights, then the exported ones
            tsr.from_gpt2(again, {k: torch.from_numpy(v) for k, v in exported.items()})
            names = [t["name"] for t in fresh.manifest["tensors"]  # the trained weights: not `runs`, the program's state
                     if t["kind"] == "parameter" and not t.get("state")]
            print(f"    GPT-2 (the example's initialisation): largest difference {diff:.1e} of the largest logit")
            check(diff <= 1e-6 and all(np.array_equal(fresh[n], again[n]) for n in names),
                  "GPT-2 with the example's initial weights: tsrc -> torch -> tsrc, logits within 1e-6 of the largest, "
                  "the weights back exactly", diff)
            # The GPT example's model itself (L=4, C=256, NH=4, T=64, V=96): its initial weights as
            # PyTorch holds them (to_gpt2 of one model), PyTorch -> tsrc (another seed) -> PyTorch.
            first = build("tests/python/gpt_example.tsr", seed=1)
            weights = tsr.to_gpt2(first)
            second = build("tests/python/gpt_example.tsr", seed=2)
            tsr.from_gpt2(second, {k: torch.from_numpy(v) for k, v in weights.items()})
            tokens = np.random.default_rng(8).integers(0, 96, (2, 64))
            second["ids"] = tokens
            second.forward()
            theirs = torch_gpt2(weights, tokens, heads=4)
            diff = largest_difference(second["logits"], theirs)
            print(f"    the GPT example's model: largest difference {diff:.1e} of the largest logit, {np.abs(second['logits']).max():.3g}")
            check(np.allclose(second["logits"], theirs, rtol=1e-5, atol=1e-5) and same_dicts(tsr.to_gpt2(second), weights),
                  "the GPT example's model and weights: PyTorch -> tsrc -> PyTorch, logits equal to 1e-5 "
                  "(numpy.allclose, rtol = atol = 1e-5), the weights back exactly", diff)
    print(f"{counts['passed']} passed, {counts['failed']} failed")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
