"""Writes the malformed data files that tests/lit/tools/mpc-run-errors.test feeds mpc-run.

Each file breaks exactly one rule of SPEC.md's data contract for the seed MLP
(inputs x: float32[N,10], y: int64[N] with labels in [0, 2)).
Regenerate: python3 tests/lit/Inputs/make_bad_data.py
"""
import os
import numpy as np

here = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1)
x = rng.standard_normal((128, 10)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.int64)


def save(name, **arrays):
    np.savez(os.path.join(here, name), **arrays)


save("bad_names.npz", inputs=x, y=y)
save("bad_shape.npz", x=x[:, :9], y=y)
save("bad_dtype.npz", x=x.astype(np.float64), y=y)
labels = y.copy()
labels[77] = 5
save("bad_label.npz", x=x, y=labels)
nan = x.copy()
nan[42, 3] = np.nan
save("bad_nan.npz", x=nan, y=y)
save("bad_count.npz", x=x, y=y[:100])
with open(os.path.join(here, "not_a_zip.npz"), "wb") as f:
    f.write(b"this is not a zip archive\n")
