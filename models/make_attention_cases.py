#!/usr/bin/env python3
"""make_attention_cases.py -- ONNX Attention (opset 23) cases, with outputs from ONNX's reference.

Debian's ONNX 1.12 test data predates Attention. This script writes cases in the layout of ONNX's
backend node tests (models/attention_cases/<case>/model.onnx, test_data_set_0/input_<i>.pb,
output_0.pb), the output computed by onnx.reference (ONNX >= 1.18) on the same inputs. mpc lowers
Attention at import (passes/onnx/attention_lowering.h); tests/unit/attention_lowering_test.cpp runs
each case on the CPU backend and compares with the reference output.

  causal          4-D Q/K/V, is_causal (the top-left causal mask), the default scale
  bool_mask_gqa   4 query heads over 2 key/value heads, a bool mask with one row masked everywhere
                  (its output row is 0, the reference's guard), a longer key sequence
  float_mask      an additive float mask of every batch and head, scale given
  causal_mask     is_causal and a float mask together
  three_d         3-D Q/K/V split by q_num_heads/kv_num_heads, grouped, causal, softcap

Regenerate:  python3 models/make_attention_cases.py   (needs onnx >= 1.18, numpy)
"""
import os
import shutil

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "attention_cases")


def case(name, inputs, attrs):
    """inputs: (name, array) for Q, K, V and an optional attn_mask."""
    names = [n for n, _ in inputs]
    node = helper.make_node("Attention", names, ["Y"], **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
          for n, a in inputs]
    graph = helper.make_graph([node], name, vi, [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    y = ReferenceEvaluator(model).run(None, dict(inputs))[0]
    d = os.path.join(HERE, name)
    os.makedirs(os.path.join(d, "test_data_set_0"))
    onnx.save(model, os.path.join(d, "model.onnx"))
    for i, (n, a) in enumerate(inputs):
        with open(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(a, n).SerializeToString())
    with open(os.path.join(d, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y, "Y").SerializeToString())
    print(name, y.shape, "rows of zeros:", int(np.all(y == 0, axis=-1).sum()))


def main():
    shutil.rmtree(HERE, ignore_errors=True)
    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    case("causal", [("Q", r(2, 2, 5, 4)), ("K", r(2, 2, 5, 4)), ("V", r(2, 2, 5, 4))], {"is_causal": 1})
    mask = rng.random((3, 6)) < 0.6
    mask[1, :] = False  # no key for query 1
    mask[0, 0] = True
    case("bool_mask_gqa", [("Q", r(2, 4, 3, 4)), ("K", r(2, 2, 6, 4)), ("V", r(2, 2, 6, 4)),
                           ("attn_mask", mask)], {})
    case("float_mask", [("Q", r(1, 2, 4, 8)), ("K", r(1, 2, 4, 8)), ("V", r(1, 2, 4, 8)),
                        ("attn_mask", r(1, 2, 4, 4))], {"scale": 0.3})
    case("causal_mask", [("Q", r(2, 1, 4, 4)), ("K", r(2, 1, 4, 4)), ("V", r(2, 1, 4, 4)),
                         ("attn_mask", r(4, 4))], {"is_causal": 1})
    case("three_d", [("Q", r(2, 5, 8)), ("K", r(2, 5, 4)), ("V", r(2, 5, 4))],
         {"q_num_heads": 2, "kv_num_heads": 1, "is_causal": 1, "softcap": 2.0})


if __name__ == "__main__":
    main()
