"""PyTorch models written the usual way, exported with torch.onnx.export as
a user would, with torch autograd's loss and gradients as the reference.

Usage: torch_models.py NAME OUT_DIR
  writes OUT_DIR/NAME.onnx (weights from torch.manual_seed(S), inputs from
  a generator seeded S + 1, S the class's `seed`, 0 unless it says, or
  $SEED), and under OUT_DIR/ref/ the trainer's --load
  files (input.X.npy, param.P.npy for every parameter of the state_dict)
  and torch's own results: loss.npy and grad.P.npy, computed in float64
  from the same float32 values.
Usage: torch_models.py --compare REF_DIR DUMP_DIR TOL
  compares a trainer's dump with the reference: each tensor's relative
  error max|ours - torch| / max|torch|; fails above TOL.
Usage: torch_models.py --same-weights REF_DIR WEIGHTS_DIR
  checks that remat import wrote every parameter bit for bit.

Names: NAME is mlp_ln_gelu, mlp_opset16, gpt, mha, cnn_bn, wide, big,
activations or resnet8.
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, approximate="none"):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.act = nn.GELU(approximate=approximate)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(self.act(self.fc1(self.ln(x))))


class MlpLnGelu(nn.Module):
    """Residual MLP blocks on a 3-D input (Linear over the last dim)."""

    opset = 17
    approximate = "none"

    def __init__(self, d=16, n=3, classes=5):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.blocks = nn.ModuleList([Block(d, self.approximate) for _ in range(n)])
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x, y):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        logits = self.head(self.ln_f(h))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    @staticmethod
    def inputs(g):
        return (torch.randn(2, 3, 8, generator=g),
                torch.randint(0, 5, (2, 3), generator=g))


class MlpOpset16(MlpLnGelu):
    """The same at opset 16, where torch spells LayerNorm out, with the
    tanh form of GELU, which torch spells out at every opset."""
    opset = 16
    approximate = "tanh"


class Attn(nn.Module):
    """Causal self-attention as people write it: q, k, v Linears, view and
    transpose into heads, masked_fill with a causal buffer, softmax."""

    def __init__(self, d, heads, t):
        super().__init__()
        self.h = heads
        self.q = nn.Linear(d, d)
        # no key bias: the softmax takes it out, so its gradient is zero
        # and no relative check can hold it
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(t, t)).view(1, 1, t, t))

    def forward(self, x):
        B, T, C = x.size()
        q = self.q(x).view(B, T, self.h, C // self.h).transpose(1, 2)
        k = self.k(x).view(B, T, self.h, C // self.h).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, C // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(y)


class GptBlock(nn.Module):
    def __init__(self, d, heads, t):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Attn(d, heads, t)
        self.ln_2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.proj(F.gelu(self.fc(self.ln_2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab=11, t=6, d=16, heads=2, n=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.h = nn.ModuleList([GptBlock(d, heads, t) for _ in range(n)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    @staticmethod
    def inputs(g):
        return (torch.randint(0, 11, (2, 6), generator=g),
                torch.randint(0, 11, (2, 6), generator=g))


class MhaLayer(nn.Module):
    """A pre-norm encoder layer around nn.MultiheadAttention (one packed
    in_proj_weight), with a ReLU MLP."""

    def __init__(self, d, heads):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 2 * d)
        self.out = nn.Linear(2 * d, d)

    def forward(self, x):
        h = self.norm(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.out(F.relu(self.fc(self.norm2(x))))


class Mha(nn.Module):
    def __init__(self, d=16, heads=4, n=2):
        super().__init__()
        self.layers = nn.ModuleList([MhaLayer(d, heads) for _ in range(n)])
        self.head = nn.Linear(d, 3)

    def forward(self, x, y):
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.head(x.mean(dim=1)), y)

    @staticmethod
    def inputs(g):
        return (torch.randn(2, 5, 16, generator=g),
                torch.randint(0, 3, (2,), generator=g))


class CnnBn(nn.Module):
    def __init__(self):
        super().__init__()
        # no bias before a BatchNorm: the batch mean takes it out (its
        # gradient is zero, and no relative check can hold a zero)
        self.conv1 = nn.Conv2d(1, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.conv2 = nn.Conv2d(4, 6, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(6)
        self.fc = nn.Linear(6 * 2 * 2, 4)

    def forward(self, x, y):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return F.cross_entropy(self.fc(torch.flatten(x, 1)), y)

    @staticmethod
    def inputs(g):
        return (torch.randn(3, 1, 8, 8, generator=g),
                torch.randint(0, 4, (3,), generator=g))


class ResBlock(nn.Module):
    """A ResNet basic block: conv-BN-ReLU, conv-BN, plus the shortcut (a
    strided 1x1 conv where the shape changes), then ReLU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = (nn.Conv2d(cin, cout, 1, stride)
                      if stride != 1 or cin != cout else None)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return F.relu(h + (x if self.short is None else self.short(x)))


