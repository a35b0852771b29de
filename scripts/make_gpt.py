#!/usr/bin/env python3
"""Writes graphs/gpt.xml: a small GPT, model name gpt. Vocabulary 256,
sequence 64, width 128, 4 heads of 32, batch 4; int64 inputs tokens and
targets (4 64). Token embedding Gather(wte, tokens) plus a learned position
embedding wpe (broadcast Add), Dropout; 4 pre-LayerNorm layers, each a block
lN: LayerNormalization -> q, k, v (MatMul; + bias for q and v) -> Reshape
(4 64 4 32) -> Transpose (0 2 1 3) -> causal Attention -> Transpose ->
Reshape (4 64 128) ->
projection (MatMul + bias) -> Dropout -> residual Add; LayerNormalization ->
MatMul 128x512 + bias -> Gelu -> MatMul 512x128 + bias -> Dropout ->
residual Add. Then a final LayerNormalization, the lm head (MatMul 128x256,
no bias), Transpose (0 2 1) to (4 256 64) and SoftmaxCrossEntropyLoss
against targets (mean). Dropout ratio 0.1. Weights normal(0, 0.02) as
GPT-2's (without GPT-2's 1/sqrt(2 layers) on the residual projections),
biases zeros, LayerNormalization scale ones and bias zeros. Weights are
(in, out): MatMul(x, W).

Unlike GPT-2, k has no bias: adding b to every key adds q.b to every score
of a query's row, which the softmax takes out, so a key bias changes
nothing and its gradient is zero up to rounding. A zero gradient cannot
pass a relative check (tests/ref/reference.py, tests/e2e/gradcheck.c):
the float32 trainer's rounding would be compared with torch's.

With --large: bench/graphs/gpt_large.xml for the benchmark (where compute
dominates), model name gpt_large, the same structure at sequence 256, width
512, 8 heads of 64, 8 layers, batch 1 (vocabulary still 256): 14.1 GFLOP
forward, about 0.9 s a train step on one core of this project's machine.

With --layers N: N layers instead of 4 (or 8), model name gptN (or
gpt_largeN), for the solver's tests and measurements (docs/solver.md): a
deep model of the same blocks. Without it the output is what it was.

Usage: scripts/make_gpt.py > graphs/gpt.xml
       scripts/make_gpt.py --large > bench/graphs/gpt_large.xml
       scripts/make_gpt.py --layers 96 > gpt96.xml"""
import sys

args = sys.argv[1:]
LARGE = "--large" in args
V, T, D, H, B, L = (256, 256, 512, 8, 1, 8) if LARGE else (256, 64, 128, 4, 4, 4)
HS, F, P = D // H, 4 * D, 0.1
NAME = "gpt_large" if LARGE else "gpt"
if "--layers" in args:
    at = args.index("--layers")
    if at + 1 >= len(args) or not args[at + 1].isdigit() or int(args[at + 1]) < 1:
        sys.exit("usage: make_gpt.py [--large] [--layers N] > gpt.xml")
    L = int(args[at + 1])
    NAME += str(L)

out = ['<?xml version="1.0" encoding="UTF-8"?>',
       f'<model name="{NAME}" format="1">', '  <graph>',
       f'    <input name="tokens" shape="{B} {T}" dtype="int64"/>',
       f'    <input name="targets" shape="{B} {T}" dtype="int64"/>', '']


def param(name, shape, init):
    out.append(f'    <initializer name="{name}" shape="{shape}" {init}/>')


W = 'init="normal" mean="0" std="0.02"'
param("wte", f"{V} {D}", W)
param("wpe", f"{T} {D}", W)
for i in range(L):
    p = f"l{i}"
    param(f"{p}.ln1.scale", D, 'init="ones"')
    param(f"{p}.ln1.bias", D, 'init="zeros"')
    for lin in ("q", "k", "v", "proj"):
        param(f"{p}.{lin}.weight", f"{D} {D}", W)
        if lin != "k":
            param(f"{p}.{lin}.bias", D, 'init="zeros"')
    param(f"{p}.ln2.scale", D, 'init="ones"')
    param(f"{p}.ln2.bias", D, 'init="zeros"')
    param(f"{p}.fc.weight", f"{D} {F}", W)
    param(f"{p}.fc.bias", F, 'init="zeros"')
    param(f"{p}.fc2.weight", f"{F} {D}", W)
    param(f"{p}.fc2.bias", D, 'init="zeros"')
