"""Trainer: a compiled trainer executable, stepped from Python.

The executable (`remat build`) owns the training: the generated train step,
the optimizers, accumulation, checkpoints (docs/training.md). A Trainer
keeps one checkpoint folder and runs the executable once per fit() or
step(): from that checkpoint (--resume), on the batches given (written as
its --data folder), saving the checkpoint again. The executable resumes
bit for bit as if never stopped, so any split of the same batches into
calls gives the same parameters as one call.
"""
import os
import re
import shutil
import struct
import tempfile
import weakref

import numpy as np

from ._compiler import RematError, flags, run

_LOSS = re.compile(r"^step (\d+) loss \S+ bits 0x([0-9a-f]{8})$")


def remat_name(name):
    """The name remat gives an ONNX (torch) tensor name: the graph format
    takes [A-Za-z_/][A-Za-z0-9_.:/-]*, so any other character becomes '_'
    and a leading digit gets a '_' before it ("0.weight" -> "_0.weight",
    docs/onnx.md). Two names that clash after that get _2, ... in remat,
    which this does not follow."""
    ok = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             "0123456789_.:/-")
    s = "".join(c if c in ok else "_" for c in name[:200])
    if not name or not (name[0].isascii() and (name[0].isalpha() or name[0] in "_/")):
        s = "_" + s
    return s


def file_name(prefix, name):
    """The trainer's file for a tensor: every '/' of its name as %2F."""
    return f"{prefix}.{name.replace('/', '%2F')}.npy"


def read_params(folder):
    """Every param.NAME.npy of a folder, by tensor name."""
    out = {}
    for f in sorted(os.listdir(folder)):
        if f.startswith("param.") and f.endswith(".npy"):
            out[f[6:-4].replace("%2F", "/")] = np.load(os.path.join(folder, f))
    return out


def as_array(value, what):
    """A numpy array of what the trainer reads: float32, or int64 for
    integer and bool inputs; torch tensors are copied to the CPU."""
    if hasattr(value, "detach"):
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    if a.dtype.kind == "f":
        return np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype.kind in "iub":
        return np.ascontiguousarray(a, dtype=np.int64)
    raise RematError(f"{what}: a {a.dtype} array; the trainer reads float32 "
                     "and int64 inputs")


