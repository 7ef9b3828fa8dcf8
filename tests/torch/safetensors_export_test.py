#!/usr/bin/env python3
"""mpc-run --export-safetensors read back by the safetensors package, and by
torch's load_state_dict.

Part 1 (numpy, onnx, safetensors): the BN MLP of tests/lit/Inputs and
models/cnn_dynamo.onnx are compiled and trained a few steps; the file
written from the checkpoint (and from the freshly compiled model, and with
--export-ema from a model compiled with --ema-decay) holds exactly the
state_dict's names with the checkpoint's values
(safetensors.numpy.load_file), each batch norm's num_batches_tracked the
steps trained.

Part 2 (torch, transformers): a tiny BertForSequenceClassification (config
built: hidden 32, 2 layers, 2 heads, intermediate 37, vocab 99; forward
returns (loss, logits)) and a CNN with BatchNorm2d, exported with torch's
dynamo exporter (torch.onnx.export(..., dynamo=True, optimize=False), as
models/make_dynamo_models.py does), compiled with mpc-opt --optimizer=adamw
--precision=fp32, trained 3 steps by mpc-run, exported; then
model.load_state_dict(safetensors.torch.load_file(F)) with strict=True, the
values the same as the checkpoint's, and the CNN's parameters the same as
torch's own 3 AdamW steps on the same batches (the numerics contract).

  safetensors_export_test.py --bin=DIR --models-dir=models --inputs=DIR --work=DIR

Exit 77 (ctest: skipped) when safetensors/onnx/numpy cannot be imported;
part 2 is skipped, with one printed line, where torch or transformers is
missing.
"""
import argparse
import contextlib
import io
import os
import subprocess
import sys
import warnings

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from safetensors.numpy import load_file
except ImportError as e:
    print("safetensors-export: SKIPPED: %s cannot import numpy/onnx/safetensors (%s); "
          "pip install safetensors to enable this test" % (sys.executable, e))
    sys.exit(77)

ARGS = None


