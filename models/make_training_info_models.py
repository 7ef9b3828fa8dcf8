#!/usr/bin/python3
"""ONNX training models that carry their own algorithm (TrainingInfoProto),
and a float64 reference that checks what mpc-run trained from them.

Each model is a small MLP (x[8,4] -> Gemm -> Relu -> Gemm -> logits) whose
training_info algorithm recomputes the forward with a SoftmaxCrossEntropyLoss,
differentiates it with ONNX's Gradient operator and updates the weights with
one optimizer of ai.onnx.preview.training (Adam, Momentum, Adagrad) or with
plain arithmetic SGD (W - lr * dW). update_binding writes the new weights,
moments and the update count T back; the initialization graph sets the
weights (the main graph's initializers hold zeros until it runs), zero
moments and T = 0.

  make_training_info_models.py --out=DIR
      writes DIR/ti_{adam,momentum,nesterov,adagrad,sgd}.onnx and
      DIR/ti_data.npz (arrays x, y: one batch of 8 samples).
  make_training_info_models.py --out=DIR --train [--steps=8]
      also compiles every model in fp32 and fp16 (mpc-opt on PATH), trains
      it (mpc-run) and checks it as --check does: loss and state within
      1e-5 of the reference in fp32, 1e-2 in fp16.
  make_training_info_models.py --check=KIND --log=LOG.csv --ckpt=CKPT.onnx
          [--loss-rtol=R] [--param-atol=A] [--all-skipped]
      recomputes the run in float64 with ONNX's own reference update
      functions (onnx.backend.test.case.node.*) and compares the loss of
      every logged step and the final state in the checkpoint. With
      --all-skipped every step must have overflowed: the loss never changes
      and the state is exactly the initial state.

Uses Debian's python3 with python3-onnx (ONNX 1.12) and numpy.
"""
import argparse
import csv
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PREVIEW = "ai.onnx.preview.training"
KINDS = ["adam", "momentum", "nesterov", "adagrad", "sgd"]
PARAMS = ["W1", "B1", "W2", "B2"]
N, D, H, C = 8, 4, 6, 3
LR = 0.05

ADAM = dict(alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.001,
            norm_coefficient_post=0.0)
MOMENTUM = dict(alpha=0.9, beta=0.5, norm_coefficient=0.001)
ADAGRAD = dict(epsilon=1e-6, decay_factor=0.1, norm_coefficient=0.0)


def initial_params():
    rng = np.random.default_rng(7)
    return {
        "W1": (rng.standard_normal((D, H)) * 0.5).astype(np.float32),
        "B1": (rng.standard_normal(H) * 0.1).astype(np.float32),
        "W2": (rng.standard_normal((H, C)) * 0.5).astype(np.float32),
        "B2": (rng.standard_normal(C) * 0.1).astype(np.float32),
    }


def data():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((N, D)).astype(np.float32)
    y = rng.integers(0, C, size=N).astype(np.int64)
    return x, y


def moment_names(kind):
    if kind == "adam":
        return [["V_" + p for p in PARAMS], ["H_" + p for p in PARAMS]]
    if kind in ("momentum", "nesterov"):
        return [["V_" + p for p in PARAMS]]
    if kind == "adagrad":
        return [["H_" + p for p in PARAMS]]
    return []


def forward_nodes(prefix, with_loss):
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "B1"], [prefix + "h"],
                         name=prefix + "fc1"),
        helper.make_node("Relu", [prefix + "h"], [prefix + "a"],
                         name=prefix + "relu"),
        helper.make_node("Gemm", [prefix + "a", "W2", "B2"],
                         [prefix + "logits"], name=prefix + "fc2"),
    ]
    if with_loss:
        nodes.append(helper.make_node(
            "SoftmaxCrossEntropyLoss", [prefix + "logits", "y"],
            [prefix + "loss"], name=prefix + "xent", reduction="mean"))
    return nodes


