#!/usr/bin/env python3
"""make_torch_modules_models.py -- models built from PyTorch's own modules, in models/.

The issue-3 families (make_issue3_models.py) spell their attention out; users export
torch.nn's modules. This script exports one of those the same way (TorchScript exporter,
dynamo=False, TrainingMode.TRAINING, do_constant_folding=False, opset 17, torch.manual_seed(0)),
with the helpers and conventions of make_issue3_models.py (same data layout, batches and
reference runs), so that mpc's tests train it against PyTorch:

  encoder_layer  Embedding(64,32) + learned pos [16,32]; nn.TransformerEncoderLayer(d_model=32,
                 nhead=2, dim_feedforward=64, dropout=0, activation="gelu", batch_first=True,
                 norm_first=True) under a causal mask (nn.Transformer.generate_square_subsequent_mask:
                 torch.triu of -inf above the diagonal, exported as Trilu); LayerNorm; Linear(32,64);
                 CrossEntropyLoss over (B*T, vocab). tokens int64[4,16], targets int64[4,16].
                 nn.MultiheadAttention exports its packed in_proj with unflatten(-1, (3, E)),
                 whose axis arithmetic is a Mod.

  norm_cnn       Conv2d(3,8,3,p1) -> GroupNorm(2, 8) -> SiLU -> Conv2d(8,16,3,s2,p1)
                 -> InstanceNorm2d(16, affine=True) -> SiLU -> MaxPool2d(2) -> Flatten
                 -> Linear(256,10) -> CrossEntropyLoss. x float[8,3,16,16], y int64[8] (cnn_data.npz's arrays).
                 Both norms export as InstanceNormalization: GroupNorm's over [N, 2, -1] with a
                 constant unit scale and zero bias and its affine after, InstanceNorm2d's with the
                 module's weight and bias. norm_cnn_opset16.onnx is the same model and weights at
                 opset 16, before ONNX's LayerNormalization.

  act_mlp        Linear(16,32), then nine Linear(32,32) each followed by one of Hardswish,
                 ELU(0.7), SELU, CELU(2), Mish, Softplus, Softsign, Hardsigmoid, PReLU(32), then
                 Linear(32,4) and an MSE loss. x float[16,16], y float[16,4] (resmlp_data.npz's
                 arrays). The activations export as ops mpc lowers at import (Mish as Softplus,
                 Tanh, Mul; Softsign as x / (1 + Abs(x))).

  reduce_head    h = Linear(16,32)(x); logits = normalize(h) @ normalize(proto [8,32]).T / 0.1;
                 loss = mean(logsumexp(logits) - sum(logits[:, :4] * softmax(y))) + 0.01 *
                 mean(amin(logits)) + 0.001 * mean(vector_norm(h, ord=1)). x float[16,16],
                 y float[16,4] (resmlp_data.npz's arrays). Exports ReduceL2, ReduceLogSumExp,
                 ReduceMin and ReduceL1, which mpc lowers at import.

  resize_cnn     Conv2d(3,8,3,s2,p1) -> ReLU -> interpolate(x2, nearest) -> Conv2d(8,8,3,p1) -> ReLU
                 -> pixel_shuffle(2) -> pixel_unshuffle(2)
                 -> interpolate(x2, bilinear, align_corners=True) -> Conv2d(8,8,3,p1) -> ReLU
                 -> interpolate(x0.25, bilinear) -> Flatten -> Linear(512,10) -> CrossEntropyLoss.
                 x float[8,3,16,16], y int64[8] (cnn_data.npz's arrays). Three Resize nodes, a
                 DepthToSpace and pixel_unshuffle's own Reshape/Transpose.

  einsum_attn    Embedding(64,32); single-head attention with torch.einsum ("bqd,bkd->bqk"
                 scores / sqrt(32), softmax, "bqk,bkd->bqd") plus x * gate ("btd,d->btd");
                 Linear(32,64); CrossEntropyLoss. tokens, targets int64[4,16]
                 (transformer_data.npz's arrays). Three Einsum nodes.

  rnn_lm         Embedding(64,16) -> LSTM(16, 24, bidirectional, batch_first) -> GRU(48, 16,
                 batch_first) -> Linear(16,64) -> CrossEntropyLoss. tokens, targets int64[4,16]
                 (transformer_data.npz's arrays). One LSTM and one GRU node.

Artifacts, for <name> in encoder_layer, norm_cnn, act_mlp, reduce_head, resize_cnn,
einsum_attn, rnn_lm: <name>.onnx, <name>_data.npz (the issue-3
transformer's and CNN's arrays), <name>_ref_sgd.csv, <name>_ref_adam.csv (30 fp32 CPU steps, as
for the issue-3 models).

Regenerate:  python3 models/make_torch_modules_models.py   (needs torch, onnx, onnxruntime, numpy)
"""
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_issue3_models import family, make_cnn_data, make_resmlp_data, make_transformer_data, out  # noqa: E402
from torch_modules import (ActMLPWithLoss, EinsumAttnWithLoss,  # noqa: E402
                           EncoderLayerWithLoss, NormCNNWithLoss, ReduceHeadWithLoss,
                           ResizeCNNWithLoss, RnnLMWithLoss)


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore", "You are using the legacy TorchScript", DeprecationWarning)
    warnings.filterwarnings("ignore", "enable_nested_tensor", UserWarning)
    r = family("encoder_layer", EncoderLayerWithLoss, make_transformer_data(), ["tokens", "targets"], 4,
               np.savez)
    ops = r["encoder_layer.onnx"]
    assert ops["Trilu"] == 1 and ops["Mod"] >= 1, ops
    r = family("norm_cnn", NormCNNWithLoss, make_cnn_data(), ["x", "y"], 8, np.savez_compressed,
               extra=[("norm_cnn_opset16.onnx", 16, "static")])
    for f in ("norm_cnn.onnx", "norm_cnn_opset16.onnx"):
        assert r[f]["InstanceNormalization"] == 2, r[f]
    r = family("act_mlp", ActMLPWithLoss, make_resmlp_data(), ["x", "y"], 16, np.savez)
    # nn.Softsign exports as x / (1 + Abs(x)), not the Softsign op
    for op in ("HardSwish", "Elu", "Selu", "Celu", "Softplus", "Abs", "HardSigmoid", "PRelu"):
        assert r["act_mlp.onnx"].get(op, 0) >= 1, (op, r["act_mlp.onnx"])
    r = family("reduce_head", ReduceHeadWithLoss, make_resmlp_data(), ["x", "y"], 16, np.savez)
    for op in ("ReduceL2", "ReduceLogSumExp", "ReduceMin", "ReduceL1"):
        assert r["reduce_head.onnx"].get(op, 0) >= 1, (op, r["reduce_head.onnx"])
    r = family("resize_cnn", ResizeCNNWithLoss, make_cnn_data(), ["x", "y"], 8, np.savez_compressed)
    assert r["resize_cnn.onnx"]["Resize"] == 3, r["resize_cnn.onnx"]
    assert r["resize_cnn.onnx"]["DepthToSpace"] == 1, r["resize_cnn.onnx"]
    r = family("einsum_attn", EinsumAttnWithLoss, make_transformer_data(), ["tokens", "targets"],
               4, np.savez)
    assert r["einsum_attn.onnx"]["Einsum"] == 3, r["einsum_attn.onnx"]
    r = family("rnn_lm", RnnLMWithLoss, make_transformer_data(), ["tokens", "targets"], 4, np.savez)
    assert r["rnn_lm.onnx"]["LSTM"] == 1 and r["rnn_lm.onnx"]["GRU"] == 1, r["rnn_lm.onnx"]
    for f in ("encoder_layer.onnx", "norm_cnn.onnx", "norm_cnn_opset16.onnx", "act_mlp.onnx",
              "reduce_head.onnx", "resize_cnn.onnx", "einsum_attn.onnx", "rnn_lm.onnx"):
        size = os.path.getsize(out(f))
        print(f"{f} {size} bytes")
        assert size < 300 * 1024


if __name__ == "__main__":
    main()
