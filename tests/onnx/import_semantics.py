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
# index are refused in one line (they would need an int64 constant in the
# IR); into a constant table they fold.
m = model([h.make_node("Gather", ["t", "idx"], ["y"])],
          [vi("t", [5, 3])], [vi("y", [2, 3])],
          [nh.from_array(np.array([2, 0], np.int64), "idx")])
out, err = run("gather_const_scattered", m, {"t": table})
check("gather_const_scattered", out is None and "consecutive (a range) or all one index" in err
      and "\n" not in err, err or "compiled indices [2, 0]")

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

sys.exit(1 if failures else 0)
