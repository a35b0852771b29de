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


def div(x, y):
    """ONNX Div: float division, or of two int64 tensors the quotient
    truncated toward zero (issue 25); ONNX leaves x / 0 undefined, and
    remat gives 0 as numpy does."""
    if x.is_floating_point() or y.is_floating_point():
        return x / y
    zero = y == 0
    q = torch.div(x, torch.where(zero, torch.ones_like(y), y), rounding_mode="trunc")
    return torch.where(zero, torch.zeros_like(q), q)


def mod(x, y, fmod):
    """ONNX Mod: fmod 1, the dividend's sign (torch.fmod, whose gradient
    to y is -trunc(x / y)); fmod 0, of int64 only, the divisor's
    (torch.remainder); x mod 0 is 0 in remat, as numpy's (issue 25)."""
    if x.is_floating_point() or y.is_floating_point():
        return torch.fmod(x, y)
    zero = y == 0
    safe = torch.where(zero, torch.ones_like(y), y)
    r = torch.fmod(x, safe) if fmod else torch.remainder(x, safe)
    return torch.where(zero, torch.zeros_like(r), r)


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
    nsp = len(hw)                                      # 1, 2 or 3 spatial axes
    k = ints(at["kernel_shape"]) if "kernel_shape" in at else k_default
    s = ints(at["strides"]) if "strides" in at else [1] * nsp
    d = ints(at["dilations"]) if "dilations" in at else [1] * nsp
    auto = at.get("auto_pad", "NOTSET")
    given = ints(at["pads"]) if "pads" in at else [0] * (2 * nsp)  # begins, ends
    assert len(k) == len(s) == len(d) == nsp and len(given) == 2 * nsp, at
    begin, end, out = [], [], []
    for ax in range(nsp):
        n, ek = hw[ax], d[ax] * (k[ax] - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            o = math.ceil(n / s[ax])
            total = max(0, (o - 1) * s[ax] + ek - n)
            b = total // 2 if auto == "SAME_UPPER" else total - total // 2
            e = total - b
        else:
            b, e = (0, 0) if auto == "VALID" else (given[ax], given[ax + nsp])
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


def torch_pads(begin, end):
    """torch.nn.functional.pad's list: the last axis first."""
    return [p for ax in reversed(range(len(begin))) for p in (begin[ax], end[ax])]


def conv(a, ins, at):
    """ONNX Conv over 1, 2 or 3 spatial axes: torch's conv1d/2d/3d on the
    input padded as window() says."""
    x, w = ins[0], ins[1]
    k, s, d, b, e, out = window(at, list(x.shape[2:]), list(w.shape[2:]))
    convnd = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d,
              3: torch.nn.functional.conv3d}[x.dim() - 2]
    y = convnd(torch.nn.functional.pad(x, torch_pads(b, e)),
               w, ins[2] if len(ins) > 2 else None, stride=s,
               dilation=d, groups=int(at.get("group", "1")))
    assert list(y.shape[2:]) == out, (y.shape, out)
    return y


def taps(x, at, fill, pad_value=None):
    """Every window's elements as (N, C, taps, positions) and the output
    size (a list, one per spatial axis): the pads hold pad_value (fill if
    None); where a ceil_mode window runs past the padded input, it reads
    fill. Any number of spatial axes: each is unfolded in turn, and a
    window's taps come out in row-major order."""
    k, s, d, b, e, out = window(at, list(x.shape[2:]))
    nsp = x.dim() - 2
    xp = torch.nn.functional.pad(x, torch_pads(b, e),
                                 value=fill if pad_value is None else pad_value)
    need = [(out[ax] - 1) * s[ax] + d[ax] * (k[ax] - 1) + 1 for ax in range(nsp)]
    more = [max(0, need[ax] - xp.shape[2 + ax]) for ax in range(nsp)]
    xp = torch.nn.functional.pad(xp, torch_pads([0] * nsp, more), value=fill)
    xp = xp[(slice(None), slice(None)) + tuple(slice(0, n) for n in need)]
    for ax in range(nsp):                     # no window past the last one
        xp = xp.unfold(2 + ax, d[ax] * (k[ax] - 1) + 1, s[ax])[..., ::d[ax]]
    n, c = x.shape[:2]
    assert list(xp.shape[2:2 + nsp]) == out, (xp.shape, out)
    return xp.reshape(n, c, math.prod(out), math.prod(k)).transpose(2, 3), out


