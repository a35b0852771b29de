"""PyTorch models written the usual way, exported with torch.onnx.export as
a user would, with torch autograd's loss and gradients as the reference.

Usage: torch_models.py NAME OUT_DIR
  writes OUT_DIR/NAME.onnx, and under OUT_DIR/ref/ the trainer's --load
  files (input.X.npy, param.P.npy for every parameter of the state_dict)
  and torch's own results: loss.npy and grad.P.npy, computed in float64
  from the same float32 values.
Usage: torch_models.py --compare REF_DIR DUMP_DIR TOL
  compares a trainer's dump with the reference: each tensor's relative
  error max|ours - torch| / max|torch|; fails above TOL.
Usage: torch_models.py --same-weights REF_DIR WEIGHTS_DIR
  checks that remat import wrote every parameter bit for bit.

Names: NAME is mlp_ln_gelu, mlp_opset16, gpt, mha, cnn_bn, wide, big,
activations, gpt2_hf or bert_mask. A model's inputs are named by its class's
input_names (x and y by default).
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
    input_names = ["idx", "targets"]

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


class Gpt2Attention(nn.Module):
    """GPT-2's attention as Hugging Face writes it: one packed c_attn Linear
    split into q, k, v, heads by view and permute, the causal mask a
    registered bool buffer sliced to T, torch.where with the dtype's
    smallest value, softmax, c_proj."""

    def __init__(self, d, heads, t):
        super().__init__()
        self.h = heads
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("bias", torch.tril(torch.ones(t, t, dtype=torch.bool))
                             .view(1, 1, t, t))

    def heads(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.h, C // self.h).permute(0, 2, 1, 3)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = self.heads(q), self.heads(k), self.heads(v)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(v.size(-1))
        causal = self.bias[:, :, :T, :T]
        w = torch.where(causal, w, torch.tensor(torch.finfo(w.dtype).min, dtype=w.dtype))
        w = F.softmax(w, dim=-1)
        a = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        return self.c_proj(a)


class Gpt2Block(nn.Module):
    def __init__(self, d, heads, t):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = Gpt2Attention(d, heads, t)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2Hf(nn.Module):
    """A small GPT-2 as Hugging Face's GPT2LMHeadModel writes it: wte + wpe
    with position ids from a registered (1, T) buffer (Gather of constant
    (1, T) indices), and the loss on shifted logits and labels
    (labels[..., 1:], a Slice of an int64 input, then .view(-1))."""

    input_names = ["input_ids", "labels"]

    def __init__(self, vocab=13, t=6, d=16, heads=2, n=2):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(t, d)
        self.register_buffer("position_ids", torch.arange(t).unsqueeze(0))
        self.h = nn.ModuleList([Gpt2Block(d, heads, t) for _ in range(n)])
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids, labels):
        T = input_ids.size(-1)
        position_ids = self.position_ids[:, :T]
        x = self.wte(input_ids) + self.wpe(position_ids)
        for b in self.h:
            x = b(x)
        logits = self.lm_head(self.ln_f(x))
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        return nn.CrossEntropyLoss()(shift_logits.view(-1, shift_logits.size(-1)),
                                     shift_labels.view(-1))

    @staticmethod
    def inputs(g):
        return (torch.randint(0, 13, (2, 6), generator=g),
                torch.randint(0, 13, (2, 6), generator=g))


class BertLayer(nn.Module):
    """A post-norm BERT encoder layer: scores plus the extended attention
    mask, softmax, output dense, LayerNorm; GELU intermediate."""

    def __init__(self, d, heads):
        super().__init__()
        self.h = heads
        self.query = nn.Linear(d, d)
        # no key bias: the softmax takes it out (see Attn)
        self.key = nn.Linear(d, d, bias=False)
        self.value = nn.Linear(d, d)
        self.dense = nn.Linear(d, d)
        self.ln_1 = nn.LayerNorm(d, eps=1e-12)
        self.intermediate = nn.Linear(d, 4 * d)
        self.output = nn.Linear(4 * d, d)
        self.ln_2 = nn.LayerNorm(d, eps=1e-12)

    def heads(self, x):
        B, T, C = x.size()
        return x.view(B, T, self.h, C // self.h).permute(0, 2, 1, 3)

    def forward(self, x, mask):
        B, T, C = x.size()
        q, k, v = self.heads(self.query(x)), self.heads(self.key(x)), self.heads(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(C // self.h)
        probs = F.softmax(scores + mask, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous().view(B, T, C)
        x = self.ln_1(x + self.dense(ctx))
        return self.ln_2(x + self.output(F.gelu(self.intermediate(x))))


class BertMask(nn.Module):
    """A BERT-style encoder as Hugging Face writes it: word, position (a
    registered (1, T) buffer) and token type embeddings (a registered
    buffer of zeros expanded to the batch: Gather of one constant index);
    the attention_mask an int64 input of 1s and 0s, extended as
    (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
    and added to the scores; the [CLS] position pooled through a tanh
    Linear into a classifier with cross-entropy."""

    input_names = ["input_ids", "attention_mask", "labels"]

    def __init__(self, vocab=17, t=6, d=16, heads=2, n=2, classes=3):
        super().__init__()
        self.word = nn.Embedding(vocab, d)
        self.position = nn.Embedding(t, d)
        self.token_type = nn.Embedding(2, d)
        self.register_buffer("position_ids", torch.arange(t).expand((1, -1)))
        self.register_buffer("token_type_ids", torch.zeros((1, t), dtype=torch.long))
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList([BertLayer(d, heads) for _ in range(n)])
        self.pooler = nn.Linear(d, d)
        self.classifier = nn.Linear(d, classes)

    def forward(self, input_ids, attention_mask, labels):
        B, T = input_ids.size()
        token_type_ids = self.token_type_ids[:, :T].expand(B, T)
        x = (self.word(input_ids) + self.token_type(token_type_ids) +
             self.position(self.position_ids[:, :T]))
        x = self.ln(x)
        ext = attention_mask[:, None, None, :].to(torch.float32)
        ext = (1.0 - ext) * -10000.0
        for layer in self.layers:
            x = layer(x, ext)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return F.cross_entropy(self.classifier(pooled), labels)

    @staticmethod
    def inputs(g):
        mask = torch.ones(2, 6, dtype=torch.long)
        mask[0, 4:] = 0
        mask[1, 2:] = 0
        return (torch.randint(0, 17, (2, 6), generator=g), mask,
                torch.randint(0, 3, (2,), generator=g))


MODELS = {"mlp_ln_gelu": MlpLnGelu, "mlp_opset16": MlpOpset16, "gpt": Gpt,
          "mha": Mha, "cnn_bn": CnnBn, "wide": Wide, "big": Big,
          "activations": Activations, "gpt2_hf": Gpt2Hf, "bert_mask": BertMask}


def fname(name):
    return name.replace("/", "%2F")


def export(name, out):
    torch.manual_seed(0)
    cls = MODELS[name]
    model = cls()
    g = torch.Generator().manual_seed(1)
    inputs = cls.inputs(g)
    # the inputs' names, which the trainer's --load reads as input.NAME.npy
    names = getattr(cls, "input_names", ["x", "y"])
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
