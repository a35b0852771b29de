#!/usr/bin/python3
"""The MLPerf Tiny models against a 256 KB part: for each model
(tests/tiny/tiny_models.py) and each configuration (full training, the
last block and the classifier, bias-only, the largest sparse update that
fits) at batch 1 and at its reference batch, the least RAM a training
step needs, the flash the frozen weights need, and, where it does not
fit, by how much and what takes the bytes.

Usage: scripts/tiny_table.py [--doc docs/tiny.md] [--remat build/remat]
  prints the markdown table; with --doc, writes it into the page between
  the tiny-table markers (the page is rewritten only when it changes).
Usage: scripts/tiny_table.py --freeze-args MODEL.onnx GLOB...
  prints, one a line, the parameters of MODEL.onnx that no GLOB matches:
  the --freeze arguments that train exactly the GLOBs (what
  tests/e2e/test_tiny.sh passes to remat).

Each figure comes from `remat pareto --json` (the plan with the least
arena) and `remat schedule --max-arena THAT --json`, run with the
configuration's --freeze globs; memory_of() turns them into RAM and
flash, and is the one place to change when `remat schedule --json`
reports ram_bytes and flash_bytes itself.
"""
import fnmatch
import json
import os
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "tiny", "tiny_models.py")
PART = 256 * 1024           # the part's RAM, bytes
MARK_BEGIN = "<!-- tiny-table: scripts/tiny_table.py -->"
MARK_END = "<!-- end tiny-table -->"

# model, its reference batch, the parameters of its last block and
# classifier (what "last block + classifier" trains), and its layers from
# the output back (what the sparse update adds one by one after every bias)
MODELS = [
    ("tiny_kws", "DS-CNN keyword spotting", 100, ["blocks.3.*", "fc.*"]),
    ("resnet8", "ResNet-8 CIFAR-10", 32, ["stages.2.*", "fc.*"]),
    ("tiny_vww", "MobileNetV1-0.25 visual wake words", 32,
     ["blocks.12.*", "fc.*"]),
    ("tiny_ad", "FC autoencoder anomaly detection", 512,
     ["body.27.*", "body.28.*", "out.*"]),
]


def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip().splitlines()[-1] if r.stderr
                           else "exit %d" % r.returncode)
    return r.stdout


def floats(shape):
    n = 1
    for d in shape.split("x") if shape != "scalar" else []:
        n *= int(d)
    return n


def weights(path):
    """(name, floats) of every float initializer of the ONNX model, the
    BatchNorm running statistics apart: (params, stats)."""
    params, stats = [], []
    for t in onnx.load(path).graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT:
            continue
        n = 1
        for d in t.dims:
            n *= d
        (stats if "running_" in t.name else params).append((t.name, n))
    return params, stats


def freeze_list(params, train):
    """The parameters no glob of train matches: what --freeze names."""
    return [n for n, _ in params
            if not any(fnmatch.fnmatchcase(n, g) for g in train)]


def memory_of(sched, params, stats):
    """RAM and flash of one training step with plain SGD, from `remat
    schedule --json` (sched) and the model's weights. Until schedule
    reports ram_bytes and flash_bytes, worked out here: RAM holds the
    trainable parameters, the BatchNorm running statistics (the step
    writes them), the gradients (none when the update is fused into the
    backward), the arena, the inputs and the outputs; plain SGD keeps no
    optimizer state; flash holds the frozen parameters. The smaller of
    the fused and the unfused step. Returns (ram, flash, parts, peak):
    parts the bytes by what holds them, peak what the train step's arena
    holds at its peak (saved activations, scratch, gradients)."""
    s = sched["summary"]
    trainable = s["gradient_bytes"]
    frozen = sum(n for _, n in params) * 4 - trainable
    io = 0
    for f in sched["files"]:
        io += floats(f["shape"]) * (8 if f["dtype"] == "int64" else 4)
    fixed = trainable + sum(n for _, n in stats) * 4 + io
    fused = fixed + s["fused_arena_bytes"]
    plain = fixed + s["gradient_bytes"] + s["arena_bytes"]
    parts = {"trainable parameters": trainable,
             "running statistics": sum(n for _, n in stats) * 4,
             "inputs and outputs": io}
    peak = {"saved": s["peak_saved_bytes"],
            "recomputed": s["peak_recomputed_bytes"],
            "forward": s["peak_forward_bytes"],
            "scratch": s["peak_scratch_bytes"],
            "gradients": s["peak_gradient_bytes"]}
    if fused <= plain:
        parts["arena (fused SGD)"] = s["fused_arena_bytes"]
        return fused, frozen, parts, peak
    parts["arena"] = s["arena_bytes"]
    parts["gradients"] = s["gradient_bytes"]
    return plain, frozen, parts, peak


def least(remat, onnx_path, freeze, params, stats):
    """The plan with the least arena and its memory_of()."""
    fr = [a for n in freeze for a in ("--freeze", n)]
    pareto = json.loads(run([remat, "pareto", onnx_path, "--json"] + fr))
    arena = min(p["arena_bytes"] for p in pareto["plans"])
    sched = json.loads(run([remat, "schedule", onnx_path, "--max-arena",
                            str(arena), "--json"] + fr))
    return memory_of(sched, params, stats)


def layers(params):
    """The model's layers (a parameter's name up to its last dot), from
    the output back, each as the globs of its parameters."""
    seen = []
    for n, _ in reversed(params):
        layer = n.rsplit(".", 1)[0]
        if layer not in seen:
            seen.append(layer)
    return [[layer + ".*"] for layer in seen]


