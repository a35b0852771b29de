#!/usr/bin/python3
"""Writes a U-Net-shaped graph of depth D for the solver's tests and
measurements (docs/solver.md): no blocks, as a diffusion model's or an
imported graph has, so every tensor is one free decision.

Encoder, level i = 1..D: h_i = MatMul(a_{i-1}, enc_i) (width w_{i-1} to
w_i), a_i = Relu(h_i), from a_0 = x. Decoder, level i = D..1: u_i =
MatMul(d_{i+1}, dec_i) (width w_{i+1} to w_i, from d_{D+1} = a_D), the skip
s_i = Add(u_i, h_i) from the encoder's level i, d_i = Relu(s_i). Then a
head y = MatMul(d_1, head) back to x's width and a mean squared error
against target: Sub, Mul, ReduceMean.

The skip reads h_i, the encoder's pre-activation, which no backward reads
(Relu's reads its output, MatMul's its inputs): h_i is needed only when a
decoder recompute reaches it, so from level i of the encoder to level i of
the decoder every skip is a pending choice, the pattern that made the
solver's states grow as 2^D. Widths w_i = 4 + 4 (i mod 3), batch 2, so that
the tensors differ in size and a compile is fast.

With --emb, a diffusion model's timestep embedding: emb = MatMul(t,
temb) of shape (2, 1), from an input t, added to every decoder level
(c_i = Add(s_i, emb), d_i = Relu(c_i)). No backward reads emb either, so
rebuilding any level's c_i needs it: one tensor that ties every level's
decisions together (model name unetD_emb).

Usage: scripts/make_unet.py [--emb] D > unet.xml"""
import sys

args = sys.argv[1:]
EMB = "--emb" in args
args = [a for a in args if a != "--emb"]
if len(args) != 1 or not args[0].isdigit() or int(args[0]) < 1:
    sys.exit("usage: make_unet.py [--emb] DEPTH > unet.xml")
D = int(args[0])
B = 2


def width(i):
    return 4 + 4 * (i % 3)


out = ['<?xml version="1.0" encoding="UTF-8"?>',
       f'<model name="unet{D}{"_emb" if EMB else ""}" format="1">', '  <graph>',
       f'    <input name="x" shape="{B} {width(0)}"/>',
       f'    <input name="target" shape="{B} {width(0)}"/>']
if EMB:
    out.append(f'    <input name="t" shape="{B} 4"/>')
    out.append('    <initializer name="temb" shape="4 1" init="uniform" '
               'low="-0.3" high="0.3"/>')
for i in range(1, D + 1):
    out.append(f'    <initializer name="enc{i}" shape="{width(i - 1)} {width(i)}" '
               'init="uniform" low="-0.3" high="0.3"/>')
for i in range(D, 0, -1):
    w_in = width(i + 1) if i < D else width(D)
    out.append(f'    <initializer name="dec{i}" shape="{w_in} {width(i)}" '
               'init="uniform" low="-0.3" high="0.3"/>')
out.append(f'    <initializer name="head" shape="{width(1)} {width(0)}" '
           'init="uniform" low="-0.3" high="0.3"/>')


def node(name, op, ins, outs, **attrs):
    a = "".join(f' {k}="{v}"' for k, v in attrs.items())
    out.append(f'    <node name="{name}" op="{op}" in="{ins}" out="{outs}"{a}/>')


if EMB:
    node("temb", "MatMul", "t temb", "emb")
prev = "x"
for i in range(1, D + 1):
    node(f"enc{i}.mm", "MatMul", f"{prev} enc{i}", f"h{i}")
    node(f"enc{i}.act", "Relu", f"h{i}", f"a{i}")
    prev = f"a{i}"
for i in range(D, 0, -1):
    node(f"dec{i}.mm", "MatMul", f"{prev} dec{i}", f"u{i}")
    node(f"dec{i}.skip", "Add", f"u{i} h{i}", f"s{i}")
    if EMB:
        node(f"dec{i}.emb", "Add", f"s{i} emb", f"c{i}")
    node(f"dec{i}.act", "Relu", f"c{i}" if EMB else f"s{i}", f"d{i}")
    prev = f"d{i}"
node("head", "MatMul", f"{prev} head", "y")
node("diff", "Sub", "y target", "e")
node("sq", "Mul", "e e", "e2")
node("mse", "ReduceMean", "e2", "loss", keepdims=0)
out += ['    <output name="loss" loss="true"/>', '  </graph>', '</model>', '']
sys.stdout.write("\n".join(out))
