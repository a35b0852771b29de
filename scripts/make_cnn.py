#!/usr/bin/env python3
"""Writes graphs/cnn.xml: a small CNN for 28x28 single-channel images, model
name cnn, batch 32; inputs x (32 1 28 28) and int64 labels (32). Two stages,
each a block: Conv 3x3 (pads 1, bias) -> Relu -> MaxPool 2x2 stride 2, with
1 -> 16 and 16 -> 32 channels (28x28 -> 14x14 -> 7x7); then Flatten (axis 1)
-> Gemm 1568 -> 10 (transB=1, bias) -> SoftmaxCrossEntropyLoss (mean) over
10 classes. He initialization: weights normal(0, sqrt(2 / fan_in)), fan_in
being in_channels * 3 * 3 for a conv and 1568 for the Gemm; biases zero.

With --large: bench/graphs/cnn_large.xml for the benchmark (where compute
dominates), model name cnn_large, the same structure on 64x64 images of 3
channels, 3 -> 64 and 64 -> 64 channels (64x64 -> 32x32 -> 16x16), Gemm
16384 -> 10.

Usage: scripts/make_cnn.py > graphs/cnn.xml
       scripts/make_cnn.py --large > bench/graphs/cnn_large.xml"""
import math
import sys

LARGE = "--large" in sys.argv[1:]
B, S, K, CLASSES = (32, 64, 3, 10) if LARGE else (32, 28, 3, 10)
STAGES = [(3, 64), (64, 64)] if LARGE else [(1, 16), (16, 32)]
NAME = "cnn_large" if LARGE else "cnn"
flat = STAGES[-1][1] * (S // 2 ** len(STAGES)) ** 2


def he(fan_in):
    return f'init="normal" mean="0" std="{math.sqrt(2 / fan_in)!r}"'


out = ['<?xml version="1.0" encoding="UTF-8"?>',
       f'<model name="{NAME}" format="1">', '  <graph>',
       f'    <input name="x" shape="{B} {STAGES[0][0]} {S} {S}"/>',
       f'    <input name="labels" shape="{B}" dtype="int64"/>', '']
for i, (cin, cout) in enumerate(STAGES, 1):
    out.append(f'    <initializer name="conv{i}.weight" shape="{cout} {cin} {K} {K}" '
               f'{he(cin * K * K)}/>')
    out.append(f'    <initializer name="conv{i}.bias" shape="{cout}" init="zeros"/>')
out.append(f'    <initializer name="fc.weight" shape="{CLASSES} {flat}" {he(flat)}/>')
out.append(f'    <initializer name="fc.bias" shape="{CLASSES}" init="zeros"/>')
out.append('')
prev = "x"
for i, _ in enumerate(STAGES, 1):
    s = f"stage{i}"
    out += [f'    <block name="{s}">',
            f'      <node name="{s}.conv" op="Conv" in="{prev} conv{i}.weight conv{i}.bias" '
            f'out="{s}.c" kernel_shape="{K} {K}" pads="1 1 1 1"/>',
            f'      <node name="{s}.relu" op="Relu" in="{s}.c" out="{s}.a"/>',
            f'      <node name="{s}.pool" op="MaxPool" in="{s}.a" out="{s}.p" '
            'kernel_shape="2 2" strides="2 2"/>',
            '    </block>']
    prev = f"{s}.p"
out += ['',
        f'    <node name="flatten" op="Flatten" in="{prev}" out="flat" axis="1"/>',
        '    <node name="fc" op="Gemm" in="flat fc.weight fc.bias" out="logits" transB="1"/>',
        '    <node name="loss" op="SoftmaxCrossEntropyLoss" in="logits labels" out="loss" '
        'reduction="mean"/>',
        '', '    <output name="loss" loss="true"/>', '  </graph>', '</model>', '']
sys.stdout.write("\n".join(out))
