#!/usr/bin/env python3
"""make_loss_head_models.py -- binary cross-entropy heads exported by torch's dynamo exporter.

Two small models whose loss is nn.BCEWithLogitsLoss, which the exporter writes as
(1 - y) z - Log(Sigmoid(z)): in fp16 a sigmoid rounded to half precision loses log(sigmoid(z)),
which mpc's fuse-log-sigmoid computes stably in fp32 (PyTorch autocast keeps
binary_cross_entropy_with_logits in fp32). Exported as make_dynamo_models.py exports
(torch.onnx.export(..., dynamo=True, optimize=False), training mode), initial weights from
torch.manual_seed(0):

  electra_head_dynamo.onnx   ELECTRA's replaced-token discriminator in miniature (transformers'
                             ElectraDiscriminatorPredictions): token + position embeddings,
                             LayerNorm, Linear(32,32) -> GELU -> Linear(32,1) per token, BCE with
                             logits against float labels [B,T] (1 = replaced).
                             tokens int64[8,16], labels float[8,16]; electra_head_data.npz (256
                             sequences, a fixed rule marks the replaced tokens).
  multilabel_head_dynamo.onnx  Linear(16,32) -> ReLU -> Linear(32,8), BCE with logits against
                             multi-hot targets float[B,8]. x float[32,16], y float[32,8];
                             multilabel_head_data.npz (256 samples, y = [x @ A > 0.3]).

<name>_ref_{sgd,adam}.csv: PyTorch's fp32 losses, 30 steps (make_issue3_models.py's trajectories:
SGD(lr=0.05, momentum=0.9) and Adam(lr=1e-3), batches in order).

Regenerate:  python3 models/make_loss_head_models.py   (needs torch >= 2.9, onnxscript, onnx)
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
from make_issue3_models import batch, out, savez, trajectories  # noqa: E402


class ElectraHead(nn.Module):
    """Embeddings and one discriminator head, as transformers' ELECTRA computes its loss."""

    def __init__(self, vocab=64, seq=16, d=32):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(seq, d) * 0.02)
        self.norm = nn.LayerNorm(d)
        self.dense, self.out = nn.Linear(d, d), nn.Linear(d, 1)
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, tokens, labels):
        h = self.norm(self.tok(tokens) + self.pos)
        logits = self.out(nn.functional.gelu(self.dense(h))).squeeze(-1)
        return self.loss(logits.reshape(-1, tokens.shape[1]), labels)


class MultiLabelHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, x, y):
        return self.loss(self.fc2(torch.relu(self.fc1(x))), y)


def electra_data(rng):
    tokens = rng.integers(0, 64, size=(256, 16)).astype(np.int64)
    labels = ((tokens * 7 + np.arange(16)) % 5 == 0).astype(np.float32)  # "replaced" tokens
    return {"tokens": tokens, "labels": labels}


def multilabel_data(rng):
    x = rng.standard_normal((256, 16)).astype(np.float32)
    a = rng.standard_normal((16, 8)).astype(np.float32) / 4
    return {"x": x, "y": (x @ a > 0.3).astype(np.float32)}


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)
    for name, cls, data, inputs, bsz in [
            ("electra_head", ElectraHead, electra_data(rng), ["tokens", "labels"], 8),
            ("multilabel_head", MultiLabelHead, multilabel_data(rng), ["x", "y"], 32)]:
        savez(f"{name}_data.npz", np.savez, **data)
        torch.manual_seed(0)
        model = cls().train()
        start = copy.deepcopy(model.state_dict())
        m, kinds, ops = export(model, batch(data, inputs, bsz, 0), f"{name}_dynamo.onnx", inputs)
        sigmoids = {o for n in m.graph.node if n.op_type == "Sigmoid" for o in n.output}
        logs = [n for n in m.graph.node if n.op_type == "Log"]
        assert logs and all(n.input[0] in sigmoids for n in logs), "no Log(Sigmoid) in the export"
        model.load_state_dict(start)
        trajectories(f"{name}_dynamo", model, start, data, inputs, bsz)


if __name__ == "__main__":
    main()
