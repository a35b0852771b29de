#!/usr/bin/python3
"""The MLPerf Tiny models against a 256 KB part: for each model
(tests/tiny/tiny_models.py) and each configuration (full training, the
last block and the classifier, bias-only, the largest sparse update that
fits) at batch 1 and at its reference batch, the least RAM a training
step with plain SGD needs, the flash it needs, and, where it does not
fit, by how much and what takes the bytes.

Usage: scripts/tiny_table.py [--doc docs/tiny.md] [--remat build/remat]
  prints the markdown table; with --doc, writes it into the page between
  the tiny-table markers (the page is rewritten only when it changes).
Usage: scripts/tiny_table.py --freeze-args MODEL.onnx GLOB...
  prints, one a line, the parameters of MODEL.onnx that no GLOB matches:
  the --freeze arguments that train exactly the GLOBs (what
  tests/e2e/test_tiny.sh passes to remat).

Every figure is remat's own: `remat schedule --json`'s ram_bytes (and its
terms) and flash_bytes, at the least RAM found (least()): `--optimizer
sgd`, with and without `--fused`, with and without `--conv-scratch
16384`; for each, the least ram_bytes of `remat pareto --by arena` and
the least `--max-ram` can meet (nested plans included), then `remat
schedule --max-ram THAT`. Full training exports the model in training
mode; the sparse configurations export it with every BatchNorm in eval
mode (tiny_models.py --eval-bn), so a frozen layer's BatchNorm folds into
its convolution, as partial fine-tuning on a device does.
"""
import fnmatch
import json
import os
import re
import subprocess
import sys
import tempfile

import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "tiny", "tiny_models.py")
PART = 256 * 1024           # the part's RAM, bytes
STACK = 4 * 1024            # of which the firmware's stack (test_tiny.sh)
STATICS = 2 * 1024          # and the C library's own (newlib's, 1.1 KB)
ROOM = PART - STACK - STATICS   # what a step's ram_bytes may take
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


SCRATCH = 16 * 1024         # the --conv-scratch bound tried


def least_bound(remat, path, flags):
    """The least ram_bytes remat finds with these flags: of pareto --by
    arena's plans, and the least --max-ram can meet (its refusal of an
    impossible bound names it). The --max-ram search (nested plans) is
    asked only when pareto's least is within twice the part: far over,
    it would not change the verdict, and on MobileNet it takes a minute."""
    pareto = json.loads(run([remat, "pareto", path, "--by", "arena",
                             "--json"] + flags))
    bound = min(p["ram_bytes"] for p in pareto["plans"])
    if bound > 2 * PART:
        return bound
    r = subprocess.run([remat, "schedule", path, "--max-ram", "1"] + flags,
                       capture_output=True, text=True)
    m = re.search(r"(needs at least|is) (\d+) bytes", r.stderr)
    if r.returncode != 0 and m:
        bound = min(bound, int(m.group(2)))
    return bound


