"""Writes the absurd models of tests/lit/tools/absurd-models.test into DIR.

Each breaks one limit issue 7 names (a dim of 2^62, rank 100, sizes that
overflow, huge external-data offsets, deeply nested subgraphs); mpc must
refuse each with one clear line, never crash or allocate an absurd size.
Usage: python3 make_absurd_models.py DIR (needs python3-onnx).
"""
import os
import sys

import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
here = os.path.dirname(os.path.abspath(__file__))
seed = os.path.join(here, "..", "..", "..", "models", "mlp_seed.onnx")


def save(model, name):
    # Written as bytes: onnx.save would run no checks either, but some of
    # these do not survive onnx's own helpers.
    with open(os.path.join(out, name), "wb") as f:
        f.write(model.SerializeToString())


def seed_with_batch(n):
    m = onnx.load(seed)
    for vi in m.graph.input:
        vi.type.tensor_type.shape.dim[0].dim_value = n
    return m


# The seed MLP with a batch of 2^62 (and 2^61, 2^40): every size is known, so
# the importer accepts it; x is 2^62 * 10 floats, far past 2^64 bytes.
save(seed_with_batch(2**62), "batch_2p62.onnx")
save(seed_with_batch(2**40), "batch_2p40.onnx")

# An initializer of dims [2^62, 4] (element count overflows int64) and one of
# [2^31, 2^31] (2^62 elements: its byte size overflows).
for name, dims in (("init_2p62x4.onnx", [2**62, 4]),
                   ("init_2p31x2p31.onnx", [2**31, 2**31])):
    m = onnx.load(seed)
    t = m.graph.initializer[0]
    del t.dims[:]
    t.dims.extend(dims)
    save(m, name)

# Rank 100: a graph input and an initializer.
m = seed_with_batch(64)
shape = m.graph.input[0].type.tensor_type.shape
del shape.dim[:]
for _ in range(100):
    shape.dim.add().dim_value = 1
save(m, "input_rank100.onnx")
m = onnx.load(seed)
t = m.graph.initializer[1]  # fc1.bias, 20 floats
del t.dims[:]
t.dims.extend([20] + [1] * 99)
save(m, "init_rank100.onnx")

# External data at a huge offset / with a huge length (the file is 80 bytes).
with open(os.path.join(out, "w.bin"), "wb") as f:
    f.write(bytes(80))
for name, kv in (("ext_offset_max.onnx", {"offset": str(2**63 - 1)}),
                 ("ext_offset_2p62.onnx", {"offset": str(2**62), "length": "80"}),
                 ("ext_length_max.onnx", {"offset": "8", "length": str(2**63 - 1)})):
    m = onnx.load(seed)
    t = m.graph.initializer[1]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in [("location", "w.bin")] + list(kv.items()):
        e = t.external_data.add()
        e.key, e.value = k, v
    save(m, name)


# Subgraphs nested 20 deep (If in If in If...), in binary: mpc has no
# control flow, so the outermost is refused; and 150 deep (450 messages),
# past protobuf's recursion limit (100), which the parser itself refuses.
def nested(depth):
    leaf = helper.make_graph([helper.make_node("Identity", ["x"], ["out"])],
                             "leaf", [], [helper.make_tensor_value_info(
                                 "out", TensorProto.FLOAT, [4])])
    body = leaf
    for i in range(depth):
        node = helper.make_node("If", ["c"], ["out"], name="if%d" % i,
                                then_branch=body, else_branch=leaf)
        body = helper.make_graph([node], "level%d" % i, [], [
            helper.make_tensor_value_info("out", TensorProto.FLOAT, [4])])
    graph = helper.make_graph(
        body.node, "nested",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


save(nested(20), "nested_if_20.onnx")
save(nested(150), "nested_if_150.onnx")

# The same nesting in ONNX text, 20000 deep: the text parser recurses once
# per level, so it must stop long before the stack does.
depth = 20000
text = ('<ir_version: 8, opset_import: ["" : 17]>\n'
        "g (float[4] x, bool c) => (float[4] out) {\n")
text += "out = If (c) <then_branch = g1 () => (float[4] out) {" * depth
text += "out = Identity(x)"
text += "}, else_branch = e () => (float[4] out) { out = Identity(x) }>" * depth
text += "\n}\n"
with open(os.path.join(out, "nested_if_deep.onnxtext"), "w") as f:
    f.write(text)

# A model-local function that calls itself: mpc does not expand model-local
# functions, so the node is an unsupported op, not an endless expansion.
fn = helper.make_function(
    "local", "F", ["a"], ["b"],
    [helper.make_node("F", ["a"], ["b"], domain="local")],
    [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)])
graph = helper.make_graph(
    [helper.make_node("F", ["x"], ["y"], domain="local")], "g",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])])
save(helper.make_model(graph, functions=[fn], opset_imports=[
    helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]),
    "recursive_function.onnx")
