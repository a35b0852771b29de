"""The round trip a user makes with a PyTorch model (make demo's last part):
the GPT of tests/onnx/torch_models.py, exported to ONNX, compiled by remat,
trained with AdamW on data, saved, loaded back into the PyTorch module by
name, and its loss there against the trainer's own on the same batch.

Usage: torch_roundtrip.py REMAT WORK_DIR
Exits 1 if the two losses differ by more than 1e-5 relative.
"""
import os
import subprocess
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "tests", "onnx"))
import torch_models  # noqa: E402

REMAT, WORK = sys.argv[1], sys.argv[2]
os.makedirs(WORK, exist_ok=True)


def sh(*cmd):
    r = subprocess.run(list(cmd), capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


# 1. the model, exported as a user would
torch_models.export("gpt", WORK)
onnx_path = os.path.join(WORK, "gpt.onnx")

# 2. data: 16 batches of token ids and next-token targets
g = np.random.default_rng(7)
data = os.path.join(WORK, "data")
os.makedirs(data, exist_ok=True)
seq = g.integers(0, 11, size=(16, 2, 7))
np.save(os.path.join(data, "input.idx.npy"), seq[:, :, :6].astype(np.int64))
np.save(os.path.join(data, "input.targets.npy"), seq[:, :, 1:].astype(np.int64))

# 3. compiled, trained with AdamW over the data (two epochs), saved
trainer = os.path.join(WORK, "trainer")
ck = os.path.join(WORK, "checkpoint")
sh(REMAT, "build", onnx_path, "--policy", "sac", "-o", trainer)
log = sh(trainer, "--load", os.path.join(WORK, "ref"), "--data", data,
         "--steps", "32", "--optimizer", "adamw", "--lr", "0.01", "--save", ck)
lines = [l for l in log.splitlines() if l.startswith("step ")]
print(f"remat trainer (sac, AdamW lr 0.01, 32 steps over 16 batches): {lines[0]}; {lines[-1]}")

# 4. the checkpoint's parameters into the PyTorch module, by name
model = torch_models.Gpt()
state = model.state_dict()
loaded = 0
for name in state:
    path = os.path.join(ck, f"param.{name}.npy")
    if os.path.exists(path):
        state[name] = torch.from_numpy(np.load(path))
        loaded += 1
missing = [n for n, _ in model.named_parameters()
           if not os.path.exists(os.path.join(ck, f"param.{n}.npy"))]
if missing:
    sys.exit(f"the checkpoint lacks parameters {missing}")
model.load_state_dict(state)
print(f"loaded {loaded} tensors of the checkpoint into the PyTorch module by name")

# 5. the same batch in both: the trainer's loss from the checkpoint, and torch's
dump = os.path.join(WORK, "dump")
sh(trainer, "--load", ck, "--dump", dump)
ours = float(np.load(os.path.join(dump, "loss.npy")))
idx = torch.from_numpy(np.load(os.path.join(ck, "input.idx.npy")))
tgt = torch.from_numpy(np.load(os.path.join(ck, "input.targets.npy")))
with torch.no_grad():
    theirs = float(model(idx, tgt))
rel = abs(ours - theirs) / abs(theirs)
print(f"loss on the checkpoint's batch: remat {ours:.6f}, PyTorch module {theirs:.6f} "
      f"(relative difference {rel:.1e})")
sys.exit(0 if rel <= 1e-5 else 1)
