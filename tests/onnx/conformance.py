"""The ONNX backend node tests (Debian's libonnx-testdata) through remat.

Usage: conformance.py REMAT WORK_DIR EXPECTED_FAILURES [-j N] [TEST ...]

Runs every node test under /usr/include/onnx/backend/test/data/node/ whose
ops are all ones remat computes or folds and whose tensors are all float32,
int64 or bool, or float64 in a test without a Cast: `remat build` of the model, then the trainer's
`--load DIR --dump OUT` on the test's inputs, and its output.NAME.npy files
against the test's expected outputs (numpy.allclose, rtol 1e-4, atol 1e-5).

remat compiles static shapes, so an int64 input that an op takes as a
shape, axes, starts, ends, steps or sizes (Reshape's shape, Slice's
starts, ...) is made an initializer holding the test's own value before
the build. remat's bools are int64 0 and 1 (docs/ops.md), and the runner
compares float32 files, so a bool or int64 output gets a Cast to float32 after it,
and its values are compared (exact for bools and for integers below 2^24),
and a bool input's file holds int64 0 and 1. remat computes in float32,
so a float64 test (Einsum's, Max's and Min's; not a Cast's, whose type is
its subject) has its float64 inputs, outputs and initializers made
float32 and its inputs rounded to float32, and is compared at the same
tolerance with its float64 outputs. Those are the changes made to a test.

The counts come in two groups: tests whose ops are all rows of remat's op
table (the ops it computes: the 90% target is over these), and tests that
use an op remat only folds on constants (Shape, Size, Constant,
ConstantOfShape, Range, Trilu), which the node tests apply to
graph inputs and whose outputs are often int64 (remat's outputs are
float32).

Prints one line per failing test and the counts. Exits 1 when a test fails
that EXPECTED_FAILURES does not list (each line there: the test's name, a
tab or spaces, and why), or when a listed test passes (the list is stale).
"""
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import numpy_helper

NODE_DIR = "/usr/include/onnx/backend/test/data/node"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOAT, INT64, BOOL, DOUBLE = (onnx.TensorProto.FLOAT, onnx.TensorProto.INT64,
                              onnx.TensorProto.BOOL, onnx.TensorProto.DOUBLE)

# Inputs an op reads as compile-time constants: (op, input index).
CONST_INPUTS = {
    "Reshape": {1}, "Unsqueeze": {1}, "Squeeze": {1}, "Expand": {1},
    "Slice": {1, 2, 3, 4}, "Split": {1}, "ReduceSum": {1}, "ReduceMean": {1},
    "Dropout": {1, 2}, "ConstantOfShape": {0}, "Range": {0, 1, 2},
    "Tile": {1}, "Trilu": {1}, "Clip": {1, 2}, "Pad": {1, 2, 3},
    "Resize": {1, 2, 3},
    "CumSum": {1}, "OneHot": {1, 2},
    # remat holds running statistics as state (parameters the train step
    # updates), not as inputs
    "BatchNormalization": {3, 4},
}
# Ops the importer takes beyond the op table's: those of the shape and
# mask subgraphs torch emits, folded when their inputs are constants (the
# rest of what onnx_eval.c folds, Max or Floor say, appears in no such
# subgraph torch writes and is no op of remat's).
FOLDED = {"Constant", "Shape", "Size", "ConstantOfShape", "Range", "Trilu"}
# Ops the importer unrolls or lowers into the op table's
# (compiler/front/onnx_rnn.c, Einsum in onnx_rewrite.c): computed, forward
# and backward, so their tests count as computed ops'.
LOWERED = {"LSTM", "GRU", "RNN", "Einsum"}


def supported_ops():
    """The ONNX names of the op table's rows (compiler/ops/ops.c)."""
    text = open(os.path.join(ROOT, "compiler", "ops", "ops.c")).read()
    names = set(re.findall(r'\[OP_\w+\]\s*=\s*(?:\{|BINARY\(|UNARY\(|UNARY_ATTRS\(|'
                           r'COMPARE\(|LOGIC\()\s*"(\w+)"', text))
    return names


def tensor_types(model):
    g = model.graph
    for v in list(g.input) + list(g.output):
        yield v.type.tensor_type.elem_type
    for t in g.initializer:
        yield t.data_type


def eligible(path, ops):
    model = onnx.load(os.path.join(path, "model.onnx"))
    kinds = {n.op_type for n in model.graph.node}
    if not kinds or not kinds <= ops:
        return None
    casts = kinds & {"Cast", "CastLike"}
    if any(t not in (FLOAT, INT64, BOOL) and (t != DOUBLE or casts)
           for t in tensor_types(model)):
        return None
    return model


def float64_to_float32(model):
    """A float64 test's declared inputs, outputs and initializers as
    float32 (remat computes in float32; eligible() took no Cast)."""
    g = model.graph
    for v in list(g.input) + list(g.output) + list(g.value_info):
        if v.type.tensor_type.elem_type == DOUBLE:
            v.type.tensor_type.elem_type = FLOAT
    for k, t in enumerate(g.initializer):
        if t.data_type == DOUBLE:
            g.initializer[k].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float32), t.name))