def grow(remat, path, params, stats, first):
    """first, then the weights of one more layer from the output back at
    a time, while the step fits: (the last train globs and memory that
    fit or None, the first ones tried)."""
    best, tried, train = None, None, list(first)
    for layer in [[]] + layers(params):
        train = train + layer
        if not train:
            continue
        mem = least(remat, path, freeze_list(params, train), params, stats)
        tried = tried or (list(train), mem)
        if mem[0] > PART:
            break
        best = (list(train), mem)
    return best, tried


def sparse(remat, path, params, stats):
    """The largest sparse update that fits, by trained floats, of two
    kinds: the last k layers, and every bias with the last k layers
    (bias-only backpropagates through the whole network, so its
    activations may cost more than the last layers' weights). When none
    fits, the least RAM of the two first tried (the last layer alone,
    every bias), marked False: (fits, train globs, memory)."""
    grown = [grow(remat, path, params, stats, []),
             grow(remat, path, params, stats, ["*.bias"])]
    found = [b for b, _ in grown if b]
    if found:
        return (True,) + max(found,
                             key=lambda b: b[1][2]["trainable parameters"])
    return (False,) + min((t for _, t in grown), key=lambda t: t[1][0])


def collapse(names, every):
    """names (layers) with each group whose layers are all there (those
    of `every` sharing a name up to the last dot) given as the group."""
    out = []
    for n in names:
        group = n.rsplit(".", 1)[0] if "." in n else None
        members = [m for m in every if group and m.startswith(group + ".")
                   and "." not in m[len(group) + 1:]]
        if group and all(m in names for m in members):
            if group not in out:
                out.append(group)
        else:
            out.append(n)
    return out


def describe(train, params):
    """The globs of a sparse update as the table's text."""
    every = [g[0][:-2] for g in layers(params)]
    rest = [g[:-2] for g in train if g != "*.bias"]
    text = "`%s`" % "`, `".join(collapse(rest, every)) if rest else ""
    if train[0] == "*.bias":
        return "every bias" + (", and " + text if text else "")
    return text


def kib(b):
    return "%.1f" % (b / 1024.0)


def verdict(mem):
    ram, _, parts, peak = mem
    if ram <= PART:
        return "fits (%s KiB free)" % kib(PART - ram)
    top = max(parts, key=parts.get)
    text = "over by %s KiB; %s %s KiB" % (kib(ram - PART), top,
                                          kib(parts[top]))
    if top.startswith("arena"):
        text += " (at the step's peak: %s)" % ", ".join(
            "%s %s" % (k, kib(v)) for k, v in peak.items() if v)
    return text


def refusal(e):
    """remat's error, short enough for a table cell."""
    e = str(e)
    if "one value per channel" in e:
        return ("training-mode BatchNorm over one value per channel (the "
                "batch statistics need 2)")
    return e.split(": ", 1)[-1][:120]


def row(name, batch, config, trains, mem):
    ram, flash, parts, _ = mem
    return "| %s | %d | %s | %s | %d | %s | %s | %s |" % (
        name, batch, config, trains, parts["trainable parameters"] // 4,
        kib(ram), kib(flash), verdict(mem))


def model_rows(remat, tmp, key, title, batches, last):
    rows = []
    for b in batches:
        path = os.path.join(tmp, "%s_%d.onnx" % (key, b))
        subprocess.run([sys.executable, TINY, key, str(b), path], check=True,
                       capture_output=True)
        params, stats = weights(path)
        configs = [("full training", "all", []),
                   ("last block + classifier", ", ".join(last),
                    freeze_list(params, last)),
                   ("bias-only", "*.bias", freeze_list(params, ["*.bias"]))]
        for config, trains, freeze in configs:
            try:
                mem = least(remat, path, freeze, params, stats)
                rows.append(row(title, b, config, "`%s`" % trains, mem))
            except RuntimeError as e:
                rows.append("| %s | %d | %s | `%s` | - | - | - | remat refuses: %s |"
                            % (title, b, config, trains, refusal(e)))
        try:
            fits, train, mem = sparse(remat, path, params, stats)
            what = describe(train, params)
            if not fits:
                what = "nothing fits; the least is " + what
            rows.append(row(title, b, "largest sparse update", what, mem))
        except RuntimeError as e:
            rows.append("| %s | %d | largest sparse update | - | - | - | - "
                        "| remat refuses: %s |" % (title, b, refusal(e)))
    return rows


def table(remat):
    head = ["| model | batch | configuration | trains | trained floats | "
            "RAM KiB | flash KiB | against 256 KiB |",
            "|---|---:|---|---|---:|---:|---:|---|"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for key, title, ref, last in MODELS:
            batches = [1, 2, ref] if key == "tiny_ad" else [1, ref]
            rows += model_rows(remat, tmp, key, title, batches, last)
    return "\n".join(head + rows) + "\n"


def write_doc(doc, text):
    with open(doc) as f:
        page = f.read()
    a, b = page.index(MARK_BEGIN), page.index(MARK_END)
    new = page[:a] + MARK_BEGIN + "\n" + text + page[b:]
    if new != page:
        with open(doc + ".tmp", "w") as f:
            f.write(new)
        os.replace(doc + ".tmp", doc)


def main(argv):
    if argv and argv[0] == "--freeze-args":
        params, _ = weights(argv[1])
        print("\n".join(freeze_list(params, argv[2:])))
        return 0
    remat = os.path.join(ROOT, "build", "remat")
    doc = None
    while argv:
        if argv[0] == "--doc" and len(argv) > 1:
            doc, argv = argv[1], argv[2:]
        elif argv[0] == "--remat" and len(argv) > 1:
            remat, argv = argv[1], argv[2:]
        else:
            sys.stderr.write(__doc__)
            return 2
    text = table(remat)
    sys.stdout.write(text)
    if doc:
        write_doc(doc, text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
