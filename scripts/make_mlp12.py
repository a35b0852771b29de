#!/usr/bin/env python3
"""Writes graphs/mlp12.xml: 12 residual blocks x + fc2(gelu(fc1(x))), D=256,
batch 32, MSE against a target input. Weights uniform(-1/16, 1/16) (1/sqrt(D)),
biases zero."""
import sys

D, B, L = 256, 32, 12
out = ['<?xml version="1.0" encoding="UTF-8"?>',
       '<model name="mlp12" format="1">', '  <graph>',
       f'    <input name="x" shape="{B} {D}"/>',
       f'    <input name="target" shape="{B} {D}"/>', '']
for i in range(L):
    for fc in ("fc1", "fc2"):
        out.append(f'    <initializer name="b{i}.{fc}.weight" shape="{D} {D}" '
                   'init="uniform" low="-0.0625" high="0.0625"/>')
        out.append(f'    <initializer name="b{i}.{fc}.bias" shape="{D}" init="zeros"/>')
out.append('')
prev = "x"
for i in range(L):
    b = f"b{i}"
    out += [f'    <block name="{b}">',
            f'      <node name="{b}.fc1" op="Gemm" in="{prev} {b}.fc1.weight {b}.fc1.bias" out="{b}.h1" transB="1"/>',
            f'      <node name="{b}.act" op="Gelu" in="{b}.h1" out="{b}.g"/>',
            f'      <node name="{b}.fc2" op="Gemm" in="{b}.g {b}.fc2.weight {b}.fc2.bias" out="{b}.y" transB="1"/>',
            f'      <node name="{b}.res" op="Add" in="{prev} {b}.y" out="{b}.out"/>',
            '    </block>']
    prev = f"{b}.out"
out += ['',
        f'    <node name="diff" op="Sub" in="{prev} target" out="d"/>',
        '    <node name="sq" op="Mul" in="d d" out="d2"/>',
        '    <node name="mse" op="ReduceMean" in="d2" out="loss" keepdims="0"/>',
        '', '    <output name="loss" loss="true"/>', '  </graph>', '</model>', '']
sys.stdout.write("\n".join(out))
