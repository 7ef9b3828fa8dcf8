"""Compares an mpc-run with bf16 optimizer state against its torch reference.

Usage: compare_bf16_state.py LOG.csv CKPT.onnx REF.csv REF_final.npz

The losses of every step must be within 1e-4 relative of torch's (the other
torch parity tests' tolerance), the parameters after the run within 5e-5
relative (norm of the difference over the norm), and every stored moment
(NAME_exp_avg, NAME_exp_avg_sq, NAME_momentum in the reference) must be bf16
in the checkpoint and within one bf16 ulp of torch's bf16 value. fp32
moments, or bf16 moments whose rounded values fed the parameter update,
give parameters 3.6e-4 to 4.6e-4 away on the AdamW run: outside 5e-5.
Prints one line: what matched, or what did not.
"""
import csv
import sys

import numpy as np
import onnx
from onnx import numpy_helper

log, ckpt, ref_csv, ref_npz = sys.argv[1:5]
got = [float(r["loss"]) for r in csv.DictReader(open(log))]
want = [float(r["loss"]) for r in csv.DictReader(open(ref_csv))]
problems = []
if len(got) != len(want):
    problems.append(f"{len(got)} logged steps, torch has {len(want)}")
bad = [i + 1 for i, (g, w) in enumerate(zip(got, want)) if abs(g - w) > 1e-4 * abs(w)]
if bad:
    problems.append(f"losses differ at steps {bad}")

model = onnx.load(ckpt)
state = {t.name: t for t in model.graph.initializer}
ref = np.load(ref_npz)
moments = 0
for name in ref.files:
    if name not in state:
        problems.append(f"no state '{name}' in the checkpoint")
        continue
    t = state[name]
    have = numpy_helper.to_array(t).astype(np.float32)
    if name.endswith(("_exp_avg", "_exp_avg_sq", "_momentum")):
        moments += 1
        if t.data_type != onnx.TensorProto.BFLOAT16:
            problems.append(f"'{name}' is {onnx.TensorProto.DataType.Name(t.data_type)}, not BFLOAT16")
        # One bf16 ulp of the larger magnitude (8 significant bits).
        ulp = np.ldexp(1.0, np.frexp(np.maximum(np.abs(have), np.abs(ref[name])))[1] - 8)
        far = int(np.sum(np.abs(have - ref[name]) > ulp))
        if far:
            problems.append(f"'{name}': {far} elements more than one bf16 ulp from torch's")
    else:
        rel = float(np.linalg.norm(have - ref[name]) / np.linalg.norm(ref[name]))
        if rel > 5e-5:
            problems.append(f"parameter '{name}' differs by {rel:.3g} (relative)")
print("; ".join(problems) if problems else
      f"matches torch: {len(got)} losses, {len(ref.files) - moments} parameters, {moments} bf16 moments")
