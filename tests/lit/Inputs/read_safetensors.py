#!/usr/bin/env python3
"""Prints a safetensors file as FileCheck reads it, checking the format on the
way (https://huggingface.co/docs/safetensors): the 8-byte little-endian
header length, a JSON header whose data starts 8-aligned, every tensor's
data_offsets back to back up to the end of the file, each the bytes its dtype
and shape take.

  read_safetensors.py FILE [--values]

One line `metadata KEY=VALUE` per metadata entry, then per tensor
`NAME DTYPE [SHAPE]` (with --values, then its values).
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64,
          "I32": np.int32, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def main():
    path, values = sys.argv[1], "--values" in sys.argv[2:]
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert (8 + n) % 8 == 0, "the data does not start 8-aligned"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    body = data[8 + n:]
    for k, v in header.pop("__metadata__", {}).items():
        print("metadata %s=%s" % (k, v))
    end = 0
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, stop = t["data_offsets"]
        assert begin == end, "%s: data at %d, expected %d" % (name, begin, end)
        a = np.frombuffer(body[begin:stop], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
        line = "%s %s %s" % (name, t["dtype"], list(t["shape"]))
        if values:
            line += " " + " ".join("%.6g" % x for x in a.astype(np.float64).ravel())
        print(line)
        end = stop
    assert end == len(body), "%d bytes after the last tensor" % (len(body) - end)


if __name__ == "__main__":
    main()
