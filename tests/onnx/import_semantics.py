"""Small ONNX models built with onnx.helper, each holding one thing the
importer once got wrong, against numpy or against what must train.

Usage: import_semantics.py REMAT WORK_DIR
Prints one line per case and exits 1 if any fails.
"""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from onnx_build import model, vi

REMAT, WORK = sys.argv[1], sys.argv[2]
failures = []


def run(name, m, inputs, params=None):
    """remat build, then the trainer's --load/--dump: the dumped files."""
    d = os.path.join(WORK, name)
    os.makedirs(os.path.join(d, "in"), exist_ok=True)
    onnx.save(m, os.path.join(d, name + ".onnx"))
    for k, v in inputs.items():
        np.save(os.path.join(d, "in", f"input.{k}.npy"), v)
    for k, v in (params or {}).items():
        np.save(os.path.join(d, "in", f"param.{k}.npy"), v)
    r = subprocess.run([REMAT, "build", os.path.join(d, name + ".onnx"), "-o",
                        os.path.join(d, "trainer")], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    r = subprocess.run([os.path.join(d, "trainer"), "--load", os.path.join(d, "in"),
                        "--dump", os.path.join(d, "out")], capture_output=True, text=True)
    if r.returncode:
        return None, r.stderr.strip()
    out = {f[:-4]: np.load(os.path.join(d, "out", f)) for f in os.listdir(os.path.join(d, "out"))}
    return out, ""


def trainable(name, m):
    """The imported XML's initializers: name -> trains."""
    d = os.path.join(WORK, name + "_xml")
    os.makedirs(d, exist_ok=True)
    onnx.save(m, os.path.join(d, name + ".onnx"))
    subprocess.run([REMAT, "import", os.path.join(d, name + ".onnx"), "-o",
                    os.path.join(d, name + ".xml")], capture_output=True, check=True)
    import xml.etree.ElementTree as ET
    g = ET.parse(os.path.join(d, name + ".xml")).getroot().find("graph")
    return {e.get("name"): e.get("trainable", "true") == "true" for e in g.iter("initializer")}


def check(name, ok, what):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {what}")
    if not ok:
        failures.append(name)


rng = np.random.default_rng(0)
W = rng.standard_normal((3, 3)).astype(np.float32)
x = rng.standard_normal((2, 3)).astype(np.float32)
loss = [h.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)]

# A gradient flows through Trilu's data input and a float-to-float Cast:
# the weights behind them train.
m = model([h.make_node("MatMul", ["x", "W"], ["a"]),
           h.make_node("Trilu", ["a"], ["t"], upper=1),
           h.make_node("Cast", ["t"], ["c64"], to=T.DOUBLE),
           h.make_node("Cast", ["c64"], ["y"], to=T.FLOAT)] + loss,
          [vi("x", [2, 3])], [vi("loss", [])], [nh.from_array(W, "W")])
check("trilu_cast_train", trainable("trilu_cast_train", m).get("W") is True,
      "a weight read through Trilu and float casts trains")

# Transpose with perm [0, 1] is no transpose: MatMul by W, not by W^T.
m = model([h.make_node("Transpose", ["W"], ["wt"], perm=[0, 1]),
           h.make_node("MatMul", ["x", "wt"], ["y"])] + loss,
          [vi("x", [2, 3])], [vi("loss", []), vi("y", [2, 3])], [nh.from_array(W, "W")])
out, err = run("identity_transpose", m, {"x": x}, {"W": W})
check("identity_transpose", out is not None and np.allclose(out["output.y"], x @ W, rtol=1e-5),
      err or "Transpose perm=[0,1] under MatMul multiplies by W")

# Two initializers whose names map to one file name (c/k, c_k).
A = np.full((2, 3), 1.0, np.float32)
B = np.full((2, 3), 100.0, np.float32)
m = model([h.make_node("Add", ["x", "c/k"], ["s"]), h.make_node("Mul", ["s", "c_k"], ["y"])],
          [vi("x", [2, 3])], [vi("y", [2, 3])], [nh.from_array(A, "c/k"), nh.from_array(B, "c_k")])
out, err = run("weight_names", m, {"x": x})
check("weight_names", out is not None and np.allclose(out["output.y"], (x + A) * B, rtol=1e-6),
      err or "c/k and c_k keep their own values")

# int64 Mod takes the divisor's sign (fmod=0), folded at compile time.
a = nh.from_array(np.array([-7, 7, -7], np.int64), "a")
b = nh.from_array(np.array([3, -3, -3], np.int64), "b")
m = model([h.make_node("Mod", ["a", "b"], ["r"]),
           h.make_node("Cast", ["r"], ["rf"], to=T.FLOAT),
           h.make_node("Add", ["x", "rf"], ["y"])],
          [vi("x", [3])], [vi("y", [3])], [a, b])
x3 = np.zeros(3, np.float32)
out, err = run("mod_int", m, {"x": x3})
check("mod_int", out is not None and np.array_equal(out["output.y"], [2.0, -2.0, -1.0]),
      err or "int64 Mod folds to the divisor's sign")