def max_pool(a, ins, at):
    t, out = taps(ins[0], at, float("-inf"))
    m = t.max(dim=2).values
    return m.reshape(m.shape[0], m.shape[1], *out)


def average_pool(a, ins, at):
    """The window's sum over its taps inside the input, or with
    count_include_pad inside the padded input (ONNX clips a ceil_mode
    window that runs past it)."""
    x = ins[0]
    t, out = taps(x, at, 0.0)
    pads_count = at.get("count_include_pad", "0") == "1"
    inside, _ = taps(torch.ones_like(x), at, 0.0, 1.0 if pads_count else 0.0)
    m = t.sum(dim=2) / inside.sum(dim=2)
    return m.reshape(m.shape[0], m.shape[1], *out)


def attention(a, ins, at):
    """ONNX Attention; the 3-D form (batch, sequence, heads * size) is split
    into q_num_heads heads, computed as 4-D and merged back. An additive
    mask (input 3) is added to the scores, broadcast as torch does."""
    q, k, v = ins[:3]
    mask = ins[3] if len(ins) > 3 else None
    if q.dim() == 3:
        h = int(at["q_num_heads"])
        def split(t):
            return t.reshape(t.shape[0], t.shape[1], h, -1).transpose(1, 2)
        y = attention(a, [split(q), split(k), split(v)] + ins[3:], at)
        return y.transpose(1, 2).reshape(q.shape[0], q.shape[1], -1)
    scale = float(at["scale"]) if "scale" in at else 1 / math.sqrt(q.shape[-1])
    scores = scale * (q @ k.transpose(-1, -2))
    if mask is not None:    # additive, broadcast to (batch, heads, sq, skv)
        scores = scores + mask
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


def negative_log_likelihood(a, ins, at):
    """ONNX NegativeLogLikelihoodLoss, from its definition: input x (N, C,
    d...) of log-probabilities, labels (N, d...), optional class weights w
    (C); l = -w[label] * x[n, label, d...] at every position (w = 1 without
    weights), 0 where label == ignore_index; none: l in the labels' shape;
    sum: sum l; mean: sum l over the sum of w[label] at the positions not
    ignored. Written with gather, not torch's nll_loss. The weights get no
    gradient (as SoftmaxCrossEntropyLoss's), so they are detached."""
    x, labels = ins[0], ins[1]
    c = x.shape[1]
    if "ignore_index" in at:
        kept = labels != int(at["ignore_index"])
    else:
        kept = torch.ones_like(labels, dtype=torch.bool)
    present = labels[kept]
    if present.numel() and not (0 <= int(present.min()) and int(present.max()) < c):
        raise SystemExit(f"{a.get('name')}: a label outside [0, {c})")
    safe = torch.where(kept, labels, torch.zeros_like(labels))
    picked = x.gather(1, safe.unsqueeze(1)).squeeze(1)
    w = ins[2].detach()[safe] if len(ins) > 2 else torch.ones_like(picked)
    w = torch.where(kept, w, torch.zeros_like(w))
    loss = -w * picked
    how = at.get("reduction", "mean")
    if how == "none":
        return loss
    if how == "sum":
        return loss.sum()
    if how == "mean":
        return loss.sum() / w.sum()
    raise SystemExit(f"{a.get('name')}: reduction {how!r}")


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
    # training_mode 0 (the XML's default is 1): eval mode in training too,
    # as torch's module.eval(), and the running statistics stay as they are
    if updated is None or int(at.get("training_mode", "1")) == 0:
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


