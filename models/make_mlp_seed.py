#!/usr/bin/env python3
"""make_mlp_seed.py -- generate the mpc "MLP seed" test artifacts in models/.

The classic PyTorch AMP-tutorial MLP, with its loss, exported in training mode:
    Linear(10,20) -> ReLU -> Linear(20,2) -> CrossEntropyLoss(mean), batch 64,
    initial weights from torch.manual_seed(0).

Artifacts (all written next to this script):
  mlp_seed.onnx / mlp_seed.onnxtext   model, forward(x float[64,10], y int64[64]) -> loss float[]
                                      (TorchScript exporter, dynamo=False, opset 17, TRAINING)
  mlp_seed_data.npz                   x float32[1024,10] ~ N(0,1), y int64[1024] =
  mlp_seed_data_compressed.npz          (x0 + 0.5*x1 - x2 > 0); np.random.default_rng(0)
  mlp_seed_ref_<run>.csv              30-step fp32 CPU loss trajectories, "step,loss"; step i uses
                                      samples [(i*64) % 1024, +64); loss is taken before step i's
                                      optimizer.step() (zero_grad, loss=model(x,y), backward, step).
                                      Runs that clip add "grad_norm": clip_grad_norm_'s return value,
                                      the gradients' total norm before clipping
  mlp_seed_ref_adam_final.npz         parameters after the 30 "adam" steps, keyed by initializer name
  mlp_seed_ref_<run>_final.npz        for adamw_bf16_state and sgd_bf16_state: the parameters and the bf16
                                      state under mpc's names (NAME_exp_avg, NAME_exp_avg_sq, NAME_momentum),
                                      widened to fp32, after the 30 steps

Runs (hyperparameters):
  sgd           SGD(lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=False)
  sgd_nesterov  SGD(lr=0.05, momentum=0.9, weight_decay=0, nesterov=True)
  adam          Adam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)
  adamw         AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
  adam_clip     Adam(lr=1e-2, defaults otherwise), clip_grad_norm_(params, max_norm=0.1) before step
  adamw_bf16_state  "adamw" with exp_avg and exp_avg_sq kept as bf16 tensors (AdamWBf16State below;
                mpc-opt --optimizer-state-dtype=bf16)
  sgd_bf16_state    "sgd" with its momentum buffer kept as a bf16 tensor (SGDBf16State below)

Regenerate:  python3 models/make_mlp_seed.py   (deterministic: re-running gives identical files)
  python3 models/make_mlp_seed.py --refs=RUN[,RUN...] rewrites only those runs' reference files,
  from the committed model and data (another torch version may export another model).
"""
import argparse
import copy
import math
import os
import types
import unittest.mock
import warnings
import zipfile

import numpy as np
import onnx
import onnx.printer
import onnxruntime as ort
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, N, STEPS = 64, 1024, 30