# A Split of constants folds (torch's repeat_interleave splits its
# repeats so): int64 sizes from the split input, float32 equal parts, and
# opset 18's uneven last part ([3, 3, 2] of 8), each read with x.
iv = nh.from_array(np.arange(1, 7, dtype=np.int64), "iv")
fv = nh.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) / 4, "fv")
ev = nh.from_array(np.arange(8, dtype=np.float32), "ev")
sizes = nh.from_array(np.array([2, 4], np.int64), "sizes")
m = model([h.make_node("Split", ["iv", "sizes"], ["i0", "i1"], axis=0),
           h.make_node("Cast", ["i1"], ["f1"], to=T.FLOAT),
           h.make_node("Split", ["fv"], ["p0", "p1", "p2"], axis=1),
           h.make_node("Split", ["ev"], ["e0", "e1", "e2"], axis=0, num_outputs=3),
           h.make_node("Concat", ["p0", "p2"], ["pc"], axis=0),
           h.make_node("Reshape", ["pc", "shape4"], ["p4"]),
           h.make_node("Mul", ["x", "f1"], ["a"]),
           h.make_node("Add", ["a", "p4"], ["b"]),
           h.make_node("Concat", ["e2", "e2"], ["e4"], axis=0),
           h.make_node("Sub", ["b", "e4"], ["y"])],
          [vi("x", [4])], [vi("y", [4])],
          [iv, fv, ev, sizes, nh.from_array(np.array([4], np.int64), "shape4")],
          opset=18)
xs = rng.standard_normal(4).astype(np.float32)
want = xs * np.arange(3, 7, dtype=np.float32) + np.array([0, 0.75, 0.5, 1.25], np.float32) \
    - np.array([6, 7, 6, 7], np.float32)
out, err = run("split_const", m, {"x": xs})
check("split_const", out is not None and np.allclose(out["output.y"], want, rtol=1e-6),
      err or "Split of int64 and float32 constants (sizes, equal parts, opset 18's uneven last) folds")

# A Slice with a negative step and a start below -dim starts at 0, folded
# or computed alike.
x4 = rng.standard_normal((3, 2)).astype(np.float32)
consts = [nh.from_array(np.array([v], np.int64), n) for v, n in
          ((-10, "st"), (-20, "en"), (0, "ax"), (-1, "sp"))]
m = model([h.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["y"])],
          [vi("x", [3, 2])], [vi("y", [1, 2])], consts)
out, err = run("slice_negative_step", m, {"x": x4})
check("slice_negative_step", out is not None and np.array_equal(out["output.y"], x4[0:1]),
      err or "x[-10:-20:-1] along axis 0 is x[0]")

# A float initializer holding -inf is a mask (a constant), even where the
# loss depends on it through an Add.
mask = np.triu(np.full((3, 3), -np.inf, np.float32), 1)
m = model([h.make_node("MatMul", ["x", "W"], ["a"]),
           h.make_node("Reshape", ["a", "shape"], ["a2"]),
           h.make_node("Add", ["a2", "mask"], ["z"]),
           h.make_node("Softmax", ["z"], ["y"], axis=-1)] + loss,
          [vi("x", [3, 3])], [vi("loss", [])],
          [nh.from_array(W, "W"), nh.from_array(mask, "mask"),
           nh.from_array(np.array([3, 3], np.int64), "shape")])
t = trainable("additive_mask", m)
check("additive_mask", t.get("W") is True and t.get("mask") is False,
      "an additive -inf mask is a constant and W trains")

# torch's Dropout in training mode: ratio and training_mode as inputs, a
# mask output nobody reads; the ratio becomes the attribute.
m = model([h.make_node("MatMul", ["x", "W"], ["a"]),
           h.make_node("Dropout", ["a", "ratio", "train"], ["y", "mask"])] + loss,
          [vi("x", [2, 3])], [vi("loss", [])],
          [nh.from_array(W, "W"), nh.from_array(np.array(0.25, np.float32), "ratio"),
           nh.from_array(np.array(True), "train")])
trainable("dropout_inputs", m)
xmlpath = os.path.join(WORK, "dropout_inputs_xml", "dropout_inputs.xml")
text = open(xmlpath).read()
check("dropout_inputs", 'op="Dropout"' in text and 'ratio="0.25"' in text and "mask" not in text,
      "Dropout's ratio input becomes ratio=\"0.25\" and its unread mask is dropped")

# Pad at opset 18 with axes (negative, out of order), a reflect pad and a
# crop, against numpy.pad: pads are per listed axis, begins then ends.
x5 = rng.standard_normal((2, 3, 4)).astype(np.float32)
m = model([h.make_node("Pad", ["x", "pads", "", "axes"], ["y"], mode="reflect")],
          [vi("x", [2, 3, 4])], [vi("y", [2, 4, 6])],
          [nh.from_array(np.array([2, 1, 0, 0], np.int64), "pads"),
           nh.from_array(np.array([-1, 1], np.int64), "axes")], opset=18)
out, err = run("pad_axes", m, {"x": x5})
check("pad_axes", out is not None and np.array_equal(
          out["output.y"], np.pad(x5, ((0, 0), (1, 0), (2, 0)), mode="reflect")),
      err or "Pad axes=[-1, 1] pads=[2, 1, 0, 0] is numpy's ((0,0),(1,0),(2,0))")

# Pad before opset 11: pads and value attributes; a negative pad crops.
m = model([h.make_node("Pad", ["x"], ["y"], pads=[1, -1, 0, 2], value=-3.0)],
          [vi("x", [2, 3])], [vi("y", [3, 4])], opset=10)
out, err = run("pad_opset10", m, {"x": x})
want = np.pad(x[:, 1:], ((1, 0), (0, 2)), constant_values=-3.0)
check("pad_opset10", out is not None and np.array_equal(out["output.y"], want),
      err or "Pad opset 10: pads and value attributes, a negative pad crops")

