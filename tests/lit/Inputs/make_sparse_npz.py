"""Writes .npz files with a huge member that takes no disk (npz-memory.test).

usage: make_sparse_npz.py DIR

DIR/unused.npz: the seed MLP's x [64, 10] float32 and y [64] int64, and an
unused 15 GiB member 'junk' (a stored .npy of zeros whose bytes are a hole
of the sparse file). DIR/used.npz: the same, but x is the 15 GiB member.
Hand-written zip64 (zipfile cannot leave a hole); the big member's CRC is
not computed (a reader that checks sizes first never gets to it).
"""
import io
import os
import struct
import sys
import zlib

import numpy as np

BIG = 15 << 30


def npy_header(dtype, shape):
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": np.dtype(dtype).str, "fortran_order": False, "shape": shape})
    return buf.getvalue()


def write_zip(path, members):
    """members: (name, header bytes, payload bytes or a hole size)."""
    central = b""
    with open(path, "wb") as f:
        for name, header, payload in members:
            name = name.encode()
            size = len(header) + (payload if isinstance(payload, int) else len(payload))
            crc = 0 if isinstance(payload, int) else zlib.crc32(header + payload)
            offset = f.tell()
            extra = struct.pack("<HHQQ", 1, 16, size, size)
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034b50, 45, 0, 0, 0, 33, crc,
                                0xffffffff, 0xffffffff, len(name), len(extra)))
            f.write(name + extra + header)
            if isinstance(payload, int):
                f.seek(payload, 1)
            else:
                f.write(payload)
            cextra = struct.pack("<HHQQQ", 1, 24, size, size, offset)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014b50, 45, 45, 0, 0,
                                   0, 33, crc, 0xffffffff, 0xffffffff, len(name),
                                   len(cextra), 0, 0, 0, 0, 0xffffffff)
            central += name + cextra
        cd_offset = f.tell()
        f.write(central)
        z64 = f.tell()
        count = len(members)
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064b50, 44, 45, 45, 0, 0, count,
                            count, len(central), cd_offset))
        f.write(struct.pack("<IIQI", 0x07064b50, 0, z64, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054b50, 0, 0, 0xffff, 0xffff,
                            0xffffffff, 0xffffffff, 0))


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 10)).astype(np.float32)
    y = rng.integers(0, 2, 64).astype(np.int64)
    small_x = ("x.npy", npy_header(np.float32, x.shape), x.tobytes())
    small_y = ("y.npy", npy_header(np.int64, y.shape), y.tobytes())
    junk = ("junk.npy", npy_header(np.float32, (BIG // 4,)), BIG)
    write_zip(os.path.join(out, "unused.npz"), [small_x, junk, small_y])
    big_x = ("x.npy", npy_header(np.float32, (BIG // 40, 10)), BIG // 40 * 40)
    write_zip(os.path.join(out, "used.npz"), [big_x, small_y])


if __name__ == "__main__":
    main()
