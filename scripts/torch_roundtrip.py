"""The round trip a user makes with a PyTorch model (make demo's last part),
through the Python module (python/remat, docs/python.md): the GPT of
tests/onnx/torch_models.py, exported to ONNX, built by remat, trained with
AdamW on data, saved, loaded back into the PyTorch module by name, and its
loss there against the trainer's own on the same batch.

Usage: torch_roundtrip.py REMAT WORK_DIR
Exits 1 if the two losses differ by more than 1e-5 relative.
"""
import os
import sys

import numpy as np
import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "python"),
                os.path.join(here, "..", "tests", "onnx")]
import remat  # noqa: E402
import torch_models  # noqa: E402

os.environ["REMAT"] = sys.argv[1]
WORK = sys.argv[2]
os.makedirs(WORK, exist_ok=True)

# 1. the model, exported as a user would (torch_models.export also writes
#    its initial weights, ref/param.NAME.npy)
torch_models.export("gpt", WORK)
onnx_path = os.path.join(WORK, "gpt.onnx")

# 2. data: 16 batches of token ids and next-token targets
g = np.random.default_rng(7)
seq = g.integers(0, 11, size=(16, 2, 7))
data = {"idx": np.ascontiguousarray(seq[:, :, :6]),
        "targets": np.ascontiguousarray(seq[:, :, 1:])}

# 3. built, trained with AdamW over the data (two epochs), saved
trainer = remat.build(onnx_path, os.path.join(WORK, "trainer"), policy="sac",
                      optimizer="adamw", lr=0.01, init=os.path.join(WORK, "ref"))
losses = trainer.fit(data, epochs=2)
ck = trainer.save(os.path.join(WORK, "checkpoint"))
print(f"remat trainer (sac, AdamW lr 0.01, 32 steps over 16 batches): "
      f"step 1 loss {losses[0]:.6f}; step 32 loss {losses[-1]:.6f}")

# 4. the checkpoint's parameters into the PyTorch module, by name
model = torch_models.Gpt()
loaded = remat.load_into(model, ck)
print(f"loaded {len(loaded)} tensors of the checkpoint into the PyTorch module by name")

# 5. the same batch in both: the trainer's loss from the checkpoint, and torch's
batch = {k: v[0] for k, v in data.items()}
ours = float(trainer.dump(batch)["loss"])
with torch.no_grad():
    theirs = float(model(*(torch.from_numpy(batch[k]) for k in ("idx", "targets"))))
rel = abs(ours - theirs) / abs(theirs)
print(f"loss on the first batch: remat {ours:.6f}, PyTorch module {theirs:.6f} "
      f"(relative difference {rel:.1e})")
sys.exit(0 if rel <= 1e-5 else 1)
