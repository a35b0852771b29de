#!/usr/bin/python3
"""PyTorch on the same model as a generated trainer: the benchmark baseline.

Builds the model from a graph XML with torch ops in float32 (eager), or with
each <block> run under torch.utils.checkpoint.checkpoint(...,
use_reentrant=False), and either times train steps (forward, loss, backward)
or measures the bytes autograd retains between forward and backward.
Float inputs are uniform in [-1, 1); int64 inputs (token ids, labels) are
uniform over [0, bound), bound being the smallest range any use accepts
(a Gather's table rows, a loss's classes), as the trainer's --seed draws.
Dropout draws its own masks (F.dropout, training mode).

Usage:
  torch_bench.py GRAPH.xml eager|checkpoint time STEPS THREADS
      prints "median_ms X"
  torch_bench.py GRAPH.xml eager|checkpoint memory
      prints "retained_bytes X": bytes of live tensors after the forward
      minus before it (the profiler's allocation and free events), the
      loss's 4 bytes included
"""
import statistics
import sys
import time
import xml.etree.ElementTree as ET

import torch
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/tests/ref")
from reference import NODE_KEYS, OPS as REF_OPS, ints  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def gemm(node, ins, at):
    """nn.Linear's own path where the attributes allow it, as a user's
    model would run; the reference's general formula otherwise."""
    plain = (float(at.get("alpha", 1)) == 1 and float(at.get("beta", 1)) == 1
             and not int(at.get("transA", 0)) and int(at.get("transB", 0)))
    if plain and (len(ins) == 2 or ins[2].dim() == 1):
        return F.linear(ins[0], ins[1], ins[2] if len(ins) == 3 else None)
    return REF_OPS["Gemm"](node, ins, at)


def layer_norm(node, ins, at):
    """F.layer_norm (nn.LayerNorm) when scale and bias hold exactly the
    normalized dimensions, as they do in a user's model."""
    x = ins[0]
    axis = int(at.get("axis", "-1")) % x.dim()
    dims = tuple(x.shape[axis:])
    if all(tuple(t.shape) == dims for t in ins[1:]):
        return F.layer_norm(x, dims, ins[1], ins[2] if len(ins) > 2 else None,
                            float(at.get("epsilon", "1e-5")))
    return REF_OPS["LayerNormalization"](node, ins, at)


def symmetric_pads(at):
    pt, pl, pb, pr = ints(at.get("pads", "0 0 0 0"))
    return (pt, pl) if (pt, pl) == (pb, pr) else None


def conv(node, ins, at):
    """F.conv2d with its own padding (nn.Conv2d) where the pads allow it."""
    pad = symmetric_pads(at)
    if pad is None:
        return REF_OPS["Conv"](node, ins, at)
    return F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None,
                    stride=ints(at.get("strides", "1 1")), padding=pad,
                    dilation=ints(at.get("dilations", "1 1")),
                    groups=int(at.get("group", "1")))


