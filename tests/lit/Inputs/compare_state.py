"""Compares the state of two mpc checkpoints byte for byte.

Usage: compare_state.py A.onnx B.onnx
Prints "N states identical" when every state initializer (the main graph's
and the training algorithm's) of A is in B with the same dtype, shape and
bytes, and B has no other; else names the first that differs. The masters'
16-bit working copies (mpc.weight_copies, derived from the masters: a step
under --shard-optimizer keeps none) are left out.
"""
import sys

import onnx
from onnx import numpy_helper


def state(path):
    model = onnx.load(path)
    copies = set()
    for p in model.metadata_props:
        if p.key == "mpc.weight_copies":
            copies = {pair.split("=")[1] for pair in p.value.split(",") if pair}
    out = {}
    for graph in [model.graph] + [t.algorithm for t in model.training_info]:
        for t in graph.initializer:
            if t.name not in copies:
                out[t.name] = numpy_helper.to_array(t)
    return out


a, b = state(sys.argv[1]), state(sys.argv[2])
if set(a) != set(b):
    print("states differ:", sorted(set(a) ^ set(b))[:5])
    sys.exit(0)
for name in sorted(a):
    x, y = a[name], b[name]
    if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
        print("state %s differs: %s%s vs %s%s" % (name, x.dtype, x.shape, y.dtype, y.shape))
        sys.exit(0)
print("%d states identical" % len(a))