def memory_of(remat, path, flags):
    """schedule --json at the least RAM with these flags: (ram, flash,
    parts, peak), parts the RAM by what holds it, peak what the unfused
    step's arena holds at its fullest statement."""
    bound = least_bound(remat, path, flags)
    s = json.loads(run([remat, "schedule", path, "--max-ram", str(bound),
                        "--json"] + flags))["summary"]
    fused = "--fused" in flags
    parts = {"trained floats": s["gradient_bytes"] // 4,
             "parameters": s["ram_params_bytes"],
             "optimizer state": s["ram_optimizer_bytes"],
             "gradients": s["ram_gradient_bytes"],
             ("arena (fused SGD)" if fused else "arena"): s["ram_arena_bytes"],
             "inputs and outputs": s["ram_io_bytes"]}
    peak = {"saved": s["peak_saved_bytes"],
            "recomputed": s["peak_recomputed_bytes"],
            "forward": s["peak_forward_bytes"],
            "scratch": s["peak_scratch_bytes"],
            "gradients": s["peak_gradient_bytes"]}
    how = ("fused" if fused else "unfused") + (
        ", scratch %d KiB" % (SCRATCH // 1024)
        if "--conv-scratch" in flags else "")
    return s["ram_bytes"], s["flash_bytes"], parts, peak, how


def least(remat, path, freeze):
    """The least RAM of one plain-SGD step with these frozen parameters,
    over fused or not and the conv scratch bounded or not."""
    fr = [a for n in freeze for a in ("--freeze", n)]
    best = None
    for fused in ([], ["--fused"]):
        for scratch in ([], ["--conv-scratch", str(SCRATCH)]):
            flags = ["--optimizer", "sgd"] + fused + scratch + fr
            mem = memory_of(remat, path, flags)
            if best is None or mem[0] < best[0]:
                best = mem
    return best


def layers(params):
    """The model's layers (a parameter's name up to its last dot), from
    the output back, each as the globs of its parameters."""
    seen = []
    for n, _ in reversed(params):
        layer = n.rsplit(".", 1)[0]
        if layer not in seen:
            seen.append(layer)
    return [[layer + ".*"] for layer in seen]


def grow(remat, path, params, first):
    """first, then the weights of one more layer from the output back at
    a time, while the step fits: (the last train globs and memory that
    fit or None, the first ones tried)."""
    best, tried, train = None, None, list(first)
    for layer in [[]] + layers(params):
        train = train + layer
        if not train:
            continue
        mem = least(remat, path, freeze_list(params, train))
        tried = tried or (list(train), mem)
        if mem[0] > ROOM:
            break
        best = (list(train), mem)
    return best, tried


def sparse(remat, path, params):
    """The largest sparse update that fits, by trained floats, of two
    kinds: the last k layers, and every bias with the last k layers
    (bias-only backpropagates through the whole network, so its
    activations may cost more than the last layers' weights). When none
    fits, the least RAM of the two first tried (the last layer alone,
    every bias), marked False: (fits, train globs, memory)."""
    grown = [grow(remat, path, params, []),
             grow(remat, path, params, ["*.bias"])]
    found = [b for b, _ in grown if b]
    if found:
        return (True,) + max(found,
                             key=lambda b: b[1][2]["trained floats"])
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
    ram, _, parts, peak, _ = mem
    if ram <= ROOM:
        return "fits (%s KiB free)" % kib(ROOM - ram)
    held = {k: v for k, v in parts.items() if k != "trained floats"}
    top = max(held, key=held.get)
    text = "over by %s KiB; %s %s KiB" % (kib(ram - ROOM), top,
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
    ram, flash, parts, _, how = mem
    return "| %s | %d | %s | %s | %d | %s | %s | %s | %s |" % (
        name, batch, config, trains, parts["trained floats"], how,
        kib(ram), kib(flash), verdict(mem))


def export(tmp, key, batch, eval_bn):
    """The model's ONNX file at this batch (every BatchNorm in eval mode
    with eval_bn) and its parameters."""
    path = os.path.join(tmp, "%s_%d%s.onnx" % (key, batch,
                                               "_eval" if eval_bn else ""))
    if not os.path.exists(path):
        subprocess.run([sys.executable, TINY, key, str(batch), path] +
                       (["--eval-bn"] if eval_bn else []), check=True,
                       capture_output=True)
    return path, weights(path)[0]


def failed(title, b, config, trains, e):
    return "| %s | %d | %s | %s | - | - | - | - | remat refuses: %s |" % (
        title, b, config, trains, refusal(e))


def model_rows(remat, tmp, key, title, batches, last):
    rows = []
    for b in batches:
        configs = [("full training", ["*"], False),
                   ("last block + classifier", last, True),
                   ("bias-only", ["*.bias"], True)]
        for config, train, eval_bn in configs:
            path, params = export(tmp, key, b, eval_bn)
            trains = "`%s`" % ", ".join(train) if train != ["*"] else "all"
            try:
                mem = least(remat, path, freeze_list(params, train))
                rows.append(row(title, b, config, trains, mem))
            except RuntimeError as e:
                rows.append(failed(title, b, config, trains, e))
        try:
            path, params = export(tmp, key, b, True)
            fits, train, mem = sparse(remat, path, params)
            what = describe(train, params)
            if not fits:
                what = "nothing fits; the least is " + what
            rows.append(row(title, b, "largest sparse update", what, mem))
        except RuntimeError as e:
            rows.append(failed(title, b, "largest sparse update", "-", e))
    return rows


def table(remat):
    head = ["| model | batch | configuration | trains | trained floats | "
            "least RAM with | RAM KiB | flash KiB | against 250 KiB |",
            "|---|---:|---|---|---:|---|---:|---:|---|"]
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
