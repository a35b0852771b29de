"""The four MLPerf Tiny reference models (v1.0 training scripts in
github.com/mlcommons/tiny, benchmark/training/) written in PyTorch from
their published architectures, for the 256 KB table (scripts/tiny_table.py)
and the Cortex-M4 runs (tests/e2e/test_tiny.sh). docs/tiny.md describes
each and where they differ from the Keras originals:

- no bias on a convolution or Linear that a BatchNorm follows (Keras keeps
  one; training-mode BatchNorm subtracts it again, so its gradient is zero
  and would only cost bytes);
- no Dropout (remat draws its own masks, so a run could not be compared
  with torch's);
- Keras "same" padding is symmetric here where that gives the same output
  shape (stride 2 on an even size pads one side only in TensorFlow); the
  keyword spotter's first conv pads (4, 5) x (1, 1) as TensorFlow does.

tests/onnx/torch_models.py adds TINY_MODELS to its MODELS, so
tests/e2e/test_onnx.sh checks each against torch autograd at the small
batch `test_batch`. ResNet-8 is torch_models.py's resnet8 (the same
network), reused here.

Usage: tiny_models.py NAME BATCH OUT.onnx [--eval-bn]
  exports NAME at BATCH images (weights from torch.manual_seed(0)) in
  training mode with its loss, as docs/onnx.md says; the table reads it.
  --eval-bn: every BatchNorm in eval mode (fixed running statistics,
  exported with PRESERVE), as partial fine-tuning with a frozen backbone
  runs them, so that remat folds a frozen layer's BatchNorm away.
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


def spread_norms(model):
    """BatchNorm scales and shifts drawn away from 1 and 0: at their
    defaults a scale's gradient is zero up to rounding after a norm,
    ReLU and conv, which no relative check can hold."""
    for mod in model.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            nn.init.uniform_(mod.weight, 0.5, 1.5)
            nn.init.uniform_(mod.bias, -0.5, 0.5)


def labels(g, batch, classes):
    return torch.randint(0, classes, (batch,), generator=g)


class DwSep(nn.Module):
    """Depthwise 3x3 (stride s), BatchNorm, activation, pointwise 1x1,
    BatchNorm, activation: the block of DS-CNN and MobileNetV1."""

    def __init__(self, cin, cout, stride, act):
        super().__init__()
        self.dw = nn.Conv2d(cin, cin, 3, stride, 1, groups=cin, bias=False)
        self.bn1 = nn.BatchNorm2d(cin)
        self.pw = nn.Conv2d(cin, cout, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.act = act

    def forward(self, x):
        return self.act(self.bn2(self.pw(self.act(self.bn1(self.dw(x))))))


class TinyKws(nn.Module):
    """Keyword spotting, DS-CNN: 49 frames x 10 MFCCs, Conv 64 (10, 4)
    stride 2 + BN + ReLU, four depthwise-separable blocks of 64, average
    pool over the 25x5 map, Linear to 12 classes, cross-entropy."""

    test_batch = 2
    ref_batch = 100     # kws_util.py's --batch_size

    def __init__(self, c=64, blocks=4, classes=12):
        super().__init__()
        self.conv = nn.Conv2d(1, c, (10, 4), 2, bias=False)
        self.bn = nn.BatchNorm2d(c)
        self.blocks = nn.Sequential(*[DwSep(c, c, 1, nn.ReLU())
                                      for _ in range(blocks)])
        self.pool = nn.AvgPool2d((25, 5))
        self.fc = nn.Linear(c, classes)
        spread_norms(self)

    def forward(self, x, y):
        # TensorFlow's "same" for (10, 4) stride 2 on 49x10: 4 rows above,
        # 5 below, a column each side (a zero Pad remat folds into the Conv)
        h = F.relu(self.bn(self.conv(F.pad(x, (1, 1, 4, 5)))))
        h = torch.flatten(self.pool(self.blocks(h)), 1)
        return F.cross_entropy(self.fc(h), y)

    @classmethod
    def inputs(cls, g, batch=None):
        b = batch or cls.test_batch
        return (torch.randn(b, 1, 49, 10, generator=g), labels(g, b, 12))


class TinyVww(nn.Module):
    """Visual wake words, MobileNetV1 at width 0.25: 96x96 RGB, Conv 8
    3x3 stride 2 + BN + ReLU6, thirteen depthwise-separable blocks (16,
    32/2, 32, 64/2, 64, 128/2, 128 x5, 256/2, 256), average pool over the
    3x3 map, Linear to 2 classes, cross-entropy."""

    test_batch = 4
    ref_batch = 32      # train_vww.py's BATCH_SIZE
    # (output channels, stride) of MobileNetV1's blocks at width 1, over 4
    plan = [(16, 1), (32, 2), (32, 1), (64, 2), (64, 1), (128, 2),
            (128, 1), (128, 1), (128, 1), (128, 1), (128, 1), (256, 2),
            (256, 1)]

    def __init__(self, classes=2):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        blocks, c = [], 8
        for cout, s in self.plan:
            blocks.append(DwSep(c, cout, s, nn.ReLU6()))
            c = cout
        self.blocks = nn.Sequential(*blocks)
        self.pool = nn.AvgPool2d(3)
        self.fc = nn.Linear(c, classes)
        spread_norms(self)

    def forward(self, x, y):
        h = F.relu6(self.bn(self.conv(x)))
        h = torch.flatten(self.pool(self.blocks(h)), 1)
        return F.cross_entropy(self.fc(h), y)

    @classmethod
    def inputs(cls, g, batch=None):
        b = batch or cls.test_batch
        return (torch.randn(b, 3, 96, 96, generator=g), labels(g, b, 2))


class TinyAd(nn.Module):
    """Anomaly detection, the fully connected autoencoder: 640 (5 frames
    of 128 mel bands) -> four Linear 128 + BN + ReLU -> Linear 8 + BN +
    ReLU -> four Linear 128 + BN + ReLU -> Linear 640, mean squared error
    against the input."""

    # BatchNorm over 4 rows puts float32's rounding 1e-4 from torch
    # float64 in the running variance after 3 steps; over 16 it is within
    test_batch = 16
    ref_batch = 512     # baseline.yaml's fit: batch_size

    def __init__(self, width=128, code=8, dim=640):
        super().__init__()
        sizes = [dim] + [width] * 4 + [code] + [width] * 4
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Linear(a, b, bias=False), nn.BatchNorm1d(b),
                       nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.out = nn.Linear(width, dim)
        spread_norms(self)

    def forward(self, x):
        return ((self.out(self.body(x)) - x) ** 2).mean()   # F.mse_loss, which torch 1.13 cannot export

    input_names = ["x"]

    @classmethod
    def inputs(cls, g, batch=None):
        b = batch or cls.test_batch
        return (torch.randn(b, 640, generator=g),)


TINY_MODELS = {"tiny_kws": TinyKws, "tiny_vww": TinyVww, "tiny_ad": TinyAd}


def resnet8():
    """torch_models.py's ResNet8 (MLPerf Tiny's image classifier), with
    the batch sizes the table uses."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "onnx"))
    from torch_models import ResNet8

    class TinyResNet8(ResNet8):
        ref_batch = 32      # train.py's BS

        @classmethod
        def inputs(cls, g, batch=None):
            b = batch or 2
            return (torch.randn(b, 3, 32, 32, generator=g), labels(g, b, 10))
    return TinyResNet8


