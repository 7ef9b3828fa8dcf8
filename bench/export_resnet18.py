#!/usr/bin/env python3
"""export_resnet18.py MODEL.onnx DATA.npz -- torchvision's resnet18 (10 classes, 32x32 images, 20 batch
norms) with its cross-entropy loss, exported by torch.onnx's TorchScript exporter in training mode with a
symbolic batch, and 256 random images with labels. The data-parallel benchmarks (bench/sync_batch_norm.sh,
bench/grad_comm.sh) train it: a network whose 42 MiB of gradients cross ranks every step.

Needs torch and torchvision (pip)."""
import os
import sys

import numpy as np
import torch
import torchvision.models as tv

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from library_models import ClassifierWithLoss  # noqa: E402  (models/)


def main(model_path, data_path):
    torch.manual_seed(0)
    model = ClassifierWithLoss(tv.resnet18(num_classes=10)).train()
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    torch.onnx.export(model, (x, y), model_path, input_names=["x", "y"], output_names=["loss"],
                      dynamo=False, training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False,
                      opset_version=17, dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    g = torch.Generator().manual_seed(1)
    np.savez(data_path, x=torch.randn(256, 3, 32, 32, generator=g).numpy(),
             y=torch.randint(0, 10, (256,), generator=g).numpy())


if __name__ == "__main__":
    main(*sys.argv[1:3])
