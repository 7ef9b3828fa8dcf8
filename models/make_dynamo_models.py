#!/usr/bin/env python3
"""make_dynamo_models.py -- models exported by torch's dynamo exporter, the default from torch 2.9.

torch.onnx.export(model, args, dynamo=True, optimize=False) on a module in training mode, the
exporter's own output with only its per-node stack traces (paths on this machine) removed. mpc reads
what this exporter records (passes/onnx/torch_export_signature.h): which initializers are
parameters, buffers or constants, and which batch norms were traced in training mode, since it
writes every BatchNormalization in inference form. Its ONNX optimizer (optimize=True, the default)
folds batch norms into convolutions and merges parameters of equal value; mpc refuses such a model.

  gpt2_tiny_dynamo.onnx     make_library_models.py's gpt2_tiny, same initial weights (checked against
                            gpt2_tiny.onnx), so gpt2_tiny_data.npz and gpt2_tiny_ref_*.csv are its
                            data and PyTorch trajectories. The exporter writes the query/key/value
                            split as SplitToSequence read by SequenceAt, and the causal mask's index
                            arithmetic as GatherND.

  gpt2_plain_dynamo.onnx    the same GPT-2 as users call it: transformers' default attention
                            (scaled_dot_product_attention) and its own causal mask and positions,
                            the tokens alone given. The exporter writes the mask arithmetic with
                            CumSum, GatherND, Where and IsNaN. gpt2_plain_dynamo_ref_{sgd,adam}.csv.

  cnn_dynamo.onnx           make_issue3_models.py's CNN (Conv, training-mode BatchNorm2d, ...): the
                            BatchNormalization is in inference form, its node metadata names
                            aten._native_batch_norm_legit_functional. torch.export does not run the
                            forward, so the running statistics are the initial ones (0 and 1).
                            cnn_dynamo_ref_{sgd,adam}.csv: PyTorch's 30 steps on cnn_data.npz;
                            cnn_dynamo_ref_adam_final.npz: its state after the Adam run, running
                            statistics included.

  frozen_norm_dynamo.onnx   Linear -> BatchNorm1d kept in eval mode (fine-tuning with frozen
                            statistics: aten._native_batch_norm_legit_no_training) -> Tanh -> Linear,
                            times a learned scalar temperature (a rank-0 parameter) and a constant
                            0.5, plus a persistent buffer; MSE loss on resmlp_data.npz. Only the
                            seven parameters train. frozen_norm_dynamo_ref_{sgd,adam}.csv and
                            frozen_norm_dynamo_ref_adam_final.npz (its parameters).

  rmsnorm_dynamo.onnx       Linear -> torch.nn.RMSNorm -> SiLU -> Linear, MSE loss on resmlp_data.npz,
                            exported at opset 23, where the exporter writes RMSNormalization.
                            rmsnorm_dynamo_ref_{sgd,adam}.csv.

  attention_dynamo.onnx     a token model with scaled_dot_product_attention (causal, 4 query heads over
                            2 key/value heads) and nn.MultiheadAttention, exported at opset 23, where
                            the exporter writes both as ONNX's Attention; transformer_data's tokens.
                            attention_dynamo_ref_{sgd,adam}.csv.

  cnn_dynamo_optimized.onnx the CNN with optimize=True: the batch norm is folded into conv1 and
                            lifted constants have no role in the signature; mpc refuses it.

Regenerate:  python3 models/make_dynamo_models.py   (needs torch >= 2.9, onnxscript, transformers, onnx)
"""
import contextlib
import copy
import io
import os
import sys
import warnings

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from library_models import PlainCausalLM, gpt2_tiny  # noqa: E402
from make_issue3_models import (CNNWithLoss, batch, make_cnn_data, make_resmlp_data, out,  # noqa: E402
                                trajectories)

KIND = "pkg.torch.export.graph_signature.InputSpec.kind"


class FrozenNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(16, 32), nn.BatchNorm1d(32), nn.Linear(32, 4)
        self.temperature = nn.Parameter(torch.tensor(1.5))
        self.register_buffer("offset", torch.linspace(-0.5, 0.5, 4))
        with torch.no_grad():  # statistics a pretrained network would have
            self.norm.running_mean.uniform_(-0.2, 0.2)
            self.norm.running_var.uniform_(0.5, 1.5)

    def train(self, mode=True):
        super().train(mode)
        self.norm.eval()  # frozen statistics whatever the model's mode
        return self

    def forward(self, x, y):
        h = torch.tanh(self.norm(self.fc1(x)))
        return nn.functional.mse_loss(self.fc2(h) * self.temperature * 0.5 + self.offset, y)


def gpt2_plain():
    lm = gpt2_tiny().lm  # the same configuration and weights
    lm.config._attn_implementation = "sdpa"  # transformers' default, which gpt2_tiny sets to eager
    return PlainCausalLM(lm)


class AttentionNet(nn.Module):
    def __init__(self, vocab=64, d=32):
        super().__init__()
        self.emb, self.qkv, self.proj = nn.Embedding(vocab, d), nn.Linear(d, 64), nn.Linear(d, d)
        self.mha = nn.MultiheadAttention(d, 2, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets):
        x = self.emb(tokens)
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split([32, 16, 16], dim=-1)
        q = q.view(b, t, 4, 8).transpose(1, 2)
        k, v = (z.view(b, t, 2, 8).transpose(1, 2) for z in (k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, 32))
        x = x + self.mha(x, x, x, need_weights=False)[0]
        logits = self.head(x)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class RMSNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.norm, self.fc2 = nn.Linear(16, 32), nn.RMSNorm(32, eps=1e-5), nn.Linear(32, 4)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)

    def forward(self, x, y):
        return nn.functional.mse_loss(self.fc2(nn.functional.silu(self.norm(self.fc1(x)))), y)


