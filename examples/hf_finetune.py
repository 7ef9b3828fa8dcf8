#!/usr/bin/env python3
"""hf_finetune.py -- a Hugging Face classifier trained by mpc from Python, deployed to ONNX Runtime.

A transformers BertForSequenceClassification built from a config (random initial weights, no
download: 2 layers, hidden 64, 2 heads, a vocabulary of 1000, dropout as transformers sets it)
learns a synthetic task: does the marker token occur in the sequence?

  1. wrap the model so that forward(input_ids, attention_mask, labels) returns (loss, logits),
     the call users make, and export it in training mode with torch's dynamo exporter, batch
     and sequence length dynamic;
  2. mpc.compile it for batches of 32 sequences of 32 tokens: fp16 with dynamic loss scaling,
     AdamW, a linear warm-up and decay of the learning rate;
  3. train it --steps steps from a torch.utils.data.DataLoader; the held-out accuracy, computed
     from Trainer.evaluate's logits, must then be clearly above chance (--min-accuracy);
  4. export the inference model (input_ids and attention_mask in, logits out, batch and length
     free) and check ONNX Runtime against mpc's logits, also on a shorter, smaller batch.

    PYTHONPATH=build/python python3 examples/hf_finetune.py [--steps=N] [--work=DIR]

Every step is checked; the script exits 1 naming what did not hold, 77 when torch,
transformers, onnxscript (the exporter's) or onnxruntime cannot be imported (the tests count
that as skipped).
"""
import argparse
import contextlib
import io
import os
import sys
import tempfile
import time
import warnings

try:
    import numpy as np
    import onnxruntime
    import onnxscript  # noqa: F401 (torch's dynamo exporter writes through it)
    import torch
    import transformers
    from torch.utils.data import DataLoader, Dataset
except ImportError as e:
    print("hf_finetune: SKIPPED: %s cannot import numpy, torch, transformers, onnxscript or "
          "onnxruntime (%s)" % (sys.executable, e))
    sys.exit(77)

try:
    import mpc
except ImportError as e:
    sys.exit("hf_finetune: cannot import the mpc module (%s): build it (make) and run with "
             "PYTHONPATH=build/python" % e)

VOCAB, SEQ, BATCH = 1000, 32, 32
PAD, CLS, MARKER = 0, 1, 7  # token ids; ordinary tokens are 10 .. VOCAB-1


# --- Data, without a tokenizer ------------------------------------------------------------------
# A tokenizer turns text into exactly what the model reads, and nothing else: input_ids (int64
# token ids, [batch, seq], padded to a common length), attention_mask (int64, 1 on real tokens,
# 0 on padding) and, for training, labels (int64 class ids, [batch]). Here the ids are drawn
# directly: sequences of 8 to 32 tokens, [CLS] then random ones, padded with PAD to SEQ. Half
# the sequences hold the marker token somewhere after [CLS] (label 1), the others never (label
# 0). With a real tokenizer, tokenizer(texts, padding="max_length", max_length=SEQ,
# truncation=True, return_tensors="np") gives the same two arrays.
def make_data(seed, n):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(8, SEQ + 1, n)
    ids = rng.integers(10, VOCAB, (n, SEQ)).astype(np.int64)
    ids[:, 0] = CLS
    labels = rng.integers(0, 2, n).astype(np.int64)
    where = rng.integers(1, lengths)  # a position among the real tokens, after [CLS]
    ids[labels == 1, where[labels == 1]] = MARKER
    mask = (np.arange(SEQ)[None, :] < lengths[:, None]).astype(np.int64)
    ids[mask == 0] = PAD
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class Sequences(Dataset):
    """A map-style dataset of dicts, as a tokenized datasets.Dataset yields them."""

    def __init__(self, data):
        self.data = data

    def __len__(self):
        return len(self.data["labels"])

    def __getitem__(self, i):
        return {k: torch.as_tensor(v[i]) for k, v in self.data.items()}


class WithLoss(torch.nn.Module):
    """What a user writes around a transformers classifier: the loss first, then the logits."""

    def __init__(self, config):
        super().__init__()
        self.model = transformers.BertForSequenceClassification(config)

    def forward(self, input_ids, attention_mask, labels):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
        return out.loss, out.logits


class Args(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 1, as the mpc tools answer bad flags
        sys.exit("%s: %s" % (self.prog, message))


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what, flush=True)
    if not ok:
        sys.exit(1)


def accuracy(tr, data):
    """Held-out accuracy from Trainer.evaluate's logits, a compiled batch at a time."""
    right = total = 0
    for i in range(0, len(data["labels"]) - BATCH + 1, BATCH):
        batch = {k: v[i:i + BATCH] for k, v in data.items()}
        logits = tr.evaluate(batch)["logits"]
        right += int((logits.argmax(1) == batch["labels"]).sum())
        total += BATCH
    return right / total