def build_model(kind):
    params = initial_params()
    # The main graph holds zeros (moments: ones, T: 5) until the
    # initialization graph runs: a model trained without it goes elsewhere.
    inits = [numpy_helper.from_array(np.zeros_like(v), k)
             for k, v in params.items()]
    for run in moment_names(kind):
        for name, p in zip(run, PARAMS):
            inits.append(numpy_helper.from_array(
                np.ones_like(params[p]), name))
    inits.append(numpy_helper.from_array(np.array(LR, np.float32), "lr"))
    inits.append(numpy_helper.from_array(np.array(5, np.int64), "T"))
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [N, D])
    y_info = helper.make_tensor_value_info("y", TensorProto.INT64, [N])
    main = helper.make_graph(
        forward_nodes("", False), "mlp_inference", [x_info], [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                          [N, C])], inits)

    grads = ["d_" + p for p in PARAMS]
    nodes = forward_nodes("t_", True)
    nodes.append(helper.make_node("Gradient", PARAMS, grads, name="gradient",
                                  domain=PREVIEW, xs=PARAMS, y="t_loss"))
    new_params = [p + "_new" for p in PARAMS]
    new_moments = [[m + "_new" for m in run] for run in moment_names(kind)]
    inputs = ["lr", "T"] + PARAMS + grads + sum(moment_names(kind), [])
    outputs = new_params + sum(new_moments, [])
    if kind == "adam":
        nodes.append(helper.make_node("Adam", inputs, outputs, name="adam",
                                      domain=PREVIEW, **ADAM))
    elif kind in ("momentum", "nesterov"):
        mode = "standard" if kind == "momentum" else "nesterov"
        nodes.append(helper.make_node("Momentum", inputs, outputs,
                                      name="momentum", domain=PREVIEW,
                                      mode=mode, **MOMENTUM))
    elif kind == "adagrad":
        nodes.append(helper.make_node("Adagrad", inputs, outputs,
                                      name="adagrad", domain=PREVIEW,
                                      **ADAGRAD))
    else:
        for p, g, out in zip(PARAMS, grads, new_params):
            nodes.append(helper.make_node("Mul", ["lr", g], ["step_" + p],
                                          name="scale_" + p))
            nodes.append(helper.make_node("Sub", [p, "step_" + p], [out],
                                          name="sgd_" + p))
    nodes.append(helper.make_node(
        "Constant", [], ["one"], name="one",
        value=numpy_helper.from_array(np.array(1, np.int64))))
    nodes.append(helper.make_node("Add", ["T", "one"], ["T_new"],
                                  name="count"))
    algorithm = helper.make_graph(
        nodes, "train_step", [x_info, y_info],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
         for o in outputs] +
        [helper.make_tensor_value_info("T_new", TensorProto.INT64, [])])
    binding = [(p, n) for p, n in zip(PARAMS, new_params)]
    for run, new_run in zip(moment_names(kind), new_moments):
        binding += list(zip(run, new_run))
    binding.append(("T", "T_new"))

    init_nodes, init_binding = [], []
    for k, v in params.items():
        init_nodes.append(helper.make_node(
            "Constant", [], ["init_" + k], name="init_" + k,
            value=numpy_helper.from_array(v)))
        init_binding.append((k, "init_" + k))
    for run in moment_names(kind):
        for name, p in zip(run, PARAMS):
            init_nodes.append(helper.make_node(
                "Constant", [], ["init_" + name], name="init_" + name,
                value=numpy_helper.from_array(np.zeros_like(params[p]))))
            init_binding.append((name, "init_" + name))
    init_nodes.append(helper.make_node(
        "Constant", [], ["init_T"], name="init_T",
        value=numpy_helper.from_array(np.array(0, np.int64))))
    init_binding.append(("T", "init_T"))
    initialization = helper.make_graph(
        init_nodes, "initialize", [],
        [helper.make_tensor_value_info(v, TensorProto.FLOAT, None)
         for _, v in init_binding[:-1]] +
        [helper.make_tensor_value_info("init_T", TensorProto.INT64, [])])

    model = helper.make_model(
        main, producer_name="make_training_info_models",
        opset_imports=[helper.make_opsetid("", 17),
                       helper.make_opsetid(PREVIEW, 1)])
    model.ir_version = 8
    info = helper.make_training_info(algorithm, binding, initialization,
                                     init_binding)
    model.training_info.append(info)
    onnx.checker.check_model(model)
    return model


# ---- float64 reference --------------------------------------------------


def loss_and_grads(p, x, y):
    h = x @ p["W1"] + p["B1"]
    a = np.maximum(h, 0)
    z = a @ p["W2"] + p["B2"]
    z = z - z.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(len(y)), y].mean()
    dz = np.exp(logp)
    dz[np.arange(len(y)), y] -= 1
    dz /= len(y)
    da = dz @ p["W2"].T
    dh = da * (h > 0)
    return loss, {"W1": x.T @ dh, "B1": dh.sum(0), "W2": a.T @ dz,
                  "B2": dz.sum(0)}


def reference_update(kind, p, g, state, t):
    """One update with ONNX's own reference functions, in float64."""
    from onnx.backend.test.case.node import adagrad, adam, momentum
    new = {}
    for name in PARAMS:
        if kind == "adam":
            new[name], state["V_" + name], state["H_" + name] = \
                adam.apply_adam(LR, t, p[name], g[name], state["V_" + name],
                                state["H_" + name], **ADAM)
        elif kind in ("momentum", "nesterov"):
            fn = momentum.apply_momentum if kind == "momentum" \
                else momentum.apply_nesterov
            new[name], state["V_" + name] = fn(
                LR, t, p[name], g[name], state["V_" + name],
                MOMENTUM["norm_coefficient"], MOMENTUM["alpha"],
                MOMENTUM["beta"])
        elif kind == "adagrad":
            new[name], state["H_" + name] = adagrad.apply_adagrad(
                LR, t, p[name], g[name], state["H_" + name],
                ADAGRAD["norm_coefficient"], ADAGRAD["epsilon"],
                ADAGRAD["decay_factor"])
        else:
            new[name] = p[name] - LR * g[name]
    return new


