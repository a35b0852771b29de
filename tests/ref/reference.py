#!/usr/bin/python3
"""An independent interpreter of graph format v1 in PyTorch, the yardstick
for the compiler's gradients.

It reads a graph XML (with Python's own XML parser, not the compiler's) and a
trainer's --dump directory, rebuilds the model from the XML alone with torch
ops in float64, feeds it the dumped inputs and parameters, and computes the
loss and every trainable parameter's gradient with autograd, in training mode
(Dropout replays the dumped mask, BatchNormalization uses the batch's
statistics and updates its running ones as torch does: the dump's after.*.npy
must match them), and every graph output (the dump's output.NAME.npy). It
also runs the model in inference mode (Dropout the identity,
BatchNormalization with the running statistics) against the dump's
forward.npy. A graph without a loss is forward only: its Dropouts pass
through, BatchNormalization uses the running statistics, and only its outputs
are compared. It reports, per tensor, the relative error max|ours - torch| /
max|torch|, and fails when the worst exceeds the tolerance.

Usage: reference.py [--tol T] GRAPH.xml DUMP_DIR [GRAPH.xml DUMP_DIR ...]

Every op the compiler supports has a case in OPS below; a graph with an op
that is not there fails, so a new op cannot go unchecked.
"""
import math
import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import torch


def ints(s):
    return [int(v) for v in s.split()]


def gemm(a, ins, at):
    A, B = ins[0], ins[1]
    if int(at.get("transA", 0)):
        A = A.t()
    if int(at.get("transB", 0)):
        B = B.t()
    y = float(at.get("alpha", 1.0)) * (A @ B)
    if len(ins) == 3:
        y = y + float(at.get("beta", 1.0)) * ins[2]
    return y


def reduce(fn):
    def run(a, ins, at):
        # ONNX: no axes (absent or empty) reduces all of them, unless
        # noop_with_empty_axes=1 makes the op the identity
        x = ins[0]
        axes = ints(at.get("axes", ""))
        keep = bool(int(at.get("keepdims", 1)))
        if not axes:
            if int(at.get("noop_with_empty_axes", 0)):
                return x
            axes = list(range(x.dim()))
        if x.dim() == 0:
            return x
        return fn(x, dim=[ax % x.dim() for ax in axes], keepdim=keep)
    return run


def gelu(a, ins, at):
    x = ins[0]
    if at.get("approximate", "none") == "tanh":
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def layer_norm(a, ins, at):
    x, scale = ins[0], ins[1]
    axis = int(at.get("axis", "-1")) % x.dim()
    dims = list(range(axis, x.dim()))
    mean = x.mean(dim=dims, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)
    y = (x - mean) / torch.sqrt(var + float(at.get("epsilon", "1e-5"))) * scale
    return y + ins[2] if len(ins) > 2 else y


def reshape(a, ins, at):
    x, want = ins[0], ints(at["shape"])
    dims = [x.shape[i] if d == 0 else d for i, d in enumerate(want)]
    return x.reshape(dims)


def flatten(a, ins, at):
    x = ins[0]
    axis = int(at.get("axis", "1")) % (x.dim() + 1) if x.dim() else 0
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


def transpose(a, ins, at):
    x = ins[0]
    perm = ints(at["perm"]) if "perm" in at else list(range(x.dim() - 1, -1, -1))
    return x.permute(perm)


