#!/usr/bin/env python3
"""make_journey_models.py -- the user's journey, start to finish, with PyTorch's answers.

Two models as a PyTorch user brings them: each returns (loss, logits), is exported by torch's
dynamo exporter (torch.onnx.export(..., dynamo=True, optimize=False)) with a dynamic batch (and
for the BERT a dynamic sequence), and is trained here by torch with AdamW in fp32 on the CPU. The
files hold what mpc must reproduce (tests/e2e/journey_test.py checks it, without torch):

  journey_bert.onnx         transformers' BertForSequenceClassification, config-built (hidden 32,
                            2 layers, 2 heads, intermediate 37, vocab 99, 3 labels, no dropout),
                            random init, called model(input_ids, attention_mask, labels=labels);
                            inputs int64 [batch, seq]; outputs loss, logits [batch, 3].
  journey_bert_data.npz     input_ids, attention_mask (sequences of 6 to 16 real tokens, padded
                            to 16), labels: 64 samples. np.random.default_rng(0).
  journey_cnn.onnx          Conv(3,8,3,p1,no bias) -> BatchNorm2d -> ReLU -> MaxPool(2) ->
                            Conv(8,16,3,s2,p1,no bias) -> BatchNorm2d -> ReLU -> global average
                            -> Linear(16,10); inputs x [batch,3,16,16], y [batch]; outputs loss,
                            logits [batch, 10]. Trains on cnn_data.npz.
  journey_<m>_ref.npz       torch's run: `loss` [10] (the loss of each of 10 AdamW steps, lr 1e-3,
                            weight decay 0.01, batches [i*B mod N, +B) in order, the loss before
                            the step's update), `eval_<input>` (a batch of 5 samples, the BERT's
                            of sequence length 12: neither the training batch nor its length),
                            `eval_logits` (model.eval()'s logits of the trained model on it),
                            and `state.<name>` (the trained state_dict: parameters, batch-norm
                            running statistics, num_batches_tracked).

Regenerate:  python3 models/make_journey_models.py   (torch >= 2.9, transformers, onnxscript, onnx)
"""
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_dynamo_models  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 10


def out(name):
    return os.path.join(HERE, name)


class BertWithLoss(nn.Module):
    """What a user writes around a Hugging Face classifier: (loss, logits)."""

    def __init__(self):
        super().__init__()
        config = transformers.BertConfig(
            vocab_size=99, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=37, max_position_embeddings=64, num_labels=3,
            hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        self.model = transformers.BertForSequenceClassification(config)

    def forward(self, input_ids, attention_mask, labels):
        o = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        return o.loss, o.logits


class CnnWithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x, y):
        h = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        h = torch.relu(self.bn2(self.conv2(h))).mean(dim=(2, 3))
        logits = self.fc(h)
        return nn.functional.cross_entropy(logits, y), logits


def export(model, args, names, dynamic, fname):
    """make_dynamo_models.export, with the (loss, logits) outputs and dynamic dims."""
    make_dynamo_models.export(model, args, fname, names, output_names=("loss", "logits"),
                              dynamic_shapes=dynamic)


def train(model, data, names, batch, fname, eval_inputs):
    """torch's run: AdamW, batches in order; the reference file."""
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    losses = []
    for i in range(STEPS):
        start = i * batch % len(data[names[0]])
        args = [torch.from_numpy(data[n][start:start + batch]) for n in names]
        opt.zero_grad()
        loss, _ = model(*args)
        loss.backward()
        losses.append(loss.item())
        opt.step()
    model.eval()
    with torch.no_grad():
        args = [torch.from_numpy(eval_inputs[n]) for n in names[:-1]]
        labels = torch.zeros(len(args[0]), dtype=torch.int64)
        _, logits = model(*args, labels)
    ref = {"loss": np.array(losses), "eval_logits": logits.numpy()}
    ref.update({"eval_" + k: v for k, v in eval_inputs.items()})
    ref.update({"state." + k: v.detach().numpy() for k, v in model.state_dict().items()})
    np.savez(out(fname), **ref)
    print(f"{fname}: losses {losses[0]:.6f} -> {losses[-1]:.6f}")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    warnings.filterwarnings("ignore")
    rng = np.random.default_rng(0)

    # BERT: sequences of 6 to 16 real tokens, padded to 16.
    n, t = 64, 16
    lengths = rng.integers(6, t + 1, n)
    ids = rng.integers(1, 99, (n, t)).astype(np.int64)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.int64)
    ids[mask == 0] = 0
    labels = (ids[:, 0] % 3).astype(np.int64)
    bert_data = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    np.savez(out("journey_bert_data.npz"), **bert_data)
    eval_ids = rng.integers(1, 99, (5, 12)).astype(np.int64)
    eval_mask = np.ones((5, 12), np.int64)
    eval_mask[1, 9:] = 0
    eval_mask[3, 7:] = 0

    torch.manual_seed(0)
    bert = BertWithLoss().train()
    names = ["input_ids", "attention_mask", "labels"]
    b, s = torch.export.Dim("batch"), torch.export.Dim("seq", max=64)
    example = [torch.from_numpy(bert_data[k][:8]) for k in names]
    export(bert, tuple(example), names,
           {"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}, "labels": {0: b}},
           "journey_bert.onnx")
    train(bert, bert_data, names, 8, "journey_bert_ref.npz",
          {"input_ids": eval_ids, "attention_mask": eval_mask})

    # The CNN, on cnn_data.npz. The export traces no forward (torch.export),
    # so the file's running statistics are the initial 0 and 1.
    cnn_data = dict(np.load(out("cnn_data.npz")))
    torch.manual_seed(0)
    cnn = CnnWithLoss().train()
    b = torch.export.Dim("batch")
    example = (torch.from_numpy(cnn_data["x"][:16]), torch.from_numpy(cnn_data["y"][:16]))
    export(cnn, example, ["x", "y"], {"x": {0: b}, "y": {0: b}}, "journey_cnn.onnx")
    train(cnn, cnn_data, ["x", "y"], 16, "journey_cnn_ref.npz", {"x": cnn_data["x"][200:205]})


if __name__ == "__main__":
    main()
