#!/usr/bin/env python3
"""make_zoo_ops_models.py -- model-zoo patterns that need Sign, TopK and ArgMax, in models/.

Each model is exported by torch's dynamo exporter (make_dynamo_models.export: dynamo=True,
optimize=False, training mode, the exporter's own output), trained by PyTorch for the references
(make_issue3_models.trajectories: 30 fp32 steps of SGD(0.05, momentum 0.9) and Adam(1e-3), batches
in order), torch.manual_seed(0):

  alexnet_small   torchvision's AlexNet class (its forward: features, AdaptiveAvgPool2d((6, 6)),
                  flatten, classifier) with narrow layers in its own layout (convolutions 11/4,
                  5, 3, 3, 3 with widths 8-16, the three max pools; classifier 576-32-32-10, no
                  dropout) on 3x96x96 images: the features end at 2x2, which does not divide 6, so
                  the exporter computes the pooling bins' edges with Div, Abs, Floor and Sign and
                  gathers the windows (GatherND, Gather, Where).
  vgg11_bn_small  torchvision's VGG class with make_layers(batch_norm=True) on configuration "A"'s
                  layout (8 convolutions, 5 max pools) at widths 8-32, AdaptiveAvgPool2d((7, 7)),
                  classifier 1568-32-32-10, on CIFAR-sized 3x32x32 images (features end at 1x1).
  adaptive_cnn    a convolution then AdaptiveAvgPool2d((4, 6)) of 10x13 maps: bins of 2 and 3
                  rows, 2 and 3 columns that overlap, the case where the bins truly average.
  clip_text_tiny  transformers' CLIPTextModel (vocab 64, width 32, 2 layers, 2 heads, 16 positions,
                  eos_token_id 2: the original CLIP's pooling at the argmax of the token ids, ArgMax
                  on int64) and a linear head, cross entropy on a class the text decides.
  mae_tiny        transformers' ViTMAEForPreTraining (16x16 images, 4x4 patches, width 32, 2
                  encoder layers, a 1-layer decoder, mask ratio 0.75) with the masking noise given
                  as an input: argsort(noise) twice (TopK over the whole axis, smallest first),
                  the kept patches gathered (GatherElements), the pixel loss on the masked ones.
  topk_pool       an MLP over 12 tokens with k-max pooling (torch.topk(k=3).values over the
                  tokens, whose gradient goes to the picked elements) then a linear head.

Artifacts, for <name> above: <name>.onnx, <name>_data.npz, <name>_ref_sgd.csv, <name>_ref_adam.csv.

Regenerate:  python3 models/make_zoo_ops_models.py
             (needs torch >= 2.9, torchvision, transformers, onnxscript, onnx, numpy)
"""
import collections
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_dynamo_models import export  # noqa: E402
from make_issue3_models import batch, savez, trajectories  # noqa: E402

BATCH = 4


def quantised_images(rng, n, size, width=None, classes=10):
    """Images whose class brightens one region of one channel; pixels multiples of 1/4 in [-2, 2]
    (small compressed npz)."""
    y = rng.integers(0, classes, size=n)
    x = rng.standard_normal((n, 3, size, width or size))
    h = min(size, width or size) // 2
    for i in range(n):
        c, q = y[i] % 3, y[i] // 3
        r0, c0 = (q // 2 % 2) * h, (q % 2) * h
        x[i, c, r0:r0 + h, c0:c0 + h] += 1.0
    x = (np.clip(np.round(x * 4.0), -8, 8) / 4.0).astype(np.float32)
    return {"x": x, "y": y.astype(np.int64)}


class Classify(nn.Module):
    """cross_entropy(model(x), y)."""

    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, x, y):
        return nn.functional.cross_entropy(self.net(x), y)