def window(at, hw, k_default=None):
    """Kernel, strides, dilations, pads at the beginning and the end of each
    axis and the output size, from ONNX's definitions: auto_pad VALID (no
    pads), SAME_UPPER / SAME_LOWER (output ceil(in / stride), the pads that
    takes split in halves, the odd one at the end / the beginning), or the
    pads given, with ceil_mode rounding the output size up but dropping a
    last window that would start in the end padding."""
    k = ints(at["kernel_shape"]) if "kernel_shape" in at else k_default
    s = ints(at.get("strides", "1 1"))
    d = ints(at.get("dilations", "1 1"))
    auto = at.get("auto_pad", "NOTSET")
    given = ints(at.get("pads", "0 0 0 0"))            # top left bottom right
    begin, end, out = [], [], []
    for ax in range(2):
        n, ek = hw[ax], d[ax] * (k[ax] - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = math.ceil(n / s[ax])
            total = max(0, (o - 1) * s[ax] + ek - n)
            b = total // 2 if auto == "SAME_UPPER" else total - total // 2
            e = total - b
        else:
            b, e = (0, 0) if auto == "VALID" else (given[ax], given[ax + 2])
            if at.get("ceil_mode", "0") == "1":
                o = math.ceil((n + b + e - ek) / s[ax]) + 1
                if (o - 1) * s[ax] >= n + b:
                    o -= 1
            else:
                o = (n + b + e - ek) // s[ax] + 1
        begin.append(b)
        end.append(e)
        out.append(o)
    return k, s, d, begin, end, out


def conv(a, ins, at):
    x, w = ins[0], ins[1]
    k, s, d, b, e, out = window(at, list(x.shape[2:]), list(w.shape[2:]))
    y = torch.nn.functional.conv2d(torch.nn.functional.pad(x, (b[1], e[1], b[0], e[0])),
                                   w, ins[2] if len(ins) > 2 else None, stride=s,
                                   dilation=d, groups=int(at.get("group", "1")))
    assert list(y.shape[2:]) == out, (y.shape, out)
    return y


def taps(x, at, fill, pad_value=None):
    """Every window's elements as (N, C, kh*kw, positions) and the output
    size: the pads hold pad_value (fill if None); where a ceil_mode window
    runs past the padded input, it reads fill."""
    k, s, d, b, e, out = window(at, list(x.shape[2:]))
    xp = torch.nn.functional.pad(x, (b[1], e[1], b[0], e[0]),
                                 value=fill if pad_value is None else pad_value)
    need = [(out[ax] - 1) * s[ax] + d[ax] * (k[ax] - 1) + 1 for ax in range(2)]
    more = [max(0, need[ax] - xp.shape[2 + ax]) for ax in range(2)]
    xp = torch.nn.functional.pad(xp, (0, more[1], 0, more[0]), value=fill)
    xp = xp[:, :, :need[0], :need[1]]          # no window past the last one
    u = torch.nn.functional.unfold(xp, k, dilation=d, stride=s)
    n, c = x.shape[:2]
    assert u.shape[-1] == out[0] * out[1], (u.shape, out)
    return u.reshape(n, c, k[0] * k[1], -1), out[0]


def max_pool(a, ins, at):
    t, oh = taps(ins[0], at, float("-inf"))
    m = t.max(dim=2).values
    return m.reshape(m.shape[0], m.shape[1], oh, -1)


def average_pool(a, ins, at):
    """The window's sum over its taps inside the input, or with
    count_include_pad inside the padded input (ONNX clips a ceil_mode
    window that runs past it)."""
    x = ins[0]
    t, oh = taps(x, at, 0.0)
    pads_count = at.get("count_include_pad", "0") == "1"
    inside, _ = taps(torch.ones_like(x), at, 0.0, 1.0 if pads_count else 0.0)
    m = t.sum(dim=2) / inside.sum(dim=2)
    return m.reshape(m.shape[0], m.shape[1], oh, -1)


def attention(a, ins, at):
    q, k, v = ins
    scale = float(at["scale"]) if "scale" in at else 1 / math.sqrt(q.shape[-1])
    scores = scale * (q @ k.transpose(-1, -2))
    if at.get("is_causal", "0") == "1":
        sq, skv = scores.shape[-2:]
        hidden = torch.ones(sq, skv, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(hidden, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def gather(a, ins, at):
    """ONNX Gather: out[i..., j...] = data[indices[i...], j...] along axis,
    an index in [-n, 0) counting from the end; indices are int64."""
    data, idx = ins
    axis = int(at.get("axis", "0")) % data.dim()
    n = data.shape[axis]
    if idx.numel() and not (-n <= int(idx.min()) and int(idx.max()) < n):
        raise SystemExit(f"{a.get('name')}: Gather index outside [-{n}, {n})")
    idx = torch.where(idx < 0, idx + n, idx)
    rows = torch.index_select(data, axis, idx.reshape(-1))
    return rows.reshape(data.shape[:axis] + idx.shape + data.shape[axis + 1:])


def softmax_cross_entropy(a, ins, at):
    """ONNX SoftmaxCrossEntropyLoss: scores (N, C, d...), labels (N, d...),
    optional class weights w (C); l = -w[label] * log_softmax(scores, axis
    1)[label] at every position (w = 1 without weights), 0 where label ==
    ignore_index; none: l itself, in the labels' shape; sum: sum l; mean:
    sum l over the sum of w[label] at the positions not ignored (their
    count without weights). The weights get no gradient (remat's choice:
    they are constants of the loss), so they are detached.

    That is torch's F.cross_entropy with weight=, ignore_index= and
    reduction= exactly, which is the reference; without an ignore_index
    ONNX ignores nothing, and the labels are checked to be classes, so
    torch's default -100 never matches one."""
    scores, labels = ins[0], ins[1]
    weight = ins[2].detach() if len(ins) > 2 else None
    ignore = int(at["ignore_index"]) if "ignore_index" in at else -100
    kept = labels != ignore if "ignore_index" in at else torch.ones_like(labels, dtype=torch.bool)
    c = scores.shape[1]
    present = labels[kept]
    if present.numel() and not (0 <= int(present.min()) and int(present.max()) < c):
        raise SystemExit(f"{a.get('name')}: a label outside [0, {c})")
    how = at.get("reduction", "mean")
    if how not in ("mean", "sum", "none"):
        raise SystemExit(f"{a.get('name')}: reduction {how!r}")
    return torch.nn.functional.cross_entropy(scores, labels, weight=weight,
                                             ignore_index=ignore, reduction=how)


def dropout(a, ins, at, dump=None):
    """ONNX Dropout in training mode: y = x * mask / (1 - ratio), mask being
    the one the trainer drew (its --dump writes mask.NODE.npy)."""
    x = ins[0]
    name = a.get("name")
    path = os.path.join(dump or "", f"mask.{fname(name)}.npy")
    if dump is None or not os.path.exists(path):
        raise SystemExit(f"Dropout '{name}': no {path}: the reference replays the "
                         "trainer's mask and needs it in the dump directory")
    mask = np.load(path)
    if tuple(mask.shape) != tuple(x.shape) or not np.isin(mask, (0.0, 1.0)).all():
        raise SystemExit(f"{path}: not a 0/1 mask of shape {tuple(x.shape)}")
    return x * torch.tensor(mask.astype(DTYPE)) / (1 - float(at.get("ratio", "0.5")))


def unsqueeze(a, ins, at):
    """ONNX Unsqueeze: a 1 inserted at each of axes, which index the
    output (rank r + len(axes)), negative ones from its end."""
    x, axes = ins[0], ints(at["axes"])
    rank = x.dim() + len(axes)
    for ax in sorted(ax % rank for ax in axes):
        x = x.unsqueeze(ax)
    return x


def squeeze(a, ins, at):
    """ONNX Squeeze: the named 1-dimensions removed, all of them without
    axes."""
    x = ins[0]
    axes = ints(at.get("axes", ""))
    if not axes:
        axes = [d for d in range(x.dim()) if x.shape[d] == 1]
    keep = [n for d, n in enumerate(x.shape) if d not in {ax % x.dim() for ax in axes}]
    return x.reshape(keep)


def concat(a, ins, at):
    return torch.cat(ins, dim=int(at["axis"]))


def split(a, ins, at):
    """ONNX Split along axis into the sizes of split, or equal parts, one
    per output."""
    x = ins[0]
    axis = int(at.get("axis", "0")) % x.dim()
    count = len(a.get("out").split())
    sizes = ints(at["split"]) if "split" in at else [x.shape[axis] // count] * count
    return list(torch.split(x, sizes, dim=axis))


def slice_(a, ins, at):
    """ONNX Slice: per listed axis, start and end counted from the end when
    negative, then clamped to [0, n] for a positive step and to [0, n-1]
    (start), [-1, n-1] (end) for a negative one; the indices start, start +
    step, ... short of end. Written as an index list per dimension so as
    not to lean on Python's own slice clamping."""
    x = ins[0]
    starts, ends = ints(at["starts"]), ints(at["ends"])
    axes = ints(at["axes"]) if "axes" in at else list(range(len(starts)))
    steps = ints(at["steps"]) if "steps" in at else [1] * len(starts)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax %= x.dim()
        n = x.shape[ax]
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
            idx = list(range(s, e, st))
        else:
            s, e = min(max(s, 0), n - 1), min(max(e, -1), n - 1)
            idx = []
            i = s
            while i > e:
                idx.append(i)
                i += st
        x = torch.index_select(x, ax, torch.tensor(idx, dtype=torch.long))
    return x
def where(a, ins, at):
    """ONNX Where: X where the condition holds, Y elsewhere, the three
    broadcast together; the condition is bool (remat's: float32, or int64
    0 and 1), true where nonzero."""
    cond, x, y = ins
    return torch.where(cond != 0, x, y)


def log_softmax(a, ins, at):
    """ONNX LogSoftmax: x - log(sum over the axis of exp(x)), the sum kept
    as a dimension so that it broadcasts back."""
    x = ins[0]
    return x - torch.logsumexp(x, dim=int(at.get("axis", "-1")), keepdim=True)


def expand(a, ins, at):
    """ONNX Expand: the input broadcast to broadcast(input shape, shape), in
    both directions (shape may hold 1 where the input is larger), as
    input * ones(shape) would be."""
    x = ins[0]
    return x * torch.ones(ints(at["shape"]), dtype=x.dtype)


def batch_norm(a, ins, at, updated=None):
    """ONNX BatchNormalization. Inference (updated None): the running
    statistics input_mean and input_var. Training: F.batch_norm with
    training=True, the batch's mean and biased variance, and torch's update
    of copies of the running statistics (unbiased variance; torch's momentum
    is 1 - ONNX's), recorded in `updated` under the inputs' names."""
    x, scale, bias, mean, var = ins
    eps = float(at.get("epsilon", "1e-5"))
    if updated is None:
        return torch.nn.functional.batch_norm(x, mean, var, scale, bias,
                                              training=False, eps=eps)
    rm, rv = mean.detach().clone(), var.detach().clone()
    y = torch.nn.functional.batch_norm(x, rm, rv, scale, bias, training=True,
                                       momentum=1 - float(at.get("momentum", "0.9")),
                                       eps=eps)
    names = a.get("in").split()
    updated[names[3]], updated[names[4]] = rm, rv
    return y


def clip(a, ins, at):
    """ONNX Clip: min(max(x, min), max), a bound left out being no bound
    (and min > max giving max everywhere, as torch.clamp does too)."""
    lo = float(at["min"]) if "min" in at else None
    hi = float(at["max"]) if "max" in at else None
    return ins[0] if lo is None and hi is None else torch.clamp(ins[0], lo, hi)


def hard_sigmoid(a, ins, at):
    """ONNX HardSigmoid: max(0, min(1, alpha x + beta))."""
    alpha, beta = float(at.get("alpha", "0.2")), float(at.get("beta", "0.5"))
    return torch.clamp(alpha * ins[0] + beta, 0, 1)


def elu(a, ins, at):
    """ONNX Elu: x for x > 0, alpha (e^x - 1) elsewhere."""
    x = ins[0]
    return torch.where(x > 0, x, float(at.get("alpha", "1.0")) * (torch.exp(x) - 1))


def selu(a, ins, at):
    """ONNX Selu: gamma x for x > 0, gamma (alpha e^x - alpha) elsewhere."""
    x = ins[0]
    alpha = float(at.get("alpha", "1.67326319217681884765625"))
    gamma = float(at.get("gamma", "1.05070102214813232421875"))
    return torch.where(x > 0, gamma * x, gamma * (alpha * torch.exp(x) - alpha))


def celu(a, ins, at):
    """ONNX Celu: max(0, x) + min(0, alpha (e^(x/alpha) - 1))."""
    x = ins[0]
    alpha = float(at.get("alpha", "1.0"))
    return torch.clamp(x, min=0) + torch.clamp(alpha * (torch.exp(x / alpha) - 1), max=0)


def cast(a, ins, at):
    """ONNX Cast: remat computes to=1 (float32) alone, of int64 or bool."""
    if at.get("to", "1") != "1":
        raise SystemExit(f"{a.get('name')}: Cast to {at['to']}")
    return ins[0].to(torch.float64 if DTYPE == np.float64 else torch.float32)


OPS = {
    "Gemm": gemm,
    "MatMul": lambda a, i, at: i[0] @ i[1],
    "Add": lambda a, i, at: i[0] + i[1],
    "Sub": lambda a, i, at: i[0] - i[1],
    "Mul": lambda a, i, at: i[0] * i[1],
    "Div": lambda a, i, at: i[0] / i[1],
    "Relu": lambda a, i, at: torch.clamp(i[0], min=0),
    "Gelu": gelu,
    "Tanh": lambda a, i, at: torch.tanh(i[0]),
    "Sigmoid": lambda a, i, at: 1 / (1 + torch.exp(-i[0])),
    "ReduceMean": reduce(torch.mean),
    "ReduceSum": reduce(torch.sum),
    "Exp": lambda a, i, at: torch.exp(i[0]),
    "Log": lambda a, i, at: torch.log(i[0]),
    "Sqrt": lambda a, i, at: torch.sqrt(i[0]),
    "Neg": lambda a, i, at: -i[0],
    "Softmax": lambda a, i, at: torch.softmax(i[0], dim=int(at.get("axis", "-1"))),
    "LayerNormalization": layer_norm,
    "Transpose": transpose,
    "Reshape": reshape,
    "Flatten": flatten,
    "Conv": conv,
    "MaxPool": max_pool,
    "AveragePool": average_pool,
    "GlobalAveragePool": lambda a, i, at: i[0].mean(dim=list(range(2, i[0].dim())), keepdim=True),
    "Attention": attention,
    "Gather": gather,
    "SoftmaxCrossEntropyLoss": softmax_cross_entropy,
    "Dropout": dropout,     # run() gives it the dump directory
    "Identity": lambda a, i, at: i[0],
    "Unsqueeze": unsqueeze,
    "Squeeze": squeeze,
    "Concat": concat,
    "Split": split,         # a list: one value per output
    "Slice": slice_,
    "Erf": lambda a, i, at: torch.erf(i[0]),
    "Reciprocal": lambda a, i, at: 1 / i[0],
    "Pow": lambda a, i, at: torch.pow(i[0], i[1]),
    "Where": where,
    "LogSoftmax": log_softmax,
    "Expand": expand,
    "BatchNormalization": batch_norm,   # run() gives it training mode
    # ONNX LeakyRelu: x for x >= 0, alpha x below
    "LeakyRelu": lambda a, i, at: torch.where(i[0] >= 0, i[0],
                                              float(at.get("alpha", "0.01")) * i[0]),
    # ONNX HardSwish: x max(0, min(1, x/6 + 1/2))
    "HardSwish": lambda a, i, at: i[0] * torch.clamp(i[0] / 6 + 0.5, 0, 1),
    "HardSigmoid": hard_sigmoid,
    "Clip": clip,
    "Elu": elu,
    # ONNX Softplus: ln(e^x + 1)
    "Softplus": lambda a, i, at: torch.log(torch.exp(i[0]) + 1),
    "Abs": lambda a, i, at: torch.abs(i[0]),
    "Selu": selu,
    "Celu": celu,
    # ONNX Softsign: x / (1 + |x|)
    "Softsign": lambda a, i, at: i[0] / (1 + torch.abs(i[0])),
    # ONNX Mish: x tanh(softplus(x)), softplus as ONNX's ln(e^x + 1)
    "Mish": lambda a, i, at: i[0] * torch.tanh(torch.log(torch.exp(i[0]) + 1)),
    # int64 and bool tensors (issue 25). ONNX Cast to= 1 (float32): the
    # integer's value as a float (the reference's float64 holds it exactly)
    "Cast": cast,
    # ONNX's comparisons: a bool tensor, the operands broadcast
    "Equal": lambda a, i, at: i[0] == i[1],
    "Less": lambda a, i, at: i[0] < i[1],
    "Greater": lambda a, i, at: i[0] > i[1],
    "LessOrEqual": lambda a, i, at: i[0] <= i[1],
    "GreaterOrEqual": lambda a, i, at: i[0] >= i[1],
    # ONNX's logical ops on bool tensors (remat's bools are int64 0 and 1)
    "Not": lambda a, i, at: torch.logical_not(i[0].bool()),
    "And": lambda a, i, at: torch.logical_and(i[0].bool(), i[1].bool()),
    "Or": lambda a, i, at: torch.logical_or(i[0].bool(), i[1].bool()),
    "Xor": lambda a, i, at: torch.logical_xor(i[0].bool(), i[1].bool()),
}
NODE_KEYS = {"name", "op", "in", "out", "remat"}
# the precision the model runs in: float64, the reference; optim_reference.py
# sets float32 for a moment to measure how far torch's own float32 run ends
DTYPE = np.float64


def fname(name):
    return name.replace("/", "%2F")


def load(dump, kind, name, shape, dtype="float32"):
    """float32 files as DTYPE (float64) tensors, int64 (indices, labels) as
    long."""
    a = np.load(os.path.join(dump, f"{kind}.{fname(name)}.npy"))
    if tuple(a.shape) != tuple(shape):
        raise SystemExit(f"{dump}: {kind}.{name} has shape {a.shape}, graph says {shape}")
    if a.dtype != np.dtype(dtype):
        raise SystemExit(f"{dump}: {kind}.{name} is {a.dtype}, graph says {dtype}")
    return torch.tensor(a) if dtype == "int64" else torch.tensor(a.astype(DTYPE))


def run(graph, dump, train=True):
    """Returns (loss or None, {param: grad}, {output: value}, {param: updated
    running statistic}) in float64 from the XML and the dump. A graph with a
    loss runs in training mode unless train is False (then the inference
    loss alone, no gradients); one without runs in inference mode."""
    g = ET.parse(graph).getroot().find("graph")
    values, params, producer, updated = {}, {}, {}, {}
    trains = os.path.exists(os.path.join(dump, "loss.npy"))
    if trains and train:
        ops = dict(OPS, Dropout=lambda a, i, at: dropout(a, i, at, dump),
                   BatchNormalization=lambda a, i, at: batch_norm(a, i, at, updated))
    else:
        ops = dict(OPS, Dropout=lambda a, i, at: i[0])
    for el in g.iter("input"):
        values[el.get("name")] = load(dump, "input", el.get("name"), ints(el.get("shape")),
                                      el.get("dtype", "float32"))
    for el in g.iter("initializer"):
        t = load(dump, "param", el.get("name"), ints(el.get("shape")))
        if el.get("trainable", "true") in ("true", "1"):
            t.requires_grad_(True)
            params[el.get("name")] = t
        values[el.get("name")] = t
    for node in g.iter("node"):
        for out in node.get("out").split():
            producer[out] = node

    def value(name):           # nodes in any order: evaluate on demand
        if name not in values:
            node = producer[name]
            op = node.get("op")
            if op not in ops:
                raise SystemExit(f"{graph}: op {op} has no reference case")
            attrs = {k: v for k, v in node.attrib.items() if k not in NODE_KEYS}
            ins = [value(i) for i in node.get("in").split()]
            got = ops[op](node, ins, attrs)
            outs = node.get("out").split()
            for out, v in zip(outs, got if isinstance(got, list) else [got]):
                values[out] = v
        return values[name]

    outs = list(g.iter("output"))
    outputs = {o.get("name"): value(o.get("name")) for o in outs}
    marked = [o for o in outs if o.get("loss") in ("true", "1")]
    cands = marked or [o for o in outs if value(o.get("name")).numel() == 1
                       and o.get("loss") not in ("false", "0")]
    if len(cands) != 1 or value(cands[0].get("name")).numel() != 1:
        if trains:
            raise SystemExit(f"{graph}: the dump has loss.npy but the graph no loss")
        return None, {}, outputs, {}
    if not trains:
        raise SystemExit(f"{graph}: the graph has a loss but {dump} no loss.npy")
    loss = value(cands[0].get("name")).reshape(())
    if not train:
        return loss, {}, outputs, {}
    trainable = list(params.items())
    grads = torch.autograd.grad(loss, [p for _, p in trainable], allow_unused=True)
    return loss, {n: (gr if gr is not None else torch.zeros_like(p))
                  for (n, p), gr in zip(trainable, grads)}, outputs, updated


def rel(ours, ref):
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    diff = float(np.max(np.abs(ours.astype(np.float64) - ref))) if ref.size else 0.0
    return diff / scale if scale > 0 else diff


def check(graph, dump, tol):
    loss, grads, outputs, updated = run(graph, dump)
    errs = {}
    if loss is not None:
        errs["loss"] = rel(np.load(os.path.join(dump, "loss.npy")), loss.detach().numpy())
    for name, v in outputs.items():
        ours = np.load(os.path.join(dump, f"output.{fname(name)}.npy"))
        if ours.dtype != np.float32 or tuple(ours.shape) != tuple(v.shape):
            raise SystemExit(f"{dump}: output.{name} is {ours.dtype} {ours.shape}, "
                             f"want float32 {tuple(v.shape)}")
        errs["output." + name] = rel(ours, v.detach().numpy())
    for name, gr in grads.items():
        errs["grad." + name] = rel(np.load(os.path.join(dump, f"grad.{fname(name)}.npy")),
                                   gr.numpy())
    # a running statistic the step left as it was has no after.*.npy
    for name, t in updated.items():
        path = os.path.join(dump, f"after.{fname(name)}.npy")
        if not os.path.exists(path):
            path = os.path.join(dump, f"param.{fname(name)}.npy")
        errs["after." + name] = rel(np.load(path), t.numpy())
    if loss is not None:
        inference = run(graph, dump, train=False)[0]
        errs["forward"] = rel(np.load(os.path.join(dump, "forward.npy")),
                              inference.detach().numpy())
    extra = {f for f in os.listdir(dump) if f.startswith("grad.")} - \
            {f"grad.{fname(n)}.npy" for n in grads}
    extra |= {f for f in os.listdir(dump) if f.startswith("after.")} - \
             {f"after.{fname(n)}.npy" for n in updated}
    worst = max(errs, key=errs.get)
    ok = errs[worst] <= tol and not extra
    print(f"{'ok  ' if ok else 'FAIL'} {graph} {dump}: worst relative error "
          f"{errs[worst]:.2e} ({worst}), {len(errs)} tensors"
          + (f"; unexpected {sorted(extra)}" if extra else ""))
    return ok


def main(argv):
    tol = 1e-4
    if argv[:1] == ["--tol"]:
        tol, argv = float(argv[1]), argv[2:]
    if not argv or len(argv) % 2:
        raise SystemExit(__doc__)
    torch.set_num_threads(1)
    results = [check(argv[i], argv[i + 1], tol) for i in range(0, len(argv), 2)]
    print(f"reference: {sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