def main():
    p = Args(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=600, help="optimizer steps (default 600)")
    p.add_argument("--lr", type=float, default=1e-3, help="the peak learning rate (default 1e-3)")
    p.add_argument("--min-accuracy", type=float, default=0.9,
                   help="the held-out accuracy the run must reach (default 0.9; chance is 0.5)")
    p.add_argument("--work", help="folder for the files it writes (default: a temporary one)")
    args = p.parse_args()
    if args.steps < 1:
        p.error("--steps: needs at least 1")
    work = args.work or tempfile.mkdtemp(prefix="mpc-hf-")
    try:
        os.makedirs(work, exist_ok=True)
    except OSError as e:
        p.error("--work: cannot make the folder %s (%s)" % (work, e.strerror))
    path = lambda name: os.path.join(work, name)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")  # the exporter's notes on transformers' internals

    train, val = make_data(0, 4096), make_data(1, 512)

    # 1. Export. The dynamo exporter with optimize=False (its optimizer would merge parameters
    #    of equal value, which mpc refuses), the model in train() mode so dropout is traced;
    #    batch and sequence length are dynamic, so the deployed model takes any.
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=128,
                                     max_position_embeddings=64, num_labels=2)
    torch.manual_seed(0)
    model = WithLoss(config).train()
    names = ["input_ids", "attention_mask", "labels"]
    example = tuple(torch.from_numpy(train[k][:BATCH]) for k in names)
    batch_dim, seq_dim = torch.export.Dim("batch"), torch.export.Dim("seq", max=64)
    with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
        torch.onnx.export(model, example, path("bert.onnx"), dynamo=True, optimize=False,
                          input_names=names, output_names=["loss", "logits"],
                          dynamic_shapes={"input_ids": {0: batch_dim, 1: seq_dim},
                                          "attention_mask": {0: batch_dim, 1: seq_dim},
                                          "labels": {0: batch_dim}})

    # 2. Compile for the training batch's shape. Keywords are mpc-opt's flags: the learning
    #    rate ramps up over the first 10% of the steps and decays linearly to 0 at the last.
    step = mpc.compile(path("bert.onnx"), loss="loss", precision="fp16", optimizer="adamw",
                       lr=args.lr, weight_decay=0.01, no_weight_decay="bias|LayerNorm",
                       lr_schedule="linear", warmup_steps=max(1, args.steps // 10),
                       total_steps=args.steps,
                       input_shape=["input_ids:%dx%d" % (BATCH, SEQ),
                                    "attention_mask:%dx%d" % (BATCH, SEQ), "labels:%d" % BATCH])
    tr = mpc.Trainer(step, seed=0)  # the seed draws dropout's masks
    check(tr.batch == BATCH and sorted(tr.inputs) == sorted(names),
          "compiled: batch %d, inputs %s" % (tr.batch, ", ".join(tr.inputs)))
    before = accuracy(tr, val)

    # 3. Train: the DataLoader's default collate stacks the dicts into a dict of tensors, which
    #    is what Trainer.step takes.
    loader = DataLoader(Sequences(train), batch_size=BATCH, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(0))
    losses, start = [], time.perf_counter()
    while len(losses) < args.steps:
        for batch in loader:
            if len(losses) == args.steps:
                break
            losses.append(tr.step(batch))
            if tr.step_count % 100 == 0:
                print("step %4d  loss %.4f  lr %.2e  loss scale %g"
                      % (tr.step_count, np.mean(losses[-100:]), tr.lr, tr.loss_scale))
    seconds = time.perf_counter() - start
    window = max(1, min(20, len(losses) // 4))
    first, last = float(np.mean(losses[:window])), float(np.mean(losses[-window:]))
    check(last < 0.9 * first, "%d steps in %.1f s (%.1f ms a step): loss %.4f -> %.4f (means "
          "of %d), %d skipped" % (args.steps, seconds, 1e3 * seconds / args.steps, first, last,
                                  window, tr.skipped_steps))
    after = accuracy(tr, val)
    check(after >= args.min_accuracy, "held-out accuracy %.3f (before training %.3f, chance 0.5;"
          " needed %.2f)" % (after, before, args.min_accuracy))
    tr.save(path("bert.ckpt.onnx"))

    # 4. Deploy: the inference model takes input_ids and attention_mask (no labels) of any batch
    #    and length, computes the logits without dropout, and ONNX Runtime runs it.
    tr.export_inference(path("bert.inference.onnx"), outputs=["logits"])
    session = onnxruntime.InferenceSession(path("bert.inference.onnx"),
                                           providers=["CPUExecutionProvider"])
    inputs = [i.name for i in session.get_inputs()]
    check(inputs == ["input_ids", "attention_mask"], "the inference model takes %s" % inputs)
    batch = {k: v[:BATCH] for k, v in val.items()}
    expected = tr.evaluate(batch)["logits"]
    (logits,) = session.run(None, {k: batch[k] for k in inputs})
    diff = float(np.abs(logits - expected).max())
    check(diff < 1e-4, "ONNX Runtime on a held-out batch of %dx%d: mpc's logits within %.1g"
          % (BATCH, SEQ, diff))
    # The 5 shortest of them, cut to their longest real length: padding is masked out, so
    # the logits are those the full batch gave.
    shortest = np.argsort(batch["attention_mask"].sum(1), kind="stable")[:5]
    length = int(batch["attention_mask"][shortest].sum(1).max())
    (short,) = session.run(None, {k: np.ascontiguousarray(batch[k][shortest, :length])
                                  for k in inputs})
    diff = float(np.abs(short - expected[shortest]).max())
    check(diff < 1e-4, "and on the %d shortest of them cut to %d tokens: within %.1g"
          % (len(shortest), length, diff))
    print("files in " + work)


if __name__ == "__main__":
    try:
        main()
    except mpc.Error as e:  # a bad flag, model or batch: the one line mpc-opt/mpc-run print
        sys.exit("hf_finetune: %s" % e)
