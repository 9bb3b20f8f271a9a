"""py_gpt.py — the PyTorch side of the GPT training-step benchmark of `make bench`
(tools/bench.sh, section gpt): the model of tools/bench/gpt.tsr.in written as a PyTorch user
writes GPT-2 (one c_attn projection for q, k and v, F.scaled_dot_product_attention's math with a
causal mask, GELU's tanh form, tied token table), eager, float32.

Usage: py_gpt.py THREADS INIT.npz [KIND VOCAB C NH T B LAYERS]   (default: gpt 96 256 4 64 8 4)

INIT.npz is the checkpoint tools/bench/gpt_tsrc.c saved before its first step: the parameters
tsrc initialised, under tsrc's names (`attn#2.wq`, `ln_f.gain`, …) and layouts (memory order
output, input: a linear weight is [out, in] like torch.nn.Linear's; the token table is
[channels, vocabulary], so PyTorch's embedding is its transpose; a head's q projection is
[heads, head_dim, channels]).  The model runs the same ten steps on the same windows (window()
is gpt_tsrc.c's gpt_window) with torch.optim.AdamW (lr 1e-3, weight decay 0.01 on every
parameter, as Train.adamw) after torch.nn.utils.clip_grad_norm_(1.0), and prints their losses in
its RESULT line; tools/bench/table.py compares them with tsrc's.  Then one step is timed.
Threads: torch.set_num_threads(THREADS).  BENCH_GPT_DEVICE=cuda runs it on the GPU (make bench-gpu,
tools/bench/gpu/run.sh): eager, float32 without TF32, float(loss) waiting for each step."""
import math
import os
import sys

threads, init = int(sys.argv[1]), sys.argv[2]
KIND = sys.argv[3] if len(sys.argv) > 3 else "gpt"
VOCAB, C, NH, T, B, LAYERS = (int(v) for v in sys.argv[4:10]) if len(sys.argv) > 9 else (96, 256, 4, 64, 8, 4)
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(threads)

import numpy as np  # noqa: E402  (after the environment is set)
from bench_data import stream  # noqa: E402
from bench_timing import timed  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(threads)
DEVICE = os.environ.get("BENCH_GPT_DEVICE", "cpu")
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
STEPS = 10


def window(step):
    """gpt_tsrc.c's gpt_window: B windows of T + 1 token ids."""
    ids = stream(31 + step, B * (T + 1)) % np.uint64(VOCAB)
    return torch.from_numpy(ids.astype(np.int64).reshape(B, T + 1)).to(DEVICE)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = torch.nn.LayerNorm(C), torch.nn.LayerNorm(C)
        self.c_attn, self.c_proj = torch.nn.Linear(C, 3 * C), torch.nn.Linear(C, C)
        self.c_fc, self.mlp_proj = torch.nn.Linear(C, 4 * C), torch.nn.Linear(4 * C, C)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(B, T, NH, C // NH).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
        att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).tril().logical_not(), float("-inf"))
        y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = torch.nn.Embedding(VOCAB, C), torch.nn.Embedding(T, C)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = torch.nn.LayerNorm(C)

    def forward(self, ids, targets):
        x = self.wte(ids) + self.wpe.weight
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def load(model, path):
    """tsrc's parameters, by tsrc's names, into the PyTorch model (the layout map)."""
    z = np.load(path)

    def get(name):
        return torch.from_numpy(np.ascontiguousarray(z[name], dtype=np.float32))

    with torch.no_grad():
        model.wte.weight.copy_(get("wte").t())
        model.wpe.weight.copy_(get("wpe"))
        model.ln_f.weight.copy_(get("ln_f.gain"))
        model.ln_f.bias.copy_(get("ln_f.bias"))
        for i, blk in enumerate(model.blocks):
            s = "" if i == 0 else f"#{i + 1}"
            blk.ln_1.weight.copy_(get(f"ln1{s}.gain"))
            blk.ln_1.bias.copy_(get(f"ln1{s}.bias"))
            blk.ln_2.weight.copy_(get(f"ln2{s}.gain"))
            blk.ln_2.bias.copy_(get(f"ln2{s}.bias"))
            blk.c_attn.weight.copy_(torch.cat([get(f"attn{s}.w{p}").reshape(C, C) for p in "qkv"]))
            blk.c_attn.bias.copy_(torch.cat([get(f"attn{s}.b{p}").reshape(C) for p in "qkv"]))
            blk.c_proj.weight.copy_(get(f"attn{s}.wo").reshape(C, C))
            blk.c_proj.bias.copy_(get(f"attn{s}.bo"))
            blk.c_fc.weight.copy_(get(f"layer{s}.w"))
            blk.c_fc.bias.copy_(get(f"layer{s}.b"))
            blk.mlp_proj.weight.copy_(get(f"rest{s}.w"))
            blk.mlp_proj.bias.copy_(get(f"rest{s}.b"))


model = GPT()
load(model, init)
model.to(DEVICE)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)


def step(ids):
    opt.zero_grad(set_to_none=True)
    loss = model(ids[:, :T], ids[:, 1:])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return float(loss)


losses = [step(window(s)) for s in range(STEPS)]
ok = all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
if not ok:
    print(f"INFO gpt torch: the losses are not finite or did not decrease: {losses}")
last = window(STEPS - 1)
_, reps, best, med = timed(lambda: step(last))
print(f"RESULT kind={KIND} impl=torch n={B} threads={threads} reps={reps} best_s={best:.6g} median_s={med:.6g} "
      f"check={'ok' if ok else 'FAIL'} maxrel=0 losses={','.join(f'{v:.8g}' for v in losses)}")
