#!/usr/bin/python3
"""torch.optim as the yardstick for the trainer's optimizers.

It rebuilds a graph in torch (float64) with reference.py's interpreter, starts
from a trainer's --dump (the seeded inputs and parameters), runs N steps of
torch.optim.SGD or torch.optim.AdamW (with torch.nn.utils.clip_grad_norm_
when asked) on that batch, with the trainer's own flags, and compares every
parameter with the trainer's --save checkpoint after the same N steps:
relative error max|ours - torch| / max|torch| per parameter, failing above
the tolerance. BatchNormalization's running statistics, which each train
step updates, are carried from step to step as torch updates them.

Usage: optim_reference.py [--tol T] GRAPH.xml DUMP_DIR CHECKPOINT_DIR STEPS
                          -- TRAINER_FLAGS...
TRAINER_FLAGS: the trainer's --optimizer, --lr, --momentum, --dampening,
--nesterov, --weight-decay, --betas, --eps, --clip-grad-norm (others are
refused: the reference would not know them).
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def parse_flags(flags):
    o = {"optimizer": "sgd", "momentum": 0.0, "dampening": 0.0, "nesterov": False,
         "weight_decay": None, "betas": (0.9, 0.999), "eps": 1e-8, "clip": None,
         "lr": None}
    i = 0
    while i < len(flags):
        f = flags[i]
        if f == "--nesterov":
            o["nesterov"] = True
            i += 1
            continue
        v = flags[i + 1]
        i += 2
        if f == "--optimizer":
            o["optimizer"] = v
        elif f == "--lr":
            o["lr"] = float(v)
        elif f == "--momentum":
            o["momentum"] = float(v)
        elif f == "--dampening":
            o["dampening"] = float(v)
        elif f == "--weight-decay":
            o["weight_decay"] = float(v)
        elif f == "--betas":
            o["betas"] = tuple(float(b) for b in v.split(","))
        elif f == "--eps":
            o["eps"] = float(v)
        elif f == "--clip-grad-norm":
            o["clip"] = float(v)
        else:
            raise SystemExit(f"optim_reference.py: no reference for {f}")
    return o


def make_optimizer(o, params):
    if o["optimizer"] == "adamw":
        return torch.optim.AdamW(params, lr=o["lr"] if o["lr"] is not None else 1e-3,
                                 betas=o["betas"], eps=o["eps"],
                                 weight_decay=(o["weight_decay"]
                                               if o["weight_decay"] is not None else 0.01))
    return torch.optim.SGD(params, lr=o["lr"] if o["lr"] is not None else 0.01,
                           momentum=o["momentum"], dampening=o["dampening"],
                           nesterov=o["nesterov"],
                           weight_decay=o["weight_decay"] or 0.0)


def main(argv):
    tol = 1e-5
    if argv[:1] == ["--tol"]:
        tol, argv = float(argv[1]), argv[2:]
    if len(argv) < 5 or argv[4] != "--":
        raise SystemExit(__doc__)
    graph, dump, ckpt, steps = argv[0], argv[1], argv[2], int(argv[3])
    o = parse_flags(argv[5:])
    torch.set_num_threads(1)

    # the parameters live here; reference.run reads them through load()
    state = {}
    plain_load = reference.load

    def load(d, kind, name, shape, dtype="float32"):
        if kind == "param" and name in state:
            return state[name].detach().clone()
        return plain_load(d, kind, name, shape, dtype)

    reference.load = load
    _, grads, _, _ = reference.run(graph, dump)      # names and first values
    names = [n for n in grads]
    for n in names:
        state[n] = reference.load(dump, "param", n, np.load(
            os.path.join(dump, f"param.{reference.fname(n)}.npy")).shape)
    trainable = {n: state[n].detach().clone().requires_grad_(False) for n in names}
    leaves = [torch.nn.Parameter(trainable[n]) for n in names]
    opt = make_optimizer(o, leaves)
    for _ in range(steps):
        for n, p in zip(names, leaves):
            state[n] = p.detach()
        _, grads, _, updated = reference.run(graph, dump)
        for n, stat in updated.items():           # running statistics
            state[n] = stat.detach()
        for n, p in zip(names, leaves):
            p.grad = grads[n].detach().clone()
        if o["clip"] is not None:
            torch.nn.utils.clip_grad_norm_(leaves, o["clip"])
        opt.step()
    for n, p in zip(names, leaves):
        state[n] = p.detach()

    worst, worst_name, ok = 0.0, "", True
    for n, ref in state.items():
        path = os.path.join(ckpt, f"param.{reference.fname(n)}.npy")
        ours = np.load(path)
        r = reference.rel(ours, ref.numpy())
        if r > worst:
            worst, worst_name = r, n
    ok = worst <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {graph} {' '.join(argv[5:])}: {steps} steps, "
          f"worst relative error {worst:.2e} ({worst_name}), {len(state)} parameters")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