# GroupNormalization as a node (opset 21's per-channel scale and bias,
# here at opset 18 where num_groups equals C, the two definitions agree)
# against numpy.
x6 = rng.standard_normal((2, 4, 3)).astype(np.float32)
s6 = rng.uniform(0.5, 1.5, 4).astype(np.float32)
b6 = rng.standard_normal(4).astype(np.float32)
m = model([h.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4,
                       epsilon=1e-3)],
          [vi("x", [2, 4, 3])], [vi("y", [2, 4, 3])],
          [nh.from_array(s6, "s"), nh.from_array(b6, "b")], opset=18)
out, err = run("group_norm_node", m, {"x": x6}, {"s": s6, "b": b6})
xd = x6.astype(np.float64)
mu, var = xd.mean(2, keepdims=True), xd.var(2, keepdims=True)
want = (xd - mu) / np.sqrt(var + 1e-3) * s6[None, :, None] + b6[None, :, None]
check("group_norm_node", out is not None and np.allclose(out["output.y"], want, rtol=1e-5,
                                                         atol=1e-6),
      err or "GroupNormalization num_groups=C is per-channel instance norm")

# A zero Pad before an AveragePool that pads by itself without counting
# its padding (count_include_pad 0) is not folded: the Pad's zeros count,
# the pool's own padding does not.
x7 = rng.standard_normal((1, 1, 3, 3)).astype(np.float32)
m = model([h.make_node("Pad", ["x", "pads"], ["p"]),
           h.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], pads=[1, 1, 1, 1])],
          [vi("x", [1, 1, 3, 3])], [vi("y", [1, 1, 5, 5])],
          [nh.from_array(np.array([0, 0, 1, 1, 0, 0, 0, 0], np.int64), "pads")])
out, err = run("pad_pool_unfolded", m, {"x": x7})
padded = np.pad(x7[0, 0].astype(np.float64), ((1, 0), (1, 0)))   # the Pad's zeros
want = np.zeros((5, 5))
for i in range(5):
    for j in range(5):
        win = [padded[a, b] for a in (i - 1, i) for b in (j - 1, j)
               if 0 <= a < 4 and 0 <= b < 4]
        want[i, j] = sum(win) / len(win)
check("pad_pool_unfolded", out is not None and np.allclose(out["output.y"][0, 0], want,
                                                           rtol=1e-5, atol=1e-6),
      err or "Pad zeros count, AveragePool's own pads (count_include_pad 0) do not")

