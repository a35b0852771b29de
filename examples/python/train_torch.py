"""A torch model trained by remat's compiled trainer, then used in torch.

A small classifier (two hidden layers, cross-entropy inside forward) is
exported to ONNX, planned under the sac policy, built into a trainer,
trained with AdamW on batches from Python, saved, and loaded back into the
torch module by name; torch then evaluates it on held-out data. The last
check: the trainer's loss on a batch and torch's on the same batch agree.

    python3 examples/python/train_torch.py [WORK_DIR]

Exits 1 if they differ by more than 1e-5 relative or the model did not
learn (held-out accuracy below 90%).
"""
import os
import sys
import tempfile

import numpy as np
import torch

import remat


class Classifier(torch.nn.Module):
    """Points in the plane: inside or outside the unit circle."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(2, 32)
        self.fc2 = torch.nn.Linear(32, 32)
        self.out = torch.nn.Linear(32, 2)

    def logits(self, x):
        return self.out(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    def forward(self, x, labels):       # the loss inside: what remat trains
        return torch.nn.functional.cross_entropy(self.logits(x), labels)


def data(n_batches, batch, seed):
    g = np.random.default_rng(seed)
    x = g.uniform(-2, 2, size=(n_batches, batch, 2)).astype(np.float32)
    labels = (np.sum(x * x, axis=-1) < 1.5).astype(np.int64)
    return {"x": x, "labels": labels}


def main(work):
    torch.manual_seed(0)
    model = Classifier()
    train, held_out = data(64, 32, seed=1), data(8, 32, seed=2)

    # 1. export: the batch's shapes are fixed here (32 points a batch)
    onnx = remat.export(model, (torch.from_numpy(train["x"][0]),
                                torch.from_numpy(train["labels"][0])),
                        os.path.join(work, "classifier.onnx"))

    # 2. plan: what the sac policy keeps for the backward, and the RAM the
    #    step needs with AdamW's state (a picture of it in memory.svg)
    s = remat.schedule(onnx, policy="sac", optimizer="adamw")["summary"]
    m = remat.memory(onnx, policy="sac", optimizer="adamw",
                     svg=os.path.join(work, "memory.svg"))
    print(f"sac saves {s['saved_bytes']} bytes; arena {s['arena_bytes']}, "
          f"RAM with AdamW {s['ram_bytes']}; the arena peaks at "
          f"'{m['peak']['does']}'")

    # 3. build and train from the module's own initial weights
    trainer = remat.build(onnx, policy="sac", optimizer="adamw", lr=0.01,
                          init=model.state_dict())
    losses = trainer.fit(train, epochs=5)
    print(f"trained {len(losses)} steps: loss {losses[0]:.4f} -> "
          f"{np.mean(losses[-64:]):.4f} (last epoch's mean)")
    checkpoint = trainer.save(os.path.join(work, "checkpoint"))

    # 4. back into torch, by name, and evaluated there
    names = remat.load_into(model, checkpoint)
    print(f"loaded {', '.join(names)} into the torch module")
    model.eval()
    with torch.no_grad():
        x = torch.from_numpy(held_out["x"].reshape(-1, 2))
        y = torch.from_numpy(held_out["labels"].reshape(-1))
        accuracy = float((model.logits(x).argmax(-1) == y).float().mean())
        batch = {k: v[0] for k, v in held_out.items()}
        theirs = float(model(*(torch.from_numpy(batch[k]) for k in ("x", "labels"))))
    ours = trainer.evaluate(batch)
    rel = abs(ours - theirs) / abs(theirs)
    print(f"held-out accuracy in torch: {accuracy:.1%}")
    print(f"loss on a held-out batch: remat {ours:.6f}, torch {theirs:.6f} "
          f"(relative difference {rel:.1e})")
    return 0 if rel <= 1e-5 and accuracy >= 0.9 else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        os.makedirs(sys.argv[1], exist_ok=True)
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as d:
        sys.exit(main(d))