def read_log(path):
    with open(path) as f:
        return [row for row in csv.DictReader(f)]


def check(args):
    failures, summary = compare(args.check, args.log, args.ckpt,
                                args.loss_rtol, args.param_atol,
                                args.all_skipped)
    for f in failures:
        print("FAIL " + f)
    print(summary)
    sys.exit(1 if failures else 0)


def compare(kind, log, ckpt_path, loss_rtol, param_atol, all_skipped):
    """(failures, summary line) of one run against the float64 reference."""
    x, y = data()
    x = x.astype(np.float64)
    p = {k: v.astype(np.float64) for k, v in initial_params().items()}
    initial = {k: v.copy() for k, v in p.items()}
    state = {m: np.zeros_like(p[pn]) for run in moment_names(kind)
             for m, pn in zip(run, PARAMS)}
    rows = read_log(log)
    if not rows:
        return ["%s has no steps" % log], kind + ": FAILED"
    failures = []
    t = 0
    for row in rows:
        step = int(row["step"])
        loss, g = loss_and_grads(p, x, y)
        got = float(row["loss"])
        if abs(got - loss) > loss_rtol * abs(loss):
            failures.append("step %d: loss %.9g, float64 reference %.9g"
                            % (step, got, loss))
        if int(row["skipped"]):
            continue
        if all_skipped:
            failures.append("step %d was not skipped" % step)
        p = reference_update(kind, p, g, state, t)
        t += 1
    ckpt = {i.name: numpy_helper.to_array(i)
            for i in onnx.load(ckpt_path).graph.initializer}
    want = dict(p)
    want.update(state)
    if all_skipped:
        want = dict(initial)
        want.update({k: np.zeros_like(v) for k, v in state.items()})
    for name, value in want.items():
        if name not in ckpt:
            failures.append("checkpoint has no '%s'" % name)
            continue
        err = np.max(np.abs(ckpt[name].astype(np.float64) - value))
        limit = 0.0 if all_skipped else param_atol
        if err > limit:
            failures.append("%s: max |checkpoint - reference| = %.3g > %.3g"
                            % (name, err, limit))
    t_state = int(ckpt.get("T", np.array(-1)))
    if t_state != t:
        failures.append("T is %d after %d updates" % (t_state, t))
    return failures, "%s: %d steps, %d updates, %s" % (
        kind, len(rows), t, "FAILED" if failures else "OK")


def train_all(out, steps):
    """Compiles and trains every model in fp32 and fp16 with the mpc-opt and
    mpc-run on PATH and checks each run (tolerances: fp32 tight, fp16
    loose)."""
    bad = 0
    for kind in KINDS:
        for precision, tol in (("fp32", 1e-5), ("fp16", 1e-2)):
            base = os.path.join(out, "%s.%s" % (kind, precision))
            subprocess.run(["mpc-opt", os.path.join(out, "ti_%s.onnx" % kind),
                            "-o", base + ".onnx", "--precision=" + precision],
                           check=True)
            subprocess.run(["mpc-run", base + ".onnx", "--data=" +
                            os.path.join(out, "ti_data.npz"), "--batch=8",
                            "--steps=%d" % steps, "--quiet", "--log=" + base +
                            ".csv", "--save=" + base + ".ckpt.onnx"],
                           check=True, stdout=subprocess.DEVNULL)
            failures, summary = compare(kind, base + ".csv",
                                        base + ".ckpt.onnx", tol, tol, False)
            for f in failures:
                print("FAIL %s %s" % (precision, f))
            print(precision + " " + summary)
            bad += bool(failures)
    sys.exit(1 if bad else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check", choices=KINDS)
    ap.add_argument("--log")
    ap.add_argument("--ckpt")
    ap.add_argument("--loss-rtol", type=float, default=1e-5)
    ap.add_argument("--param-atol", type=float, default=1e-5)
    ap.add_argument("--all-skipped", action="store_true")
    ap.add_argument("--train", action="store_true",
                    help="with --out: also compile, train and check each")
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    if args.check:
        check(args)
        return
    if not args.out:
        ap.error("--out=DIR or --check=KIND")
    os.makedirs(args.out, exist_ok=True)
    for kind in KINDS:
        onnx.save(build_model(kind), os.path.join(args.out,
                                                  "ti_%s.onnx" % kind))
    x, y = data()
    np.savez(os.path.join(args.out, "ti_data.npz"), x=x, y=y)
    if args.train:
        train_all(args.out, args.steps)


if __name__ == "__main__":
    main()
