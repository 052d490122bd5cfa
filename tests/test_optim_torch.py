#!/usr/bin/env python3
"""AdamW of cloze (cz_adamw_update, bias correction on) against
torch.optim.AdamW for a few steps, with a decayed and a no_decay group.
Exit 77 (skip) when torch is not importable."""
import os, struct, subprocess, sys, tempfile

try:
    import numpy as np
    import torch
except ImportError:
    sys.exit(77)

n, steps, nd_from = 1000, 6, 700
lr, b1, b2, eps, wd = 1e-2, 0.9, 0.999, 1e-6, 0.1
rng = np.random.default_rng(1)
w0 = rng.standard_normal(n).astype(np.float32)
g = (rng.standard_normal((steps, n)) * 0.1).astype(np.float32)
g[3] *= 20.0  # one large step, so moments matter

exe = os.path.join(os.environ["CLOZE_BUILD_DIR"], "tests", "test_optim")
with tempfile.TemporaryDirectory() as d:
    fin, fout = os.path.join(d, "in.bin"), os.path.join(d, "out.bin")
    with open(fin, "wb") as f:
        f.write(struct.pack("<3i5d", n, steps, nd_from, lr, b1, b2, eps, wd))
        f.write(w0.tobytes())
        f.write(g.tobytes())
    subprocess.run([exe, "--adamw-file", fin, fout], check=True)
    ours = np.fromfile(fout, dtype=np.float32)

p1 = torch.nn.Parameter(torch.from_numpy(w0[:nd_from].copy()))
p2 = torch.nn.Parameter(torch.from_numpy(w0[nd_from:].copy()))
opt = torch.optim.AdamW([{"params": [p1], "weight_decay": wd}, {"params": [p2], "weight_decay": 0.0}],
                        lr=lr, betas=(b1, b2), eps=eps)
for s in range(steps):
    p1.grad = torch.from_numpy(g[s, :nd_from].copy())
    p2.grad = torch.from_numpy(g[s, nd_from:].copy())
    opt.step()
ref = torch.cat([p1.detach(), p2.detach()]).numpy()

# error relative to the size of `steps` updates of lr each: float rounding
# is ~1e-6 of it; a missing weight decay (wd * lr * steps) would be 0.1
err = np.max(np.abs(ours - ref)) / (lr * steps)
print(f"max |ours - torch| / (lr * steps) = {err:.3g}")
if not err < 1e-4:
    sys.exit(1)
print("ok")
