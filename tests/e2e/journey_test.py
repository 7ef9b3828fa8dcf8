#!/usr/bin/env python3
"""The user's journey, start to finish, against PyTorch's answers.

For each of models/journey_{bert,cnn}.onnx (a model returning (loss, logits),
exported by torch's dynamo exporter with a dynamic batch; see
models/make_journey_models.py, whose torch run made journey_<m>_ref.npz):

  1. mpc-opt compiles it with no --loss (a note names the loss), fp32 AdamW;
  2. mpc-run trains 10 steps: every step's loss is torch's to 1e-4
     (relative), and an fp16 run follows the fp32 one;
  3. mpc-run --export-inference from the checkpoint, with no data: the file
     passes onnx.checker, takes no labels, and ONNX Runtime on a batch of
     another size (and, for the BERT, another sequence length) returns the
     logits of torch's trained model in eval mode to 1e-4; its fp16 export
     follows them;
  4. mpc-run --export-safetensors: exactly the state_dict's names, each
     value torch's (to 1e-5), num_batches_tracked included.

  journey_test.py --bin=DIR --models-dir=models --work=DIR

Exit 77 (ctest: skipped) when numpy, onnx, onnxruntime or safetensors
cannot be imported. Needs no torch.
"""
import argparse
import csv
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    import onnxruntime
    from safetensors.numpy import load_file
except ImportError as e:
    print("journey: SKIPPED: %s cannot import numpy/onnx/onnxruntime/safetensors (%s)"
          % (sys.executable, e))
    sys.exit(77)

ARGS = None
FAILURES = []


def run(*cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, MPC_DEVICE="cpu"))
    if r.returncode != 0:
        sys.exit("FAILED: %s\n%s%s" % (" ".join(cmd), r.stdout, r.stderr))
    return r.stdout + r.stderr


def check(ok, what):
    print(("ok     " if ok else "FAILED ") + what)
    if not ok:
        FAILURES.append(what)


def losses(log):
    with open(log) as f:
        return np.array([float(row["loss"]) for row in csv.DictReader(f)])


def work(name):
    return os.path.join(ARGS.work, name)


def journey(name, data, shapes, batch_inputs):
    mpc_opt = os.path.join(ARGS.bin, "mpc-opt")
    mpc_run = os.path.join(ARGS.bin, "mpc-run")
    model = os.path.join(ARGS.models_dir, "journey_%s.onnx" % name)
    ref = np.load(os.path.join(ARGS.models_dir, "journey_%s_ref.npz" % name))
    data = os.path.join(ARGS.models_dir, data)

    # 1-2. Compile with no --loss; train as torch did.
    logs = {}
    for precision in ("fp32", "fp16"):
        step = work("%s.%s.onnx" % (name, precision))
        said = run(mpc_opt, model, "-o", step, "--optimizer=adamw", "--lr=1e-3",
                   "--precision=" + precision, *shapes)
        check("note: the loss is 'loss'" in said,
              "%s: mpc-opt names the loss it chose (%s)" % (name, said.strip()[:80]))
        logs[precision] = work("%s.%s.csv" % (name, precision))
        run(mpc_run, step, "--data=" + data, "--steps=10", "--log=" + logs[precision],
            "--save=" + work("%s.%s.ckpt.onnx" % (name, precision)), "--quiet")
    fp32, fp16 = losses(logs["fp32"]), losses(logs["fp16"])
    rel = np.max(np.abs(fp32 - ref["loss"]) / np.abs(ref["loss"]))
    check(len(fp32) == 10 and rel < 1e-4,
          "%s: fp32 AdamW's 10 losses are torch's (max relative difference %.2g)" % (name, rel))
    rel16 = np.max(np.abs(fp16 - fp32) / np.abs(fp32))
    check(rel16 < 2e-2, "%s: fp16 follows fp32 (max relative difference %.2g)" % (name, rel16))

    # 3. The deployable model, from the checkpoint, with no data.
    ckpt = work("%s.fp32.ckpt.onnx" % name)
    exported = work("%s.inference.onnx" % name)
    run(mpc_run, ckpt, "--export-inference=" + exported)
    onnx.checker.check_model(exported, full_check=True)
    session = onnxruntime.InferenceSession(exported, providers=["CPUExecutionProvider"])
    inputs = [i.name for i in session.get_inputs()]
    check(inputs == batch_inputs, "%s: the inference model takes %s (no labels)" % (name, inputs))
    check([o.name for o in session.get_outputs()] == ["logits"],
          "%s: the inference model outputs the logits" % name)
    feed = {i: ref["eval_" + i] for i in inputs}
    logits = session.run(None, feed)[0]
    expected = ref["eval_logits"]
    diff = np.max(np.abs(logits - expected))
    check(logits.shape == expected.shape and diff < 1e-4 * max(1.0, np.max(np.abs(expected))),
          "%s: ONNX Runtime on %s gives torch's trained logits (max difference %.2g)"
          % (name, "x".join(map(str, ref["eval_" + inputs[0]].shape)), diff))
    half = work("%s.inference.fp16.onnx" % name)
    run(mpc_run, ckpt, "--export-inference=" + half, "--precision=fp16")
    onnx.checker.check_model(half, full_check=True)
    logits16 = onnxruntime.InferenceSession(half, providers=["CPUExecutionProvider"]).run(
        None, feed)[0]
    diff16 = np.max(np.abs(logits16 - expected))
    check(logits16.dtype == np.float32 and diff16 < 2e-2 * max(1.0, np.max(np.abs(expected))),
          "%s: the fp16 inference model (fp32 inputs and outputs) follows (max difference %.2g)"
          % (name, diff16))

    # 4. Weights back to PyTorch.
    weights = work("%s.safetensors" % name)
    run(mpc_run, ckpt, "--export-safetensors=" + weights)
    got = load_file(weights)
    state = {k[len("state."):]: ref[k] for k in ref.files if k.startswith("state.")}
    check(sorted(got) == sorted(state),
          "%s: the safetensors hold the state_dict's %d names (missing %s, extra %s)"
          % (name, len(state), sorted(set(state) - set(got)), sorted(set(got) - set(state))))
    worst = max((float(np.max(np.abs(got[k].astype(np.float64) - state[k])))
                 for k in state if k in got and k.endswith("num_batches_tracked") is False),
                default=0.0)
    check(worst < 1e-5, "%s: the safetensors' values are torch's (max difference %.2g)"
          % (name, worst))
    for k in state:
        if k.endswith("num_batches_tracked") and k in got:
            check(int(got[k]) == int(state[k]),
                  "%s: %s is %d, torch's %d" % (name, k, int(got[k]), int(state[k])))


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--work", required=True)
    ARGS = p.parse_args()
    os.makedirs(ARGS.work, exist_ok=True)
    journey("bert", "journey_bert_data.npz",
            ["--input-shape=input_ids:8x16", "--input-shape=attention_mask:8x16",
             "--input-shape=labels:8"], ["input_ids", "attention_mask"])
    journey("cnn", "cnn_data.npz", ["--batch=16"], ["x"])
    if FAILURES:
        sys.exit("%d check(s) failed" % len(FAILURES))


if __name__ == "__main__":
    main()
