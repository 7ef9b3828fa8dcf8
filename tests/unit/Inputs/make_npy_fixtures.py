#!/usr/bin/env python3
"""make_npy_fixtures.py -- regenerate the .npy/.npz fixtures for tests/unit/npy_test.cpp.

Run:  python3 tests/unit/Inputs/make_npy_fixtures.py   (deterministic: zip entries are
stamped 1980-01-01, so re-running gives identical files). Needs numpy.

Files (all in this directory, prefixed npy_):
  npy_mixed.npz             np.savez: a f4[2,3], b i8[4], c f2[3], d b1[2,2], e f8[] (scalar), z f4[0,3]
  npy_compressed.npz        np.savez_compressed: the same plus i i4[3], j i1[3], k u1[3]
  npy_zip64.npz             np.savez with zipfile's zip64 limits lowered, so the central
                            directory carries zip64 extra fields and zip64 end records
  npy_v2.npy / npy_v3.npy   format 2.0 / 3.0 file of f4[2,2]
  npy_big_endian.npy        '>f4' array           -> "unsupported dtype '>f4' (big-endian)"
  npy_big_endian.npz        savez of x: '>f4'     -> "array 'x': unsupported dtype '>f4' (big-endian)"
  npy_fortran.npy           fortran_order: True   -> "fortran_order"
  npy_truncated.npy         f4[10] cut short      -> "truncated"
  npy_truncated.npz         npy_mixed.npz cut in half -> "end of central directory"
  npy_bad_crc.npz           one data byte flipped -> "CRC-32 mismatch"
  npy_bad_deflate.npz       compressed stream damaged -> error naming array 'a'
  npy_not_npy.npz           contains README.txt   -> "is not a .npy file"
"""
import io
import os
import types
import unittest.mock
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def out(name):
    return os.path.join(HERE, name)


def pinned_time():
    fixed = types.SimpleNamespace(time=lambda: 0.0,
                                  localtime=lambda t=None: (1980, 1, 1, 0, 0, 0, 0, 1, -1))
    return unittest.mock.patch.object(zipfile, "time", fixed)


def savez(name, fn, **arrays):
    with pinned_time():
        fn(out(name), **arrays)


def write_bytes(name, data):
    with open(out(name), "wb") as f:
        f.write(data)


def main():
    mixed = {
        "a": (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5 - 1.0),
        "b": np.array([-1, 0, 2**40, -2**62], dtype=np.int64),
        "c": np.array([0.5, -2.0, 65504.0], dtype=np.float16),
        "d": np.array([[True, False], [False, True]]),
        "e": np.float64(3.25) * np.ones((), dtype=np.float64),
        "z": np.zeros((0, 3), dtype=np.float32),
    }
    savez("npy_mixed.npz", np.savez, **mixed)

    more = dict(mixed)
    more["i"] = np.array([-7, 0, 2**31 - 1], dtype=np.int32)
    more["j"] = np.array([-128, 5, 127], dtype=np.int8)
    more["k"] = np.array([0, 200, 255], dtype=np.uint8)
    savez("npy_compressed.npz", np.savez_compressed, **more)

    with unittest.mock.patch.object(zipfile, "ZIP64_LIMIT", 16), \
            unittest.mock.patch.object(zipfile, "ZIP_FILECOUNT_LIMIT", 1):
        savez("npy_zip64.npz", np.savez, a=mixed["a"], b=mixed["b"])
    with zipfile.ZipFile(out("npy_zip64.npz")) as z:  # sanity: really zip64 everywhere
        assert all(i.extra for i in z.infolist())
    raw = open(out("npy_zip64.npz"), "rb").read()
    assert b"PK\x06\x06" in raw and b"PK\x06\x07" in raw

    v = np.array([[1.5, -2.5], [3.0, 4.0]], dtype=np.float32)
    for ver in (2, 3):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, v, version=(ver, 0))
        write_bytes(f"npy_v{ver}.npy", buf.getvalue())

    np.save(out("npy_big_endian.npy"), np.arange(4, dtype=">f4"))
    savez("npy_big_endian.npz", np.savez, x=np.arange(4, dtype=">f4"))
    np.save(out("npy_fortran.npy"), np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3)))

    buf = io.BytesIO()
    np.save(buf, np.arange(10, dtype=np.float32))
    write_bytes("npy_truncated.npy", buf.getvalue()[:-7])

    data = open(out("npy_mixed.npz"), "rb").read()
    write_bytes("npy_truncated.npz", data[:len(data) // 2])

    # Flip the last data byte of entry 'a' (stored, so the CRC must catch it).
    with zipfile.ZipFile(out("npy_mixed.npz")) as z:
        info = z.getinfo("a.npy")
    hdr = data[info.header_offset:info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(hdr[26:28], "little") + \
        int.from_bytes(hdr[28:30], "little")
    bad = bytearray(data)
    bad[start + info.file_size - 1] ^= 0x40
    write_bytes("npy_bad_crc.npz", bytes(bad))

    cdata = open(out("npy_compressed.npz"), "rb").read()
    with zipfile.ZipFile(out("npy_compressed.npz")) as z:
        info = z.getinfo("a.npy")
    hdr = cdata[info.header_offset:info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(hdr[26:28], "little") + \
        int.from_bytes(hdr[28:30], "little")
    bad = bytearray(cdata)
    for k in range(start, start + info.compress_size):
        bad[k] ^= 0xA5
    write_bytes("npy_bad_deflate.npz", bytes(bad))

    with pinned_time():
        with zipfile.ZipFile(out("npy_not_npy.npz"), "w") as z:
            buf = io.BytesIO()
            np.save(buf, v)
            z.writestr("v.npy", buf.getvalue())
            z.writestr("README.txt", "not an array\n")

    # Self-check: numpy reads the good files back.
    for name, ref in (("npy_mixed.npz", mixed), ("npy_compressed.npz", more)):
        with np.load(out(name)) as f:
            assert list(f.files) == list(ref), (name, f.files)
            for k in ref:
                assert np.array_equal(f[k], ref[k]) and f[k].dtype == ref[k].dtype
    with np.load(out("npy_zip64.npz")) as f:
        assert np.array_equal(f["b"], mixed["b"])


if __name__ == "__main__":
    main()
