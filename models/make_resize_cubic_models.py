#!/usr/bin/env python3
"""make_resize_cubic_models.py -- a small CNN through F.interpolate's bicubic mode, in models/.

CrossViT resizes its input image for each branch with F.interpolate(mode="bicubic",
align_corners=False) (timm's scale_image); both exporters write that as a cubic Resize
(cubic_coeff_a = -0.75, PyTorch's), which mpc lowers at import (passes/onnx/resize_lowering.h).

  resize_cubic   Conv2d(3,8,3,p1) -> ReLU -> interpolate(size 12x12, bicubic)       [16 -> 12]
                 -> Conv2d(8,8,3,p1) -> ReLU -> interpolate(x1.5, bicubic, align_corners=True)
                 -> Conv2d(8,8,3,p1) -> ReLU -> interpolate(x0.5, bicubic)           [18 -> 9]
                 -> Flatten -> Linear(648,10) -> CrossEntropyLoss.
                 x float[8,3,16,16], y int64[8] (cnn_data.npz's arrays). Three Resize nodes: sizes
                 with half_pixel (a fractional factor, taps past both edges), scales with
                 align_corners, and a downsample with half_pixel.

Artifacts: resize_cubic.onnx (TorchScript exporter, TrainingMode.TRAINING, opset 17, as
make_issue3_models.py's families), resize_cubic_dynamo.onnx (the same weights through the dynamo
exporter, make_dynamo_models.export: opset 20, Resize with every attribute written out),
resize_cubic_data.npz (cnn_data.npz's arrays), resize_cubic_ref_sgd.csv and
resize_cubic_ref_adam.csv (PyTorch's 30 fp32 CPU steps; both files start from the same weights,
so they share them).

Regenerate:  python3 models/make_resize_cubic_models.py   (needs torch >= 2.9, onnxscript, onnx,
onnxruntime, numpy)
"""
import os
import sys
import warnings

import numpy as np
import onnx
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_dynamo_models import export as export_dynamo  # noqa: E402
from make_issue3_models import batch, family, make_cnn_data  # noqa: E402


class BicubicCNNWithLoss(nn.Module):
    """Three bicubic resizes between convolutions: a fractional downsize by output size (CrossViT's
    scale_image), x1.5 with align_corners=True, and x0.5."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 9 * 9, 10)

    def forward(self, x, y):
        f = nn.functional.interpolate
        h = torch.relu(self.stem(x))  # 16x16
        h = f(h, size=(12, 12), mode="bicubic", align_corners=False)
        h = torch.relu(self.mid(h))
        h = f(h, scale_factor=1.5, mode="bicubic", align_corners=True)  # 18x18
        h = torch.relu(self.up(h))
        h = f(h, scale_factor=0.5, mode="bicubic", align_corners=False)  # 9x9
        return nn.functional.cross_entropy(self.fc(h.flatten(1)), y)


def resizes(m):
    """(coordinate_transformation_mode, cubic_coeff_a, exclude_outside) of every Resize."""
    out = []
    for n in m.graph.node:
        if n.op_type == "Resize":
            a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
            assert a["mode"] == b"cubic", a
            out.append((a["coordinate_transformation_mode"].decode(), a["cubic_coeff_a"],
                        a.get("exclude_outside", 0)))
    return out


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    data = make_cnn_data()
    r = family("resize_cubic", BicubicCNNWithLoss, data, ["x", "y"], 8, np.savez_compressed)
    assert r["resize_cubic.onnx"]["Resize"] == 3, r["resize_cubic.onnx"]
    m = onnx.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "resize_cubic.onnx"))
    found = resizes(m)
    print("  resize_cubic.onnx Resize nodes:", found)
    assert [c for c, _, _ in found] == ["half_pixel", "align_corners", "half_pixel"], found

    # The same initial weights (family() starts from torch.manual_seed(0)) through the dynamo
    # exporter, which runs no forward: no batch norm here, so the trajectories are the same.
    torch.manual_seed(0)
    model = BicubicCNNWithLoss().train()
    md, _, ops = export_dynamo(model, batch(data, ["x", "y"], 8, 0), "resize_cubic_dynamo.onnx", ["x", "y"])
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in md.graph.initializer}
    assert all(np.array_equal(inits[k], v.detach().numpy()) for k, v in model.state_dict().items())
    found = resizes(md)
    print("  resize_cubic_dynamo.onnx Resize nodes:", found)
    assert [c for c, _, _ in found] == ["half_pixel", "align_corners", "half_pixel"], found


if __name__ == "__main__":
    main()
