"""Checks model files written by mpc with (or without) ONNX external data.

usage: check_external_data.py [--no-load] MODEL...

For each MODEL prints one line:
  NAME: external N inline-large M aligned yes|no checker ok load ok
N counts the tensors (initializers of every graph: main graph, training_info
initialization and algorithm) whose bytes are external data, M those of at
least 1 KiB still inline. Every external tensor must name NAME.data (relative
to the model's folder) at an offset that is a multiple of 4096, within that
file. Then onnx.checker.check_model(MODEL) (the path form, which reads models
past 2 GiB) and onnx.load(MODEL) (external data included) must accept it;
--no-load skips onnx.load (gigabytes of tensors read into Python), printing
"load skipped".
"""
import os
import sys

import onnx


def tensors(model):
    graphs = [model.graph]
    for info in model.training_info:
        graphs += [info.initialization, info.algorithm]
    for g in graphs:
        yield from g.initializer


paths = sys.argv[1:]
load = "--no-load" not in paths
paths = [p for p in paths if p != "--no-load"]
for path in paths:
    name = os.path.basename(path)
    model = onnx.load(path, load_external_data=False)
    external = inline_large = 0
    aligned = True
    data_size = None
    for t in tensors(model):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            if len(t.raw_data) >= 1024:
                inline_large += 1
            continue
        external += 1
        entries = {e.key: e.value for e in t.external_data}
        assert list(entries) == ["location", "offset", "length"], entries
        assert entries["location"] == name + ".data", entries
        offset, length = int(entries["offset"]), int(entries["length"])
        if data_size is None:
            data_size = os.path.getsize(path + ".data")
        assert offset + length <= data_size, (t.name, offset, length)
        aligned = aligned and offset % 4096 == 0
    onnx.checker.check_model(path)
    if load:
        onnx.load(path)
    print(f"{name}: external {external} inline-large {inline_large} "
          f"aligned {'yes' if aligned else 'no'} checker ok "
          f"load {'ok' if load else 'skipped'}")
