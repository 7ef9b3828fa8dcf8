# Writes the seed-like MLP (x[4,3] -> Gemm -> ReduceMean) without an
# opset_import, and with one for another domain only: neither says which
# ONNX opset its ops follow.
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
w = numpy_helper.from_array(np.ones((3, 2), np.float32), "w")
nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], name="gemm"),
         helper.make_node("ReduceMean", ["y"], ["loss"], name="mean",
                          keepdims=0)]
graph = helper.make_graph(
    nodes, "no_opset",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], [w])
for name, opsets in [("no_opset", []),
                     ("other_domain_only",
                      [helper.make_opsetid("com.example", 1)])]:
    m = helper.make_model(graph, opset_imports=opsets)
    del m.opset_import[:]
    m.opset_import.extend(opsets)
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))
