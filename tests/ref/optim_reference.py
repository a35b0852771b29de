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

Dropout draws a new mask every step, from (seed, step, node) alone
(runtime/remat_rt.h: rt_rand_uniform over RT_DROPOUT_STREAM); the dump holds
step 0's. The masks of every step are generated here from that rule, written
again in numpy, and step 0's must equal the dumped ones bit for bit before
any step runs, so a port that drifted from the runtime fails loudly. The
seed is the checkpoint's (checkpoint.txt).

Usage: optim_reference.py [--tol T] [--f32-floor K] GRAPH.xml DUMP_DIR
                          CHECKPOINT_DIR STEPS -- TRAINER_FLAGS...
--f32-floor K runs the same steps in float32 torch as well and widens the
tolerance to K times the distance that run ends from float64's, where that
is larger than T: over many steps of a deep model float32 rounding alone
moves the parameters further than 1e-5 (gpt, 20 steps: 1.2e-5 to 1.8e-5),
and no float32 trainer can do better than float32 torch.
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


GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    """splitmix64's finaliser over a uint64 array (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniform(seed, stream, n):
    """rt_rand_uniform(seed, stream, i) for i in [0, n), as float32."""
    m = (1 << 64) - 1
    h = mix64(np.array([(seed + GOLDEN) & m], np.uint64))
    h = mix64(h ^ mix64(np.array([(stream + 2 * GOLDEN) & m], np.uint64)))
    c = np.arange(n, dtype=np.uint64) + np.uint64((3 * GOLDEN) & m)
    h = mix64(h ^ mix64(c))
    return ((h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0))


def dropout_mask(seed, step, key, shape, ratio):
    """The trainer's keep mask (1.0 kept, 0.0 dropped) of Dropout node `key`
    (its index among the graph's nodes) at train step `step` (0 first)."""
    stream = (1 << 63) | (step << 24) | key
    u = uniform(seed, stream, int(np.prod(shape, dtype=np.int64)))
    return (u >= np.float32(ratio)).astype(np.float32).reshape(shape)


def checkpoint_seed(ckpt):
    with open(os.path.join(ckpt, "checkpoint.txt")) as f:
        for line in f:
            if line.startswith("seed "):
                return int(line.split()[1])
    raise SystemExit(f"{ckpt}/checkpoint.txt: no seed line")


def replay_dropout(graph, dump, seed, step):
    """Makes reference.dropout use step's masks; checks step 0's against
    the dump's mask files."""
    import xml.etree.ElementTree as ET
    keys = {n.get("name"): k for k, n in
            enumerate(ET.parse(graph).getroot().find("graph").iter("node"))}

    def dropout(a, ins, at, _dump=None):
        name, ratio = a.get("name"), float(at.get("ratio", "0.5"))
        mask = dropout_mask(seed, step[0], keys[name], tuple(ins[0].shape), ratio)
        if step[0] == 0:
            path = os.path.join(dump, f"mask.{reference.fname(name)}.npy")
            if not np.array_equal(np.load(path), mask):
                raise SystemExit(f"{path}: the numpy port of the trainer's mask "
                                 "rule does not reproduce it")
        return ins[0] * torch.tensor(mask.astype(reference.DTYPE)) / (1 - ratio)

    reference.dropout = dropout


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


def train(graph, dump, seed, steps, o):
    """torch's parameters after `steps` steps from the dump, in
    reference.DTYPE."""
    # the parameters live here; reference.run reads them through load()
    state = {}
    plain_load = reference.load

    def load(d, kind, name, shape, dtype="float32"):
        if kind == "param" and name in state:
            return state[name].detach().clone()
        return plain_load(d, kind, name, shape, dtype)

    reference.load = load
    step = [0]
    replay_dropout(graph, dump, seed, step)
    _, grads, _, _ = reference.run(graph, dump)      # names and first values
    names = [n for n in grads]
    for n in names:
        state[n] = reference.load(dump, "param", n, np.load(
            os.path.join(dump, f"param.{reference.fname(n)}.npy")).shape)
    trainable = {n: state[n].detach().clone().requires_grad_(False) for n in names}
    leaves = [torch.nn.Parameter(trainable[n]) for n in names]
    opt = make_optimizer(o, leaves)
    for k in range(steps):
        step[0] = k
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
    reference.load = plain_load
    return state


def worst_error(ours, ref):
    """(max over parameters of reference.rel, its parameter's name)."""
    worst, worst_name = 0.0, ""
    for n, r in ref.items():
        e = reference.rel(ours[n], r.double().numpy())
        if e > worst:
            worst, worst_name = e, n
    return worst, worst_name


def main(argv):
    tol, floor_k = 1e-5, None
    while argv[:1] in (["--tol"], ["--f32-floor"]):
        if argv[0] == "--tol":
            tol = float(argv[1])
        else:
            floor_k = float(argv[1])
        argv = argv[2:]
    if len(argv) < 5 or argv[4] != "--":
        raise SystemExit(__doc__)
    graph, dump, ckpt, steps = argv[0], argv[1], argv[2], int(argv[3])
    o = parse_flags(argv[5:])
    torch.set_num_threads(1)
    seed = checkpoint_seed(ckpt)
    ref = train(graph, dump, seed, steps, o)
    ours = {n: np.load(os.path.join(ckpt, f"param.{reference.fname(n)}.npy"))
            for n in ref}
    worst, worst_name = worst_error(ours, ref)
    note = ""
    if floor_k is not None:
        # the same steps by torch in float32: how far float32 alone ends
        reference.DTYPE = np.float32
        f32 = train(graph, dump, seed, steps, o)
        reference.DTYPE = np.float64
        floor, _ = worst_error({n: t.numpy() for n, t in f32.items()}, ref)
        tol = max(tol, floor_k * floor)
        note = f"; torch in float32 ends {floor:.2e} from float64, tolerance {tol:.2e}"
    ok = worst <= tol
    print(f"{'ok  ' if ok else 'FAIL'} {graph} {' '.join(argv[5:])}: {steps} steps, "
          f"worst relative error {worst:.2e} ({worst_name}), {len(ref)} parameters{note}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
