#!/usr/bin/env python3
"""Writes a large graph for the compile-time benchmark and the size test:
NODES nodes in residual blocks of four (Gemm, Gelu, Gemm, Add), each a
<block>, on small 4x16 activations so that only the graph is large.
Usage: make_chain.py NODES > big.xml   (NODES a multiple of 4, plus 1 loss)"""
import sys

n = int(sys.argv[1])
D, B = 16, 4
w = sys.stdout.write
w(f'<?xml version="1.0"?>\n<model name="chain" format="1">\n  <graph>\n'
  f'    <input name="x" shape="{B} {D}"/>\n')
blocks = max(1, n // 4)
for i in range(blocks):
    for fc in ("fc1", "fc2"):
        w(f'    <initializer name="b{i}.{fc}.w" shape="{D} {D}" init="uniform" '
          f'low="-0.25" high="0.25"/>\n')
        w(f'    <initializer name="b{i}.{fc}.b" shape="{D}" init="zeros"/>\n')
prev = "x"
for i in range(blocks):
    b = f"b{i}"
    w(f'    <block name="{b}">\n'
      f'      <node name="{b}.fc1" op="Gemm" in="{prev} {b}.fc1.w {b}.fc1.b" out="{b}.h" transB="1"/>\n'
      f'      <node name="{b}.act" op="Gelu" in="{b}.h" out="{b}.g"/>\n'
      f'      <node name="{b}.fc2" op="Gemm" in="{b}.g {b}.fc2.w {b}.fc2.b" out="{b}.y" transB="1"/>\n'
      f'      <node name="{b}.res" op="Add" in="{prev} {b}.y" out="{b}.out"/>\n'
      f'    </block>\n')
    prev = f"{b}.out"
w(f'    <node name="mean" op="ReduceMean" in="{prev}" out="loss" keepdims="0"/>\n'
  f'    <output name="loss" loss="true"/>\n  </graph>\n</model>\n')
