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

Usage: scripts/make_unet.py D > unet.xml"""
import sys

if len(sys.argv) != 2 or not sys.argv[1].isdigit() or int(sys.argv[1]) < 1:
    sys.exit("usage: make_unet.py DEPTH > unet.xml")
D = int(sys.argv[1])
B = 2


def width(i):
    return 4 + 4 * (i % 3)


out = ['<?xml version="1.0" encoding="UTF-8"?>',
       f'<model name="unet{D}" format="1">', '  <graph>',
       f'    <input name="x" shape="{B} {width(0)}"/>',
       f'    <input name="target" shape="{B} {width(0)}"/>']
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


prev = "x"
for i in range(1, D + 1):
    node(f"enc{i}.mm", "MatMul", f"{prev} enc{i}", f"h{i}")
    node(f"enc{i}.act", "Relu", f"h{i}", f"a{i}")
    prev = f"a{i}"
for i in range(D, 0, -1):
    node(f"dec{i}.mm", "MatMul", f"{prev} dec{i}", f"u{i}")
    node(f"dec{i}.skip", "Add", f"u{i} h{i}", f"s{i}")
    node(f"dec{i}.act", "Relu", f"s{i}", f"d{i}")
    prev = f"d{i}"
node("head", "MatMul", f"{prev} head", "y")
node("diff", "Sub", "y target", "e")
node("sq", "Mul", "e e", "e2")
node("mse", "ReduceMean", "e2", "loss", keepdims=0)
out += ['    <output name="loss" loss="true"/>', '  </graph>', '</model>', '']
sys.stdout.write("\n".join(out))
