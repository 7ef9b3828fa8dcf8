#!/usr/bin/env python3
"""seed_tutorial.py -- the seed MLP from PyTorch to ONNX Runtime, trained by mpc from Python.

The classic PyTorch AMP-tutorial MLP (Linear(10,20) -> ReLU -> Linear(20,2), cross-entropy,
batch 64, torch.manual_seed(0): the model of models/mlp_seed.onnx) on a learnable toy task:

  1. define the model with its loss and export it in training mode (torch.onnx.export);
  2. mpc.compile it: fp16 with fp32 master weights and dynamic loss scaling, AdamW;
  3. train it from a torch.utils.data.DataLoader, one mpc.Trainer.step per batch;
  4. evaluate on held-out data (the forward's logits, accuracy);
  5. save a checkpoint halfway and resume from it: the resumed run repeats the second half
     bit for bit;
  6. export the inference model and run it in ONNX Runtime (its logits are mpc's);
  7. train the same model on the same batches with PyTorch (fp32, and autocast to bf16 on the
     CPU) and print the trajectories side by side: mpc's fp16 run follows them.

    PYTHONPATH=build/python python3 examples/seed_tutorial.py [--steps=N] [--work=DIR]

Every step is checked; the script exits 1 naming what did not hold, 77 when torch or
onnxruntime cannot be imported (the tests count that as skipped).
"""
import argparse
import os
import sys
import tempfile
import time
import warnings

try:
    import numpy as np
    import onnxruntime
    import torch
    from torch.utils.data import DataLoader, TensorDataset
except ImportError as e:
    print("seed_tutorial: SKIPPED: %s cannot import numpy, torch or onnxruntime (%s)"
          % (sys.executable, e))
    sys.exit(77)

try:
    import mpc
except ImportError as e:
    sys.exit("seed_tutorial: cannot import the mpc module (%s): build it (make) and run with "
             "PYTHONPATH=build/python" % e)

BATCH, LR, WEIGHT_DECAY = 64, 1e-2, 0.01


class MLP(torch.nn.Module):
    """The model with its loss: forward takes the inputs and the labels and returns the loss
    first (what mpc trains) and the logits (what the deployed model computes)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 20)
        self.fc2 = torch.nn.Linear(20, 2)

    def forward(self, x, y):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return torch.nn.functional.cross_entropy(logits, y), logits


def make_data(seed, n):
    """x ~ N(0, 1) in 10 dimensions; the label is which side of a plane x lies on (the seed
    MLP's data: seed 0 and n=1024 give models/mlp_seed_data.npz)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 10)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] - x[:, 2] > 0).astype(np.int64)
    return x, y


def batches(loader, steps):
    """`steps` batches from the loader, epoch after epoch."""
    done = 0
    while True:
        for x, y in loader:
            if done == steps:
                return
            yield x, y
            done += 1


def loader_of(x, y):
    # The same seed gives the same shuffled order: PyTorch's run below sees mpc's batches.
    return DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=BATCH,
                      shuffle=True, drop_last=True, generator=torch.Generator().manual_seed(0))


class Args(argparse.ArgumentParser):
    def error(self, message):  # one line and exit code 1, as the mpc tools answer bad flags
        sys.exit("%s: %s" % (self.prog, message))


def check(ok, what):
    print(("ok      " if ok else "FAILED  ") + what, flush=True)
    if not ok:
        sys.exit(1)


