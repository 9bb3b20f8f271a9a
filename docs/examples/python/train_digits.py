"""train_digits.py — train a tsrc model from a Python loop, then hand its weights to PyTorch.

    python3 tools/digits.py /tmp/digits           # the synthetic digits (NumPy only)
    PYTHONPATH=runtime/python python3 docs/examples/python/train_digits.py /tmp/digits

digits_mlp.tsr is compiled with tsr.compile (tsrc --shared, cached), the loop feeds it NumPy
batches and reads its loss, the test images go through `predict` at a run-time batch of 200,
and the accuracy is computed in NumPy.  Then the weights are read by the names the manifest
gives them (Nn.mlp's `layer.w`, `layer.b`, `rest.w`, `rest.b`; a weight is [out, in], as
torch.nn.Linear's) into a torch.nn.Sequential, whose predictions must be tsrc's (when PyTorch is
installed).  Set $TSRC to the compiler to use (default: tsrc on PATH)."""
import os
import sys

import numpy as np
import tsr

here = os.path.dirname(os.path.abspath(__file__))
data = sys.argv[1] if len(sys.argv) > 1 else "."
train_x = np.load(os.path.join(data, "digits_train_x.npy"))   # 10, 30, 784
train_y = np.load(os.path.join(data, "digits_train_y.npy"))   # 10, 30 (class ids)
test_x = np.load(os.path.join(data, "digits_test_x.npy"))     # 200, 784
test_y = np.load(os.path.join(data, "digits_test_y.npy"))     # 200

m = tsr.compile(os.path.join(here, "digits_mlp.tsr"), seed=0)
for epoch in range(1, 9):
    losses = []
    for b in range(len(train_x)):
        m["x"] = train_x[b]
        m["y"] = train_y[b]
        m.train()
        losses.append(float(m["loss"][0]))
    m.sizes["test_x.b"] = len(test_x)
    m["test_x"] = test_x
    m.predict()
    accuracy = float((m["logits"].argmax(axis=1) == test_y).mean())
    print(f"epoch {epoch}  loss {np.mean(losses):.4f}  test accuracy {100 * accuracy:.1f}%")

try:
    import torch
except ImportError:
    print("PyTorch is not installed: the export to torch.nn is skipped")
    sys.exit(0)
net = torch.nn.Sequential(torch.nn.Linear(784, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
with torch.no_grad():
    for layer, prefix in ((net[0], "layer"), (net[2], "rest")):
        layer.weight.copy_(torch.from_numpy(m[prefix + ".w"].copy()))
        layer.bias.copy_(torch.from_numpy(m[prefix + ".b"].copy()))
    theirs = net(torch.from_numpy(test_x)).numpy()
same = np.allclose(theirs, m["logits"], rtol=1e-5, atol=1e-5)
print(f"PyTorch's predictions from the exported weights {'agree' if same else 'DISAGREE'} with tsrc's "
      f"(largest difference {np.abs(theirs - m['logits']).max():.1e})")
sys.exit(0 if same else 1)