def pad(a, ins, at):
    """ONNX Pad: pads (begins, then ends) for every axis, or for the axes
    `axes` names; a negative pad removes elements. Each axis in turn: the
    output index o reads input index o - begin, and outside the input
    constant mode gives constant_value, edge the nearest end, reflect the
    input mirrored about its ends (numpy's 'reflect', again as far as the
    pad goes). Written as index lists, not with F.pad."""
    x = ins[0]
    mode = at.get("mode", "constant")
    value = float(at.get("constant_value", "0"))
    p = ints(at["pads"])
    axes = ints(at["axes"]) if "axes" in at else list(range(x.dim()))
    k = len(axes)
    for ax, b, e in zip(axes, p[:k], p[k:]):
        ax %= x.dim()
        n = x.shape[ax]
        idx = []
        for o in range(n + b + e):
            i = o - b
            if mode == "edge":
                i = min(max(i, 0), n - 1)
            elif mode == "reflect":
                while not 0 <= i < n:
                    i = 0 if n == 1 else (-i if i < 0 else 2 * (n - 1) - i)
            idx.append(i)
        inside = torch.tensor([0 <= j < n for j in idx])
        safe = torch.tensor([min(max(j, 0), n - 1) for j in idx], dtype=torch.long)
        y = torch.index_select(x, ax, safe)
        if mode == "constant":
            shape = [1] * x.dim()
            shape[ax] = len(idx)
            y = torch.where(inside.reshape(shape), y, torch.full_like(y, value))
        x = y
    return x


def group_norm(a, ins, at):
    """GroupNormalization with scale and bias per channel (torch's
    nn.GroupNorm, ONNX opset 21)."""
    return torch.nn.functional.group_norm(ins[0], int(at["num_groups"]), ins[1], ins[2],
                                          eps=float(at.get("epsilon", "1e-5")))


def instance_norm(a, ins, at):
    """ONNX InstanceNormalization: each (sample, channel) normalized over
    its spatial values, then scale and B per channel."""
    return torch.nn.functional.instance_norm(ins[0], weight=ins[1], bias=ins[2],
                                             eps=float(at.get("epsilon", "1e-5")))

def conv_transpose(a, ins, at):
    """ONNX ConvTranspose in 1 to 3 spatial dimensions: torch's
    conv_transpose of the full output, (in - 1) * s + (k - 1) * d + 1 per
    axis, then per ONNX the output is out positions starting at pad_begin
    of it (output_padding adds positions at the end; output_shape and
    auto_pad SAME_* set out and split the total padding, the odd one at the
    end for SAME_UPPER, at the beginning otherwise), and the bias."""
    x, w = ins[0], ins[1]
    nd = x.dim() - 2
    k = list(w.shape[2:])
    s = ints(at.get("strides", " ".join(["1"] * nd)))
    d = ints(at.get("dilations", " ".join(["1"] * nd)))
    pads = ints(at.get("pads", " ".join(["0"] * 2 * nd)))
    op = ints(at.get("output_padding", " ".join(["0"] * nd)))
    auto = at.get("auto_pad", "NOTSET")
    shape = ints(at["output_shape"])[-nd:] if "output_shape" in at else None
    g = int(at.get("group", "1"))
    fn = [None, torch.nn.functional.conv_transpose1d,
          torch.nn.functional.conv_transpose2d,
          torch.nn.functional.conv_transpose3d][nd]
    y = fn(x, w, None, stride=s, dilation=d, groups=g)
    for ax in range(nd):
        full = s[ax] * (x.shape[2 + ax] - 1) + op[ax] + d[ax] * (k[ax] - 1) + 1
        if shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
            out = shape[ax] if shape is not None else x.shape[2 + ax] * s[ax]
            total = full - out
            begin = total // 2 if auto == "SAME_UPPER" else total - total // 2
        elif auto == "VALID":
            out, begin = full, 0
        else:
            out, begin = full - pads[ax] - pads[nd + ax], pads[ax]
        have = y.shape[2 + ax]
        lo, hi = max(0, -begin), max(0, begin + out - have)
        padding = [0, 0] * (nd - 1 - ax) + [lo, hi]     # last axis first
        y = torch.nn.functional.pad(y, padding)
        y = y.narrow(2 + ax, begin + lo, out)
    if len(ins) > 2:
        y = y + ins[2].reshape([1, -1] + [1] * nd)
    return y


