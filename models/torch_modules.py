"""torch_modules.py -- the PyTorch modules of models/make_torch_modules_models.py.

Kept apart from the export script so that bench/torch_models.py can build the same modules
(load_model("encoder_layer" | "norm_cnn", ...)) without the script's onnxruntime check.
Needs torch.
"""
import torch
import torch.nn as nn


class EncoderLayerWithLoss(nn.Module):
    def __init__(self, vocab=64, d=32, T=16, heads=2, hidden=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.02)
        self.layer = nn.TransformerEncoderLayer(d, heads, hidden, dropout=0.0, activation="gelu",
                                                batch_first=True, norm_first=True)
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets):
        T = tokens.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        x = self.layer(self.tok(tokens) + self.pos, src_mask=mask)
        logits = self.head(self.lnf(x))
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class NormCNNWithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.inorm = nn.InstanceNorm2d(16, affine=True)
        self.fc = nn.Linear(256, 10)

    def forward(self, x, y):
        h = nn.functional.silu(self.gn(self.conv1(x)))
        h = nn.functional.silu(self.inorm(self.conv2(h)))
        logits = self.fc(nn.functional.max_pool2d(h, 2).flatten(1))
        return nn.functional.cross_entropy(logits, y)


class ActMLPWithLoss(nn.Module):
    """One Linear(.., 32) per activation torch.nn exports as an op mpc lowers at import."""

    ACTS = ("hardswish", "elu", "selu", "celu", "mish", "softplus", "softsign", "hardsigmoid",
            "prelu")

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.hidden = nn.ModuleList(nn.Linear(32, 32) for _ in self.ACTS)
        self.acts = nn.ModuleList([nn.Hardswish(), nn.ELU(alpha=0.7), nn.SELU(), nn.CELU(alpha=2.0),
                                   nn.Mish(), nn.Softplus(), nn.Softsign(), nn.Hardsigmoid(),
                                   nn.PReLU(32, init=0.2)])
        self.out = nn.Linear(32, 4)

    def forward(self, x, y):
        h = self.inp(x)
        for lin, act in zip(self.hidden, self.acts):
            h = act(lin(h))
        return nn.functional.mse_loss(self.out(h), y)


class ReduceHeadWithLoss(nn.Module):
    """Normalised embeddings against normalised prototypes, with a loss built from the reductions
    torch exports as ops mpc lowers at import: F.normalize (ReduceL2), torch.logsumexp
    (ReduceLogSumExp), amin (ReduceMin) and linalg.vector_norm(ord=1) (ReduceL1)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(16, 32)
        self.proto = nn.Parameter(torch.randn(8, 32))

    def forward(self, x, y):
        h = self.embed(x)
        z = nn.functional.normalize(h, dim=-1)
        p = nn.functional.normalize(self.proto, dim=-1)
        logits = z @ p.t() / 0.1
        # soft targets over the first four prototypes (float ops only: the CUDA backend has no
        # integer arithmetic for labels computed in the graph)
        picked = (logits[:, :4] * y.softmax(dim=-1)).sum(dim=-1)
        contrast = (torch.logsumexp(logits, dim=-1) - picked).mean()
        spread = logits.amin(dim=-1).mean()
        sparsity = torch.linalg.vector_norm(h, ord=1, dim=-1).mean()
        return contrast + 0.01 * spread + 0.001 * sparsity


class ResizeCNNWithLoss(nn.Module):
    """A small encoder-decoder through the F.interpolate modes users train with: nearest x2
    (nn.Upsample's default), bilinear x2 with align_corners=True and bilinear x0.25 with
    align_corners=False (all export as Resize), and pixel_shuffle / pixel_unshuffle
    (DepthToSpace / SpaceToDepth), which mpc lowers at import."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.mid = nn.Conv2d(8, 8, 3, padding=1)
        self.up = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 8 * 8, 10)

    def forward(self, x, y):
        h = torch.relu(self.down(x))  # 8x8
        h = nn.functional.interpolate(h, scale_factor=2, mode="nearest")  # 16x16
        h = torch.relu(self.mid(h))
        h = nn.functional.pixel_unshuffle(nn.functional.pixel_shuffle(h, 2), 2)  # 2x32x32, back
        h = nn.functional.interpolate(h, scale_factor=2, mode="bilinear", align_corners=True)
        h = torch.relu(self.up(h))  # 32x32
        h = nn.functional.interpolate(h, scale_factor=0.25, mode="bilinear", align_corners=False)
        return nn.functional.cross_entropy(self.fc(h.flatten(1)), y)


class EinsumAttnWithLoss(nn.Module):
    """Single-head attention written with torch.einsum (scores, the weighted sum, and a
    per-dim gate as an outer product), which exports as Einsum; mpc lowers it at import."""

    def __init__(self, vocab=64, d=32):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.gate = nn.Parameter(torch.randn(d) * 0.1)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets):
        x = self.tok(tokens)
        q, k, v = self.q(x), self.k(x), self.v(x)
        scores = torch.einsum("bqd,bkd->bqk", q, k) / (q.shape[-1] ** 0.5)
        h = torch.einsum("bqk,bkd->bqd", scores.softmax(dim=-1), v)
        h = h + torch.einsum("btd,d->btd", x, self.gate)
        logits = self.head(h)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


class RnnLMWithLoss(nn.Module):
    """A next-token model through nn.LSTM (bidirectional) and nn.GRU, which export as LSTM and
    GRU nodes; mpc unrolls them at import."""

    def __init__(self, vocab=64, d=16):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, 24, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(48, d, batch_first=True)
        self.head = nn.Linear(d, vocab)

    def forward(self, tokens, targets):
        h, _ = self.lstm(self.tok(tokens))
        h, _ = self.gru(h)
        logits = self.head(h)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
