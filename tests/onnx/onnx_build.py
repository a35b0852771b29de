"""Building small ONNX models by hand (onnx.helper), for the catalogue's
cases (make_bad_models.py) and the importer's semantics test
(import_semantics.py)."""
from onnx import TensorProto as T, helper as h


def model(nodes, inputs, outputs, inits=(), opset=17):
    """A ModelProto of one graph at the given opset (IR version 8)."""
    g = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def vi(name, shape, t=T.FLOAT):
    """A graph input's or output's declaration."""
    return h.make_tensor_value_info(name, t, shape)