# ...nor one with ceil_mode: its last window starts in the Pad's zeros,
# which are input to it; folded, they would be end padding, and the window
# would be dropped (a 3x3 output, not 2x2).
m = model([h.make_node("Pad", ["x", "pads"], ["p"]),
           h.make_node("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                       ceil_mode=1)],
          [vi("x", [1, 1, 3, 3])], [vi("y", [1, 1, 3, 3])],
          [nh.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")])
out, err = run("pad_pool_ceil", m, {"x": x7})
padded = np.pad(x7[0, 0].astype(np.float64), 1)
want = np.array([[padded[2 * i:2 * i + 2, 2 * j:2 * j + 2].mean() for j in range(3)]
                 for i in range(3)])
check("pad_pool_ceil", out is not None and out["output.y"].shape == (1, 1, 3, 3) and
      np.allclose(out["output.y"][0, 0], want, rtol=1e-5, atol=1e-6),
      err or "Pad then AveragePool ceil_mode=1: the window over the Pad's last zeros is kept")
# LSTM, GRU and RNN (issue 25) unrolled: each direction, layout 1, initial
# states given or not, GRU linear_before_reset 0 and 1, Y, Y_h and Y_c,
# against numpy written from ONNX's equations.
def sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def onnx_rnn(kind, X, W, R, B=None, h0=None, c0=None, direction="forward",
             layout=0, lbr=0, act=np.tanh):
    X = X.astype(np.float64)
    if layout:
        X = X.transpose(1, 0, 2)
        h0 = None if h0 is None else h0.transpose(1, 0, 2)
        c0 = None if c0 is None else c0.transpose(1, 0, 2)
    T, N = X.shape[0], X.shape[1]
    dirs, H = W.shape[0], R.shape[2]
    G = W.shape[1] // H
    Y = np.zeros((T, dirs, N, H))
    Yh, Yc = np.zeros((dirs, N, H)), np.zeros((dirs, N, H))
    for d in range(dirs):
        Wd, Rd = W[d].astype(np.float64), R[d].astype(np.float64)
        Bd = np.zeros(2 * G * H) if B is None else B[d].astype(np.float64)
        Wb, Rb = Bd[:G * H], Bd[G * H:]
        h = np.zeros((N, H)) if h0 is None else h0[d].astype(np.float64)
        c = np.zeros((N, H)) if c0 is None else c0[d].astype(np.float64)
        rev = direction == "reverse" or d == 1
        for t in (range(T - 1, -1, -1) if rev else range(T)):
            x = X[t]
            if kind == "LSTM":
                g = x @ Wd.T + h @ Rd.T + Wb + Rb
                i, o, f, u = (g[:, k * H:(k + 1) * H] for k in range(4))
                c = sigmoid(f) * c + sigmoid(i) * np.tanh(u)
                h = sigmoid(o) * np.tanh(c)
            elif kind == "GRU":
                gx = x @ Wd.T + Wb
                z = sigmoid(gx[:, :H] + h @ Rd[:H].T + Rb[:H])
                r = sigmoid(gx[:, H:2 * H] + h @ Rd[H:2 * H].T + Rb[H:2 * H])
                if lbr:
                    n = np.tanh(gx[:, 2 * H:] + r * (h @ Rd[2 * H:].T + Rb[2 * H:]))
                else:
                    n = np.tanh(gx[:, 2 * H:] + (r * h) @ Rd[2 * H:].T + Rb[2 * H:])
                h = (1 - z) * n + z * h
            else:
                h = act(x @ Wd.T + h @ Rd.T + Wb + Rb)
            Y[t, d] = h
        Yh[d], Yc[d] = h, c
    if layout:
        return Y.transpose(2, 0, 1, 3), Yh.transpose(1, 0, 2), Yc.transpose(1, 0, 2)
    return Y, Yh, Yc


def rnn_case(name, kind, dirs, T_, N, I, H, layout=0, direction="forward", bias=True,
             states=True, outs=("Y", "Y_h", "Y_c"), **attrs):
    G = {"LSTM": 4, "GRU": 3, "RNN": 1}[kind]
    Wv = (0.5 * rng.standard_normal((dirs, G * H, I))).astype(np.float32)
    Rv = (0.5 * rng.standard_normal((dirs, G * H, H))).astype(np.float32)
    Bv = (0.5 * rng.standard_normal((dirs, 2 * G * H))).astype(np.float32)
    xs = rng.standard_normal((N, T_, I) if layout else (T_, N, I)).astype(np.float32)
    sh = (N, dirs, H) if layout else (dirs, N, H)
    h0 = rng.standard_normal(sh).astype(np.float32)
    c0 = rng.standard_normal(sh).astype(np.float32)
    ins = ["x", "W", "R", "B" if bias else "", ""]
    feeds, decl = {"x": xs}, [vi("x", list(xs.shape))]
    if states:
        ins.append("h0")
        feeds["h0"], decl = h0, decl + [vi("h0", list(sh))]
        if kind == "LSTM":
            ins.append("c0")
            feeds["c0"], decl = c0, decl + [vi("c0", list(sh))]
    while not ins[-1]:
        ins.pop()
    names = ["Y", "Y_h", "Y_c"][:3 if kind == "LSTM" else 2]
    node = h.make_node(kind, ins, [n if n in outs else "" for n in names], name=name,
                       hidden_size=H, direction=direction, layout=layout, **attrs)
    yshape = {"Y": [N, T_, dirs, H] if layout else [T_, dirs, N, H],
              "Y_h": list(sh), "Y_c": list(sh)}
    inits = [nh.from_array(Wv, "W"), nh.from_array(Rv, "R")] + (
        [nh.from_array(Bv, "B")] if bias else [])
    m = model([node], decl, [vi(n, yshape[n]) for n in names if n in outs], inits)
    out, err = run(name, m, feeds)
    relu = attrs.get("activations") == ["Relu"] * dirs
    want = onnx_rnn(kind, xs, Wv, Rv, Bv if bias else None, h0 if states else None,
                    c0 if states and kind == "LSTM" else None, direction, layout,
                    attrs.get("linear_before_reset", 0),
                    (lambda v: np.maximum(v, 0)) if relu else np.tanh)
    ok = out is not None
    for k, n in enumerate(names):
        if ok and n in outs:
            got = out.get("output." + n)
            ok = got is not None and got.shape == want[k].shape and \
                np.allclose(got, want[k], rtol=1e-4, atol=1e-5)
    check(name, ok, err or f"{kind} {direction} layout={layout} "
          f"({', '.join(n for n in names if n in outs)}) "
          "matches ONNX's equations")


rnn_case("lstm_bidirectional_layout1", "LSTM", 2, 4, 2, 3, 2, layout=1,
         direction="bidirectional")
rnn_case("lstm_reverse_no_state", "LSTM", 1, 3, 2, 2, 3, direction="reverse",
         states=False, bias=False, outs=("Y", "Y_c"))
rnn_case("gru_reverse_lbr0", "GRU", 1, 4, 2, 3, 2, direction="reverse")
rnn_case("gru_bidirectional_lbr1_zero_state", "GRU", 2, 3, 3, 2, 2,
         direction="bidirectional", states=False, linear_before_reset=1, outs=("Y_h",))
rnn_case("gru_lbr0_zero_state_layout1", "GRU", 1, 3, 2, 2, 2, layout=1, states=False)
rnn_case("rnn_relu_reverse", "RNN", 1, 5, 2, 3, 4, direction="reverse",
         activations=["Relu"], states=False)
rnn_case("rnn_tanh_bidirectional", "RNN", 2, 3, 2, 3, 2, direction="bidirectional")


# Stacked layers as torch exports them: Y -> Squeeze(the directions axis)
# -> the next layer's X, which then reads each step's h directly; and the
# same with layout 1 and with the first Y also a graph output (built whole).
def stacked_case(name, layout, y1_out):
    T_, N, I, H = 4, 2, 3, 2
    ws = [(0.5 * rng.standard_normal(s)).astype(np.float32) for s in
          ((1, 4 * H, I), (1, 4 * H, H), (1, 8 * H), (1, 4 * H, H), (1, 4 * H, H), (1, 8 * H))]
    xs = rng.standard_normal((N, T_, I) if layout else (T_, N, I)).astype(np.float32)
    ax = nh.from_array(np.array([2 if layout else 1], np.int64), "ax")
    nodes = [h.make_node("LSTM", ["x", "W1", "R1", "B1"], ["y1", "", ""], name="/lstm/LSTM",
                         hidden_size=H, layout=layout),
             h.make_node("Squeeze", ["y1", "ax"], ["x2"], name="/lstm/Squeeze"),
             h.make_node("LSTM", ["x2", "W2", "R2", "B2"], ["y2", "", ""], name="/lstm/LSTM_1",
                         hidden_size=H, layout=layout)]
    y1s = [N, T_, 1, H] if layout else [T_, 1, N, H]
    outs = [vi("y2", y1s)] + ([vi("y1", y1s)] if y1_out else [])
    inits = [nh.from_array(w, n) for w, n in zip(ws, ["W1", "R1", "B1", "W2", "R2", "B2"])]
    m = model(nodes, [vi("x", list(xs.shape))], outs, inits + [ax])
    out, err = run(name, m, {"x": xs})
    y1 = onnx_rnn("LSTM", xs, ws[0], ws[1], ws[2], layout=layout)[0]
    y2 = onnx_rnn("LSTM", np.squeeze(y1, 2 if layout else 1), ws[3], ws[4], ws[5],
                  layout=layout)[0]
    ok = out is not None and np.allclose(out.get("output.y2", np.inf), y2, rtol=1e-4, atol=1e-5)
    if ok and y1_out:
        ok = np.allclose(out.get("output.y1", np.inf), y1, rtol=1e-4, atol=1e-5)
    xml = trainable(name, m) is not None and open(os.path.join(
        WORK, name + "_xml", name + ".xml")).read()
    # the second layer reads the first one's h_t: it slices no x_t from a
    # whole Y, where the first slices x
    sliced = not xml or 'name="/lstm.l1.t1/x' in xml or 'name="/lstm.l0.t1/x' not in xml
    check(name, ok and (y1_out or not sliced), err or f"two stacked LSTMs, layout={layout}"
          f"{', the first Y an output' if y1_out else ', no Slice of the first Y'}, "
          "match ONNX's equations")


stacked_case("lstm_stacked", 0, False)
stacked_case("lstm_stacked_layout1", 1, False)
stacked_case("lstm_stacked_y1_output", 0, True)

# Gather with constant indices of any shape (issue 25): a (1, 4) range as
# Hugging Face's position ids, a repeated negative index as token type ids
# of zeros, a range of negative indices: each as numpy's take.
table = rng.standard_normal((5, 3)).astype(np.float32)
for name, idx in (("gather_const_range_2d", [[1, 2, 3, 4]]),
                  ("gather_const_repeated", [[-1, -1], [-1, -1]]),
                  ("gather_const_negative_range", [[-3, -2]])):
    idx = np.array(idx, np.int64)
    xg = rng.standard_normal(idx.shape + (3,)).astype(np.float32)
    m = model([h.make_node("Gather", ["table", "idx"], ["g"]),
               h.make_node("Add", ["x", "g"], ["y"])],
              [vi("x", list(xg.shape))], [vi("y", list(xg.shape))],
              [nh.from_array(table, "table"), nh.from_array(idx, "idx")])
    out, err = run(name, m, {"x": xg})
    check(name, out is not None and np.array_equal(out["output.y"], xg + np.take(table, idx, axis=0)),
          err or f"constant indices {idx.tolist()} gather table's rows")

# Constant indices into computed data that are neither a range nor one
# index: along axis 0 a Gather of an int64 constant (issue 25), as numpy's
# take; along another axis refused in one line; into a constant table
# they fold.
m = model([h.make_node("Gather", ["t", "idx"], ["y"])],
          [vi("t", [5, 3])], [vi("y", [2, 2, 3])],
          [nh.from_array(np.array([[2, 0], [-1, 2]], np.int64), "idx")])
out, err = run("gather_const_scattered", m, {"t": table})
want = np.take(table, np.array([[2, 0], [-1, 2]]), axis=0)
check("gather_const_scattered", out is not None and np.array_equal(out["output.y"], want),
      err or "constant indices [[2, 0], [-1, 2]] gather table's rows through an int64 constant")
m = model([h.make_node("Gather", ["t", "idx"], ["y"], axis=1)],
          [vi("t", [5, 3])], [vi("y", [5, 2])],
          [nh.from_array(np.array([2, 0], np.int64), "idx")])
out, err = run("gather_const_scattered_axis1", m, {"t": table})
check("gather_const_scattered_axis1", out is None and "consecutive (a range) or all one index" in err
      and "\n" not in err, err or "compiled indices [2, 0] along axis 1")

# int64 and bool at run time: labels and a mask (int64 inputs) through
# Slice (the label shift), the comparisons, the logical ops, Where with a
# bool condition, Cast to float; against numpy.
labels = np.array([[3, 1, 0, 2], [1, 1, 2, 0]], np.int64)
maskv = np.array([[1, 1, 0, 1], [0, 1, 1, 1]], np.int64)
x24 = rng.standard_normal((2, 3)).astype(np.float32)
sl = [nh.from_array(np.array([v], np.int64), n) for v, n in
      ((1, "one"), (4, "four"), (0, "zero"), (3, "three"))]
m = model([h.make_node("Slice", ["labels", "one", "four", "one"], ["ls"]),
           h.make_node("Slice", ["mask", "zero", "three", "one"], ["ms"]),
           h.make_node("Equal", ["ls", "ms"], ["eq"]),
           h.make_node("Greater", ["ls", "ms"], ["gt"]),
           h.make_node("Not", ["gt"], ["ngt"]),
           h.make_node("And", ["eq", "ngt"], ["c1"]),
           h.make_node("LessOrEqual", ["ls", "ms"], ["le"]),
           h.make_node("Xor", ["c1", "le"], ["c2"]),
           h.make_node("Cast", ["ms"], ["mf"], to=T.FLOAT),
           h.make_node("Where", ["c2", "x", "mf"], ["y"])],
          [vi("x", [2, 3]), vi("labels", [2, 4], T.INT64), vi("mask", [2, 4], T.INT64)],
          [vi("y", [2, 3])], sl)
out, err = run("int_runtime", m, {"x": x24, "labels": labels, "mask": maskv})
ls_, ms_ = labels[:, 1:4], maskv[:, 0:3]
want = np.where(((ls_ == ms_) & ~(ls_ > ms_)) ^ (ls_ <= ms_), x24, ms_.astype(np.float32))
check("int_runtime", out is not None and np.array_equal(out["output.y"], want),
      err or "Slice, Equal, Greater, Not, And, LessOrEqual, Xor, Cast, Where on int64 inputs")

# int64 constants computed with int64 tensors (issue 25): ids against a
# constant pad id, labels plus row offsets (Mul, Add of an arange constant
# broadcast over rows), Sub, and Where of int64 values by a bool; numbers
# beyond 2^53 stay exact (int64, never through a double); against numpy.
ids = np.array([[4, 0, 7], [0, 2, 3]], np.int64)
big = np.array([[1 << 60, -(1 << 61), 3]], np.int64)
m = model([h.make_node("Equal", ["ids", "pad"], ["ispad"]),
           h.make_node("Mul", ["rows", "width"], ["off"]),
           h.make_node("Add", ["ids", "off"], ["flat"]),
           h.make_node("Sub", ["flat", "big"], ["d"]),
           h.make_node("Where", ["ispad", "minus1", "d"], ["w"]),
           h.make_node("Sub", ["w", "big"], ["back"]),
           h.make_node("Add", ["back", "big"], ["again"]),
           h.make_node("Equal", ["again", "w"], ["same"]),
           h.make_node("Cast", ["w"], ["wf"], to=T.FLOAT),
           h.make_node("Where", ["same", "wf", "x"], ["y"])],
          [vi("x", [2, 3]), vi("ids", [2, 3], T.INT64)],
          [vi("y", [2, 3]), vi("w", [2, 3], T.INT64), vi("ispad", [2, 3], T.BOOL)],
          [nh.from_array(np.array(0, np.int64), "pad"),
           nh.from_array(np.array([[0], [1]], np.int64), "rows"),
           nh.from_array(np.array(10, np.int64), "width"),
           nh.from_array(big, "big"),
           nh.from_array(np.array(-1, np.int64), "minus1")])
out, err = run("int64_arith", m, {"x": x24, "ids": ids})
w_ = np.where(ids == 0, -1, ids + np.array([[0], [1]]) * 10 - big)
want = w_.astype(np.float32)
ok = out is not None and np.array_equal(out["output.y"], want)
# the int64 and bool outputs: int64 files, exact (w holds values past 2^53)
ok = ok and out["output.w"].dtype == np.int64 and np.array_equal(out["output.w"], w_)
ok = ok and out["output.ispad"].dtype == np.int64 and np.array_equal(out["output.ispad"], ids == 0)
check("int64_arith", ok, err or "Equal with a constant, Mul, Add, Sub, Where on int64 inputs "
      "and constants; int64 and bool outputs")

# Bool constants read with computed bools (issue 25): a causal triangle
# And a padding mask made from int64 ids, Or, Xor and Equal with a
# constant row, Where choosing between a constant bool and a computed one;
# a bool constant as Where's condition over float32 X and Y; and one bool
# constant read both by And (as int64 0/1) and as Gather's data (float32
# 0/1, then a Where condition). Against numpy; the bool outputs exact.
tri = np.tril(np.ones((3, 3), bool))
rowc = np.array([True, False, True])
m = model([h.make_node("Equal", ["ids", "pad"], ["ispad"]),
           h.make_node("Not", ["ispad"], ["keep"]),                # (2, 3)
           h.make_node("Unsqueeze", ["keep", "ax1"], ["keep3"]),   # (2, 1, 3)
           h.make_node("And", ["tri", "keep3"], ["both"]),         # (2, 3, 3)
           h.make_node("Or", ["keep", "rowc"], ["or_"]),
           h.make_node("Xor", ["rowc", "keep"], ["xor_"]),
           h.make_node("Equal", ["rowc", "xor_"], ["eqb"]),
           h.make_node("Where", ["or_", "rowc", "eqb"], ["sel"]),
           h.make_node("Where", ["tri", "x33", "neg"], ["yt"]),
           h.make_node("Gather", ["tri", "pick"], ["trif"]),       # (2, 3, 3)
           h.make_node("Where", ["trif", "yt", "neg"], ["y2"]),
           h.make_node("Cast", ["both"], ["bothf"], to=T.FLOAT),
           h.make_node("Add", ["y2", "bothf"], ["y"])],
          [vi("x33", [3, 3]), vi("ids", [2, 3], T.INT64)],
          [vi("y", [2, 3, 3]), vi("both", [2, 3, 3], T.BOOL), vi("sel", [2, 3], T.BOOL)],
          [nh.from_array(np.array(0, np.int64), "pad"),
           nh.from_array(np.array([1], np.int64), "ax1"),
           nh.from_array(tri, "tri"), nh.from_array(rowc, "rowc"),
           nh.from_array(np.array(-5.0, np.float32), "neg")])
x33 = rng.standard_normal((3, 3)).astype(np.float32)
pick = np.array([[2, 0, 1], [1, 1, 0]], np.int64)
m.graph.input.append(vi("pick", [2, 3], T.INT64))
out, err = run("bool_constants", m, {"x33": x33, "ids": ids, "pick": pick})
keep_ = ids != 0
both_ = tri & keep_[:, None, :]
or_, xor_ = keep_ | rowc, rowc ^ keep_
sel_ = np.where(or_, rowc, rowc == xor_)
yt_ = np.where(tri, x33, np.float32(-5))
want = np.where(tri[pick], yt_, np.float32(-5)) + both_.astype(np.float32)
ok = out is not None and np.array_equal(out["output.y"], want)
ok = ok and out["output.both"].dtype == np.int64 and np.array_equal(out["output.both"], both_)
ok = ok and np.array_equal(out["output.sel"], sel_)
check("bool_constants", ok, err or "bool constants with computed bools (And, Or, Xor, "
      "Equal, Where of bools), as a float32 Where's condition and Gather's data")

# A Cast of a computed float32 tensor to an integer is refused in one line.
m = model([h.make_node("Cast", ["x"], ["xi"], to=T.INT64),
           h.make_node("Cast", ["xi"], ["y"], to=T.FLOAT)],
          [vi("x", [2, 3])], [vi("y", [2, 3])])
out, err = run("cast_float_to_int", m, {"x": x})
check("cast_float_to_int", out is None and "Cast of a computed float32 tensor to int64" in err
      and "\n" not in err, err or "compiled a float to int64 Cast")

# Cast of a computed int64 tensor to bool is x != 0 (two Nots), for any
# value, which the trainer's checks accept (nonzero is true).
codes = np.array([[0, 3, -2], [1, 0, 7]], np.int64)
m = model([h.make_node("Cast", ["codes"], ["b"], to=T.BOOL),
           h.make_node("Where", ["b", "x", "zero"], ["y"])],
          [vi("x", [2, 3]), vi("codes", [2, 3], T.INT64)], [vi("y", [2, 3])],
          [nh.from_array(np.array(0.5, np.float32), "zero")])
out, err = run("cast_int_to_bool", m, {"x": x24, "codes": codes})
check("cast_int_to_bool", out is not None and np.array_equal(out["output.y"], np.where(codes != 0, x24, 0.5)),
      err or "Cast to bool of int64 codes selects where they are nonzero")

# Einsum (issue 25) is lowered at import into ReduceSum, Transpose,
# Reshape and MatMul: each equation's output against numpy.einsum and the
# gradients of sum(einsum * R) with respect to every operand (trainable
# initializers) against torch.einsum's autograd in float64. Implicit
# outputs (sorted, uppercase first), '...' broadcast across inputs of
# different ranks, a dimension of 1 broadcast, three operands, a scalar.
import torch  # noqa: E402

EINSUM_CASES = [
    ("ij->ji", [(3, 4)]), ("ij->i", [(3, 4)]), ("ij->", [(3, 4)]),
    ("ji", [(3, 4)]), ("ij->ij", [(2, 3)]),
    ("bij, bjk -> bik", [(5, 2, 3), (5, 3, 4)]), ("i,i", [(5,), (5,)]),
    ("bi,bi->b", [(4, 5), (4, 5)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("bhqk,bhkd->bhqd", [(2, 3, 4, 6), (2, 3, 6, 5)]), ("bnd,dk->bnk", [(2, 3, 4), (4, 5)]),
    ("...ij->...ji", [(2, 3, 4, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),
    ("...i,i", [(4, 2, 3), (3,)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("i,j->ij", [(3,), (4,)]), ("ij,ij->ij", [(1, 3), (2, 3)]),
    ("abc,cd->", [(2, 3, 4), (4, 5)]), ("bik,bkj->bji", [(2, 3, 4), (2, 4, 5)]),
    ("ijk,jil->kl", [(2, 3, 4), (3, 2, 5)]), ("Ab,bc", [(2, 3), (3, 4)]),
    ("a,b,c->", [(2,), (3,), (4,)]), ("i,->i", [(3,), ()]),
]
for k, (eq, shapes) in enumerate(EINSUM_CASES):
    name = f"einsum_{k}"
    ws = [rng.standard_normal(sh).astype(np.float32) for sh in shapes]
    want = np.einsum(eq.replace(" ", ""), *[w.astype(np.float64) for w in ws])
    R = rng.standard_normal(want.shape).astype(np.float32)
    names = [f"w{i}" for i in range(len(ws))]
    m = model([h.make_node("Einsum", names, ["y"], equation=eq),
               h.make_node("Mul", ["y", "R"], ["z"]),
               h.make_node("ReduceSum", ["z"], ["loss"], keepdims=0)],
              [vi("R", list(R.shape))], [vi("loss", []), vi("y", list(want.shape))],
              [nh.from_array(w, n) for n, w in zip(names, ws)])
    out, err = run(name, m, {"R": R}, dict(zip(names, ws)))
    tw = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in ws]
    (torch.einsum(eq.replace(" ", ""), *tw) * torch.tensor(R, dtype=torch.float64)).sum().backward()
    ok = out is not None and out["output.y"].shape == want.shape and \
        np.allclose(out["output.y"], want, rtol=1e-5, atol=1e-5)
    for n, t in zip(names, tw):
        ok = ok and np.allclose(out[f"grad.{n}"], t.grad.numpy(), rtol=1e-5, atol=1e-5)
    check(name, ok, err or f"Einsum '{eq}' of {shapes}: output and gradients")

# Einsum with a letter twice in a term (a diagonal, a trace) is refused in
# one line naming the equation.
m = model([h.make_node("Einsum", ["x"], ["y"], equation="...ii->...i")],
          [vi("x", [3, 5, 5])], [vi("y", [3, 5])])
out, err = run("einsum_diagonal", m, {"x": rng.standard_normal((3, 5, 5)).astype(np.float32)})
check("einsum_diagonal", out is None and "equation '...ii->...i' repeats 'i' in input 0" in err
      and "\n" not in err, err or "compiled a diagonal")

# ArgMax (issue 25) feeding an int64 consumer, as a user counts accuracy
# beside the loss: (logits.argmax(-1) == labels).float().mean(), against
# numpy; the weights still train through the loss alone.
xa = rng.standard_normal((6, 3)).astype(np.float32)
la = np.array([0, 2, 1, 1, 0, 2], np.int64)
m = model([h.make_node("MatMul", ["x", "W"], ["logits"]),
           h.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"], ["loss"]),
           h.make_node("ArgMax", ["logits"], ["pred"], axis=-1, keepdims=0),
           h.make_node("Equal", ["pred", "labels"], ["hit"]),
           h.make_node("Cast", ["hit"], ["hitf"], to=T.FLOAT),
           h.make_node("ReduceMean", ["hitf"], ["acc"], keepdims=0)],
          [vi("x", [6, 3]), vi("labels", [6], T.INT64)], [vi("loss", []), vi("acc", [])],
          [nh.from_array(W, "W")])
out, err = run("argmax_accuracy", m, {"x": xa, "labels": la}, {"W": W})
want = np.mean((xa @ W).argmax(-1) == la)
check("argmax_accuracy", out is not None and out["output.acc"] == np.float32(want) and
      0 < want < 1 and "grad.W" in out,
      err or f"accuracy {want} by ArgMax, Equal, Cast, ReduceMean; W trains")
# issue 25: CumSum's axis input (int32, negative) with exclusive and
# reverse, against numpy: y[k] = sum of x[j] over j > k along the last axis.
x25 = rng.standard_normal((3, 5)).astype(np.float32)
m = model([h.make_node("CumSum", ["x", "ax"], ["y"], exclusive=1, reverse=1)],
          [vi("x", [3, 5])], [vi("y", [3, 5])],
          [nh.from_array(np.array(-1, np.int32), "ax")])
out, err = run("cumsum_exclusive_reverse", m, {"x": x25})
want = np.flip(np.cumsum(np.flip(x25.astype(np.float64), 1), 1), 1) - x25
check("cumsum_exclusive_reverse", out is not None and np.allclose(out["output.y"], want,
                                                                  rtol=1e-5, atol=1e-6),
      err or "CumSum axis=-1 (an int32 input) exclusive=1 reverse=1 sums the later entries")

# OneHot with a float depth, float values [off, on] and axis 1, of int64
# indices with a negative one, against numpy.
ids = np.array([[0, 3, -1], [2, -4, 1]], np.int64)
m = model([h.make_node("OneHot", ["ids", "depth", "vals"], ["y"], axis=1)],
          [vi("ids", [2, 3], T.INT64)], [vi("y", [2, 4, 3])],
          [nh.from_array(np.array([4.0], np.float32), "depth"),
           nh.from_array(np.array([-1.0, 5.0], np.float32), "vals")])
out, err = run("one_hot_axis_values", m, {"ids": ids})
want = np.where(np.arange(4)[None, :, None] == (ids % 4)[:, None, :], 5.0, -1.0)
check("one_hot_axis_values", out is not None and np.array_equal(out["output.y"], want),
      err or "OneHot axis=1 depth 4.0 values [-1, 5] with negative indices")

# GatherElements along axis -1 with indices narrower than the data and
# negative ones, against numpy's take_along_axis.
x26 = rng.standard_normal((3, 4)).astype(np.float32)
gi = np.array([[0, -1], [3, 3], [-4, 2]], np.int64)
m = model([h.make_node("GatherElements", ["x", "gi"], ["y"], axis=-1)],
          [vi("x", [3, 4]), vi("gi", [3, 2], T.INT64)], [vi("y", [3, 2])])
out, err = run("gather_elements_negative", m, {"x": x26, "gi": gi})
check("gather_elements_negative", out is not None and np.array_equal(
          out["output.y"], np.take_along_axis(x26, gi % 4, axis=-1)),
      err or "GatherElements axis=-1, negative and repeated indices")

# Tile of an int64 input (passed on as int64, then Cast), against np.tile.
ti = np.array([[1, -2, 3], [40, 5, 6]], np.int64)
m = model([h.make_node("Tile", ["ti", "reps"], ["t"]),
           h.make_node("Cast", ["t"], ["y"], to=T.FLOAT)],
          [vi("ti", [2, 3], T.INT64)], [vi("y", [4, 9])],
          [nh.from_array(np.array([2, 3], np.int64), "reps")])
out, err = run("tile_int64", m, {"ti": ti})
check("tile_int64", out is not None and np.array_equal(out["output.y"], np.tile(ti, (2, 3))),
      err or "Tile of int64 by (2, 3) is np.tile")

sys.exit(1 if failures else 0)
