#!/usr/bin/env python3
"""How many of a model's weights could be used in place in the file.

Counts the raw_data fields of the main graph's initializers and how many
start at a file offset aligned for their element type (4 bytes checked):
a tensor read straight from a mapping of the file must be aligned to be
read as floats, so the rest would need a copy. Reads the protobuf wire
format itself (ONNX's Python API does not tell where a field sits).

Usage: bench/raw_data_alignment.py MODEL.onnx...
"""
import sys


def varint(b, i):
    value, shift = 0, 0
    while True:
        c = b[i]
        i += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return value, i


def fields(b, start, end):
    """(field number, start, end) of each length-delimited field."""
    i = start
    while i < end:
        key, i = varint(b, i)
        number, wire = key >> 3, key & 7
        if wire == 2:
            length, i = varint(b, i)
            yield number, i, i + length
            i += length
        elif wire == 0:
            _, i = varint(b, i)
        elif wire == 5:
            i += 4
        elif wire == 1:
            i += 8
        else:
            sys.exit(f"unsupported wire type {wire} at byte {i}")


GRAPH, INITIALIZER, RAW_DATA = 7, 5, 9  # ModelProto, GraphProto, TensorProto


def main(paths):
    if not paths:
        sys.exit(__doc__.strip())
    for path in paths:
        b = open(path, "rb").read()
        graphs = [(s, e) for n, s, e in fields(b, 0, len(b)) if n == GRAPH]
        count = aligned = total = alignedBytes = 0
        for gs, ge in graphs:
            for n, s, e in fields(b, gs, ge):
                if n != INITIALIZER:
                    continue
                for n2, s2, e2 in fields(b, s, e):
                    if n2 == RAW_DATA:
                        count += 1
                        total += e2 - s2
                        if s2 % 4 == 0:
                            aligned += 1
                            alignedBytes += e2 - s2
        print(f"{path}: {count} raw_data fields, {total} bytes; "
              f"{count - aligned} not 4-byte aligned "
              f"({total - alignedBytes} bytes)")


if __name__ == "__main__":
    main(sys.argv[1:])