def export(name, batch, out, eval_bn=False):
    """The model at this batch into out. eval_bn: every BatchNorm in eval
    mode (its running statistics fixed, none updated), the rest training:
    what partial fine-tuning does with a frozen backbone (the 256 KB work
    folds BatchNorm into the convolution before it trains), exported with
    PRESERVE so that remat folds a frozen layer's BatchNorm away."""
    cls = resnet8() if name == "resnet8" else TINY_MODELS[name]
    torch.manual_seed(0)
    model = cls()
    inputs = cls.inputs(torch.Generator().manual_seed(1), batch)
    mode = torch.onnx.TrainingMode.TRAINING
    model.train()
    if eval_bn or (batch == 1 and cls is TinyAd):
        # torch refuses training-mode BatchNorm1d over one value per
        # channel; at batch 1 the autoencoder's are exported in eval mode
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.eval()
        mode = torch.onnx.TrainingMode.PRESERVE
    names = getattr(cls, "input_names", ["x", "y"])
    torch.onnx.export(model, inputs, out, opset_version=17, training=mode,
                      do_constant_folding=False, input_names=names,
                      output_names=["loss"])


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--eval-bn"]
    if len(args) != 3:
        sys.exit("usage: tiny_models.py NAME BATCH OUT.onnx [--eval-bn]")
    export(args[0], int(args[1]), args[2], "--eval-bn" in sys.argv[1:])
