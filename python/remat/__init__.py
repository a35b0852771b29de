"""remat for PyTorch users: export a torch module, plan its memory, build
its trainer and train it from Python, then load the weights back.

    import remat
    remat.export(model, (x, y), "model.onnx")      # forward returns the loss
    plan = remat.schedule("model.onnx", policy="sac")
    trainer = remat.build("model.onnx", policy="sac")
    losses = trainer.fit({"x": xs, "y": ys}, epochs=3)
    remat.load_into(model, trainer)

The planning and code generation are the remat program's (C); this package
runs it (remat.compiler() says which) and reads its --json output. The
trainer is the executable `remat build` makes, run once per fit() or step()
from its last checkpoint. docs/python.md describes every function.
"""
import os

from ._compiler import RematError, command, command_json, compiler, run
from ._torch import export, load_into
from .trainer import Trainer, remat_name

__all__ = ["RematError", "Trainer", "build", "compile", "compiler", "diff",
           "export", "load_into", "memory", "ops", "pareto", "remat_name",
           "schedule", "version"]


def version():
    """The remat program's version string ("0.1.0")."""
    return run([compiler(), "--version"]).split()[-1]


def schedule(model, **options):
    """`remat schedule MODEL --json` as a dict: "tensors" (each forward
    tensor's decision), "compact", "files" and "summary" (saved_bytes,
    arena_bytes, ram_bytes, ...). Options: policy, budget, max_arena,
    max_ram, freeze, optimizer, momentum, fused, seed, conv_scratch."""
    return command_json("schedule", model, **options)


def diff(model, policies=("none", "sac"), **options):
    """`remat diff` of two policies as a dict: "changed" rows and each
    figure's from, to and change. policy= is the same as policies=; with a
    budget (budget=, max_arena=, max_ram=) and no policies, the budget's
    plan against the policy it turns."""
    policies = options.pop("policy", policies)
    if any(options.get(k) for k in ("budget", "max_arena", "max_ram")) and \
            policies == ("none", "sac"):
        policies = None
    return command_json("diff", model, policy=policies, **options)


def pareto(model, svg=None, **options):
    """`remat pareto MODEL --json`: every optimal plan ("plans") and where
    the built-in policies fall ("policies"). With svg=PATH the curve is
    drawn there too and the dict's "svg" names it. Options: policy,
    by ("saved" or "arena"), measure, freeze, optimizer, momentum, fused."""
    return _with_svg("pareto", model, svg, options)


def memory(model, svg=None, **options):
    """`remat memory MODEL --json`: the peak, the largest values there and
    "live", each kind's bytes at every statement. With svg=PATH the stacked
    picture is written there too ("svg" in the dict)."""
    return _with_svg("memory", model, svg, options)


def ops():
    """The ops remat computes, folds and lowers (`remat ops --json`)."""
    import json
    return json.loads(run([compiler(), "ops", "--json"]))


def compile(model, out, **options):
    """Writes the generated pair, out (NAME.c) and the header beside it
    (NAME.h), with `remat compile`, and returns their paths. Options as for
    schedule, and name (the symbols' prefix)."""
    out = os.fspath(out)
    command("compile", model, "-o", out, **options)
    return out, out[:-2] + ".h"


# the compiler plans RAM for the optimizer the trainer will run
_SHARED = ("optimizer", "momentum", "fused")
_TRAINER = ("lr", "dampening", "nesterov", "weight_decay", "betas", "eps",
            "clip_grad_norm", "accumulate", "threads", "seed", "init",
            "resume", "workdir")


def build(model, out=None, **options):
    """Builds the model's trainer executable (`remat build`) at out (by
    default in a temporary folder removed with the Trainer) and returns a
    Trainer for it. The compiler's options are compile's, with no_blas and
    cflags; the Trainer's (lr, weight_decay, ..., seed, init, resume) go to
    the Trainer; optimizer, momentum and fused go to both: the plan counts
    that optimizer's state in ram_bytes and the trainer runs it. seed is
    the Trainer's (the compiler's --seed, frozen parameters drawn at
    compile time: compile(seed=...))."""
    import shutil
    import tempfile
    ours = {k: options.pop(k) for k in _TRAINER if k in options}
    ours.update({k: options[k] for k in _SHARED if options.get(k) is not None})
    temp = None
    if out is None:
        temp = tempfile.mkdtemp(prefix="remat-")
        out = os.path.join(temp, "trainer")
    try:
        command("build", model, "-o", os.fspath(out), **options)
        t = Trainer(out, **ours)
    except BaseException:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    if temp:
        t._own(temp)
    return t


def _with_svg(cmd, model, svg, options):
    extra = ["-o", os.fspath(svg)] if svg is not None else []
    d = command_json(cmd, model, *extra, **options)
    if svg is not None:
        d["svg"] = os.fspath(svg)
    return d
