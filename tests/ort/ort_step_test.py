#!/usr/bin/env python3
"""Runs mpc-opt --emit=step models in ONNX Runtime and compares the loss of
every step with mpc-run's: the seed MLP, the transformer (GatherGrad,
GeluGrad, LayerNormalizationGrad), the CNN (ConvGradInput, ConvGradWeight,
MaxPoolGrad, BatchNormalizationGrad; also with --sync-batchnorm) and a CNN built here with the window
attributes the CNN lacks (window_cnn; AveragePoolGrad, LeakyReluGrad), whose
mpc ops run as their model-local function bodies
(passes/onnx/mpc_functions*.cpp), and an MLP built here with Max and Min of
several inputs (extremum_mlp), whose gradient mpc.ExtremumGrad, variadic, the
step model writes inline in standard ops (passes/onnx/expand_variadic.cpp);
two of torch's dynamo exports (cnn_dynamo, attention_dynamo at opset 23), and
LLaMA (llama_tiny), whose RMS norms fuse-rmsnorm makes one mpc op each.

The step model is (state..., batch...) -> (loss, state'...), with the bound
state first and its new values in the same order (passes/onnx/onnx_export.cpp),
so the runtime feeds outputs 1..k back as inputs 1..k. The initial state is
the compiled training model's (mpc-opt without --emit=step), batch i is
samples [i*B, (i+1)*B) of the data file, as mpc-run takes them.

  ort_step_test.py --bin=DIR --models-dir=models --work=DIR
                   [--models=mlp_seed,transformer,cnn]

Exit 77 (ctest: skipped) when onnxruntime cannot be imported: it is an
optional check (pip install onnxruntime), never a dependency of make test.
"""
import argparse
import csv
import os
import subprocess
import sys

try:
    import numpy as np
    import onnx
    from onnx import numpy_helper
    import onnxruntime as ort
except ImportError as e:
    print("ort-step: SKIPPED: %s cannot import onnxruntime/onnx/numpy (%s); "
          "pip install onnxruntime to enable this test" % (sys.executable, e))
    sys.exit(77)

# model -> (data file, steps, cases); a case is (tag, mpc-opt flags, relative
# loss tolerance). fp16: ORT's CPU kernels accumulate fp16 products in their
# own order and round differently. 10 steps of each: about 15 s in all on
# two cores (the ctest budget is a minute).
FP32_ADAM = ["--precision=fp32", "--optimizer=adam", "--lr=0.01"]
FP16_ADAM = ["--precision=fp16", "--optimizer=adam", "--lr=0.01"]
MODELS = {
    "mlp_seed": ("mlp_seed_data.npz", 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
        ("fp16-clip", ["--precision=fp16", "--optimizer=sgd", "--lr=0.05",
                       "--momentum=0.9", "--max-grad-norm=0.5"], 2e-3),
        # --lr-schedule: mpc.LearningRate's body (Cos, Pow, Floor in double)
        # feeds the updates' lr input; the 10 steps cross warmup and decay.
        ("fp32-cosine", FP32_ADAM + ["--lr-schedule=cosine", "--warmup-steps=3",
                                     "--total-steps=8", "--min-lr-ratio=0.1"],
         1e-5),
        ("fp32-sgd-step", ["--precision=fp32", "--optimizer=sgd", "--lr=0.05",
                           "--lr-schedule=step", "--lr-step-size=3",
                           "--lr-gamma=0.5"], 1e-5),
        ("fp32-polynomial", FP32_ADAM + ["--lr-schedule=polynomial",
                                         "--warmup-steps=2", "--total-steps=7",
                                         "--lr-end=1e-3", "--lr-power=2"], 1e-5),
        ("fp32-restarts", FP32_ADAM + ["--lr-schedule=cosine_with_restarts",
                                       "--warmup-steps=1", "--total-steps=9",
                                       "--lr-cycles=2"], 1e-5),
        ("fp32-inverse-sqrt", FP32_ADAM + ["--lr-schedule=inverse_sqrt",
                                           "--warmup-steps=3"], 1e-5),
        ("fp32-wsd", FP32_ADAM + ["--lr-schedule=warmup_stable_decay",
                                  "--warmup-steps=2", "--lr-stable-steps=2",
                                  "--lr-decay-steps=4", "--lr-warmup-type=cosine",
                                  "--min-lr-ratio=0.2"], 1e-5),
        # --ema-decay: the average's state in standard ops.
        ("fp16-ema", FP16_ADAM + ["--ema-decay=0.9"], 2e-3),
        # Adafactor: standard ops (row and column factors of 2-D weights).
        ("fp32-adafactor", ["--precision=fp32", "--optimizer=adafactor",
                            "--weight-decay=0.01"], 1e-5),
    ]),
    "transformer": ("transformer_data.npz", 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
    ]),
    "cnn": ("cnn_data.npz", 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
        # --sync-batchnorm in a world of one: the statistics' AllReduces are
        # Identities, BatchNormalizationGrad with the statistics given is
        # written in standard ops (expand_variadic.cpp).
        ("fp32-sync-bn", FP32_ADAM + ["--data-parallel", "--sync-batchnorm"],
         1e-5),
        # Adafactor's factors of 4-D convolution weights (batched outer
        # products).
        ("fp16-adafactor", ["--precision=fp16", "--optimizer=adafactor"], 2e-3),
    ]),
    # torch's dynamo exporter (models/make_dynamo_models.py): the CNN with its
    # batch norm put back in training mode, and attention at opset 23 through
    # the Attention lowering.
    "cnn_dynamo": ("cnn_data.npz", 10, [
        ("fp32", FP32_ADAM, 1e-5),
    ]),
    "attention_dynamo": ("gpt2_tiny_data.npz", 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
    ]),
    # LLaMA: fuse-rmsnorm's mpc.RMSNormalization and its gradient run as
    # their function bodies.
    "llama_tiny": ("llama_tiny_data.npz", 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
    ]),
    # Built here (window_cnn): the window attributes the exporter must make
    # explicit or express, which the CNN above does not use.
    "window_cnn": (None, 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
    ]),
    # Built here (extremum_mlp): Max and Min of 2 and 3 inputs with ties.
    "extremum_mlp": (None, 10, [
        ("fp32", FP32_ADAM, 1e-5),
        ("fp16", FP16_ADAM, 2e-3),
    ]),
}


