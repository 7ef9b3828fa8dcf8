"""Writes a training model whose compiled Adam state passes 2 GiB.

usage: make_big_embedding_model.py DIR [ROWS]

For tests/lit/tools/external-data-over-2gib.test: DIR/in.onnx is an
embedding table (ROWS x 64 fp32; by default 2.8M rows, 179.2M parameters)
gathered by token ids, a small linear head and a softmax cross-entropy loss.
The table is itself external data (DIR/in.onnx.data), zeros made by
truncating the file, so it takes no disk blocks and no time to write. Its
weights plus Adam's two moments are 3 x 716.8 MB = 2,150,400,000 bytes, just
past the 2 GiB (2,147,483,648 bytes) one protobuf holds: the fewest rows
that cross it, since every byte of state costs the test memory and time.
DIR/data.npz holds 8 batches of 4 ids and labels; the ids come from a few
rows (the first, a middle and the last among them), so later steps see
rows that earlier steps updated and the losses change.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

out = sys.argv[1]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 2_800_000
dim, classes, batch = 64, 8, 4

table = TensorProto()
table.name = "emb.weight"
table.data_type = TensorProto.FLOAT
table.dims.extend([rows, dim])
table.data_location = TensorProto.EXTERNAL
for key, value in (("location", "in.onnx.data"), ("offset", "0"),
                   ("length", str(rows * dim * 4))):
    entry = table.external_data.add()
    entry.key, entry.value = key, value
with open(os.path.join(out, "in.onnx.data"), "wb") as f:
    f.truncate(rows * dim * 4)

rng = np.random.default_rng(0)
head = helper.make_tensor(
    "head.weight", TensorProto.FLOAT, [dim, classes],
    rng.standard_normal((dim, classes)).astype(np.float32).ravel())
graph = helper.make_graph(
    [
        helper.make_node("Gather", ["emb.weight", "ids"], ["h"]),
        helper.make_node("MatMul", ["h", "head.weight"], ["logits"]),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "labels"],
                         ["loss"]),
    ],
    "big_embedding",
    [
        helper.make_tensor_value_info("ids", TensorProto.INT64, [batch]),
        helper.make_tensor_value_info("labels", TensorProto.INT64, [batch]),
    ],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [table, head],
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
with open(os.path.join(out, "in.onnx"), "wb") as f:
    f.write(model.SerializeToString())

few = np.array([0, 1, rows // 2, rows - 2, rows - 1], dtype=np.int64)
ids = few[rng.integers(0, len(few), size=8 * batch)]
labels = rng.integers(0, classes, size=8 * batch).astype(np.int64)
np.savez(os.path.join(out, "data.npz"), ids=ids, labels=labels)
