"""Writes a training model whose one value has N consumers (fan-out).

  make_fan_out_model.py N sum|concat|add OUT.onnx

h = x * w feeds N Relu nodes; their outputs meet in one Sum (sum), one
Concat (concat) or a chain of N - 1 Adds (add); the loss is the ReduceSum of
that. Compiling it must take time linear in N (autodiff's accumulation of
h's N gradient contributions, and every pass after it).
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

n, kind, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
nodes = [helper.make_node("Mul", ["x", "w"], ["h"], name="scale")]
relus = []
for i in range(n):
    nodes.append(helper.make_node("Relu", ["h"], ["r%d" % i], name="relu%d" % i))
    relus.append("r%d" % i)
if kind == "sum":
    nodes.append(helper.make_node("Sum", relus, ["s"], name="sum"))
elif kind == "concat":
    nodes.append(helper.make_node("Concat", relus, ["s"], name="concat", axis=0))
elif kind == "add":
    prev = relus[0]
    for i in range(1, n):
        nodes.append(helper.make_node("Add", [prev, relus[i]], ["a%d" % i], name="add%d" % i))
        prev = "a%d" % i
    nodes.append(helper.make_node("Identity", [prev], ["s"], name="last"))
else:
    sys.exit("kind: sum, concat or add, not " + kind)
nodes.append(helper.make_node("ReduceSum", ["s"], ["loss"], name="loss", keepdims=0))
graph = helper.make_graph(
    nodes, "fan_out",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.array([0.5, -1.0, 2.0, 0.25], np.float32), "w")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, out)
