"""The Python module (python/remat) against independent references: its
dicts against the compiler's own --json for the same flags, its training
against torch.optim on the same batches, its gradients against torch
autograd in float64, and its save, resume, step and fit against each
other bit for bit. Prints one line per failed check and "N passed, M
failed" last. Usage: check_module.py WORK_DIR (REMAT names the compiler).
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

import remat

WORK = sys.argv[1]
REMAT = os.environ["REMAT"]
passed = failed = 0


def check(what, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL: {what} {detail}")


def raises(what, fn, exc, text):
    try:
        fn()
    except exc as e:
        check(what, text in str(e), f"message: {e}")
        return e
    check(what, False, "did not raise")


def cli_json(*args):
    return json.loads(subprocess.run([REMAT, *args, "--json"], check=True,
                                     capture_output=True, text=True).stdout)


class Seq(torch.nn.Sequential):
    """Parameters named "0.weight", "1.running_mean" (remat's "_0.weight"),
    BatchNorm's statistics, Dropout's random numbers."""

    def __init__(self):
        super().__init__(torch.nn.Linear(6, 8), torch.nn.BatchNorm1d(8),
                         torch.nn.ReLU(), torch.nn.Dropout(0.25), torch.nn.Linear(8, 3))

    def forward(self, x, y):
        return ((super().forward(x) - y) ** 2).mean()


class Net(torch.nn.Module):
    """Two layers and a Gelu, squared error inside: SGD and AdamW differ."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 12)
        self.fc2 = torch.nn.Linear(12, 3)

    def forward(self, x, y):
        return ((self.fc2(torch.nn.functional.gelu(self.fc1(x))) - y) ** 2).mean()


def batches(n, seed):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(n, 4, 6, generator=g), "y": torch.randn(n, 4, 3, generator=g)}


