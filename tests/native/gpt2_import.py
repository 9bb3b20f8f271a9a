"""gpt2_import.py — GPT-2's weights from PyTorch's layout into a tsrc model
(tools/gpt2_weights.py), checked against GPT-2 computed in NumPy (run by tests/run.sh).

    python3 tests/native/gpt2_import.py --tsrc build/tsrc

The weights: a two-block GPT-2 (vocabulary 16, 32 channels, 2 heads, 8 positions of a table of
12) drawn at random (large enough that attention is far from uniform, layer norms' gains and
biases far from 1 and 0), saved under Hugging Face's names and layouts (Conv1D weights
[in, out], `transformer.` prefix, the tied lm_head and the attention's mask buffers present)
as `numpy.savez(**state_dict)` writes them.  The reference: GPT-2's forward pass written from
its definition in float64 (pre-norm blocks, causal softmax attention, GELU's tanh form, logits
against the token table), independent of tsrc's names and layouts.

Checks: tests/native/gpt2_import.tsr, compiled (-c for its manifest, and an executable), loads
the converted checkpoint with --load and prints its loss and a random projection of its logits
(mean of logits x probe), natively and with the reference executor: both within 2e-6 relative
of the reference, and the two executors print the same.  The converter refuses, with exit 1, a
message naming the array and nothing written: a weight of the wrong shape, a state dict with
three blocks for a two-block program, and one without ln_f.  Prints PASS/FAIL lines and
"N passed, N failed"."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROGRAM = os.path.join(ROOT, "tests", "native", "gpt2_import.tsr")
CONVERT = os.path.join(ROOT, "tools", "gpt2_weights.py")
V, C, H, T, P, L, W = 16, 32, 2, 8, 12, 2, 3
results = {"passed": 0, "failed": 0}


def check(ok, what, detail=""):
    results["passed" if ok else "failed"] += 1
    print(("PASS " if ok else "FAIL ") + what + ("" if ok or not detail else "\n    " + detail.replace("\n", "\n    ")))


def gpt2_weights(rng, layers=L, v=V, c=C, p=P):
    V, C, P = v, c, p  # noqa: N806  (the test's model unless another is asked for)
    s = {"transformer.wte.weight": rng.normal(0, 0.5, (V, C)), "transformer.wpe.weight": rng.normal(0, 0.3, (P, C)),
         "transformer.ln_f.weight": rng.normal(1, 0.3, C), "transformer.ln_f.bias": rng.normal(0, 0.2, C)}
    for k in range(layers):
        h = f"transformer.h.{k}."
        s.update({h + "ln_1.weight": rng.normal(1, 0.3, C), h + "ln_1.bias": rng.normal(0, 0.2, C),
                  h + "attn.c_attn.weight": rng.normal(0, 0.4, (C, 3 * C)), h + "attn.c_attn.bias": rng.normal(0, 0.2, 3 * C),
                  h + "attn.c_proj.weight": rng.normal(0, 0.2, (C, C)), h + "attn.c_proj.bias": rng.normal(0, 0.1, C),
                  h + "ln_2.weight": rng.normal(1, 0.3, C), h + "ln_2.bias": rng.normal(0, 0.2, C),
                  h + "mlp.c_fc.weight": rng.normal(0, 0.2, (C, 4 * C)), h + "mlp.c_fc.bias": rng.normal(0, 0.1, 4 * C),
                  h + "mlp.c_proj.weight": rng.normal(0, 0.1, (4 * C, C)), h + "mlp.c_proj.bias": rng.normal(0, 0.1, C),
                  h + "attn.bias": np.tril(np.ones((P, P)))[None, None]})  # GPT-2's mask buffer
    s["lm_head.weight"] = s["transformer.wte.weight"]
    return {k: np.asarray(v, dtype=np.float32) for k, v in s.items()}


def gpt2_forward(s, ids):
    """GPT-2 in float64 from its definition: the logits [W, T, V] of ids [W, T]."""
    w = {k: v.astype(np.float64) for k, v in s.items()}

    def ln(x, p):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))

    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][:T]
    for k in range(L):
        h = f"transformer.h.{k}."
        qkv = ln(x, h + "ln_1") @ w[h + "attn.c_attn.weight"] + w[h + "attn.c_attn.bias"]
        q, kk, v = (qkv[..., i * C:(i + 1) * C].reshape(W, T, H, C // H).transpose(0, 2, 1, 3) for i in range(3))
        att = q @ kk.transpose(0, 1, 3, 2) / np.sqrt(C // H)
        att = np.where(np.tril(np.ones((T, T))) > 0, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        y = (att @ v).transpose(0, 2, 1, 3).reshape(W, T, C)
        x = x + y @ w[h + "attn.c_proj.weight"] + w[h + "attn.c_proj.bias"]
        m = gelu(ln(x, h + "ln_2") @ w[h + "mlp.c_fc.weight"] + w[h + "mlp.c_fc.bias"])
        x = x + m @ w[h + "mlp.c_proj.weight"] + w[h + "mlp.c_proj.bias"]
    return ln(x, "transformer.ln_f") @ w["transformer.wte.weight"].T


def run(cmd, cwd=None):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tsrc", required=True)
    tsrc = os.path.abspath(ap.parse_args().tsrc)
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory(prefix="tsrc-gpt2.") as d:
        state = gpt2_weights(rng)
        np.savez(os.path.join(d, "gpt2.npz"), **state)
        ids = rng.integers(0, V, (W, T + 1))
        probe = rng.normal(0, 1, (W, T, V)).astype(np.float32)
        np.save(os.path.join(d, "ids.npy"), ids.astype(np.float32))
        np.save(os.path.join(d, "probe.npy"), probe)
        logits = gpt2_forward(state, ids[:, :T])
        logp = logits - logits.max(-1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
        want_loss = -np.take_along_axis(logp, ids[:, 1:, None], -1).mean()
        want_projected = (logits * probe).mean()

        rc, _, err = run([tsrc, "-c", PROGRAM, "-o", os.path.join(d, "model.o")])
        check(rc == 0, "tsrc -c tests/native/gpt2_import.tsr (its manifest)", err)
        rc, _, err = run([sys.executable, CONVERT, os.path.join(d, "gpt2.npz"), os.path.join(d, "model.json"),
                          os.path.join(d, "tsrc.npz")])
        check(rc == 0 and os.path.exists(os.path.join(d, "tsrc.npz")), "gpt2_weights.py converts the state dict", err)
        names = json.load(open(os.path.join(d, "model.json")))["tensors"]
        saved = np.load(os.path.join(d, "tsrc.npz"))
        check(sorted(saved.files) == sorted(t["name"] for t in names if t["kind"] == "parameter" and not t.get("state")),
              "the checkpoint holds every parameter of the program but its own state, and nothing else",
              str(saved.files))
        check([t["name"] for t in names if t.get("state")] == ["evaluated"],
              "the manifest marks the program's own state", json.dumps(names)[:400])

        args = ["--", "--load", "tsrc.npz", "--data", "ids=ids.npy", "--data", "probe=probe.npy"]
        printed = {}
        for mode in ("native", "interp"):
            cmd = [tsrc, "--run"] + (["--interp"] if mode == "interp" else []) + [PROGRAM] + args
            rc, out, err = run(cmd, cwd=d)
            printed[mode] = out
            fields = out.split()
            ok = rc == 0 and len(fields) == 4 and fields[0] == "loss" and fields[2] == "projected"
            got_loss, got_projected = (float(fields[1]), float(fields[3])) if ok else (0.0, 0.0)
            rel = max(abs(got_loss - want_loss) / abs(want_loss), abs(got_projected - want_projected) / abs(want_projected))
            check(ok and rel <= 2e-6, f"{mode}: the loaded model's loss and logits are GPT-2's (relative error {rel:.1e})",
                  f"exit {rc}: {out.strip()} {err.strip()[:400]}; want loss {want_loss:.9g} projected {want_projected:.9g}")
        check(printed["native"] == printed["interp"], "native and the reference executor print the same",
              printed["native"] + printed["interp"])

        def refused(what, bad, needle):
            path = os.path.join(d, "bad.npz")
            np.savez(path, **bad)
            out = os.path.join(d, "bad_out.npz")
            rc, _, err = run([sys.executable, CONVERT, path, os.path.join(d, "model.json"), out])
            check(rc == 1 and needle in err and "error:" in err and not os.path.exists(out)
                  and not os.path.exists(out + ".partial"),
                  f"the converter refuses {what}", f"exit {rc}: {err.strip()}")

        # docs/examples/gpt.tsr as stdlib.md's "Weights from GPT-2" converts it: its sample's text,
        # its KV caches and its loss sum are its own state, which GPT-2 does not give.
        example = os.path.join(ROOT, "docs", "examples", "gpt.tsr")
        rc, _, err = run([tsrc, "-c", example, "-o", os.path.join(d, "gpt.o")])
        example_names = json.load(open(os.path.join(d, "gpt.json")))["tensors"] if rc == 0 else []
        dims = {t["name"]: t["dims"] for t in example_names}
        if rc == 0:
            vocab, dim = dims["wte"][1], dims["wte"][0]
            blocks = sum(1 for n in dims if n.startswith("ln1") and n.endswith(".gain"))
            big = gpt2_weights(np.random.default_rng(3), layers=blocks, v=vocab, c=dim, p=dims["wpe"][0])
            np.savez(os.path.join(d, "gpt2_example.npz"), **big)
            rc, _, err = run([sys.executable, CONVERT, os.path.join(d, "gpt2_example.npz"), os.path.join(d, "gpt.json"),
                              os.path.join(d, "example.npz")])
        want = sorted(t["name"] for t in example_names if t["kind"] == "parameter" and not t.get("state"))
        got = sorted(np.load(os.path.join(d, "example.npz")).files) if rc == 0 else []
        check(rc == 0 and got == want and "k_cache1" not in got and "text" not in got,
              "gpt2_weights.py converts GPT-2's weights for docs/examples/gpt.tsr (its caches and text left out)",
              err.strip()[:400])

        bad = dict(state)
        bad["transformer.h.1.mlp.c_fc.weight"] = bad["transformer.h.1.mlp.c_fc.weight"][:, :64]
        refused("a weight of the wrong shape", bad, "'h.1.mlp.c_fc.weight' is [32, 64]")
        refused("three blocks for a two-block program", gpt2_weights(np.random.default_rng(1), layers=3),
                "3 blocks")
        bad = {k: v for k, v in state.items() if "ln_f" not in k}
        refused("a state dict without ln_f", bad, "'ln_f.weight'")
    print(f"{results['passed']} passed, {results['failed']} failed")
    return 1 if results["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
