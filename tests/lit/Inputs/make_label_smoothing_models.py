#!/usr/bin/env python3
"""Writes the dynamo exports of tests/lit/import/label-smoothing.test beside this script.

torch's dynamo exporter writes CrossEntropyLoss(label_smoothing=e) as SoftmaxCrossEntropyLoss and
drops the smoothing; only the node's pkg.torch.onnx.fx_node metadata keeps it
(passes/onnx/torch_dropped_arguments.h):

  label_smoothing_dynamo.onnx           Linear(4,5) -> CrossEntropyLoss(label_smoothing=0.1)
  label_smoothing_kwarg_dynamo.onnx     Linear(4,5) -> F.cross_entropy(..., label_smoothing=0.25)
                                        with the weight and reduction given by keyword
  cross_entropy_dynamo.onnx             the same without smoothing
  label_smoothing_explicit_dynamo.onnx  the smoothing spelled out, as mpc's error suggests:
                                        (1 - e) * F.cross_entropy(x, y) + e * -F.log_softmax(x, 1).mean(1).mean()
  label_smoothing_data.npz              x float[8,4], y int64[8]

Each file is checked against torch in onnxruntime; the explicit one computes torch's smoothed loss.
Regenerate:  python3 tests/lit/Inputs/make_label_smoothing_models.py   (torch >= 2.9, onnxscript,
onnx, onnxruntime, numpy; stack traces, which name this machine's paths, are removed)
"""
import contextlib
import io
import os
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Net(nn.Module):
    def __init__(self, how, e):
        super().__init__()
        self.fc = nn.Linear(4, 5)
        self.how, self.e = how, e
        self.loss = nn.CrossEntropyLoss(label_smoothing=e)

    def forward(self, x, y):
        z = self.fc(x)
        if self.how == "module":
            return self.loss(z, y)
        if self.how == "kwarg":
            return F.cross_entropy(z, y, weight=None, reduction="mean", label_smoothing=self.e)
        e = self.e
        return (1 - e) * F.cross_entropy(z, y) + e * -F.log_softmax(z, 1).mean(1).mean()


def export(model, args, name):
    with contextlib.redirect_stdout(io.StringIO()):
        program = torch.onnx.export(model, args, dynamo=True, optimize=False, input_names=["x", "y"],
                                    output_names=["loss"])
    m = program.model_proto
    for n in m.graph.node:
        keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    m.producer_version = torch.__version__.split("+")[0]
    onnx.checker.check_model(m, full_check=True)
    path = os.path.join(HERE, name)
    onnx.save(m, path)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    return float(sess.run(None, {"x": args[0].numpy(), "y": args[1].numpy()})[0])


def main():
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    x, y = torch.randn(8, 4), torch.randint(0, 5, (8,))
    np.savez(os.path.join(HERE, "label_smoothing_data.npz"), x=x.numpy(), y=y.numpy())
    for name, how, e in [("label_smoothing_dynamo.onnx", "module", 0.1),
                         ("label_smoothing_kwarg_dynamo.onnx", "kwarg", 0.25),
                         ("cross_entropy_dynamo.onnx", "module", 0.0),
                         ("label_smoothing_explicit_dynamo.onnx", "explicit", 0.1)]:
        torch.manual_seed(0)
        model = Net(how, e)
        with torch.no_grad():
            smoothed = F.cross_entropy(model.fc(x), y, label_smoothing=e).item()
            plain = F.cross_entropy(model.fc(x), y).item()
        got = export(model, (x, y), name)
        fx = [p.value for n in onnx.load(os.path.join(HERE, name)).graph.node for p in n.metadata_props
              if p.key == "pkg.torch.onnx.fx_node" and "cross_entropy" in p.value]
        print(f"{name}: onnx {got:.6f}, torch smoothed {smoothed:.6f}, unsmoothed {plain:.6f}; {fx}")
        want = smoothed if how == "explicit" else plain  # the exporter drops the smoothing
        assert abs(got - want) < 1e-5, (got, want)


if __name__ == "__main__":
    main()