def resize_matrix(at, n_in, n_out, scale=None):
    """ONNX Resize along one axis as an (out, in) matrix, the way ONNX's
    own reference computes it: output j's coordinate x in the input by
    coordinate_transformation_mode (with the given scale and resized
    length in * scale, or out / in and out), r = x - floor(x) (1 where x is
    whole), the mode's coefficients (nearest by nearest_mode, linear 1 - r
    and r, cubic Keys' with a = cubic_coeff_a) over the n input positions
    nearest x in the input padded with its edge values, and with
    exclude_outside the coefficients of positions outside the input
    zeroed and the rest normalized."""
    mode = at.get("mode", "nearest")
    ctm = at.get("coordinate_transformation_mode", "half_pixel")
    nm = at.get("nearest_mode", "round_prefer_floor")
    A = float(at.get("cubic_coeff_a", "-0.75"))
    exclude = at.get("exclude_outside", "0") == "1"
    length = n_in * scale if scale is not None else n_out
    scale = scale if scale is not None else n_out / n_in
    m = torch.zeros(n_out, n_in, dtype=torch.float64)
    for j in range(n_out):
        if ctm == "align_corners":
            x = 0.0 if length == 1 else j * (n_in - 1) / (length - 1)
        elif ctm == "asymmetric":
            x = j / scale
        elif ctm == "tf_half_pixel_for_nn":
            x = (j + 0.5) / scale
        elif ctm == "pytorch_half_pixel" and length == 1:
            x = -0.5
        else:
            x = (j + 0.5) / scale - 0.5
        r = 1.0 if float(x).is_integer() else x - math.floor(x)
        if mode == "nearest":
            if r == 1.0:
                c = [0, 1]
            elif nm == "round_prefer_floor":
                c = [r <= 0.5, r > 0.5]
            elif nm == "round_prefer_ceil":
                c = [r < 0.5, r >= 0.5]
            elif nm == "floor":
                c = [1, 0]
            else:
                c = [0, 1]
        elif mode == "linear":
            c = [1 - r, r]
        else:
            q = 1 - r
            c = [((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                 ((A + 2) * r - (A + 3)) * r * r + 1,
                 ((A + 2) * q - (A + 3)) * q * q + 1,
                 ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A]
        c = [float(v) for v in c]
        n = len(c)
        pad = math.ceil(n / 2)
        # the n positions of the padded input nearest x + pad, ties to the left
        near = sorted(sorted(range(n_in + 2 * pad),
                             key=lambda i: (abs(x + pad - i), i))[:n])
        idx = [i - pad for i in near]
        if exclude:
            c = [0.0 if i < 0 or i >= n_in else v for v, i in zip(c, idx)]
            total = sum(c)
            c = [v / total for v in c]
        for v, i in zip(c, idx):
            m[j, min(max(i, 0), n_in - 1)] += v
    return m


def resize(a, ins, at):
    """ONNX Resize (nearest, linear, cubic) to the shape `sizes` (with the
    given `scales`, if any, for the coordinates): one matrix per axis
    (resize_matrix), applied axis by axis."""
    y = ins[0]
    sizes = ints(at["sizes"])
    scales = [float(v) for v in at["scales"].split()] if "scales" in at else None
    for ax, n_out in enumerate(sizes):
        m = resize_matrix(at, y.shape[ax], n_out,
                          scales[ax] if scales is not None else None)
        y = torch.movedim(torch.tensordot(m, y, dims=([1], [ax])), 0, ax)
    return y

def arg_extreme(fn):
    """ONNX ArgMax / ArgMin: int64 indices along `axis`, the first among
    equals, or the last with select_last_index (the first in the flipped
    tensor, counted from the end)."""
    def run_arg(a, ins, at):
        x, axis = ins[0], int(at.get("axis", "0"))
        keep = at.get("keepdims", "1") != "0"
        if at.get("select_last_index", "0") != "0":
            n = x.shape[axis]
            return n - 1 - fn(torch.flip(x, [axis]), dim=axis, keepdim=keep)
        return fn(x, dim=axis, keepdim=keep)
    return run_arg


def depth_to_space(a, ins, at):
    """ONNX DepthToSpace, as its definition writes it: a reshape to 6-D, a
    transpose, a reshape (DCR: depth, column, row; CRD: torch's
    pixel_shuffle)."""
    x, b = ins[0], int(at["blocksize"])
    n, c, h, w = x.shape
    if at.get("mode", "DCR") == "DCR":
        t = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        t = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(a, ins, at):
    """ONNX SpaceToDepth: DepthToSpace DCR's inverse."""
    x, b = ins[0], int(at["blocksize"])
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def cast(a, ins, at):
    """ONNX Cast: remat computes to=1 (float32) alone, of int64 or bool."""
    if at.get("to", "1") != "1":
        raise SystemExit(f"{a.get('name')}: Cast to {at['to']}")
    return ins[0].to(torch.float64 if DTYPE == np.float64 else torch.float32)


def gather_elements(a, ins, at):
    """ONNX GatherElements: out[i_0, ..., i_r] = data[i_0, ..., idx[i], ...,
    i_r], the index replacing the coordinate along axis (negative ones
    counting from the end); out has the indices' shape. Advanced indexing
    with every coordinate spelled out, so a repeated index adds its
    gradients as the definition's sum does."""
    data, idx = ins
    axis = int(at.get("axis", "0")) % data.dim()
    n = data.shape[axis]
    if idx.numel() and not (-n <= int(idx.min()) and int(idx.max()) < n):
        raise SystemExit(f"{a.get('name')}: GatherElements index outside [-{n}, {n})")
    idx = torch.where(idx < 0, idx + n, idx)
    coords = list(torch.meshgrid(*[torch.arange(d) for d in idx.shape], indexing="ij"))
    coords[axis] = idx
    return data[tuple(coords)]


def one_hot(a, ins, at):
    """ONNX OneHot with depth and values as attributes: a new axis of depth
    entries at axis, on_value where the entry's number is the index (a
    negative index + depth), off_value elsewhere."""
    idx = ins[0]
    depth = int(at["depth"])
    axis = int(at.get("axis", "-1")) % (idx.dim() + 1)
    idx = torch.where(idx < 0, idx + depth, idx).unsqueeze(axis)
    shape = [1] * (idx.dim())
    shape[axis] = depth
    hit = idx == torch.arange(depth).reshape(shape)
    on, off = float(at.get("on_value", "1")), float(at.get("off_value", "0"))
    return hit.to(torch.float64 if DTYPE == np.float64 else torch.float32) * (on - off) + off


def cumsum(a, ins, at):
    """ONNX CumSum along axis: y[k] = sum of x[j] over j <= k (j < k when
    exclusive; j >= k or j > k when reverse), as a product with the
    matrix of those (k, j) pairs."""
    x = ins[0]
    axis = int(at.get("axis", "0")) % x.dim()
    n = x.shape[axis]
    k = torch.arange(n).reshape(n, 1)
    j = torch.arange(n).reshape(1, n)
    rev, excl = int(at.get("reverse", "0")), int(at.get("exclusive", "0"))
    take = (j > k if excl else j >= k) if rev else (j < k if excl else j <= k)
    y = torch.tensordot(x.movedim(axis, -1), take.to(x.dtype).t(), dims=1)
    return y.movedim(-1, axis)


def tile(a, ins, at):
    """ONNX Tile: output dimension d is x's times repeats[d], and
    out[i] = x[i mod x's shape], one index_select per dimension."""
    x = ins[0]
    for d, r in enumerate(ints(at["repeats"])):
        x = torch.index_select(x, d, torch.arange(x.shape[d] * r) % x.shape[d])
    return x


OPS = {
    "Gemm": gemm,
    # remat's own third input: a bias of B's columns added to every row
    "MatMul": lambda a, i, at: i[0] @ i[1] + (i[2] if len(i) > 2 else 0),
    "Add": lambda a, i, at: i[0] + i[1],
    "Sub": lambda a, i, at: i[0] - i[1],
    "Mul": lambda a, i, at: i[0] * i[1],
    "Div": lambda a, i, at: div(i[0], i[1]),
    "Mod": lambda a, i, at: mod(i[0], i[1], int(at.get("fmod", 0))),
    "Relu": lambda a, i, at: torch.clamp(i[0], min=0),
    "Gelu": gelu,
    "Tanh": lambda a, i, at: torch.tanh(i[0]),
    "Sigmoid": lambda a, i, at: 1 / (1 + torch.exp(-i[0])),
    "ReduceMean": reduce(torch.mean),
    "ReduceSum": reduce(torch.sum),
    # torch.amax / amin share a tie's gradient evenly, as ONNX leaves open
    # and remat does
    "ReduceMax": reduce(torch.amax),
    "ReduceMin": reduce(torch.amin),
    # torch.maximum / minimum: half the gradient to each input on a tie
    "Max": lambda a, i, at: torch.maximum(i[0], i[1]),
    "Min": lambda a, i, at: torch.minimum(i[0], i[1]),
    # ONNX PRelu: x where x > 0, else slope x (slope broadcast to x)
    "PRelu": lambda a, i, at: torch.where(i[0] > 0, i[0], i[1] * i[0]),
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
    "GlobalMaxPool": lambda a, i, at: i[0].amax(dim=list(range(2, i[0].dim())), keepdim=True),
    "Attention": attention,
    "Gather": gather,
    "SoftmaxCrossEntropyLoss": softmax_cross_entropy,
    "NegativeLogLikelihoodLoss": negative_log_likelihood,
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
    "Sin": lambda a, i, at: torch.sin(i[0]),
    "Cos": lambda a, i, at: torch.cos(i[0]),
    # issue 25: Pad, GroupNormalization, InstanceNormalization
    "Pad": pad,
    "GroupNormalization": group_norm,
    "InstanceNormalization": instance_norm,
    "ConvTranspose": conv_transpose,
    "Resize": resize,

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
    # ArgMax and ArgMin (issue 25): int64 indices, no gradient
    "ArgMax": arg_extreme(torch.argmax),
    "ArgMin": arg_extreme(torch.argmin),
    # ops users meet (issue 25): GatherElements, OneHot, CumSum, Tile
    "GatherElements": gather_elements,
    "OneHot": one_hot,
    "CumSum": cumsum,
    "Tile": tile,

    # ops users meet (issue 25, newops2), from ONNX's definitions: ReduceL1
    # sum |x|, ReduceL2 sqrt(sum x^2), ReduceSumSquare sum x^2,
    # ReduceLogSumExp log(sum exp(x)) (plain: float64 holds the tests'
    # values); Sign, whose gradient torch makes zero; DepthToSpace and
    # SpaceToDepth as ONNX's reshape-transpose-reshape
    "ReduceL1": reduce(lambda x, dim, keepdim:
                       torch.sum(torch.abs(x), dim=dim, keepdim=keepdim)),
    "ReduceL2": reduce(lambda x, dim, keepdim:
                       torch.sqrt(torch.sum(x * x, dim=dim, keepdim=keepdim))),
    "ReduceSumSquare": reduce(lambda x, dim, keepdim:
                              torch.sum(x * x, dim=dim, keepdim=keepdim)),
    "ReduceLogSumExp": reduce(lambda x, dim, keepdim:
                              torch.log(torch.sum(torch.exp(x), dim=dim,
                                                  keepdim=keepdim))),
    "Sign": lambda a, i, at: torch.sign(i[0]),
    "DepthToSpace": depth_to_space,
    "SpaceToDepth": space_to_depth,
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
        if el.get("dtype") == "int64":
            # an int64 constant (issue 25): not a parameter the trainer
            # dumps, its values the .npy file beside the graph
            a = np.load(os.path.join(os.path.dirname(graph), el.get("path")))
            if a.dtype != np.int64 or tuple(a.shape) != tuple(ints(el.get("shape"))):
                raise SystemExit(f"{graph}: {el.get('path')} is {a.dtype} {a.shape}")
            values[el.get("name")] = torch.tensor(a)
            continue
        path = os.path.join(dump, f"param.{fname(el.get('name'))}.npy")
        if not os.path.exists(path) and el.get("init") == "file":
            # folded away at compile time (an eval BatchNormalization into
            # a frozen Conv or Gemm): the unfolded values, from the file
            a = np.load(os.path.join(os.path.dirname(graph), el.get("path")))
            values[el.get("name")] = torch.tensor(a.astype(DTYPE))
            continue
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
        # an int64 (or bool) output is int64, and exact (issue 25)
        want = np.int64 if v.dtype in (torch.int64, torch.bool) else np.float32
        if ours.dtype != want or tuple(ours.shape) != tuple(v.shape):
            raise SystemExit(f"{dump}: output.{name} is {ours.dtype} {ours.shape}, "
                             f"want {np.dtype(want).name} {tuple(v.shape)}")
        if want == np.int64:
            errs["output." + name] = 0.0 if np.array_equal(
                ours, v.numpy().astype(np.int64)) else float("inf")
            continue
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
