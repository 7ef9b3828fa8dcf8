"""torch_models.py -- PyTorch mirrors of the ONNX models the benchmarks train, loaded with their weights.

Each class is the PyTorch module that the model's ONNX file was exported from (models/
make_issue3_models.py, models/make_mlp_seed.py; the torch.nn-module families come from
models/torch_modules.py itself, the model-library ones from models/library_models.py) or, for the synthetic stacks, that
bench/make_transformer_stack.py writes as ONNX. load_model(family, onnx_path) builds the
module at the file's sizes and copies the file's initializers into it by name (the ONNX
initializer names are the modules' state_dict keys), so PyTorch trains exactly the model
mpc trains: same weights, same batches, same first loss.

Needs torch and onnx (both from pip).
"""
import math
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
from torch_modules import (ActMLPWithLoss, EinsumAttnWithLoss,  # noqa: E402  (models/)
                           EncoderLayerWithLoss, NormCNNWithLoss, ReduceHeadWithLoss,
                           ResizeCNNWithLoss, RnnLMWithLoss)
import library_models  # noqa: E402  (models/; torchvision and transformers when a model is built)

# models/make_library_models.py's families: Hugging Face and torchvision architectures.
LIBRARY_FAMILIES = {"gpt2_tiny": library_models.gpt2_tiny, "llama_tiny": library_models.llama_tiny,
                    "swin_tiny": library_models.swin_tiny, "convnext_tiny": library_models.convnext_tiny}


class MLPWithLoss(nn.Module):  # models/mlp_seed.onnx
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 20)
        self.fc2 = nn.Linear(20, 2)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x, y):
        return self.loss_fn(self.fc2(torch.relu(self.fc1(x))), y)


class CNNWithLoss(nn.Module):  # models/cnn.onnx
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(16 * 4 * 4, 10)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x, y):
        h = self.pool(torch.relu(self.bn(self.conv1(x))))
        h = torch.flatten(torch.relu(self.conv2(h)), 1)
        return self.loss_fn(self.fc(h), y)


class ResMLPWithLoss(nn.Module):  # models/resmlp.onnx
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 32)
        self.out = nn.Linear(32, 4)

    def forward(self, x, y):
        h = self.inp(x)
        h = h + torch.tanh(self.fc1(h))
        h = h + torch.sigmoid(self.fc2(h))
        return ((self.out(h) - y) ** 2).mean()


class Attn(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.d, self.h, self.dh = d, heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T = x.size(0), x.size(1)
        q = self.q(x).view(B, T, self.h, self.dh).transpose(1, 2)
        k = self.k(x).view(B, T, self.h, self.dh).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, self.dh).transpose(1, 2)
        att = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dh), dim=-1)
        return self.o(torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, self.d))


class Block(nn.Module):
    """One pre-LN block: x + Attn(LN1(x)), then x + MLP(LN2(x)) with the exact (erf) GELU."""

    def __init__(self, d, heads, hidden):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attn(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.fc2 = nn.Linear(hidden, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TransformerWithLoss(nn.Module):  # models/transformer.onnx (one block, its names unprefixed)
    def __init__(self, vocab, d, T, heads, hidden):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(T, d))
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attn(d, heads), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, hidden), nn.Linear(hidden, d)
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, tokens, targets):
        x = self.tok(tokens) + self.pos
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))
        logits = self.head(self.lnf(x))
        return self.loss_fn(logits.view(-1, self.vocab), targets.view(-1))


class TransformerStack(nn.Module):  # bench/make_transformer_stack.py
    def __init__(self, vocab, d, T, heads, hidden, layers):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(T, d))
        self.blocks = nn.ModuleList(Block(d, heads, hidden) for _ in range(layers))
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, tokens, targets):
        x = self.tok(tokens) + self.pos
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.lnf(x))
        return self.loss_fn(logits.view(-1, self.vocab), targets.view(-1))


def _heads(model, family, onnx_path):
    """The head count, which no weight's shape says: the stack generator writes it as metadata."""
    meta = {p.key: p.value for p in model.metadata_props}
    if "heads" in meta:
        return int(meta["heads"])
    if family == "transformer":
        return 2  # models/transformer.onnx: TransformerWithLoss(heads=2)
    raise ValueError(f"{onnx_path}: no 'heads' metadata (made by bench/make_transformer_stack.py?)")


# The families whose module has one size (the file's); transformer and stack are sized from the file.
FIXED_FAMILIES = {"mlp_seed": MLPWithLoss, "cnn": CNNWithLoss, "resmlp": ResMLPWithLoss,
                  "encoder_layer": EncoderLayerWithLoss, "norm_cnn": NormCNNWithLoss,
                  "act_mlp": ActMLPWithLoss, "reduce_head": ReduceHeadWithLoss,
                  "resize_cnn": ResizeCNNWithLoss, "einsum_attn": EinsumAttnWithLoss,
                  "rnn_lm": RnnLMWithLoss, **LIBRARY_FAMILIES}


def load_model(family, onnx_path):
    """The PyTorch module for FAMILY (mlp_seed, cnn, resmlp, transformer, encoder_layer, norm_cnn,
    act_mlp, reduce_head, resize_cnn, einsum_attn, rnn_lm, the LIBRARY_FAMILIES, stack) with
    ONNX_PATH's weights."""
    model = onnx.load(onnx_path)
    weights = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    if family in FIXED_FAMILIES:
        module = FIXED_FAMILIES[family]()
    elif family in ("transformer", "stack"):
        vocab, d = weights["tok.weight"].shape
        T = weights["pos"].shape[0]
        if family == "transformer":
            module = TransformerWithLoss(vocab, d, T, _heads(model, family, onnx_path), weights["fc1.weight"].shape[0])
        else:
            layers = sum(1 for k in weights if k.endswith(".ln1.weight"))
            module = TransformerStack(vocab, d, T, _heads(model, family, onnx_path), weights["blocks.0.fc1.weight"].shape[0], layers)
    else:
        raise ValueError(f"unknown model family '{family}'")
    state = module.state_dict()
    # A tied weight (GPT-2's lm_head is its token embedding) is one initializer in the file,
    # under the name the exporter met first: the other names of the same tensor take its value.
    for k, v in state.items():
        if k not in weights:
            tied = [t for t, w in state.items() if t in weights and w.data_ptr() == v.data_ptr()]
            if tied:
                weights[k] = weights[tied[0]]
    missing = sorted(set(state) - set(weights) - {k for k in state if k.endswith("num_batches_tracked")})
    if missing:
        raise ValueError(f"{onnx_path}: no initializer for {', '.join(missing)}")
    module.load_state_dict({k: weights.get(k, v) for k, v in state.items()})
    return module


def input_names(onnx_path):
    """The graph's data inputs in order (the arrays of the .npz, the module's forward arguments)."""
    model = onnx.load(onnx_path)
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def batches(npz_path, names, batch):
    """mpc-run's order: step i takes samples [(i*B) % N, +B), wrapping."""
    data = np.load(npz_path)
    arrays = [data[n] for n in names]
    n = arrays[0].shape[0]
    step = 0
    while True:
        idx = (np.arange(batch) + step * batch) % n
        yield [torch.from_numpy(a[idx]) for a in arrays]
        step += 1
