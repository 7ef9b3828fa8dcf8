# Writes small training graphs whose sizing or indexing attributes hold
# values no model could mean (2^40, 2^62, -2^62): the importer refuses each
# with one line naming the node and the attribute (attribute_ranges.h).
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)


def save(name, node, inits=()):
    nodes = [node, helper.make_node("ReduceMean", ["y"], ["loss"], keepdims=0)]
    g = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, os.path.join(out, name + ".onnx"))


w = numpy_helper.from_array(np.ones((2, 1, 3, 3), np.float32), "w")
save("conv_pads", helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                                   pads=[2**40, 0, 0, 0]), [w])
save("conv_strides", helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                                      strides=[1, 2**62]), [w])
save("conv_group", helper.make_node("Conv", ["x", "w"], ["y"], name="conv",
                                    group=2**40), [w])
save("pool_kernel", helper.make_node("MaxPool", ["x"], ["y"], name="pool",
                                     kernel_shape=[2**40, 2]))
save("pool_dilations", helper.make_node("MaxPool", ["x"], ["y"], name="pool",
                                        kernel_shape=[2, 2],
                                        dilations=[-2**62, 1]))
save("softmax_axis", helper.make_node("Softmax", ["x"], ["y"], name="softmax",
                                      axis=2**40))
save("transpose_perm", helper.make_node("Transpose", ["x"], ["y"],
                                        name="transpose",
                                        perm=[0, 1, 2, 2**62]))