def run(*cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, MPC_DEVICE="cpu"))
    if r.returncode != 0:
        sys.exit("FAILED: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout


def mpc_opt(model, out, *flags):
    run(os.path.join(ARGS.bin, "mpc-opt"), model, "-o", out, *flags)


def mpc_run(model, *flags):
    return run(os.path.join(ARGS.bin, "mpc-run"), model, *flags)


def work(name):
    return os.path.join(ARGS.work, name)


def initializers(path):
    m = onnx.load(path)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def expect_file(path, expected):
    """The file holds exactly `expected` (name -> array), in dtype and value."""
    got = load_file(path)
    check(sorted(got) == sorted(expected),
          "%s: names %s, expected %s" % (path, sorted(got), sorted(expected)))
    for k, v in expected.items():
        check(got[k].dtype == v.dtype and got[k].shape == v.shape and np.array_equal(got[k], v),
              "%s: '%s' is %s%s, expected %s%s" % (path, k, got[k].dtype, got[k].shape,
                                                 v.dtype, v.shape))


def part_numpy():
    # The BN MLP: parameters and running statistics by their graph names.
    mlp = os.path.join(ARGS.inputs, "train_bn_mlp.onnxtext")
    mpc_opt(mlp, work("mlp.onnx"), "--optimizer=adam", "--precision=fp32")
    mpc_run(work("mlp.onnx"), "--synthetic", "--steps=3", "--save=" + work("mlp.ckpt.onnx"),
            "--quiet")
    mpc_run(work("mlp.ckpt.onnx"), "--export-safetensors=" + work("mlp.safetensors"))
    ckpt = initializers(work("mlp.ckpt.onnx"))
    names = ["w1", "gamma", "beta", "bn_mean", "bn_var", "w2", "b2"]
    expect_file(work("mlp.safetensors"), {k: ckpt[k] for k in names})
    fresh = initializers(work("mlp.onnx"))
    mpc_run(work("mlp.onnx"), "--export-safetensors=" + work("mlp0.safetensors"))
    expect_file(work("mlp0.safetensors"), {k: fresh[k] for k in names})

    # --export-ema: the averages under the parameters' names.
    mpc_opt(mlp, work("mlp.ema.onnx"), "--optimizer=adam", "--precision=fp32", "--ema-decay=0.5")
    mpc_run(work("mlp.ema.onnx"), "--synthetic", "--steps=3", "--export-ema",
            "--save=" + work("mlp.ema.ckpt.onnx"),
            "--export-safetensors=" + work("mlp.ema.safetensors"), "--quiet")
    ckpt = initializers(work("mlp.ema.ckpt.onnx"))
    params = ["w1", "gamma", "beta", "w2", "b2"]
    expected = {k: ckpt[k + "_ema"] for k in params}
    expected.update({k: ckpt[k] for k in ("bn_mean", "bn_var")})
    check(not np.array_equal(ckpt["w1"], ckpt["w1_ema"]), "the average equals the parameters")
    expect_file(work("mlp.ema.safetensors"), expected)

    # torch's dynamo export of a CNN: the state_dict's keys, num_batches_tracked
    # the steps trained.
    mpc_opt(os.path.join(ARGS.models_dir, "cnn_dynamo.onnx"), work("cnn.onnx"),
            "--optimizer=adamw", "--precision=fp32")
    mpc_run(work("cnn.onnx"), "--data=" + os.path.join(ARGS.models_dir, "cnn_data.npz"),
            "--steps=4", "--save=" + work("cnn.ckpt.onnx"), "--quiet")
    out = mpc_run(work("cnn.ckpt.onnx"), "--export-safetensors=" + work("cnn.safetensors"))
    ckpt = initializers(work("cnn.ckpt.onnx"))
    keys = ["conv1.weight", "conv1.bias", "bn.weight", "bn.bias", "conv2.weight", "conv2.bias",
            "fc.weight", "fc.bias", "bn.running_mean", "bn.running_var"]
    expected = {k: ckpt[k] for k in keys}
    expected["bn.num_batches_tracked"] = np.array(4, dtype=np.int64)
    expect_file(work("cnn.safetensors"), expected)
    check("exported 11 tensors after step 4" in out, "mpc-run printed: " + out)
    print("safetensors-export: numpy: BN MLP, EMA and dynamo CNN files read back")


def part_torch():
    try:
        import torch
        import torch.nn as nn
        import transformers
        from safetensors.torch import load_file as torch_load_file
    except ImportError as e:
        print("safetensors-export: torch part SKIPPED: %s cannot import torch/transformers (%s)"
              % (sys.executable, e))
        return
    torch.manual_seed(0)
    torch.set_num_threads(1)
    warnings.filterwarnings("ignore")
    import logging
    logging.disable(logging.WARNING)  # the exporter's notes on skipped torchvision ops

    class Bert(nn.Module):
        def __init__(self):
            super().__init__()
            cfg = transformers.BertConfig(vocab_size=99, hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=37,
                                          num_labels=3)
            self.bert = transformers.BertForSequenceClassification(cfg)

        def forward(self, input_ids, attention_mask, labels):
            out = self.bert(input_ids=input_ids, attention_mask=attention_mask, labels=labels)
            return out.loss, out.logits

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 3, padding=1, bias=False)  # a bias before BN has no gradient but noise
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(64, 3)

        def forward(self, x, y):
            h = torch.relu(self.bn(self.conv(x)))
            return nn.functional.cross_entropy(self.fc(h.flatten(1)), y)

    def export(model, args, names, outputs, path):
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            program = torch.onnx.export(model, args, dynamo=True, optimize=False,
                                        input_names=names, output_names=outputs)
        onnx.save(program.model_proto, path)

    def mpc_flags(model):
        """BERT returns (loss, logits): the loss is named (--loss, or before
        mpc-opt had it, the pipeline with autodiff{loss=loss})."""
        if len(onnx.load(model).graph.output) == 1:
            return []
        help_text = subprocess.run([os.path.join(ARGS.bin, "mpc-opt"), "--help"],
                                   stdout=subprocess.PIPE, text=True).stdout
        if "--loss=" in help_text:
            return ["--loss=loss"]
        return ["--passes=verify,infer-shapes,fold-constants,fuse-gelu,fuse-rmsnorm,"
                "autodiff{loss=loss},autocast,loss-scale,master-weights,optimizer,"
                "fold-widening-casts,fold-transpose,fold-bias-add,cleanup,plan-memory"]

    def train_and_load(tag, model, data, names, outputs, batch):
        args = tuple(torch.from_numpy(data[k][:batch]) for k in names)
        start = {k: v.clone() for k, v in model.state_dict().items()}
        export(model, args, names, outputs, work(tag + ".onnx"))
        model.load_state_dict(start)  # the export must not have changed it
        np.savez(work(tag + "_data.npz"), **data)
        mpc_opt(work(tag + ".onnx"), work(tag + ".train.onnx"), "--optimizer=adamw",
                "--precision=fp32", *mpc_flags(work(tag + ".onnx")))
        mpc_run(work(tag + ".train.onnx"), "--data=" + work(tag + "_data.npz"), "--steps=3",
                "--save=" + work(tag + ".ckpt.onnx"), "--quiet")
        mpc_run(work(tag + ".ckpt.onnx"), "--export-safetensors=" + work(tag + ".safetensors"))
        loaded = torch_load_file(work(tag + ".safetensors"))
        model.load_state_dict(loaded, strict=True)  # raises on a missing or unexpected key
        ckpt = initializers(work(tag + ".ckpt.onnx"))
        for k, v in loaded.items():
            if k in ckpt:
                check(np.array_equal(v.numpy(), ckpt[k]), "%s: '%s' differs from the checkpoint"
                      % (tag, k))
        moved = [k for k, v in loaded.items() if v.is_floating_point() and
                 not torch.equal(v, start[k])]
        check(len(moved) > 0, tag + ": no parameter changed in 3 steps")
        return start, loaded

    rng = np.random.default_rng(0)
    bert = Bert().train()
    data = {"input_ids": rng.integers(0, 99, (8, 7)).astype(np.int64),
            "attention_mask": np.ones((8, 7), np.int64),
            "labels": rng.integers(0, 3, 8).astype(np.int64)}
    train_and_load("bert", bert, data, ["input_ids", "attention_mask", "labels"],
                   ["loss", "logits"], 2)

    cnn = CNN().train()
    data = {"x": rng.standard_normal((8, 1, 4, 4)).astype(np.float32),
            "y": rng.integers(0, 3, 8).astype(np.int64)}
    start, loaded = train_and_load("cnn", cnn, data, ["x", "y"], ["loss"], 2)
    check(loaded["bn.num_batches_tracked"].item() == 3, "cnn: num_batches_tracked is %s"
          % loaded["bn.num_batches_tracked"].item())
    # torch's own 3 steps from the same start on the same batches.
    cnn.load_state_dict(start)
    opt = torch.optim.AdamW(cnn.parameters())
    for step in range(3):
        x, y = (torch.from_numpy(data[k][2 * step:2 * step + 2]) for k in ("x", "y"))
        opt.zero_grad()
        cnn(x, y).backward()
        opt.step()
    for k, v in cnn.state_dict().items():
        diff = (v.double() - loaded[k].double()).abs().max().item()
        check(diff <= 1e-5, "cnn: '%s' differs from torch's by %g" % (k, diff))
    print("safetensors-export: torch: tiny BERT and BN CNN load_state_dict(strict=True)")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--inputs", required=True)
    p.add_argument("--work", required=True)
    ARGS = p.parse_args()
    os.makedirs(ARGS.work, exist_ok=True)
    part_numpy()
    part_torch()


if __name__ == "__main__":
    main()
