# Writes a small training graph (binary ONNX) whose node, value and parameter
# names are 50 000 characters long: the name patterns of mpc-opt's flags
# must match them without a recursive regex's stack overflow.
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

n = "a" * 50000
w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), n + "w")
b = numpy_helper.from_array(np.zeros(2, dtype=np.float32), "b")
nodes = [
    helper.make_node("Gemm", ["x", n + "w", "b"], [n + "y"], name=n + "gemm"),
    helper.make_node("Sub", [n + "y", "t"], ["d"], name="sub"),
    helper.make_node("Mul", ["d", "d"], ["sq"], name="mul"),
    helper.make_node("ReduceMean", ["sq"], ["loss"], name="mean", keepdims=0),
]
graph = helper.make_graph(
    nodes, "long_names",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
     helper.make_tensor_value_info("t", TensorProto.FLOAT, [4, 2])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [w, b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
