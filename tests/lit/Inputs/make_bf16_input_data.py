"""Data for a model whose input x is bf16 (tests/lit/tools/mpc-run-bf16-data):
numpy has no bfloat16, so the data is float32.

  f32.npz      x: float32 values that bf16 cannot hold (ties and values just
               off them, where truncation and round-to-nearest-even differ)
  rounded.npz  the same x rounded to nearest even here, so exactly bf16
  dir/         f32.npz's arrays as x.npy and y.npy (the mapped path)
  f64.npz      x as float64 (refused)
  v2.npz       x as raw 2-byte records, as an ml_dtypes bfloat16 array is
               saved (refused)
Usage: make_bf16_input_data.py OUT_DIR
"""
import os
import sys

import numpy as np


def round_to_bf16(a):
    bits = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32)


out = sys.argv[1]
rng = np.random.default_rng(0)
n = 16
# Mantissas whose low 16 bits are exactly 0x8000 (ties) or just above or
# below: round-to-nearest-even, truncation and round-half-up all differ.
base = rng.standard_normal((n, 3)).astype(np.float32)
bits = base.view(np.uint32) & np.uint32(0xFFFF0000)
low = rng.choice(np.array([0x8000, 0x8001, 0x7FFF, 0xC000], np.uint32), (n, 3))
x = (bits | low).view(np.float32)
y = rng.integers(0, 2, n)
np.savez(os.path.join(out, "f32.npz"), x=x, y=y)
rounded = round_to_bf16(x)
assert not np.array_equal(rounded, x)
np.savez(os.path.join(out, "rounded.npz"), x=rounded, y=y)
os.makedirs(os.path.join(out, "dir"), exist_ok=True)
np.save(os.path.join(out, "dir", "x.npy"), x)
np.save(os.path.join(out, "dir", "y.npy"), y)
np.savez(os.path.join(out, "f64.npz"), x=x.astype(np.float64), y=y)
np.savez(os.path.join(out, "v2.npz"), x=rounded.view(np.uint32).__rshift__(16)
         .astype(np.uint16).view("V2"), y=y)
