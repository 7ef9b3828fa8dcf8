#!/usr/bin/env python3
"""make_library_models.py -- the architectures users take from torchvision and Hugging Face, in models/.

The torch.nn-module families (make_torch_modules_models.py) build models from torch.nn's layers; users
export whole architectures from model libraries. This script instantiates four of them at tiny sizes
(a few thousand parameters: the real classes and forward code, small widths and depths) and exports
them the same way (TorchScript exporter, dynamo=False, TrainingMode.TRAINING, do_constant_folding=False,
opset 17, torch.manual_seed(0)), with make_issue3_models.py's data, batches and reference runs:

  gpt2_tiny     transformers' GPT2LMHeadModel (2 layers, d 32, 2 heads, vocab 64, 16 positions, no
                dropout, eager attention) with the mask and positions passed explicitly (transformers 5's
                own mask code calls torch.diff, which the exporter refuses); CrossEntropyLoss over
                (B*T, vocab). tokens, targets int64[4,16] (transformer_data.npz's arrays). Its causal
                mask exports as LessOrEqual, And and Where over constants.

  llama_tiny    transformers' LlamaForCausalLM (2 layers, d 32, 2 heads, 1 key/value head, MLP 64,
                vocab 64), the same way: RMSNorm as Pow/ReduceMean/Sqrt arithmetic, rotary embeddings
                as Sin and Cos of constant angles, grouped-query attention by Expand, SiLU gating.

  swin_tiny     torchvision's SwinTransformer (patch 4, embed 16, depths [2, 2], heads [2, 4], window
                [3, 3], no stochastic depth, 10 classes) on 16x16 images: windows that do not divide
                the 4x4 patch grid pad it (F.pad -> Pad), the shifted windows' mask is an indexed
                assignment over constants (ScatterND), patch merging slices and concatenates.
                x float[8,3,16,16], y int64[8] (cnn_data.npz's arrays).

  convnext_tiny torchvision's ConvNeXt (two stages of widths 16 and 32, one block each, layer scale,
                no stochastic depth, 10 classes): 7x7 depthwise convolutions, LayerNorm over channels
                between Permutes, GELU. Same data as swin_tiny.

  convnext_tiny_sd.onnx is convnext_tiny (same weights) with stochastic depth 0.5: every block's
  residual branch after the first (the linear schedule gives the first p = 0) is dropped per sample
  by RandomUniformLike < survival rate. It has no PyTorch
  trajectory (the draws are random); the tests check that it trains and is reproducible under --seed.

Artifacts, for <name> above: <name>.onnx, <name>_data.npz, <name>_ref_sgd.csv, <name>_ref_adam.csv
(30 fp32 CPU steps, as for the issue-3 models); convnext_tiny_sd.onnx.

Regenerate:  python3 models/make_library_models.py
             (needs torch, torchvision, transformers, onnx, onnxruntime, numpy)
"""
import os
import sys
import warnings

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from library_models import convnext_tiny, gpt2_tiny, llama_tiny, swin_tiny  # noqa: E402
from make_issue3_models import export, family, make_cnn_data, make_transformer_data, out  # noqa: E402


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    tokens = ["tokens", "targets"]
    r = family("gpt2_tiny", gpt2_tiny, make_transformer_data(), tokens, 4, np.savez)
    assert r["gpt2_tiny.onnx"].get("LessOrEqual", 0) >= 1, r["gpt2_tiny.onnx"]
    r = family("llama_tiny", llama_tiny, make_transformer_data(), tokens, 4, np.savez)
    assert r["llama_tiny.onnx"].get("Sin", 0) >= 1 and r["llama_tiny.onnx"].get("Cos", 0) >= 1
    r = family("swin_tiny", swin_tiny, make_cnn_data(), ["x", "y"], 8, np.savez_compressed)
    assert r["swin_tiny.onnx"].get("Pad", 0) >= 1 and r["swin_tiny.onnx"].get("ScatterND", 0) >= 1, \
        r["swin_tiny.onnx"]
    r = family("convnext_tiny", convnext_tiny, make_cnn_data(), ["x", "y"], 8, np.savez_compressed)
    # The same weights with stochastic depth on: the blocks' DropPath becomes RandomUniformLike.
    torch.manual_seed(0)
    plain = convnext_tiny()
    torch.manual_seed(0)
    dropping = convnext_tiny(0.5)
    dropping.load_state_dict(plain.state_dict())
    data = make_cnn_data()
    args = (torch.from_numpy(data["x"][:8]), torch.from_numpy(data["y"][:8]))
    _, m = export(dropping.train(), args, "convnext_tiny_sd.onnx", ["x", "y"], 17)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("RandomUniformLike") == 1, ops  # block 0 of the linear schedule has p = 0
    for f in ("gpt2_tiny.onnx", "llama_tiny.onnx", "swin_tiny.onnx", "convnext_tiny.onnx",
              "convnext_tiny_sd.onnx"):
        size = os.path.getsize(out(f))
        print(f"{f} {size} bytes")
        assert size < 600 * 1024  # swin_tiny: 1974 nodes, most of them its shape arithmetic


if __name__ == "__main__":
    main()
