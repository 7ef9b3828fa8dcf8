"""Forwards as torch's exporters write a small conv + batch norm classifier
(tests/lit/import/eval-mode-export-note.test), built with onnx.helper:

  eval_bn.onnx      exported in eval mode: BatchNormalization without
                    training_mode, on the running mean and var (initializers)
  train_bn.onnx     exported in training mode: training_mode=1, the running
                    statistics as outputs
  folded.onnx       the TorchScript exporter's default (eval mode, constant
                    folding): the batch norm folded into the convolution,
                    whose weights are named 'onnx::Conv_18' and 'onnx::Conv_19'
Usage: make_eval_export_models.py OUT_DIR
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

out = sys.argv[1]
rng = np.random.default_rng(0)


def init(name, shape):
    return numpy_helper.from_array(
        rng.standard_normal(shape).astype(np.float32) * 0.1, name)


def model(name, conv_w, conv_b, bn):
    inits = [init(conv_w, (4, 3, 3, 3)), init(conv_b, (4,)),
             init("fc.weight", (4 * 4 * 4, 2)), init("fc.bias", (2,))]
    nodes = [helper.make_node("Conv", ["x", conv_w, conv_b], ["c"], name="conv")]
    feature = "c"
    if bn:
        inits += [init("bn.weight", (4,)), init("bn.bias", (4,)),
                  init("bn.running_mean", (4,)),
                  numpy_helper.from_array(np.ones(4, np.float32), "bn.running_var")]
        ins = ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]
        if bn == "train":
            nodes.append(helper.make_node("BatchNormalization", ins,
                                          ["n", "mean_out", "var_out"], name="bn",
                                          training_mode=1))
        else:
            nodes.append(helper.make_node("BatchNormalization", ins, ["n"],
                                          name="bn"))
        feature = "n"
    nodes += [
        helper.make_node("Relu", [feature], ["r"], name="relu"),
        helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
        helper.make_node("MatMul", ["f", "fc.weight"], ["m"], name="fc"),
        helper.make_node("Add", ["m", "fc.bias"], ["logits"], name="fc_bias"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"],
                         name="loss"),
    ]
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6]),
         helper.make_tensor_value_info("y", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(os.path.join(out, name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


model("eval_bn", "conv.weight", "conv.bias", "eval")
model("train_bn", "conv.weight", "conv.bias", "train")
model("folded", "onnx::Conv_18", "onnx::Conv_19", None)
