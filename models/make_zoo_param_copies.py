#!/usr/bin/env python3
"""make_zoo_param_copies.py -- models whose parameters the dynamo exporter reads through a no-op copy.

From the sweep of torchvision/timm/Hugging Face models (MaxViT, Whisper, wav2vec2): a parameter that
the exported forward reads through an Identity or a Transpose<perm=[0, 1]> gets a gradient that is
the same copy of another value, which cleanup removes; mpc.grads must then name the value copied.
Each model is the smallest module with the pattern, exported as make_dynamo_models.export does
(torch.onnx.export(..., dynamo=True, optimize=False), training mode), with PyTorch's 30-step
trajectories (make_issue3_models.trajectories: SGD lr=0.05 momentum=0.9, Adam lr=1e-3).

  weight_norm_dynamo.onnx   Linear(16, 32) under torch.nn.utils.parametrizations.weight_norm (the
                            weight is original1 * original0 / ||original1||, wav2vec2's positional
                            convolution), Tanh, Linear(32, 4); MSE on resmlp_data.npz, batch 16.
                            weight_norm_dynamo_ref_{sgd,adam}.csv.

  indexed_param_dynamo.onnx Embedding(64, 8) plus a learned position table nn.Parameter(16, 8) read
                            as pos[torch.arange(T)] (MaxViT's relative position bias, Whisper's
                            decoder positions; the exporter writes Transpose<perm=[0, 1]>(pos) then
                            GatherND), Linear(8, 64); cross entropy on gpt2_tiny_data.npz, batch 4.
                            indexed_param_dynamo_ref_{sgd,adam}.csv.

  frozen_param_dynamo.onnx  the indexed-parameter model plus Whisper's frozen sinusoidal positions: a
                            requires_grad=False nn.Parameter(16, 8) added to the hidden states (the
                            exporter writes it as a PARAMETER, byte for byte as a trained one), and a
                            registered buffer scaling the logits; PyTorch trains neither.
                            frozen_param_dynamo_ref_{sgd,adam}.csv (mpc matches with --frozen=sinusoid).

Regenerate:  python3 models/make_zoo_param_copies.py   (needs torch >= 2.9, onnxscript, onnx)
"""
import copy
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_dynamo_models import export  # noqa: E402
from make_issue3_models import batch, make_resmlp_data, out, trajectories  # noqa: E402


class WeightNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.utils.parametrizations.weight_norm(nn.Linear(16, 32))
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x, y):
        return nn.functional.mse_loss(self.fc2(torch.tanh(self.fc1(x))), y)


class IndexedParamNet(nn.Module):
    def __init__(self, vocab=64, d=8, positions=16):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(positions, d) * 0.1)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        x = self.emb(tokens) + self.pos[torch.arange(t)]
        logits = self.head(torch.tanh(x))
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def sinusoids(length, channels):
    """Whisper's sinusoidal position table (transformers' modeling_whisper.sinusoids)."""
    scale = np.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-scale * torch.arange(channels // 2))
    t = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class FrozenParamNet(IndexedParamNet):
    def __init__(self):
        super().__init__()
        self.sinusoid = nn.Parameter(sinusoids(16, 8), requires_grad=False)
        self.register_buffer("logit_scale", torch.tensor(0.5))

    def forward(self, tokens, targets):
        t = tokens.shape[1]
        x = torch.tanh(self.emb(tokens) + self.pos[torch.arange(t)]) + self.sinusoid[:t]
        logits = self.head(x) * self.logit_scale
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")

    mlp_data = make_resmlp_data()
    torch.manual_seed(0)
    net = WeightNormNet().train()
    start = copy.deepcopy(net.state_dict())
    m, kinds, ops = export(net, batch(mlp_data, ["x", "y"], 16, 0), "weight_norm_dynamo.onnx", ["x", "y"])
    assert "ReduceL2" in ops and "Div" in ops, ops
    assert kinds["fc1.parametrizations.weight.original0"] == "PARAMETER", kinds
    trajectories("weight_norm_dynamo", net, start, mlp_data, ["x", "y"], 16)

    tokens = dict(np.load(out("gpt2_tiny_data.npz")))
    torch.manual_seed(0)
    net = IndexedParamNet().train()
    start = copy.deepcopy(net.state_dict())
    m, kinds, ops = export(net, batch(tokens, ["tokens", "targets"], 4, 0), "indexed_param_dynamo.onnx",
                           ["tokens", "targets"])
    copies = [n for n in m.graph.node if n.op_type == "Transpose" and list(n.input) == ["pos"]]
    assert copies and list(copies[0].attribute[0].ints) == [0, 1], "pos is no longer read through a copy"
    trajectories("indexed_param_dynamo", net, start, tokens, ["tokens", "targets"], 4)

    torch.manual_seed(0)
    net = FrozenParamNet().train()
    start = copy.deepcopy(net.state_dict())
    m, kinds, ops = export(net, batch(tokens, ["tokens", "targets"], 4, 0), "frozen_param_dynamo.onnx",
                           ["tokens", "targets"])
    # What the exporter records: the frozen table is a PARAMETER like any other; the buffer is not.
    assert kinds["sinusoid"] == "PARAMETER" and kinds["logit_scale"] == "BUFFER", kinds
    trajectories("frozen_param_dynamo", net, start, tokens, ["tokens", "targets"], 4)
    assert torch.equal(net.sinusoid, sinusoids(16, 8))


if __name__ == "__main__":
    main()