class Trainer:
    """Trains the model of a `remat build` executable.

    The optimizer options are the trainer's flags (docs/training.md):
    optimizer ("sgd" or "adamw"), lr, momentum, dampening, nesterov,
    weight_decay, betas (b1, b2), eps, clip_grad_norm, accumulate
    (micro-batches per step), fused, threads. The first step starts from
    seed (the model's init), from init (a folder of param.NAME.npy files or
    a dict of arrays by name, e.g. a torch state_dict), or from resume (a
    checkpoint folder that save() or the trainer's --save wrote). Names in
    init are torch's or remat's (remat_name). With init, Dropout's masks
    are drawn from seed 0 (the trainer's --load), so seed is not taken
    with it. The Trainer's files (its checkpoint, the batches it hands the
    trainer) are in workdir/remat-trainer; by default workdir is a
    temporary folder removed with the Trainer.
    """

    def __init__(self, executable, optimizer="sgd", lr=None, momentum=None,
                 dampening=None, nesterov=False, weight_decay=None, betas=None,
                 eps=None, clip_grad_norm=None, accumulate=1, fused=False,
                 threads=None, seed=None, init=None, resume=None, workdir=None):
        self.executable = os.path.abspath(os.fspath(executable))
        if not os.access(self.executable, os.X_OK):
            raise RematError(f"{self.executable}: no such trainer executable "
                             "(remat.build makes one)")
        if int(accumulate) < 1:
            raise RematError(f"accumulate is {accumulate}; give 1 or more")
        self.accumulate = int(accumulate)
        if seed is not None and (init is not None or resume is not None):
            raise RematError("give seed, or init or resume: with init the "
                             "trainer draws Dropout's masks from seed 0, and "
                             "a checkpoint keeps its own seed")
        self.seed = int(seed or 0)
        if betas is not None and len(tuple(betas)) != 2:
            raise RematError(f"betas is {betas!r}; give two numbers (b1, b2)")
        self.losses = []          # every step's loss, in order
        if betas is not None:       # the trainer's --betas B1,B2
            betas = ",".join(repr(float(b)) for b in betas)
        options = dict(
            optimizer=optimizer, lr=lr, momentum=momentum, dampening=dampening,
            nesterov=nesterov, weight_decay=weight_decay, betas=betas, eps=eps,
            clip_grad_norm=clip_grad_norm, fused=fused, threads=threads,
            accumulate=self.accumulate if self.accumulate > 1 else None)
        self._flags = flags(known=tuple(options), **options)
        if workdir is None:
            workdir = tempfile.mkdtemp(prefix="remat-trainer-")
            self._own(workdir)
        # the Trainer's own folder: what it removes and rewrites is its own
        self.workdir = os.path.join(os.path.abspath(os.fspath(workdir)),
                                    "remat-trainer")
        self._ck = os.path.join(self.workdir, "checkpoint")
        if os.path.exists(os.path.join(self._ck, "checkpoint.txt")):
            raise RematError(f"{self.workdir} holds another Trainer's run; give "
                             "another workdir, or resume= a checkpoint that "
                             "save() wrote")
        os.makedirs(self.workdir, exist_ok=True)
        self._init = None
        if resume is not None and init is not None:
            raise RematError("give init or resume, not both")
        if resume is not None:
            _copy_folder(os.fspath(resume), self._ck, "resume")
        elif init is not None:
            self._init = self._init_folder(init)

    # ---- training

    def fit(self, batches, epochs=1):
        """Trains on batches, in order, epochs times: a dict of arrays (or
        torch tensors) by input name, each (batches, *the input's shape),
        or a list of dicts of one batch each. One optimizer step per
        `accumulate` batches. Returns the steps' losses (floats, exact
        float32 values)."""
        data = self._stack(batches)
        n = len(next(iter(data.values())))
        if n % self.accumulate:
            raise RematError(f"fit: {n} batches do not make whole steps of "
                             f"accumulate={self.accumulate}")
        steps = n * int(epochs) // self.accumulate
        if steps < 1:
            raise RematError("fit: no batches (or epochs < 1)")
        folder = os.path.join(self.workdir, "data")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        # the trainer reads batch (micro-batches done) % n next: rotate the
        # batches so that the first given is the one it reads first
        shift = self.progress()["micro_batches"] % n
        for name, a in data.items():
            np.save(os.path.join(folder, file_name("input", name)),
                    np.roll(a, shift, axis=0))
        out = self._run(self._start() + ["--data", folder, "--steps", steps,
                                         "--bits", "--save", self._ck]
                        + self._flags)
        losses = _losses(out, self.progress()["step"] - steps)
        self.losses += losses
        return losses

    def step(self, batch):
        """One optimizer step on one batch (a dict of arrays by input name,
        each of the input's shape); returns its loss."""
        if self.accumulate != 1:
            raise RematError(f"step: with accumulate={self.accumulate} give "
                             "fit() the micro-batches of each step")
        return self.fit({k: as_array(v, k)[None] for k, v in
                         self._named(batch, "step").items()})[0]

    # ---- looking at the model

    def parameters(self):
        """Every parameter's current values (dict of numpy arrays by name):
        the last checkpoint's, before any step the initial ones."""
        return read_params(self._params_folder())

    def dump(self, batch):
        """One train step's every file on batch with the current parameters,
        without updating them (the trainer's --dump): a dict by file name
        without .npy: "loss", "forward" (the inference forward's loss),
        "grad.NAME", "output.NAME", "input.NAME", "param.NAME", ..."""
        src = self._params_folder()
        load = os.path.join(self.workdir, "load")
        out = os.path.join(self.workdir, "dump")
        for d in (load, out):
            shutil.rmtree(d, ignore_errors=True)
        os.makedirs(load)
        for f in os.listdir(src):
            if f.startswith("param."):
                os.symlink(os.path.join(src, f), os.path.join(load, f))
        for name, a in self._named(batch, "dump").items():
            np.save(os.path.join(load, file_name("input", name)), as_array(a, name))
        self._run(["--load", load, "--dump", out])
        return {f[:-4].replace("%2F", "/"): np.load(os.path.join(out, f))
                for f in sorted(os.listdir(out)) if f.endswith(".npy")}

    def evaluate(self, batch):
        """The loss of the inference forward (Dropout off, BatchNorm on its
        running statistics) on batch, with the current parameters."""
        d = self.dump(batch)
        if "forward" not in d:
            raise RematError("evaluate: the model is forward only (no loss); "
                             "dump() gives its outputs")
        return float(d["forward"])

    def progress(self):
        """{"step": optimizer steps done, "micro_batches": batches read,
        "seed": ...}, from the checkpoint; zeros before the first step."""
        meta = os.path.join(self._ck, "checkpoint.txt")
        if not os.path.exists(meta):
            return {"step": 0, "micro_batches": 0, "seed": self.seed}
        out = {}
        with open(meta) as f:
            for line in f:
                key, _, value = line.strip().partition(" ")
                if key in ("step", "micro_batches", "seed"):
                    out[key] = int(value)
        return out

    # ---- checkpoints

    def save(self, path):
        """Copies the checkpoint to path (replacing what is there only once
        the copy is whole): a folder Trainer(..., resume=path) and the
        trainer's --resume continue from, and load_into reads."""
        if not self._started():
            raise RematError("save: no step taken yet; nothing to save")
        _copy_folder(self._ck, os.fspath(path), "save")
        return os.fspath(path)

    # ---- the rest

    def _started(self):
        return os.path.exists(os.path.join(self._ck, "checkpoint.txt"))

    def _start(self):
        if self._started():
            return ["--resume", self._ck]
        if self._init:
            return ["--load", self._init]
        return ["--seed", self.seed]

    def _params_folder(self):
        if self._started():
            return self._ck
        if self._init:
            return self._init
        seeded = os.path.join(self.workdir, "seeded")
        if not os.path.exists(os.path.join(seeded, "loss.npy")):
            self._run(["--seed", self.seed, "--dump", seeded])
        return seeded

    def _init_folder(self, init):
        if not isinstance(init, dict):
            folder = os.path.abspath(os.fspath(init))
            if not os.path.isdir(folder):
                raise RematError(f"init: {folder} is not a folder")
            return folder
        folder = os.path.join(self.workdir, "init")
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        for name, v in init.items():
            np.save(os.path.join(folder, file_name("param", remat_name(name))),
                    as_array(v, name))
        return folder

    def _run(self, args):
        return run([self.executable] + args, what="the trainer")

    def _own(self, folder):
        """Removes folder when this Trainer goes (or at exit)."""
        weakref.finalize(self, shutil.rmtree, folder, True)

    @staticmethod
    def _named(batch, what):
        if not isinstance(batch, dict) or not batch:
            raise RematError(f"{what}: give the batch as a dict of arrays by "
                             "input name")
        return batch

    def _stack(self, batches):
        if isinstance(batches, dict):
            data = {k: as_array(v, k) for k, v in self._named(batches, "fit").items()}
        else:
            batches = list(batches)
            if not batches:
                raise RematError("fit: no batches")
            names = list(self._named(batches[0], "fit"))
            for b in batches:
                if sorted(self._named(b, "fit")) != sorted(names):
                    raise RematError(f"fit: a batch has inputs {sorted(b)}, "
                                     f"the first {sorted(names)}")
            data = {k: np.stack([as_array(b[k], k) for b in batches])
                    for k in names}
        counts = {k: (a.shape[0] if a.ndim else 0) for k, a in data.items()}
        if len(set(counts.values())) != 1:
            raise RematError(f"fit: the inputs hold different numbers of "
                             f"batches: {counts}")
        return data


def _losses(out, first):
    """The loss lines after step `first`, exact from their float32 bits."""
    losses = []
    for line in out.splitlines():
        m = _LOSS.match(line)
        if m and int(m.group(1)) > first:
            losses.append(struct.unpack("<f", bytes.fromhex(m.group(2))[::-1])[0])
    return losses


def _copy_folder(src, dst, what):
    """Copies checkpoint src to dst, replacing a checkpoint there only once
    the copy is whole; never replaces a folder that is not a checkpoint."""
    src, dst = os.path.normpath(src), os.path.normpath(dst)
    if not os.path.exists(os.path.join(src, "checkpoint.txt")):
        raise RematError(f"{what}: {src} is not a checkpoint (no checkpoint.txt)")
    if os.path.exists(dst) and not os.path.exists(os.path.join(dst, "checkpoint.txt")):
        raise RematError(f"{what}: {dst} exists and is not a checkpoint; "
                         "give a new folder or one that holds a checkpoint")
    tmp, old = dst + ".copying", dst + ".old"
    for d in (tmp, old):
        shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, tmp)
    if os.path.exists(dst):
        os.rename(dst, old)
    os.rename(tmp, dst)
    shutil.rmtree(old, ignore_errors=True)