def alexnet_small():
    import torchvision
    m = torchvision.models.AlexNet(num_classes=10, dropout=0.0)
    m.features = nn.Sequential(
        nn.Conv2d(3, 8, kernel_size=11, stride=4, padding=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(8, 16, kernel_size=5, padding=2), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2),
        nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(16, 16, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.MaxPool2d(kernel_size=3, stride=2))
    m.classifier = nn.Sequential(nn.Dropout(p=0.0), nn.Linear(16 * 6 * 6, 32), nn.ReLU(inplace=True),
                                 nn.Dropout(p=0.0), nn.Linear(32, 32), nn.ReLU(inplace=True),
                                 nn.Linear(32, 10))
    return Classify(m)


def vgg11_bn_small():
    import torchvision
    from torchvision.models.vgg import make_layers
    cfg = [8, "M", 16, "M", 16, 16, "M", 32, 32, "M", 32, 32, "M"]  # "A"'s layout, narrow
    m = torchvision.models.VGG(make_layers(cfg, batch_norm=True), num_classes=10, dropout=0.0)
    m.classifier = nn.Sequential(nn.Linear(32 * 7 * 7, 32), nn.ReLU(True), nn.Dropout(p=0.0),
                                 nn.Linear(32, 32), nn.ReLU(True), nn.Dropout(p=0.0), nn.Linear(32, 10))
    return Classify(m)


class AdaptiveCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d((4, 6))
        self.fc = nn.Linear(8 * 4 * 6, 10)

    def forward(self, x, y):
        h = self.pool(torch.relu(self.conv(x)))
        return nn.functional.cross_entropy(self.fc(torch.flatten(h, 1)), y)


class ClipText(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import CLIPTextConfig, CLIPTextModel
        cfg = CLIPTextConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=2, max_position_embeddings=16, eos_token_id=2, bos_token_id=1, pad_token_id=0,
                             attn_implementation="eager")
        self.text = CLIPTextModel(cfg)
        self.head = nn.Linear(32, 10)

    def forward(self, tokens, y):
        pooled = self.text(input_ids=tokens).pooler_output
        return nn.functional.cross_entropy(self.head(pooled), y)


def make_clip_data(rng, n=64, t=16):
    """Token ids in [3, 62], the end-of-text token 63 (the largest id, as in CLIP) at a random
    position, padding 0 after it; the class is the token before the end mod 10."""
    tokens = rng.integers(3, 63, size=(n, t))
    ends = rng.integers(4, t, size=n)
    y = np.empty(n, dtype=np.int64)
    for i, e in enumerate(ends):
        tokens[i, e] = 63
        tokens[i, e + 1:] = 0
        y[i] = tokens[i, e - 1] % 10
    return {"tokens": tokens.astype(np.int64), "y": y}


class MAE(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import ViTMAEConfig, ViTMAEForPreTraining
        cfg = ViTMAEConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
                           num_attention_heads=2, intermediate_size=64, decoder_hidden_size=32,
                           decoder_num_hidden_layers=1, decoder_num_attention_heads=2,
                           decoder_intermediate_size=64, mask_ratio=0.75, hidden_dropout_prob=0.0,
                           attention_probs_dropout_prob=0.0, attn_implementation="eager")
        self.mae = ViTMAEForPreTraining(cfg)

    def forward(self, x, noise):
        return self.mae(pixel_values=x, noise=noise).loss


class TopKPool(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16 * 3, 4)

    def forward(self, x, y):
        h = torch.tanh(self.fc1(x))                  # [B, 12, 16]
        top = torch.topk(h, 3, dim=1).values         # [B, 3, 16]: k-max pooling over tokens
        return nn.functional.cross_entropy(self.fc2(top.flatten(1)), y)


def family(name, make, data, names, expect):
    savez(f"{name}_data.npz", np.savez_compressed, **data)
    torch.manual_seed(0)
    model = make().train()
    state = {k: v.clone() for k, v in model.state_dict().items()}
    args = batch(data, names, BATCH, 0)
    m, _, ops = export(model, args, f"{name}.onnx", names)
    model.load_state_dict(state)
    counts = collections.Counter(ops)
    for op in expect:
        assert counts[op] >= 1, (name, op, dict(counts))
    print(f"  {name}: " + ", ".join(f"{op} {counts[op]}" for op in expect))
    trajectories(name, model, state, data, names, BATCH)


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    only = set(sys.argv[1:])
    rng = None  # each family draws its data from its own generator, so any subset regenerates alike
    todo = [
        ("alexnet_small", alexnet_small, lambda: quantised_images(rng, 16, 96), ["x", "y"], ["Sign", "GatherND"]),
        ("vgg11_bn_small", vgg11_bn_small, lambda: quantised_images(rng, 32, 32), ["x", "y"], ["Sign"]),
        ("adaptive_cnn", AdaptiveCNN, lambda: quantised_images(rng, 64, 10, 13), ["x", "y"],
         ["Sign"]),
        ("clip_text_tiny", ClipText, lambda: make_clip_data(rng), ["tokens", "y"], ["ArgMax"]),
        ("mae_tiny", MAE, lambda: {"x": quantised_images(rng, 32, 16)["x"],
                                   "noise": rng.random((32, 16)).astype(np.float32)}, ["x", "noise"], ["TopK"]),
        ("topk_pool", TopKPool, lambda: {"x": rng.standard_normal((64, 12, 8)).astype(np.float32),
                                         "y": rng.integers(0, 4, 64).astype(np.int64)}, ["x", "y"], ["TopK"]),
    ]
    for seed, (name, make, data, names, expect) in enumerate(todo):
        if only and name not in only:
            continue
        rng = np.random.default_rng(seed)
        family(name, make, data(), names, expect)
    for f in sorted(os.listdir(os.path.dirname(os.path.abspath(__file__)))):
        if any(f.startswith(t[0]) for t in todo):
            print(f"{f} {os.path.getsize(os.path.join(os.path.dirname(os.path.abspath(__file__)), f))} bytes")


if __name__ == "__main__":
    main()
