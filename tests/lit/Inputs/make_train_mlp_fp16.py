"""Writes train_mlp_fp16.onnx: a Gemm + SoftmaxCrossEntropyLoss model whose
parameters are stored as fp16 (ONNX 1.12's text parser cannot write fp16
initializers, so the master-weights lit test reads this binary file).

Deterministic: re-running gives a byte-identical file. Needs onnx and numpy.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

w = numpy_helper.from_array(
    np.array([[0.1, -0.2, 0.3], [0.05, 0.4, -0.1]], dtype=np.float16), "w")
b = numpy_helper.from_array(np.array([0.0, 0.5], dtype=np.float16), "b")
graph = helper.make_graph(
    [
        helper.make_node("Cast", ["x"], ["x16"], name="cast_x",
                         to=TensorProto.FLOAT16),
        helper.make_node("Gemm", ["x16", "w", "b"], ["z16"], name="fc",
                         transB=1),
        helper.make_node("Cast", ["z16"], ["z"], name="cast_z",
                         to=TensorProto.FLOAT),
        helper.make_node("SoftmaxCrossEntropyLoss", ["z", "y"], ["loss"],
                         name="loss_fn", reduction="mean"),
    ],
    "half_mlp",
    [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3]),
        helper.make_tensor_value_info("y", TensorProto.INT64, [4]),
    ],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [w, b],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                          producer_name="make_train_mlp_fp16")
model.ir_version = 8
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                   "train_mlp_fp16.onnx")
with open(out, "wb") as f:
    f.write(model.SerializeToString())