def folds_only(path):
    """The test uses an op that remat folds but does not compute."""
    model = onnx.load(os.path.join(path, "model.onnx"))
    return any(n.op_type in FOLDED for n in model.graph.node)


def fname(name):
    return name.replace("/", "%2F")


def run_one(args):
    remat, work, name, ops = args
    src = os.path.join(NODE_DIR, name)
    model = eligible(src, ops)
    if model is None:
        return name, None, ""
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(os.path.join(d, "in"))
    data = os.path.join(src, "test_data_set_0")
    inputs = [i.name for i in model.graph.input
              if i.name not in {t.name for t in model.graph.initializer}]
    values = {}
    for k, n in enumerate(inputs):
        t = onnx.TensorProto()
        with open(os.path.join(data, f"input_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        values[n] = numpy_helper.to_array(t)
        if values[n].dtype == np.float64:
            values[n] = values[n].astype(np.float32)
    # shape-like int64 inputs become initializers holding the test's value
    const = set()
    for node in model.graph.node:
        for i, n in enumerate(node.input):
            if i in CONST_INPUTS.get(node.op_type, ()) and n in values:
                const.add(n)
    for n in sorted(const):
        model.graph.initializer.append(numpy_helper.from_array(values[n], n))
    float64_to_float32(model)
    keep = [i for i in model.graph.input if i.name not in const]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    # an integer or bool output: a Cast to float32 after it, same name
    for o in model.graph.output:
        if o.type.tensor_type.elem_type == FLOAT:
            continue
        inner = o.name + "__int"
        for node in model.graph.node:
            node.output[:] = [inner if x == o.name else x for x in node.output]
            node.input[:] = [inner if x == o.name else x for x in node.input]
        model.graph.node.append(onnx.helper.make_node("Cast", [inner], [o.name], to=FLOAT))
        o.type.tensor_type.elem_type = FLOAT
    onnx.save(model, os.path.join(d, "model.onnx"))
    for n, v in values.items():
        if n not in const:
            np.save(os.path.join(d, "in", f"input.{fname(n)}.npy"),
                    v.astype(np.int64) if v.dtype == np.bool_ else v)
    r = subprocess.run([remat, "build", os.path.join(d, "model.onnx"), "-o",
                        os.path.join(d, "trainer")], capture_output=True, text=True)
    if r.returncode:
        return name, False, "build: " + r.stderr.strip().splitlines()[-1][:300]
    r = subprocess.run([os.path.join(d, "trainer"), "--load", os.path.join(d, "in"),
                        "--dump", os.path.join(d, "out")], capture_output=True,
                       text=True)
    if r.returncode:
        return name, False, "run: " + (r.stderr.strip() or r.stdout.strip())[:300]
    for k, o in enumerate(model.graph.output):
        t = onnx.TensorProto()
        with open(os.path.join(data, f"output_{k}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        want = numpy_helper.to_array(t)
        path = os.path.join(d, "out", f"output.{fname(o.name)}.npy")
        if not os.path.exists(path):
            return name, False, f"no output.{o.name}.npy"
        got = np.load(path)
        if got.shape != want.shape and got.size == want.size == 1:
            got = got.reshape(want.shape)
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-4,
                                                        atol=1e-5):
            err = np.abs(got.astype(np.float64) - want).max() if got.shape == want.shape else "shape"
            return name, False, f"output {o.name}: {got.shape} vs {want.shape}, max error {err}"
    shutil.rmtree(d, ignore_errors=True)
    return name, True, ""


def main(argv):
    remat, work, expected_file = argv[:3]
    rest = argv[3:]
    jobs = 2
    if rest[:1] == ["-j"]:
        jobs, rest = int(rest[1]), rest[2:]
    expected = {}
    for line in open(expected_file):
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, why = line.partition(" ")
            expected[name] = why.strip()
    ops = supported_ops() | FOLDED | LOWERED
    names = rest or sorted(os.listdir(NODE_DIR))
    passed, failed, unexpected, stale = [], [], [], []
    group = {True: [0, 0], False: [0, 0]}   # folds only -> [passed, run]
    with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
        for name, ok, why in ex.map(run_one, [(remat, work, n, ops) for n in names]):
            if ok is None:
                continue
            g = group[folds_only(os.path.join(NODE_DIR, name))]
            g[0] += ok
            g[1] += 1
            (passed if ok else failed).append(name)
            if not ok:
                print(f"fail {name}: {why}")
                if name not in expected:
                    unexpected.append(name)
            elif name in expected:
                stale.append(name)
    total = len(passed) + len(failed)
    print(f"onnx node tests: {len(passed)} of {total} eligible passed "
          f"({100.0 * len(passed) / max(total, 1):.1f}%), {len(failed)} failed")
    for folds, what in ((False, "computed ops"), (True, "folded ops")):
        p, n = group[folds]
        print(f"onnx node tests of {what}: {p} of {n} passed "
              f"({100.0 * p / max(n, 1):.1f}%)")
    for n in unexpected:
        print(f"FAIL {n}: fails and is not in {expected_file}")
    for n in stale:
        print(f"FAIL {n}: passes but {expected_file} lists it as failing")
    return 1 if unexpected or stale or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
