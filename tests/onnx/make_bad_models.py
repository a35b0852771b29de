"""Writes the error catalogue's ONNX cases (tests/bad/onnx_*.onnx): each a
small model with one thing wrong. Run from the repository root after
changing a case: /usr/bin/python3 tests/onnx/make_bad_models.py"""
import os

import numpy as np
import onnx
from onnx import TensorProto as T, helper as h, numpy_helper as nh

from onnx_build import model, vi

OUT = "tests/bad"


def save(name, m):
    onnx.save(m, os.path.join(OUT, name + ".onnx"))


x = vi("x", [2, 3])
y = vi("y", [2, 3])
relu = [h.make_node("Relu", ["x"], ["y"], name="act")]

good = model(relu, [x], [y]).SerializeToString()
with open(os.path.join(OUT, "onnx_truncated.onnx"), "wb") as f:
    f.write(good[: len(good) // 2 + 3])
save("onnx_unknown_op", model([h.make_node("Foo", ["x"], ["y"], name="mystery")],
                              [x], [y]))
save("onnx_folded_only_op", model([h.make_node("Floor", ["x"], ["y"], name="round_down")],
                                  [x], [y]))
save("onnx_dynamic_dim", model(relu, [vi("x", ["batch", 3])], [vi("y", ["batch", 3])]))
save("onnx_float16_input", model(relu, [vi("x", [2, 3], T.FLOAT16)], [y]))
save("onnx_undefined_input", model([h.make_node("Add", ["x", "z"], ["y"], name="sum")],
                                   [x], [y]))
ext = nh.from_array(np.ones((2, 3), np.float32), "w")
ext.ClearField("raw_data")
ext.data_location = T.EXTERNAL
ext.external_data.add(key="location", value="onnx_missing.bin")
save("onnx_external_missing", model([h.make_node("Mul", ["x", "w"], ["y"], name="scale")],
                                    [x], [y], [ext]))
save("onnx_mask_read", model([h.make_node("Dropout", ["x"], ["y", "mask"], name="drop")],
                             [x], [y, vi("mask", [2, 3], T.BOOL)]))
save("onnx_shape_mismatch", model([h.make_node("Add", ["x", "b"], ["y"], name="bias")],
                                  [x], [y], [nh.from_array(np.zeros(4, np.float32), "b")]))
save("onnx_domain", model([h.make_node("Gelu", ["x"], ["y"], name="g", domain="com.microsoft")],
                          [x], [y]))
save("onnx_output_constant", model([h.make_node("Shape", ["x"], ["s"], name="shape")],
                                   [x], [vi("s", [2], T.INT64)]))
save("onnx_int_as_data", model([h.make_node("Add", ["x", "k"], ["y"], name="plus")],
                               [x], [y], [nh.from_array(np.ones(3, np.int64), "k")]))
save("onnx_bad_attribute", model([h.make_node("Softmax", ["x"], ["y"], name="sm", axis=1,
                                              bogus=3)], [x], [y]))
save("onnx_nan_constant", model([h.make_node("Mul", ["x", "w"], ["y"], name="scale")],
                                [x], [y], [nh.from_array(np.full(3, np.nan, np.float32), "w")]))
# found by a review of the importer
c23 = nh.from_array(np.ones((2, 3), np.float32), "c")
save("onnx_transpose_perm", model([h.make_node("Transpose", ["c"], ["t"], name="swap", perm=[0, 0]),
                                   h.make_node("Add", ["x", "t"], ["y"], name="sum")],
                                  [x], [y], [c23]))
save("onnx_node_no_output", model([h.make_node("Add", ["x", "x"], [], name="lost"),
                                   h.make_node("Relu", ["x"], ["y"], name="act")], [x], [y]))
save("onnx_softmax_opset11", model([h.make_node("Softmax", ["x3"], ["y3"], name="sm")],
                                   [vi("x3", [2, 3, 4])], [vi("y3", [2, 3, 4])], opset=11))
save("onnx_concat_mismatch", model([h.make_node("Concat", ["c", "d"], ["cd"], name="join", axis=0),
                                    h.make_node("ReduceSum", ["cd"], ["s"], name="r", keepdims=0),
                                    h.make_node("Add", ["x", "s"], ["y"], name="sum")],
                                   [x], [y], [c23, nh.from_array(np.ones((2, 4), np.float32), "d")]))
# Clip's bounds are inputs in ONNX, attributes in remat: constants only
save("onnx_clip_varying_min", model([h.make_node("Clip", ["x", "lo"], ["y"], name="clamp")],
                                    [x, vi("lo", [])], [y]))
save("onnx_clip_inf_min", model([h.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clamp")],
                                [x], [y], [nh.from_array(np.array(np.inf, np.float32), "lo"),
                                           nh.from_array(np.array(6, np.float32), "hi")]))
# an opset newer than the definitions the importer follows
save("onnx_opset_too_new", model(relu, [x], [y], opset=19))
# Reshape's shape input with an entry whose product with the next passes
# a long (the ONNX fuzzer's find): refused by size, no overflow
save("onnx_reshape_overflow", model(
    [h.make_node("Reshape", ["x", "s"], ["r"], name="reshape")], [x],
    [vi("r", None)],
    [nh.from_array(np.array([1400000000000000000, 32], np.int64), "s")]))
# Pad's pads and constant_value are inputs in ONNX, attributes in remat:
# constants only (issue 25); and opset 18's GroupNormalization, whose scale
# and bias are per group, where that differs from per channel
save("onnx_pad_varying_pads", model([h.make_node("Pad", ["x", "p"], ["y"], name="pad")],
                                    [x, vi("p", [4], T.INT64)], [vi("y", [3, 5])]))
save("onnx_pad_varying_value", model([h.make_node("Pad", ["x", "p", "v"], ["y"], name="pad")],
                                     [x, vi("v", [])], [vi("y", [3, 5])],
                                     [nh.from_array(np.array([0, 1, 1, 1], np.int64), "p")]))
save("onnx_groupnorm_per_group",
     model([h.make_node("GroupNormalization", ["x4", "s", "b"], ["y4"], name="gn", num_groups=2)],
           [vi("x4", [2, 4, 3])], [vi("y4", [2, 4, 3])],
           [nh.from_array(np.ones(2, np.float32), "s"), nh.from_array(np.zeros(2, np.float32), "b")],
           opset=18))
# issue 25: recurrent layers unroll with ONNX's default activations only;
# what would compute something else is refused, naming node and attribute
xs = vi("xs", [5, 2, 3])
hn = vi("hn", [1, 2, 2])
rw = nh.from_array(np.full((1, 8, 3), 0.1, np.float32), "W")
rr = nh.from_array(np.full((1, 8, 2), 0.1, np.float32), "R")
save("onnx_lstm_clip", model([h.make_node("LSTM", ["xs", "W", "R"], ["", "hn"], name="lstm",
                                          hidden_size=2, clip=3.0)], [xs], [hn], [rw, rr]))
save("onnx_lstm_sequence_lens", model(
    [h.make_node("LSTM", ["xs", "W", "R", "", "lens"], ["", "hn"], name="lstm", hidden_size=2)],
    [xs], [hn], [rw, rr, nh.from_array(np.array([5, 3], np.int32), "lens")]))
save("onnx_lstm_peepholes", model(
    [h.make_node("LSTM", ["xs", "W", "R", "", "", "", "", "P"], ["", "hn"], name="lstm",
                 hidden_size=2)],
    [xs], [hn], [rw, rr, nh.from_array(np.full((1, 6), 0.5, np.float32), "P")]))
save("onnx_gru_activation", model(
    [h.make_node("GRU", ["xs", "Wg", "Rg"], ["", "hn"], name="gru", hidden_size=2,
                 activations=["Sigmoid", "Relu"])],
    [xs], [hn], [nh.from_array(np.full((1, 6, 3), 0.1, np.float32), "Wg"),
                 nh.from_array(np.full((1, 6, 2), 0.1, np.float32), "Rg")]))
# Resize's scales and sizes are inputs in ONNX, its output shape in remat:
# constants only; what remat does not compute exactly is refused (issue 25)
x4, y4 = vi("x4", [1, 1, 2, 2]), vi("y4", [1, 1, 4, 4])
scales2 = nh.from_array(np.array([1, 1, 2, 2], np.float32), "sc")
save("onnx_resize_varying_scales", model([h.make_node("Resize", ["x4", "", "sc"], ["y4"], name="up")],
                                         [x4, vi("sc", [4])], [y4]))
save("onnx_resize_antialias", model([h.make_node("Resize", ["x4", "", "sc"], ["y4"], name="up",
                                                 mode="linear", antialias=1)],
                                    [x4], [y4], [scales2], opset=18))
save("onnx_resize_crop", model([h.make_node("Resize", ["x4", "", "sc"], ["y4"], name="up",
                                            coordinate_transformation_mode="tf_crop_and_resize")],
                               [x4], [y4], [scales2]))
save("onnx_resize_opset10", model([h.make_node("Resize", ["x4", "sc"], ["y4"], name="up")],
                                  [x4], [y4], [scales2], opset=10))
save("onnx_upsample_linear", model([h.make_node("Upsample", ["x4", "sc"], ["y4"], name="up",
                                               mode="linear")],
                                   [x4], [y4], [scales2], opset=9))
# An empty string attribute (protobuf may hand its data over as NULL; the
# fuzzer found the copy of it undefined): refused, naming what is taken
save("onnx_empty_string_attribute", model([h.make_node("Resize", ["x4", "", "sc"], ["y4"], name="up",
                                                       mode="")],
                                          [x4], [y4], [scales2]))
# Einsum is lowered at import (issue 25): a letter twice in a term (a
# diagonal or a trace) is refused, and so are sizes that do not broadcast
save("onnx_einsum_diagonal", model([h.make_node("Einsum", ["sq"], ["d"], name="diag",
                                                equation="ii->i")],
                                   [vi("sq", [3, 3])], [vi("d", [3])]))
save("onnx_einsum_sizes", model([h.make_node("Einsum", ["x", "w"], ["y"], name="proj",
                                             equation="ij,jk->ik")],
                                [x], [vi("y", [2, 4])],
                                [nh.from_array(np.ones((4, 4), np.float32), "w")]))
# A Split of a constant folds (issue 25); equal parts that do not divide
# the axis are opset 18's rule, refused before it
save("onnx_split_const_uneven", model(
    [h.make_node("Split", ["c5"], ["s0", "s1"], name="cut", axis=0),
     h.make_node("Concat", ["s0", "s0"], ["s2"], name="join", axis=0),
     h.make_node("Add", ["x6", "s2"], ["y6"], name="plus")],
    [vi("x6", [6])], [vi("y6", [6])],
    [nh.from_array(np.arange(5, dtype=np.float32), "c5")]))
