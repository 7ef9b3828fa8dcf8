"""Writes an .npz's arrays as mpc-run's other data forms, for the tests of
--data=DIR and of shards (tests/lit/tools/mpc-run-data-dir.test).

  make_npy_shards.py DATA.npz OUT   writes, under OUT:
    whole/NAME.npy             every array, one file each
    a/NAME.npy, b.npz          the samples split at 400: a directory, then
                               an .npz (read one after the other, the same
                               data as DATA.npz)
    c/NAME.npy, d/NAME.npy     the split at 700, two directories
    missing/                   whole/ without its last array's file
    counts/                    whole/ with one array a sample short
    dtype/                     b's samples with an integer array as int32
                               (the first shard stores int64)
    nan/                       whole/ with sample 517 of the first float
                               array holding NaN
    label/                     whole/ with sample 300 of the int64 array
                               holding label 7
    shape/                     whole/ with the first array's samples
                               reshaped (one more axis)
    truncated/                 whole/ with the first array's file cut short
    i32/                       whole/ with the int64 arrays stored as int32
"""
import os
import shutil
import sys

import numpy as np

src, out = sys.argv[1], sys.argv[2]
data = dict(np.load(src))
names = list(data)


def write_dir(path, arrays):
    os.makedirs(path, exist_ok=True)
    for name, a in arrays.items():
        np.save(os.path.join(path, name + ".npy"), a)


shutil.rmtree(out, ignore_errors=True)
write_dir(os.path.join(out, "whole"), data)
write_dir(os.path.join(out, "a"), {k: v[:400] for k, v in data.items()})
np.savez(os.path.join(out, "b.npz"), **{k: v[400:] for k, v in data.items()})
write_dir(os.path.join(out, "c"), {k: v[:700] for k, v in data.items()})
write_dir(os.path.join(out, "d"), {k: v[700:] for k, v in data.items()})
write_dir(os.path.join(out, "missing"), {k: data[k] for k in names[:-1]})
write_dir(os.path.join(out, "counts"),
          {k: (v[:-1] if k == names[-1] else v) for k, v in data.items()})
ints = [k for k in names if data[k].dtype == np.int64]
floats = [k for k in names if data[k].dtype.kind == "f"]
write_dir(os.path.join(out, "dtype"),
          {k: (v[400:].astype(np.int32) if k in ints else v[400:])
           for k, v in data.items()})
nan = {k: v.copy() for k, v in data.items()}
nan[floats[0]][517].flat[3] = np.nan
write_dir(os.path.join(out, "nan"), nan)
label = {k: v.copy() for k, v in data.items()}
label[ints[0]][300] = 7
write_dir(os.path.join(out, "label"), label)
write_dir(os.path.join(out, "shape"),
          {k: (v[:, None] if k == names[0] else v) for k, v in data.items()})
write_dir(os.path.join(out, "truncated"), data)
path = os.path.join(out, "truncated", names[0] + ".npy")
with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) - 5)
write_dir(os.path.join(out, "i32"),
          {k: (v.astype(np.int32) if k in ints else v)
           for k, v in data.items()})
