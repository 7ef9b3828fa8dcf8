"""Writes models whose external data attacks the reader (external-data-safety.test).

usage: make_external_data_attacks.py DIR

DIR/m/ holds each model (y = x + w, w external) and the files its location
names; DIR/outside/ is a folder the links point into. The large files are
sparse: they take no disk.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper


def model(path, location, dims, data_type=TensorProto.FLOAT, extra=()):
    w = TensorProto()
    w.name = "w"
    w.data_type = data_type
    w.dims.extend(dims)
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location),) + tuple(extra):
        entry = w.external_data.add()
        entry.key = key
        entry.value = value
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])],
                              "ext", [x], [y], initializer=[w])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


def sparse(path, size):
    with open(path, "wb") as f:
        f.truncate(size)


def main():
    root = os.path.abspath(sys.argv[1])
    m = os.path.join(root, "m")
    outside = os.path.join(root, "outside")
    os.makedirs(m)
    os.makedirs(outside)
    four = np.array([1, 2, 3, 4], dtype=np.float32).tobytes()
    with open(os.path.join(m, "w.bin"), "wb") as f:
        f.write(four)
    with open(os.path.join(outside, "secret.bin"), "wb") as f:
        f.write(four)
    # A terabyte claimed by dims and file alike; a type that has no size.
    sparse(os.path.join(m, "huge.bin"), 1 << 40)
    model(os.path.join(m, "huge.onnx"), "huge.bin", [1 << 38])
    model(os.path.join(m, "undefined.onnx"), "huge.bin", [4], data_type=0)
    # 8 GiB: under the 16 GiB cap on a tensor, so only the memory check
    # stands between it and the heap.
    sparse(os.path.join(m, "eight.bin"), 8 << 30)
    model(os.path.join(m, "eight.onnx"), "eight.bin", [1 << 31])
    # Links out of the folder: to a file, through a folder.
    os.symlink("/etc/passwd", os.path.join(m, "passwd.bin"))
    model(os.path.join(m, "passwd.onnx"), "passwd.bin", [4])
    os.symlink(os.path.join(outside, "secret.bin"), os.path.join(m, "secret.bin"))
    model(os.path.join(m, "secret.onnx"), "secret.bin", [4])
    os.symlink(outside, os.path.join(m, "linked"))
    model(os.path.join(m, "folder.onnx"), "linked/secret.bin", [4])
    model(os.path.join(m, "absolute.onnx"), os.path.join(outside, "secret.bin"), [4])
    model(os.path.join(m, "dotdot.onnx"), "../outside/secret.bin", [4])
    # Not a regular file: a FIFO (opening it for reading would wait for a
    # writer forever) and a folder.
    os.mkfifo(os.path.join(m, "fifo"))
    model(os.path.join(m, "fifo.onnx"), "fifo", [4])
    os.makedirs(os.path.join(m, "sub"))
    model(os.path.join(m, "folder_itself.onnx"), "sub", [4])
    # A link that stays inside the folder is followed.
    os.symlink("w.bin", os.path.join(m, "inside.bin"))
    model(os.path.join(m, "inside.onnx"), "inside.bin", [4])


if __name__ == "__main__":
    main()