class ResNet8(nn.Module):
    """MLPerf Tiny's image classifier: a conv-BN-ReLU stem, three residual
    stages (16, 32, 64 channels; the last two strided, with 1x1 strided
    shortcuts), global average pool, Linear, cross-entropy; 32x32 images,
    batch 2. BatchNorm's statistics run over 2,048 values per channel in
    the stem: float sums that drift with their length put its conv weight
    gradients 3.5e-2 from torch's (issue 25). Seed 1 (weights; inputs
    from seed 2): with those sums its worst gradient was 5.2e-2 from torch
    float64 (a ReLU input near zero flipped), seeds 0 and 2-6 3.7e-6 to
    1.1e-5; summed with rt_sum every seed tried is within 3e-6."""

    seed = 1    # torch.manual_seed for the weights; the inputs' is seed + 1

    def __init__(self, classes=10):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.stages = nn.Sequential(ResBlock(16, 16, 1), ResBlock(16, 32, 2),
                                    ResBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x, y):
        h = self.stages(F.relu(self.bn(self.conv(x))))
        h = torch.flatten(F.adaptive_avg_pool2d(h, 1), 1)
        return F.cross_entropy(self.fc(h), y)

    @staticmethod
    def inputs(g):
        return (torch.randn(2, 3, 32, 32, generator=g),
                torch.randint(0, 10, (2,), generator=g))


class Wide(nn.Module):
    """262,660 parameters: past what the C file holds (262,144 values), so
    its initial values go to a weights file."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(512, 512)
        self.fc2 = nn.Linear(512, 4)

    def forward(self, x, y):
        return F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)

    @staticmethod
    def inputs(g):
        return (torch.randn(4, 512, generator=g),
                torch.randint(0, 4, (4,), generator=g))


class Big(nn.Module):
    """10.5M parameters, for the import of a large model."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(1024, 1024) for _ in range(10)])
        self.head = nn.Linear(1024, 10)

    def forward(self, x, y):
        for lin in self.layers:
            x = F.relu(lin(x))
        return F.cross_entropy(self.head(x), y)

    @staticmethod
    def inputs(g):
        return (torch.randn(8, 1024, generator=g),
                torch.randint(0, 10, (8,), generator=g))


class ActBlock(nn.Module):
    """One Linear, then every activation of issue 25 side by side, each on
    values that straddle its kinks (3h reaches past HardSwish's -3 and 3,
    HardSigmoid's and ReLU6's), and SELU, CELU, Softsign and Mish."""

    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.leaky = nn.LeakyReLU(0.1)
        self.hswish = nn.Hardswish()
        self.hsig = nn.Hardsigmoid()
        self.relu6 = nn.ReLU6()
        self.elu = nn.ELU(alpha=0.8)
        self.softplus = nn.Softplus()
        self.selu = nn.SELU()
        self.celu = nn.CELU(alpha=0.6)
        self.softsign = nn.Softsign()
        self.mish = nn.Mish()

    def forward(self, x):
        h = self.fc(x)
        w = 3 * h
        return (self.leaky(h) + self.hswish(w) * self.hsig(w) +
                self.relu6(w) + self.elu(h) + self.softplus(h) + x.abs() +
                self.selu(h) * self.celu(w) + self.softsign(w) +
                self.mish(w))


class Activations(nn.Module):
    """torch.nn's activations, which export as LeakyRelu, HardSwish,
    HardSigmoid, Clip (ReLU6, its bounds constant inputs), Elu, Softplus,
    Abs, Selu and Celu, in two blocks; at opset 17 torch spells Softsign
    out (Abs, Add, Div) and Mish too (Softplus, Tanh, Mul): ONNX's Mish is
    opset 18."""

    def __init__(self, d=16, n=2, classes=5):
        super().__init__()
        self.inp = nn.Linear(8, d)
        self.blocks = nn.ModuleList([ActBlock(d) for _ in range(n)])
        self.head = nn.Linear(d, classes)

    def forward(self, x, y):
        h = self.inp(x)
        for b in self.blocks:
            h = b(h)
        return F.cross_entropy(self.head(h), y)

    @staticmethod
    def inputs(g):
        return (torch.randn(6, 8, generator=g),
                torch.randint(0, 5, (6,), generator=g))