def save_classifier(work, name, nodes, inits, batch, x, y):
    """Saves graph `name`: inputs x (float, a batch of x's samples) and y
    (int64 labels), output the scalar loss; and the data set (x, y).
    Returns (model path, data path)."""
    from onnx import helper as oh
    graph = oh.make_graph(
        nodes, name,
        [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT,
                                   [batch] + list(x.shape[1:])),
         oh.make_tensor_value_info("y", onnx.TensorProto.INT64, [batch])],
        [oh.make_tensor_value_info("loss", onnx.TensorProto.FLOAT, [])], inits)
    model = os.path.join(work, name + ".onnx")
    data = os.path.join(work, name + "_data.npz")
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]),
              model)
    np.savez(data, x=x, y=y)
    return model, data


def window_cnn(work):
    """A CNN with a SAME_UPPER strided Conv, LeakyRelu, a ceil_mode MaxPool
    with pads, a grouped Conv with uneven pads and an AveragePool with
    count_include_pad, and its data; returns (model path, data path)."""
    from onnx import helper as oh
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in [
        ("w1", rng.standard_normal([6, 3, 3, 3]) * 0.3),
        ("b1", np.zeros([6])),
        ("w2", rng.standard_normal([4, 3, 2, 2]) * 0.3),
        ("wf", rng.standard_normal([64, 5]) * 0.3),
        ("bf", np.zeros([5]))]]
    inits.append(numpy_helper.from_array(np.array([-1, 64], np.int64),
                                         "flat"))
    nodes = [
        oh.make_node("Conv", ["x", "w1", "b1"], ["c1"], auto_pad="SAME_UPPER",
                     strides=[2, 2]),
        oh.make_node("LeakyRelu", ["c1"], ["r1"], alpha=0.1),
        oh.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[3, 3],
                     strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
        oh.make_node("Conv", ["p1", "w2"], ["c2"], kernel_shape=[2, 2],
                     pads=[1, 0, 0, 1], group=2),
        oh.make_node("AveragePool", ["c2"], ["p2"], kernel_shape=[2, 2],
                     pads=[1, 1, 0, 0], count_include_pad=1),
        oh.make_node("Reshape", ["p2", "flat"], ["f"]),
        oh.make_node("Gemm", ["f", "wf", "bf"], ["logits"]),
        oh.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"])]
    x = rng.standard_normal([64, 3, 13, 11]).astype(np.float32)
    y = rng.integers(0, 5, [64]).astype(np.int64)
    return save_classifier(work, "window_cnn", nodes, inits, 8, x, y)


def extremum_mlp(work):
    """An MLP whose hidden layer is m + Min(m, a) with m = Max(a, h, floor):
    Max of three inputs, one a trainable [1,16] row broadcast against
    [16,16], and Min of two that tie wherever a is the maximum
    (ExtremumGrad splits dY in half there); a Relu-like Max(z, 0) of two
    inputs before the classifier. Returns (model path, data path)."""
    from onnx import helper as oh
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in [
        ("w1", rng.standard_normal([8, 16]) * 0.4),
        ("b1", np.zeros([16])),
        ("w2", rng.standard_normal([8, 16]) * 0.4),
        ("floor", np.full([1, 16], -0.1)),
        ("w3", rng.standard_normal([16, 16]) * 0.3),
        ("wf", rng.standard_normal([16, 4]) * 0.3),
        ("bf", np.zeros([4]))]]
    nodes = [
        # A Constant, not an initializer: initializers are trainable.
        oh.make_node("Constant", [], ["zero"],
                     value=numpy_helper.from_array(np.zeros([], np.float32))),
        oh.make_node("MatMul", ["x", "w1"], ["h1"]),
        oh.make_node("Add", ["h1", "b1"], ["a"]),
        oh.make_node("MatMul", ["x", "w2"], ["h"]),
        oh.make_node("Max", ["a", "h", "floor"], ["m"]),
        oh.make_node("Min", ["m", "a"], ["n"]),
        oh.make_node("Add", ["n", "m"], ["s"]),
        oh.make_node("MatMul", ["s", "w3"], ["z"]),
        oh.make_node("Max", ["z", "zero"], ["r"]),
        oh.make_node("Gemm", ["r", "wf", "bf"], ["logits"]),
        oh.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"])]
    x = rng.standard_normal([64, 8]).astype(np.float32)
    y = rng.integers(0, 4, [64]).astype(np.int64)
    return save_classifier(work, "extremum_mlp", nodes, inits, 16, x, y)


# Models the test builds itself: name -> builder(work) -> (model, data).
BUILT = {"window_cnn": window_cnn, "extremum_mlp": extremum_mlp}


def mpc_losses(args, train_model, data, steps, batch, tag):
    log = os.path.join(args.work, tag + ".csv")
    subprocess.run([os.path.join(args.bin, "mpc-run"), train_model,
                    "--data=" + data, "--batch=%d" % batch,
                    "--steps=%d" % steps, "--quiet", "--log=" + log],
                   check=True, stdout=subprocess.DEVNULL)
    with open(log) as f:
        return [float(r["loss"]) for r in csv.DictReader(f)]


def ort_losses(step_model, train_model, data_file, steps):
    state0 = {i.name: numpy_helper.to_array(i)
              for i in onnx.load(train_model).graph.initializer}
    options = ort.SessionOptions()
    options.log_severity_level = 3
    sess = ort.InferenceSession(step_model, options,
                                providers=["CPUExecutionProvider"])
    inputs = sess.get_inputs()
    outputs = sess.get_outputs()
    data = np.load(data_file)
    state_inputs = [i.name for i in inputs if i.name in state0]
    batch_inputs = [i.name for i in inputs if i.name not in state0]
    fed_back = len(outputs) - 1
    batch = inputs[len(state_inputs)].shape[0]
    feed = {n: state0[n] for n in state_inputs}
    n_samples = len(data[batch_inputs[0]])
    losses = []
    for step in range(steps):
        idx = [(step * batch + k) % n_samples for k in range(batch)]
        for n in batch_inputs:
            feed[n] = data[n][idx]
        out = sess.run(None, feed)
        losses.append(float(out[0]))
        for k in range(fed_back):
            feed[inputs[k].name] = out[1 + k]
    return losses, batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--models-dir", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    print("ort-step: onnxruntime %s" % ort.__version__)
    failed = False
    for name in args.models.split(","):
        data_name, steps, cases = MODELS[name]
        if data_name:
            model = os.path.join(args.models_dir, name + ".onnx")
            data = os.path.join(args.models_dir, data_name)
        else:
            model, data = BUILT[name](args.work)
        for case, flags, rtol in cases:
            failed |= not run_case(args, name + "-" + case, model, data, steps,
                                   flags, rtol)
    sys.exit(1 if failed else 0)


def run_case(args, tag, model, data, steps, flags, rtol):
    train_model = os.path.join(args.work, tag + ".train.onnx")
    step_model = os.path.join(args.work, tag + ".step.onnx")
    opt = os.path.join(args.bin, "mpc-opt")
    subprocess.run([opt, model, "-o", train_model] + flags, check=True)
    subprocess.run([opt, model, "-o", step_model, "--emit=step"] + flags,
                   check=True)
    got, batch = ort_losses(step_model, train_model, data, steps)
    want = mpc_losses(args, train_model, data, steps, batch, tag)
    worst = max(abs(g - w) / abs(w) for g, w in zip(got, want))
    ok = len(got) == len(want) and worst <= rtol
    for i, (g, w) in enumerate(zip(got, want)):
        if abs(g - w) > rtol * abs(w):
            print("%s step %d: onnxruntime loss %.9g, mpc-run %.9g"
                  % (tag, i + 1, g, w))
    print("ort-step: %s: %d steps, worst relative loss difference %.3g "
          "(tolerance %g): %s" % (tag, len(got), worst, rtol,
                                  "OK" if ok else "FAILED"))
    return ok


if __name__ == "__main__":
    main()