def torch_run(x, y, steps, autocast):
    """PyTorch's trajectory on the same batches, from the same initial weights."""
    torch.manual_seed(0)
    model = MLP().train()
    opt = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for xb, yb in batches(loader_of(x, y), steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            loss, _ = model(xb, yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def same_as_seed_file(exported):
    """In the repository: the export holds models/mlp_seed.onnx's initial weights (that file is
    this model, exported the same way with only the loss as output)."""
    seed = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models",
                        "mlp_seed.onnx")
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError:
        return
    if not os.path.exists(seed):
        return
    weights = lambda f: {t.name: numpy_helper.to_array(t) for t in onnx.load(f).graph.initializer}
    mine, theirs = weights(exported), weights(seed)
    check(sorted(mine) == sorted(theirs) and all(np.array_equal(mine[k], theirs[k]) for k in mine),
          "exported: the initial weights are models/mlp_seed.onnx's (%s)" % ", ".join(sorted(mine)))


def main():
    p = Args(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=400, help="optimizer steps (default 400)")
    p.add_argument("--work", help="folder for the files it writes (default: a temporary one)")
    args = p.parse_args()
    if args.steps < 2:
        p.error("--steps: needs at least 2 (a checkpoint is saved halfway)")
    work = args.work or tempfile.mkdtemp(prefix="mpc-seed-")
    try:
        os.makedirs(work, exist_ok=True)
    except OSError as e:
        p.error("--work: cannot make the folder %s (%s)" % (work, e.strerror))
    path = lambda name: os.path.join(work, name)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore", "You are using the legacy TorchScript", DeprecationWarning)

    # 1. Export. The TorchScript exporter in training mode, without constant folding, as
    #    models/make_mlp_seed.py exports models/mlp_seed.onnx (this file adds the logits).
    torch.manual_seed(0)
    model = MLP().train()
    x, y = make_data(0, 1024)
    val_x, val_y = make_data(1, 256)
    torch.onnx.export(model, (torch.from_numpy(x[:BATCH]), torch.from_numpy(y[:BATCH])),
                      path("mlp.onnx"), dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17, input_names=["x", "y"],
                      output_names=["loss", "logits"])

    same_as_seed_file(path("mlp.onnx"))

    # 2. Compile: the backward, autocast to fp16 with fp32 islands, dynamic loss scaling, fp32
    #    master weights and AdamW's update, in one step (mpc-opt's flags as keywords).
    #    loss= names the output to train (without it mpc takes the only scalar one, with a note).
    step = mpc.compile(path("mlp.onnx"), loss="loss", precision="fp16", optimizer="adamw", lr=LR,
                       weight_decay=WEIGHT_DECAY)
    step.save(path("mlp.train.onnx"))
    tr = mpc.Trainer(step, device="cpu")
    check(tr.batch == BATCH and sorted(tr.inputs) == ["x", "y"],
          "compiled: batch %d, inputs %s" % (tr.batch, ", ".join(tr.inputs)))

    # 3. Train from a DataLoader, saving a checkpoint halfway (5.).
    half = args.steps // 2
    losses, second_half = [], []
    start = time.perf_counter()
    for i, (xb, yb) in enumerate(batches(loader_of(x, y), args.steps)):
        if i == half:
            tr.save(path("half.ckpt.onnx"))
        if i >= half:
            second_half.append({"x": xb.numpy(), "y": yb.numpy()})
        losses.append(tr.step({"x": xb, "y": yb}))  # CPU torch tensors or numpy arrays
    mpc_seconds = time.perf_counter() - start
    losses = np.array(losses)
    first, last = losses[:10].mean(), losses[-10:].mean()
    check(last < 0.5 * first, "mpc: %d steps in %.2f s, loss %.4f -> %.4f (means of 10), "
          "loss scale %g, %d skipped" % (args.steps, mpc_seconds, first, last, tr.loss_scale,
                                         tr.skipped_steps))

    # 4. Evaluate: the forward in inference form, one batch of the compiled size at a time.
    logits = np.concatenate([
        tr.evaluate({"x": val_x[i:i + BATCH], "y": val_y[i:i + BATCH]})["logits"]
        for i in range(0, len(val_x), BATCH)])
    accuracy = float((logits.argmax(1) == val_y).mean())
    check(accuracy > 0.8, "held-out accuracy %.3f (%d samples; chance is about 0.5)"
          % (accuracy, len(val_y)))

    # 5. Resume: the checkpoint holds parameters, AdamW's moments, the loss scale and the step
    #    count; the second half, replayed, gives the same losses and weights bit for bit.
    resumed = mpc.Trainer.resume(path("half.ckpt.onnx"))
    check(resumed.step_count == half, "resumed at step %d" % resumed.step_count)
    again = np.array([resumed.step(b) for b in second_half])
    theirs = resumed.state_dict()
    same_weights = all(np.array_equal(a, theirs[k]) for k, a in tr.state_dict().items())
    check(np.array_equal(again, losses[half:]) and same_weights,
          "the resumed run's %d losses and final weights are the uninterrupted run's, bit for bit"
          % len(again))
    tr.save(path("final.ckpt.onnx"))

    # 6. Deploy: no labels input, no loss, a symbolic batch; ONNX Runtime gives mpc's logits.
    tr.export_inference(path("mlp.inference.onnx"), outputs=["logits"])
    session = onnxruntime.InferenceSession(path("mlp.inference.onnx"),
                                           providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    (ort_logits,) = session.run(None, {"x": val_x})
    diff = float(np.abs(ort_logits - logits).max())
    check(names == ["x"] and diff < 1e-5,
          "ONNX Runtime on all %d held-out samples: inputs %s, logits within %.1g of "
          "mpc's" % (len(val_x), names, diff))

    # 7. PyTorch on the same batches: fp32, and autocast to bf16 (the CPU's AMP).
    start = time.perf_counter()
    fp32 = torch_run(x, y, args.steps, autocast=False)
    torch_seconds = time.perf_counter() - start
    bf16 = torch_run(x, y, args.steps, autocast=True)
    print("\n step   mpc fp16   torch fp32   torch bf16 autocast")
    shown = sorted(set(np.linspace(0, args.steps - 1, 9).astype(int)))
    for i in shown:
        print("%5d   %8.5f   %10.5f   %10.5f" % (i, losses[i], fp32[i], bf16[i]))
    print("(mpc %.2f s, torch fp32 %.2f s for %d steps)\n" % (mpc_seconds, torch_seconds,
                                                              args.steps))
    rel = abs(losses[-10:].mean() - fp32[-10:].mean()) / fp32[-10:].mean()
    check(rel < 0.05, "mpc fp16's final loss is torch fp32's within %.2g (relative, means of "
          "the last 10 steps; bf16 autocast: %.5f)" % (rel, bf16[-10:].mean()))
    print("files in " + work)


if __name__ == "__main__":
    try:
        main()
    except mpc.Error as e:  # a bad flag, model or batch: the one line mpc-opt/mpc-run print
        sys.exit("seed_tutorial: %s" % e)
