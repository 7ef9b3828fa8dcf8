# usage: set_loss_scale.py IN OUT VALUE -- writes checkpoint IN with its loss
# scale state (metadata mpc.loss_scale) set to VALUE (nan, inf, 0, -1, ...),
# for the tests of mpc-run's refusal of a scale no step can train with.
import sys

import numpy as np
import onnx
from onnx import numpy_helper

src, dst, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
m = onnx.load(src)
name = {p.key: p.value for p in m.metadata_props}["mpc.loss_scale"]
for g in [m.graph] + [t.algorithm for t in m.training_info]:
    for i, t in enumerate(g.initializer):
        if t.name == name:
            a = numpy_helper.to_array(t).copy()
            a[...] = value
            g.initializer[i].CopyFrom(numpy_helper.from_array(a, name))
onnx.save(m, dst)