param("lnf.scale", D, 'init="ones"')
param("lnf.bias", D, 'init="zeros"')
param("head.weight", f"{D} {V}", W)
out.append('')


def node(name, op, ins, outs, indent=4, **attrs):
    a = "".join(f' {k}="{v}"' for k, v in attrs.items())
    out.append(f'{" " * indent}<node name="{name}" op="{op}" in="{ins}" out="{outs}"{a}/>')


node("embed", "Gather", "wte tokens", "tok")
node("pos", "Add", "tok wpe", "emb")
node("embed.drop", "Dropout", "emb", "h0", ratio=P)
prev = "h0"
for i in range(L):
    p = f"l{i}"
    out.append(f'    <block name="{p}">')

    def n(name, op, ins, outs, **attrs):
        node(f"{p}.{name}", op, ins, outs, indent=6, **attrs)
    n("ln1", "LayerNormalization", f"{prev} {p}.ln1.scale {p}.ln1.bias", f"{p}.a")
    for h in ("q", "k", "v"):
        n(h, "MatMul", f"{p}.a {p}.{h}.weight", f"{p}.{h}0")
        lin = f"{p}.{h}0"
        if h != "k":
            n(f"{h}.bias", "Add", f"{p}.{h}0 {p}.{h}.bias", f"{p}.{h}1")
            lin = f"{p}.{h}1"
        n(f"{h}.heads", "Reshape", lin, f"{p}.{h}2", shape=f"{B} {T} {H} {HS}")
        n(f"{h}.t", "Transpose", f"{p}.{h}2", f"{p}.{h}3", perm="0 2 1 3")
    n("attn", "Attention", f"{p}.q3 {p}.k3 {p}.v3", f"{p}.att", is_causal=1)
    n("attn.t", "Transpose", f"{p}.att", f"{p}.att2", perm="0 2 1 3")
    n("attn.merge", "Reshape", f"{p}.att2", f"{p}.att3", shape=f"{B} {T} {D}")
    n("proj", "MatMul", f"{p}.att3 {p}.proj.weight", f"{p}.o0")
    n("proj.bias", "Add", f"{p}.o0 {p}.proj.bias", f"{p}.o1")
    n("attn.drop", "Dropout", f"{p}.o1", f"{p}.o2", ratio=P)
    n("res1", "Add", f"{prev} {p}.o2", f"{p}.r")
    n("ln2", "LayerNormalization", f"{p}.r {p}.ln2.scale {p}.ln2.bias", f"{p}.m")
    n("fc", "MatMul", f"{p}.m {p}.fc.weight", f"{p}.f0")
    n("fc.bias", "Add", f"{p}.f0 {p}.fc.bias", f"{p}.f1")
    n("act", "Gelu", f"{p}.f1", f"{p}.g")
    n("fc2", "MatMul", f"{p}.g {p}.fc2.weight", f"{p}.y0")
    n("fc2.bias", "Add", f"{p}.y0 {p}.fc2.bias", f"{p}.y1")
    n("mlp.drop", "Dropout", f"{p}.y1", f"{p}.y2", ratio=P)
    n("res2", "Add", f"{p}.r {p}.y2", f"{p}.out")
    out.append('    </block>')
    prev = f"{p}.out"
out.append('')
node("lnf", "LayerNormalization", f"{prev} lnf.scale lnf.bias", "hf")
node("head", "MatMul", "hf head.weight", "logits")
node("head.t", "Transpose", "logits", "scores", perm="0 2 1")
node("loss", "SoftmaxCrossEntropyLoss", "scores targets", "loss", reduction="mean")
out += ['', '    <output name="loss" loss="true"/>', '  </graph>', '</model>', '']
sys.stdout.write("\n".join(out))