MODELS = {"mlp_ln_gelu": MlpLnGelu, "mlp_opset16": MlpOpset16, "gpt": Gpt,
          "mha": Mha, "cnn_bn": CnnBn, "wide": Wide, "big": Big,
          "activations": Activations, "resnet8": ResNet8}


def fname(name):
    return name.replace("/", "%2F")


def export(name, out):
    cls = MODELS[name]
    seed = int(os.environ.get("SEED", getattr(cls, "seed", 0)))
    torch.manual_seed(seed)
    model = cls()
    g = torch.Generator().manual_seed(seed + 1)
    inputs = cls.inputs(g)
    names = ["x", "y"] if name != "gpt" else ["idx", "targets"]
    os.makedirs(os.path.join(out, "ref"), exist_ok=True)
    model.train()
    torch.onnx.export(model, inputs, os.path.join(out, name + ".onnx"),
                      opset_version=getattr(cls, "opset", 17), training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, input_names=names,
                      output_names=["loss"])
    ref = os.path.join(out, "ref")
    for n, v in zip(names, inputs):
        np.save(os.path.join(ref, f"input.{n}.npy"),
                v.numpy().astype(np.int64 if v.dtype == torch.long else np.float32))
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    for k, v in state.items():
        if v.dtype == torch.float32:
            np.save(os.path.join(ref, f"param.{fname(k)}.npy"), v.numpy())
    # torch autograd in float64 from the same float32 values
    ref_model = cls().double()
    ref_model.load_state_dict({k: v.double() if v.is_floating_point() else v
                               for k, v in state.items()})
    ref_model.train()
    args = [v.double() if v.is_floating_point() else v for v in inputs]
    loss = ref_model(*args)
    loss.backward()
    np.save(os.path.join(ref, "ref_loss.npy"), loss.detach().numpy())
    # running statistics after the step (BatchNorm in training mode)
    for k, v in ref_model.state_dict().items():
        if "running_" in k:
            np.save(os.path.join(ref, f"ref_after.{fname(k)}.npy"), v.numpy())
    for k, p in ref_model.named_parameters():
        np.save(os.path.join(ref, f"ref_grad.{fname(k)}.npy"), p.grad.numpy())


def rel(ours, ref):
    ref = np.asarray(ref, dtype=np.float64)
    scale = max(np.abs(ref).max(), 1e-30)
    return float(np.abs(np.asarray(ours, dtype=np.float64) - ref).max() / scale)


def compare(ref, dump, tol):
    errs = {"loss": rel(np.load(os.path.join(dump, "loss.npy")),
                        np.load(os.path.join(ref, "ref_loss.npy")))}
    for f in sorted(os.listdir(ref)):
        if f.startswith("ref_grad."):
            mine = os.path.join(dump, f[4:])
            if not os.path.exists(mine):
                print(f"FAIL {dump}: no {f[4:]} for torch's {f}")
                return False
            errs[f[4:-4]] = rel(np.load(mine), np.load(os.path.join(ref, f)))
    for f in sorted(os.listdir(ref)):
        if f.startswith("ref_after."):
            mine = os.path.join(dump, f[4:])
            if not os.path.exists(mine):
                print(f"FAIL {dump}: no {f[4:]}: the step left torch's updated {f[10:-4]} as it was")
                return False
            errs[f[4:-4]] = rel(np.load(mine), np.load(os.path.join(ref, f)))
    worst = max(errs, key=errs.get)
    ok = errs[worst] <= tol and len(errs) > 1
    print(f"{'ok  ' if ok else 'FAIL'} {dump}: {len(errs) - 1} gradients and running statistics, worst "
          f"relative error {errs[worst]:.2e} ({worst}) against torch autograd")
    return ok


def same_weights(ref, weights):
    """Every parameter (a ref_grad exists) is imported bit for bit; a buffer
    (a mask, running statistics) is checked where import kept it, since
    one read only through constants is folded away."""
    n = 0
    for f in sorted(os.listdir(ref)):
        if not f.startswith("param."):
            continue
        name = f[len("param."):]
        ours = os.path.join(weights, name)
        trains = os.path.exists(os.path.join(ref, "ref_grad." + name))
        if not trains and not os.path.exists(ours):
            continue
        a, b = np.load(os.path.join(ref, f)), np.load(ours)
        if a.shape != b.shape or a.tobytes() != b.tobytes():
            print(f"FAIL {ours}: not the module's {f} bit for bit")
            return False
        n += 1
    print(f"ok   {weights}: {n} parameters equal the state_dict bit for bit")
    return n > 0


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "--compare":
        sys.exit(0 if compare(a[1], a[2], float(a[3])) else 1)
    if a[0] == "--same-weights":
        sys.exit(0 if same_weights(a[1], a[2]) else 1)
    export(a[0], a[1])