def max_pool(node, ins, at):
    """F.max_pool2d (nn.MaxPool2d) where its padding rule allows."""
    pad, k = symmetric_pads(at), ints(at["kernel_shape"])
    if pad is None or any(p > kk // 2 for p, kk in zip(pad, k)):
        return REF_OPS["MaxPool"](node, ins, at)
    return F.max_pool2d(ins[0], k, stride=ints(at.get("strides", "1 1")), padding=pad,
                        dilation=ints(at.get("dilations", "1 1")))


def attention(node, ins, at):
    """F.scaled_dot_product_attention where this torch has it (2.0; `scale`
    from 2.1); torch 1.13 has none, and a user writes the formula, as the
    reference does."""
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    causal = at.get("is_causal", "0") == "1"
    if sdpa is not None and "scale" not in at:
        return sdpa(*ins, is_causal=causal)
    if sdpa is not None and torch.__version__ >= (2, 1):
        return sdpa(*ins, is_causal=causal, scale=float(at["scale"]))
    return REF_OPS["Attention"](node, ins, at)


def gather(node, ins, at):
    """F.embedding (nn.Embedding) for a table's rows; indices are drawn in
    [0, rows), so ONNX's negative indices never come up."""
    if int(at.get("axis", "0")) == 0 and ins[0].dim() == 2:
        return F.embedding(ins[1], ins[0])
    return REF_OPS["Gather"](node, ins, at)


def cross_entropy(node, ins, at):
    """F.cross_entropy: the same math as ONNX's SoftmaxCrossEntropyLoss
    without weights (log-softmax over axis 1, mean over positions not
    ignored)."""
    return F.cross_entropy(ins[0], ins[1], reduction=at.get("reduction", "mean"),
                           ignore_index=int(at.get("ignore_index", "-100")))


# Native kernels where the reference spells a formula out for clarity: what
# a PyTorch user's model runs, and what autograd then saves.
OPS = dict(REF_OPS,
           Gemm=gemm,
           Relu=lambda n, i, at: torch.relu(i[0]),
           Sigmoid=lambda n, i, at: torch.sigmoid(i[0]),
           Gelu=lambda n, i, at: F.gelu(i[0], approximate=at.get("approximate", "none")),
           LayerNormalization=layer_norm,
           Conv=conv,
           MaxPool=max_pool,
           Attention=attention,
           Gather=gather,
           SoftmaxCrossEntropyLoss=cross_entropy,
           Dropout=lambda n, i, at: F.dropout(i[0], p=float(at.get("ratio", "0.5")),
                                              training=True))

# The graph's integer inputs index something: a Gather's table rows
# (input 1 indexes input 0's first axis), a loss's classes (input 1 labels
# input 0's axis 1). (op, which input, the input it indexes, the axis.)
INDEXES = {"Gather": (1, 0, 0), "SoftmaxCrossEntropyLoss": (1, 0, 1)}


class Model:
    """The graph as segments: runs of nodes in topological order that share
    a block (None outside blocks); each segment reads and writes a dict."""

    def __init__(self, path):
        g = ET.parse(path).getroot().find("graph")
        torch.manual_seed(0)
        ints64 = [e for e in g.iter("input") if e.get("dtype") == "int64"]
        self.inputs = {e.get("name"): torch.rand(ints(e.get("shape"))) * 2 - 1
                       for e in g.iter("input") if e not in ints64}
        # zeros index anything; the bounds come from a forward over them
        self.inputs.update({e.get("name"): torch.zeros(ints(e.get("shape")), dtype=torch.long)
                            for e in ints64})
        self.params = {}
        for e in g.iter("initializer"):
            t = (torch.rand(ints(e.get("shape"))) - 0.5) * 0.125
            t.requires_grad_(e.get("trainable", "true") in ("true", "1"))
            self.params[e.get("name")] = t
        nodes = []
        for child in g:
            if child.tag == "node":
                nodes.append((None, child))
            elif child.tag == "block":
                nodes += [(child.get("name"), n) for n in child.iter("node")]
        self.order = self.topo(nodes)
        outs = list(g.iter("output"))
        marked = [o for o in outs if o.get("loss") in ("true", "1")]
        self.loss = (marked or outs)[0].get("name")
        if ints64:
            bounds = self.index_bounds()
            for e in ints64:
                name = e.get("name")
                if name not in bounds:
                    raise SystemExit(f"{path}: int64 input {name} indexes nothing")
                self.inputs[name] = torch.randint(0, bounds[name], ints(e.get("shape")))

    def index_bounds(self):
        """For each integer input, the smallest range any use accepts: the
        same [0, bound) that the trainer's --seed draws from."""
        with torch.no_grad():
            env = self.run_nodes([n for _, n in self.order], dict(self.inputs, **self.params))
        bounds = {}
        for _, n in self.order:
            if n.get("op") in INDEXES:
                which, of, axis = INDEXES[n.get("op")]
                ins = n.get("in").split()
                if ins[which] in self.inputs:
                    b = env[ins[of]].shape[axis]
                    bounds[ins[which]] = min(b, bounds.get(ins[which], b))
        return bounds

    @staticmethod
    def topo(nodes):
        made = {o: i for i, (_, n) in enumerate(nodes) for o in n.get("out").split()}
        done, order = set(), []

        def visit(i):
            if i in done:
                return
            done.add(i)
            for t in nodes[i][1].get("in").split():
                if t in made:
                    visit(made[t])
            order.append(nodes[i])
        for i in range(len(nodes)):
            visit(i)
        return order

    def segments(self):
        seg = []
        for blk, node in self.order:
            if seg and seg[-1][0] == blk:
                seg[-1][1].append(node)
            else:
                seg.append((blk, [node]))
        return seg

    @staticmethod
    def run_nodes(nodes, env):
        for n in nodes:
            attrs = {k: v for k, v in n.attrib.items() if k not in NODE_KEYS}
            y = OPS[n.get("op")](n, [env[i] for i in n.get("in").split()], attrs)
            env[n.get("out")] = y
        return env

    def forward(self, use_checkpoint):
        env = dict(self.inputs, **self.params)
        for blk, nodes in self.segments():
            if blk is None or not use_checkpoint:
                self.run_nodes(nodes, env)
                continue
            made = {n.get("out") for n in nodes}
            reads = sorted({t for n in nodes for t in n.get("in").split()} - made)

            def seg(*args, nodes=nodes, reads=reads, made=made):
                local = self.run_nodes(nodes, dict(zip(reads, args)))
                return tuple(local[t] for t in sorted(made))
            outs = checkpoint(seg, *[env[t] for t in reads], use_reentrant=False)
            env.update(zip(sorted(made), outs))
        return env[self.loss].reshape(())


def time_steps(model, use_checkpoint, steps):
    params = [p for p in model.params.values() if p.requires_grad]
    times = []
    for i in range(steps + 3):
        t0 = time.perf_counter()
        for p in params:
            p.grad = None
        model.forward(use_checkpoint).backward()
        if i >= 3:                      # three warm-up steps, as the trainer
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def retained_bytes(model, use_checkpoint):
    """Bytes allocated during the forward and still live after it: what the
    profiler's allocator events add up to (allocations minus frees)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        loss = model.forward(use_checkpoint)
    n = sum(e.self_cpu_memory_usage for e in prof.key_averages())
    loss.backward()
    return n


def main(argv):
    path, mode, what = argv[0], argv[1], argv[2]
    model = Model(path)
    ck = mode == "checkpoint"
    if what == "time":
        torch.set_num_threads(int(argv[4]))
        print(f"median_ms {time_steps(model, ck, int(argv[3])):.4f}")
    else:
        print(f"retained_bytes {retained_bytes(model, ck)}")


if __name__ == "__main__":
    main(sys.argv[1:])