class AdamWBf16State(torch.optim.Optimizer):
    """torch.optim.AdamW (single tensor, amsgrad off) with exp_avg and exp_avg_sq stored as bf16 tensors,
    as torchao's low-precision AdamW keeps them: each step widens the moments to fp32, runs AdamW's fp32
    ops in torch's order, moves the parameter by the fp32 new moments, then stores them rounded to
    nearest even (copy_ into the bf16 tensors)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, dtype=torch.bfloat16)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=torch.bfloat16)
                state["step"] += 1
                t, grad = state["step"], p.grad
                p.mul_(1 - lr * wd)
                exp_avg = state["exp_avg"].float().lerp_(grad, 1 - beta1)
                exp_avg_sq = state["exp_avg_sq"].float().mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                step_size = lr / (1 - beta1 ** t)
                denom = (exp_avg_sq.sqrt() / math.sqrt(1 - beta2 ** t)).add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size)
                state["exp_avg"].copy_(exp_avg)
                state["exp_avg_sq"].copy_(exp_avg_sq)


class SGDBf16State(torch.optim.Optimizer):
    """torch.optim.SGD (single tensor, no nesterov) with the momentum buffer stored as a bf16 tensor: the
    buffer is widened, updated by SGD's fp32 ops, the parameter moves by the fp32 buffer, and the buffer
    is stored rounded to nearest even."""

    def __init__(self, params, lr, momentum, weight_decay=0.0, dampening=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay, dampening=dampening))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr, momentum, wd, dampening = group["lr"], group["momentum"], group["weight_decay"], group["dampening"]
            for p in group["params"]:
                state = self.state[p]
                d = p.grad.add(p, alpha=wd) if wd != 0 else p.grad
                if "momentum_buffer" not in state:
                    buf = torch.clone(d)
                    state["momentum_buffer"] = torch.zeros_like(p, dtype=torch.bfloat16)
                else:
                    buf = state["momentum_buffer"].float().mul_(momentum).add_(d, alpha=1 - dampening)
                p.add_(buf, alpha=-lr)
                state["momentum_buffer"].copy_(buf)


RUNS = {
    "sgd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-4, nesterov=False), None),
    "sgd_nesterov": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=0.0, nesterov=True), None),
    "adam": (torch.optim.Adam, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0), None),
    "adamw": (torch.optim.AdamW, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), None),
    "adam_clip": (torch.optim.Adam, dict(lr=1e-2), 0.1),
    "adamw_bf16_state": (AdamWBf16State, dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01), None),
    "sgd_bf16_state": (SGDBf16State, dict(lr=0.05, momentum=0.9, weight_decay=1e-4), None),
}


class MLPWithLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(10, 20)
        self.relu = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(20, 2)
        self.loss_fn = torch.nn.CrossEntropyLoss()  # reduction="mean"

    def forward(self, x, y):
        return self.loss_fn(self.fc2(self.relu(self.fc1(x))), y)


def out(name):
    return os.path.join(HERE, name)


def savez(name, fn, **arrays):
    # np.savez stamps zip entries with the wall clock; pin it so files are reproducible.
    fixed = types.SimpleNamespace(time=lambda: 0.0, localtime=lambda t=None: (1980, 1, 1, 0, 0, 0, 0, 1, -1))
    with unittest.mock.patch.object(zipfile, "time", fixed):
        fn(out(name), **arrays)


def batch(data, i):
    idx = (np.arange(BATCH) + i * BATCH) % N
    return torch.from_numpy(data["x"][idx]), torch.from_numpy(data["y"][idx])


def reference_runs(model, init_state, data, runs):
    for run in runs:
        opt_cls, hp, clip = RUNS[run]
        model.load_state_dict(init_state)
        opt = opt_cls(model.parameters(), **hp)
        losses, norms = [], []
        for i in range(STEPS):
            xb, yb = batch(data, i)
            opt.zero_grad()
            loss = model(xb, yb)
            loss.backward()
            if clip is not None:
                norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=clip).item())
            opt.step()
            losses.append(loss.item())
        with open(out(f"mlp_seed_ref_{run}.csv"), "w") as f:
            if clip is None:
                f.write("step,loss\n" + "".join(f"{i},{l!r}\n" for i, l in enumerate(losses)))
            else:
                f.write("step,loss,grad_norm\n" +
                        "".join(f"{i},{l!r},{n!r}\n" for i, (l, n) in enumerate(zip(losses, norms))))
        print(f"{run:<13} first3={losses[:3]} last={losses[-1]!r}")
        if run == "adam":
            savez("mlp_seed_ref_adam_final.npz", np.savez,
                  **{k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
        if run in ("adamw_bf16_state", "sgd_bf16_state"):
            # Parameters, and the bf16 state under mpc's names (P_exp_avg, P_momentum) widened to fp32.
            final = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
            mpc_names = {"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq", "momentum_buffer": "momentum"}
            for name, p in model.named_parameters():
                for key, t in opt.state[p].items():
                    if key in mpc_names:
                        final[f"{name}_{mpc_names[key]}"] = t.float().numpy()
            savez(f"mlp_seed_ref_{run}_final.npz", np.savez, **final)


def refs_only(runs):
    """The named runs' references from the committed model and data."""
    unknown = [r for r in runs if r not in RUNS]
    if unknown:
        raise SystemExit(f"--refs: no run {unknown} (runs: {', '.join(RUNS)})")
    data = dict(np.load(out("mlp_seed_data.npz")))
    torch.manual_seed(0)
    model = MLPWithLoss()
    init_state = copy.deepcopy(model.state_dict())
    committed = {t.name: onnx.numpy_helper.to_array(t) for t in onnx.load(out("mlp_seed.onnx")).graph.initializer}
    assert all(np.array_equal(committed[k], v.numpy()) for k, v in init_state.items()), \
        "torch.manual_seed(0)'s weights are not mlp_seed.onnx's"
    reference_runs(model, init_state, data, runs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--refs", help="comma-separated runs: rewrite only their reference files")
    args = p.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    if args.refs:
        return refs_only(args.refs.split(","))

    # ---- data ----
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 10)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] - x[:, 2] > 0).astype(np.int64)
    data = {"x": x, "y": y}
    savez("mlp_seed_data.npz", np.savez, **data)
    savez("mlp_seed_data_compressed.npz", np.savez_compressed, **data)
    print(f"data: x {x.shape} {x.dtype}, y {y.shape} {y.dtype}, mean(y)={y.mean():.4f}")

    # ---- model + export ----
    torch.manual_seed(0)
    model = MLPWithLoss()
    init_state = copy.deepcopy(model.state_dict())
    xb, yb = batch(data, 0)
    path = out("mlp_seed.onnx")
    warnings.filterwarnings("ignore", "You are using the legacy TorchScript", DeprecationWarning)
    torch.onnx.export(model, (xb, yb), path, dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17, input_names=["x", "y"], output_names=["loss"])
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    with open(out("mlp_seed.onnxtext"), "w") as f:
        f.write(onnx.printer.to_text(m) + "\n")

    opset = {o.domain: o.version for o in m.opset_import}
    print("opset_import:", opset)
    assert opset.get("", 0) == 17
    vi = lambda v: (v.name, onnx.TensorProto.DataType.Name(v.type.tensor_type.elem_type),
                    [d.dim_value if d.HasField("dim_value") else d.dim_param for d in v.type.tensor_type.shape.dim])
    inits = {t.name: list(t.dims) for t in m.graph.initializer}
    print("inputs:", [vi(v) for v in m.graph.input])
    print("outputs:", [vi(v) for v in m.graph.output])
    print("initializers:", inits)
    print("nodes:")
    for n in m.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        print(f"  {n.op_type:<24} name={n.name!r} in={list(n.input)} out={list(n.output)} attrs={attrs}")
    assert [vi(v) for v in m.graph.input] == [("x", "FLOAT", [64, 10]), ("y", "INT64", [64])]
    assert [vi(v) for v in m.graph.output] == [("loss", "FLOAT", [])]
    assert inits == {k: list(v.shape) for k, v in init_state.items()}, "initializers != torch parameters"
    assert not any(n.op_type in ("Constant", "Identity", "Dropout") for n in m.graph.node)

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_loss = float(sess.run(["loss"], {"x": xb.numpy(), "y": yb.numpy()})[0])
    with torch.no_grad():
        pt_loss = model(xb, yb).item()
    print(f"first-batch loss: torch={pt_loss!r} ort={ort_loss!r} |diff|={abs(pt_loss - ort_loss):.3g}")
    assert abs(pt_loss - ort_loss) <= 1e-6 * max(1.0, abs(pt_loss))

    # ---- reference trajectories ----
    reference_runs(model, init_state, data, RUNS)

if __name__ == "__main__":
    main()