def export(model, args, fname, input_names, optimize=False, opset=None, output_names=("loss",),
           dynamic_shapes=None):
    with contextlib.redirect_stdout(io.StringIO()):
        program = torch.onnx.export(model, args, dynamo=True, optimize=optimize, opset_version=opset,
                                    input_names=input_names, output_names=list(output_names),
                                    dynamic_shapes=dynamic_shapes)
    m = program.model_proto
    for n in m.graph.node:  # the stack traces name files on the exporting machine
        keep = [p for p in n.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del n.metadata_props[:]
        n.metadata_props.extend(keep)
    m.producer_version = torch.__version__.split("+")[0]
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, out(fname))
    kinds = {v.name: p.value for v in m.graph.value_info for p in v.metadata_props if p.key == KIND}
    ops = [n.op_type for n in m.graph.node]
    print(f"{fname}: {len(ops)} nodes, {os.path.getsize(out(fname))} bytes, initializers:",
          {t.name: kinds.get(t.name) for t in m.graph.initializer})
    return m, kinds, ops


def initializers(m):
    return {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")

    # GPT-2: the same weights as gpt2_tiny.onnx, so its data and trajectories are this file's.
    torch.manual_seed(0)
    gpt2 = gpt2_tiny().train()
    data = dict(np.load(out("gpt2_tiny_data.npz")))
    m, kinds, ops = export(gpt2, batch(data, ["tokens", "targets"], 4, 0), "gpt2_tiny_dynamo.onnx",
                           ["tokens", "targets"])
    assert "SplitToSequence" in ops and "SequenceAt" in ops and "GatherND" in ops, ops
    script = initializers(onnx.load(out("gpt2_tiny.onnx")))
    mine = initializers(m)
    assert all(kinds[k] == "PARAMETER" for k in mine), kinds
    # The tied embedding is lm_head.weight here and transformer.wte.weight in the TorchScript export.
    same = {k: np.array_equal(v, script.get(k, script["lm.transformer.wte.weight"])) for k, v in mine.items()}
    assert all(same.values()) and len(mine) == len(script), "weights differ from gpt2_tiny.onnx"

    # GPT-2 as users call it.
    torch.manual_seed(0)
    plain = gpt2_plain().train()
    start = copy.deepcopy(plain.state_dict())
    m, kinds, ops = export(plain, batch(data, ["tokens", "targets"], 4, 0), "gpt2_plain_dynamo.onnx",
                           ["tokens", "targets"])
    assert "IsNaN" in ops and "CumSum" in ops, ops
    trajectories("gpt2_plain_dynamo", plain, start, data, ["tokens", "targets"], 4)

    # The CNN: a training-mode batch norm written in inference form.
    cnn_data = make_cnn_data()
    torch.manual_seed(0)
    cnn = CNNWithLoss().train()
    start = copy.deepcopy(cnn.state_dict())
    args = batch(cnn_data, ["x", "y"], 8, 0)
    m, kinds, ops = export(cnn, args, "cnn_dynamo.onnx", ["x", "y"])
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn) == 1 and len(bn[0].output) == 1, "the exporter now writes training-mode batch norms"
    assert any("_native_batch_norm_legit_functional" in p.value for p in bn[0].metadata_props)
    assert kinds["bn.running_mean"] == kinds["bn.running_var"] == "BUFFER"
    cnn.load_state_dict(start)  # the export must not have changed it
    assert all(torch.equal(v, cnn.state_dict()[k]) for k, v in start.items())
    trajectories("cnn_dynamo", cnn, start, cnn_data, ["x", "y"], 8,
                 [t.name for t in m.graph.initializer])
    export(cnn, args, "cnn_dynamo_optimized.onnx", ["x", "y"], optimize=True)

    # Frozen statistics, a buffer, a scalar parameter and a scalar constant.
    mlp_data = make_resmlp_data()
    torch.manual_seed(0)
    net = FrozenNormNet().train()
    start = copy.deepcopy(net.state_dict())
    m, kinds, ops = export(net, batch(mlp_data, ["x", "y"], 16, 0), "frozen_norm_dynamo.onnx", ["x", "y"])
    assert kinds["offset"] == "BUFFER" and kinds["temperature"] == "PARAMETER", kinds
    assert [t.dims for t in m.graph.initializer if t.name == "temperature"] == [[]]
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn) == 1 and any("_no_training" in p.value for p in bn[0].metadata_props)
    trajectories("frozen_norm_dynamo", net, start, mlp_data, ["x", "y"], 16,
                 [k for k, _ in net.named_parameters()])

    # torch.nn.RMSNorm at opset 23: ONNX's RMSNormalization.
    torch.manual_seed(0)
    net = RMSNormNet().train()
    start = copy.deepcopy(net.state_dict())
    m, kinds, ops = export(net, batch(mlp_data, ["x", "y"], 16, 0), "rmsnorm_dynamo.onnx", ["x", "y"],
                           opset=23)
    assert "RMSNormalization" in ops and m.opset_import[0].version == 23, (ops, m.opset_import)
    trajectories("rmsnorm_dynamo", net, start, mlp_data, ["x", "y"], 16)

    # scaled_dot_product_attention and nn.MultiheadAttention at opset 23: ONNX's Attention.
    torch.manual_seed(0)
    net = AttentionNet().train()
    start = copy.deepcopy(net.state_dict())
    m, kinds, ops = export(net, batch(data, ["tokens", "targets"], 4, 0), "attention_dynamo.onnx",
                           ["tokens", "targets"], opset=23)
    assert ops.count("Attention") == 2, ops
    trajectories("attention_dynamo", net, start, data, ["tokens", "targets"], 4)


if __name__ == "__main__":
    main()