def torch_train(model, data, make_opt, accumulate=1):
    """torch.optim's steps over data, accumulate micro-batches a step
    (their gradients' mean); the steps' losses (the micro-batches' mean)."""
    opt = make_opt(model.parameters())
    losses = []
    n = len(data["x"])
    for s in range(n // accumulate):
        opt.zero_grad()
        total = 0.0
        for k in range(s * accumulate, (s + 1) * accumulate):
            loss = model(data["x"][k], data["y"][k]) / accumulate
            loss.backward()
            total += float(loss)
        opt.step()
        losses.append(total)
    return losses


def close(a, b, tol):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and np.all(np.abs(a - b) <= tol * (1 + np.abs(b)))


def main():
    torch.manual_seed(0)
    net = Net()
    init = {k: v.clone() for k, v in net.state_dict().items()}
    net.eval()
    onnx = remat.export(net, (torch.zeros(4, 6), torch.zeros(4, 3)),
                        os.path.join(WORK, "net.onnx"))
    check("export wrote the file", os.path.getsize(onnx) > 0)
    check("export leaves the module's mode", not net.training)
    net.train()
    # a module with BatchNorm (its running statistics) and Dropout (the
    # random state), its parameters named "0.weight" as nn.Sequential's
    seq = Seq()
    before = {k: v.clone() for k, v in seq.state_dict().items()}
    example = (torch.randn(4, 6), torch.randn(4, 3))
    rng = torch.random.get_rng_state()
    seq_onnx = remat.export(seq, example, os.path.join(WORK, "seq.onnx"))
    check("export leaves the buffers", all(torch.equal(v, before[k])
                                           for k, v in seq.state_dict().items()))
    check("export leaves torch's random state", torch.equal(rng, torch.random.get_rng_state()))
    check("compiler(): REMAT", remat.compiler() == REMAT)
    tree = os.path.normpath(os.path.join(os.path.dirname(remat.__file__), "..", "..", "build", "remat"))
    del os.environ["REMAT"]
    check("compiler(): the source tree's build/remat", remat.compiler() == tree, remat.compiler())
    os.environ["REMAT"] = REMAT
    check("version", remat.version() == subprocess.run(
        [REMAT, "--version"], capture_output=True, text=True).stdout.split()[-1])

    # ---- the dicts are the compiler's JSON for the same flags
    opts = dict(policy="sac", max_ram=6000, optimizer="adamw", freeze=["fc1.*"])
    flags = ["--policy", "sac", "--max-ram", "6000", "--optimizer", "adamw",
             "--freeze", "fc1.*"]
    d = remat.schedule(onnx, **opts)
    check("schedule = the CLI's JSON", d == cli_json("schedule", onnx, *flags))
    check("schedule froze fc1", d["summary"]["ram_bytes"] <
          remat.schedule(onnx, policy="sac", optimizer="adamw")["summary"]["ram_bytes"])
    check("schedule with a budget", remat.schedule(onnx, budget=0.5, momentum=0.9) ==
          cli_json("schedule", onnx, "--budget", "0.5", "--momentum", "0.9"))
    check("diff", remat.diff(onnx) == remat.diff(onnx, policy=["none", "sac"]) ==
          cli_json("diff", onnx, "--policy", "none", "--policy", "sac"))
    check("diff of a budget", remat.diff(onnx, budget=0.3) == cli_json("diff", onnx, "--budget", "0.3"))
    svg = os.path.join(WORK, "curve.svg")
    p = remat.pareto(onnx, svg=svg, by="arena")
    check("pareto draws", p.pop("svg") == svg and open(svg).read().startswith("<svg"))
    check("pareto = the CLI's JSON", p == cli_json("pareto", onnx, "--by", "arena"))
    m = remat.memory(onnx, policy="sac", fused=True)
    check("memory = the CLI's JSON", m == cli_json("memory", onnx, "--policy", "sac", "--fused"))
    check("memory's live bytes peak at peak_live_bytes",
          max(map(sum, zip(*m["live"].values()))) == m["peak_live_bytes"])
    check("ops", "Gemm" in [o["op"] for o in remat.ops()["computed"]])
    c, h = remat.compile(onnx, os.path.join(WORK, "gen.c"), name="net")
    check("compile wrote the pair", "net_train_step" in open(c).read() and os.path.exists(h))

    # ---- errors: the compiler's message, its status; options by name
    bad = os.path.join(WORK, "bad.xml")
    open(bad, "w").write('<model name="m" format="1"><graph>\n<input name="x" shape="4 0"/>\n</graph></model>\n')
    e = raises("a bad model", lambda: remat.schedule(bad), remat.RematError, "bad.xml")
    check("a bad model's status is 1", e is not None and e.status == 1)
    e = raises("a bad flag value", lambda: remat.schedule(onnx, policy="nosuch"),
               remat.RematError, "nosuch")
    raises("an unknown option", lambda: remat.schedule(onnx, polcy="sac"), TypeError, "polcy")
    e = raises("a usage error: the compiler's line, not its hint",
               lambda: remat.schedule(onnx, by="arena"), remat.RematError, "unknown option --by")
    check("a usage error's status is 2", e is not None and e.status == 2)
    raises("export of a forward that is no loss",
           lambda: remat.export(torch.nn.Linear(2, 2), (torch.zeros(1, 2),),
                                os.path.join(WORK, "x.onnx")), remat.RematError, "0-d")
    check("nothing written for the refused export", not os.path.exists(os.path.join(WORK, "x.onnx")))

    # ---- training: torch.optim on the same batches, from the same weights
    data = batches(6, 1)
    cases = {
        "sgd momentum weight decay": (dict(lr=0.05, momentum=0.9, weight_decay=0.01),
                                      lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01)),
        "adamw": (dict(optimizer="adamw", lr=0.01, betas=(0.8, 0.99)),
                  lambda p: torch.optim.AdamW(p, lr=0.01, betas=(0.8, 0.99))),
    }
    for name, (ours, theirs) in cases.items():
        t = remat.build(onnx, policy="sac", init=init, **ours)
        got = t.fit(data)
        ref = Net()
        ref.load_state_dict(init)
        want = torch_train(ref, data, theirs)
        check(f"{name}: losses = torch's", close(got, want, 1e-5), f"{got} vs {want}")
        params = t.parameters()
        check(f"{name}: parameters = torch's",
              all(close(params[k], v.detach(), 1e-5) for k, v in ref.state_dict().items()))
    t = remat.build(onnx, policy="sac", init=init, lr=0.05, accumulate=2)
    ref = Net()
    ref.load_state_dict(init)
    want = torch_train(ref, data, lambda p: torch.optim.SGD(p, lr=0.05), accumulate=2)
    got = t.fit(data)
    check("accumulate=2: 3 steps of 2 batches = torch's", len(got) == 3 and close(got, want, 1e-5),
          f"{got} vs {want}")
    raises("step() with accumulate", lambda: t.step({"x": data["x"][0], "y": data["y"][0]}),
           remat.RematError, "accumulate")

    # ---- gradients: torch autograd in float64 on the trainer's --dump
    t = remat.build(onnx, policy="sac", init=init)
    batch = {"x": data["x"][0], "y": data["y"][0]}
    dump = t.dump(batch)
    ref = Net().double()
    ref.load_state_dict({k: v.double() for k, v in init.items()})
    loss = ref(batch["x"].double(), batch["y"].double())
    loss.backward()
    check("dump's loss = torch's", close(dump["loss"], loss.item(), 1e-6))
    check("dump's gradients = torch autograd's",
          all(close(dump["grad." + k], p.grad, 1e-5) for k, p in ref.named_parameters()))
    t.step(batch)
    moved = t.parameters()
    t.dump(batch)
    check("dump took no step", not np.array_equal(moved["fc1.weight"], init["fc1.weight"].numpy())
          and all(np.array_equal(a, moved[k]) for k, a in t.parameters().items()))

    # ---- step, fit, save and resume: the same bits however split
    base, exe = t, t.executable   # the executable lives as long as base
    whole = remat.Trainer(exe, lr=0.05, seed=4)
    all_losses = whole.fit(data, epochs=2)
    parts = remat.Trainer(exe, lr=0.05, seed=4)
    # each fit starts where (batches read) % (batches given) is not 0
    part = lambda a, b: {k: v[a:b] for k, v in data.items()}
    split = [parts.step({k: v[0] for k, v in data.items()})]
    split += parts.fit(part(1, 4))
    saved = parts.save(os.path.join(WORK, "ck"))
    resumed = remat.Trainer(exe, lr=0.05, resume=saved)
    split += resumed.fit(part(4, 6))
    split += resumed.fit(part(0, 4))
    split += resumed.fit(part(4, 6))
    check("fit, step, save and resume = one fit, bitwise", split == all_losses,
          f"{split} vs {all_losses}")
    check("their parameters, bitwise", all(np.array_equal(a, whole.parameters()[k])
                                           for k, a in resumed.parameters().items()))
    check("progress", resumed.progress()["step"] == 12 and resumed.losses == split[4:])
    check("the two epochs differ", all_losses[:6] != all_losses[6:])
    lst = remat.Trainer(exe, lr=0.05, seed=4)
    check("fit over a list of batches", lst.fit([{k: v[i] for k, v in data.items()}
                                                  for i in range(6)]) == all_losses[:6])
    raises("resume of no checkpoint", lambda: remat.Trainer(exe, resume=WORK),
           remat.RematError, "not a checkpoint")
    raises("a batch that is not a dict", lambda: whole.step([1, 2]), remat.RematError, "dict")
    e = raises("a batch of the wrong shape", lambda: whole.step({"x": np.zeros((3, 6)), "y": np.zeros((4, 3))}),
               remat.RematError, "input.x.npy")

    # ---- back into torch: load_into, then torch's loss = the trainer's
    back = Net()
    names = remat.load_into(back, resumed)
    check("load_into loads every parameter", sorted(names) == sorted(init))
    check("load_into's values are the checkpoint's", all(
        np.array_equal(back.state_dict()[k].numpy(), v) for k, v in resumed.parameters().items()))
    check("load_into from the folder", remat.load_into(Net(), saved) == names)
    with torch.no_grad():
        theirs = float(back(batch["x"], batch["y"]))
    check("evaluate = torch's loss of the loaded module", close(resumed.evaluate(batch), theirs, 1e-5))

    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(6, 12)
            self.extra = torch.nn.Linear(1, 1)
    raises("load_into: a parameter missing", lambda: remat.load_into(Other(), saved),
           remat.RematError, "extra.weight")
    check("load_into strict=False", sorted(remat.load_into(Other(), saved, strict=False)) ==
          ["fc1.bias", "fc1.weight"])
    wrong = Net()
    wrong.fc1 = torch.nn.Linear(6, 5)
    raises("load_into: a shape that differs", lambda: remat.load_into(wrong, saved, strict=False),
           remat.RematError, "fc1.weight")

    # ---- names remat spells otherwise, BatchNorm's statistics, Dropout's seed
    t = remat.build(seq_onnx, init=before, lr=0.05)
    params = t.parameters()
    check("remat's names for torch's", "_0.weight" in params and "0.weight" not in params,
          sorted(params))
    check("init= from a state_dict with torch's names",
          np.array_equal(params["_0.weight"], before["0.weight"].numpy()))
    t.fit({k: v[:4] for k, v in data.items()} | {"y": data["y"][:4]})
    back = Seq()
    names = remat.load_into(back, t)
    check("load_into by torch's names", "0.weight" in names and "1.running_mean" in names, names)
    check("load_into: the running statistics moved", not torch.equal(
        back.state_dict()["1.running_mean"], before["1.running_mean"]))
    back.eval()
    with torch.no_grad():
        theirs = float(back(batch["x"], batch["y"]))
    check("evaluate = torch's eval-mode loss (BatchNorm's statistics)",
          close(t.evaluate(batch), theirs, 1e-5), f"{t.evaluate(batch)} vs {theirs}")
    raises("seed with init", lambda: remat.Trainer(t.executable, init=before, seed=3),
           remat.RematError, "seed 0")
    fwd = remat.export(torch.nn.Linear(6, 2), (torch.zeros(4, 6),),
                       os.path.join(WORK, "fwd.onnx"), forward_only=True)
    raises("evaluate on a forward-only model", lambda: remat.build(fwd).evaluate(
        {"input": np.zeros((4, 6))}), remat.RematError, "forward only")

    # ---- files the Trainer must not touch
    keep = os.path.join(WORK, "project")
    os.makedirs(os.path.join(keep, "data"))
    open(os.path.join(keep, "data", "train.csv"), "w").write("1,2\n")
    t = remat.Trainer(exe, lr=0.05, workdir=keep)
    t.fit(data)
    check("a workdir's own files stay", os.path.exists(os.path.join(keep, "data", "train.csv")))
    raises("a workdir that holds a run", lambda: remat.Trainer(exe, workdir=keep),
           remat.RematError, "another Trainer's run")
    raises("save over a folder that is not a checkpoint",
           lambda: t.save(os.path.join(keep, "data")), remat.RematError, "not a checkpoint")
    check("... which stays", os.path.exists(os.path.join(keep, "data", "train.csv")))
    ck = t.save(os.path.join(WORK, "ck2") + "/")
    check("save to a path ending in /", os.path.exists(os.path.join(WORK, "ck2", "checkpoint.txt")))
    t.fit(data)
    t.save(ck)
    check("save over its own checkpoint", remat.Trainer(exe, resume=ck).progress()["step"] == 12)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


sys.exit(main())
