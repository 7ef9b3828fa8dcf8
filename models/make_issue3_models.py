#!/usr/bin/env python3
"""make_issue3_models.py -- generate the issue-3 model-family artifacts in models/.

Three small PyTorch models, each with its loss, exported in training mode with the TorchScript
exporter (dynamo=False, TrainingMode.TRAINING, do_constant_folding=False), initial weights from
torch.manual_seed(0):

  cnn          Conv2d(3,8,3,s1,p1) -> BatchNorm2d(8) -> ReLU -> MaxPool2d(2)
               -> Conv2d(8,16,3,s2,p1,groups=2) -> ReLU -> Flatten -> Linear(256,10)
               -> CrossEntropyLoss.                 x float[8,3,16,16], y int64[8]; opset 17
  transformer  pre-LN transformer block + LM head: Embedding(64,32) + learned pos [16,32];
               x + Attn(LN(x)) (2 heads, q/k/v/out Linear(32,32), view/transpose head split,
               no mask); x + MLP(LN(x)) (Linear(32,64) -> GELU(erf) -> Linear(64,32)); LN;
               Linear(32,64); CrossEntropyLoss over (B*T, vocab).
                                                    tokens int64[4,16], targets int64[4,16]; opset 17
               Exported with a dynamic batch axis, then input dim 0 pinned to 4, so that the inputs are
               static and the graph keeps the exporter's Shape->Gather->Unsqueeze->Concat->Reshape
               chains (a plain static export folds x.size(i) into Constants).
  transformer_gelu20   the same model (same weights) at opset 20, where GELU is the Gelu op
  transformer_dynbatch the same opset-17 model with input dim 0 left dynamic ("batch")
  resmlp       h = Linear(16,32)(x); h = h + tanh(Linear(32,32)(h)); h = h + sigmoid(Linear(32,32)(h));
               loss = mean((Linear(32,4)(h) - y) ** 2).  x float[16,16], y float[16,4]; opset 17

Artifacts (next to this script), for <name> in cnn, transformer, resmlp:
  <name>.onnx                the model with its loss; the only graph output is `loss` (float scalar)
  <name>_data.npz            arrays named after the graph inputs, first axis = samples
                             (cnn: np.savez_compressed, others: np.savez)
  <name>_ref_sgd.csv         fp32 CPU loss trajectory, 30 steps, SGD(lr=0.05, momentum=0.9)
  <name>_ref_adam.csv        fp32 CPU loss trajectory, 30 steps, Adam(lr=1e-3)
  cnn_ref_adam_final.npz     parameters and BatchNorm running_mean/running_var after the 30 adam
                             steps, keyed by ONNX initializer name
  transformer_gelu20.onnx, transformer_dynbatch.onnx  (use transformer_data.npz and transformer_ref_*.csv)

Data: cnn x float32[256,3,16,16] (class k brightens quadrant k//3 of channel k%3; pixels multiples of
1/4 in [-2,2]), y = argmax of the 10 (channel, quadrant) means; transformer tokens int64[64,16] walk a
fixed permutation perm, targets = perm[tokens] (the next token); resmlp x float32[256,16] ~ N(0,1),
y = 0.5*(x@A) + tanh(x@B). All from np.random.default_rng(0).

BatchNorm: the exporter traces one training-mode forward on batch 0, which updates the running stats
in place before they are written; the PyTorch references start from exactly the file's initializers.

Step i (0-based) takes samples [(i*B) % N, +B) (wrapping); the loop is
zero_grad; loss = model(*batch); backward; step, and the logged loss of step i is taken before
step i's optimizer.step(). Losses are written as repr(float), header "step,loss".

Regenerate:  python3 models/make_issue3_models.py   (deterministic: re-running gives identical files)
"""
import collections
import copy
import math
import os
import types
import unittest.mock
import warnings
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 30
RUNS = {
    "sgd": (torch.optim.SGD, dict(lr=0.05, momentum=0.9)),
    "adam": (torch.optim.Adam, dict(lr=1e-3)),
}


# ----------------------------------------------------------------------------- models
class CNNWithLoss(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=1, padding=1)
        self.bn = nn.BatchNorm2d(8)  # momentum 0.1 (PyTorch convention)
        self.relu1 = nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, dilation=1, groups=2)
        self.relu2 = nn.ReLU()
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(16 * 4 * 4, 10)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, x, y):
        h = self.pool(self.relu1(self.bn(self.conv1(x))))
        h = self.flatten(self.relu2(self.conv2(h)))
        return self.loss_fn(self.fc(h), y)


class Attn(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.d, self.h, self.dh = d, heads, d // heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)

    def forward(self, x):
        B, T = x.size(0), x.size(1)  # traced sizes -> Shape/Gather/Unsqueeze/Concat/Reshape
        q = self.q(x).view(B, T, self.h, self.dh).transpose(1, 2)
        k = self.k(x).view(B, T, self.h, self.dh).transpose(1, 2)
        v = self.v(x).view(B, T, self.h, self.dh).transpose(1, 2)
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.dh)
        att = torch.softmax(att, dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).contiguous().view(B, T, self.d)
        return self.o(y)


class TransformerWithLoss(nn.Module):
    def __init__(self, vocab=64, d=32, T=16, heads=2, hidden=64):
        super().__init__()
        self.vocab = vocab
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(T, d) * 0.02)
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attn(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, hidden)
        self.gelu = nn.GELU()  # exact (erf) form
        self.fc2 = nn.Linear(hidden, d)
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.loss_fn = nn.CrossEntropyLoss()

    def forward(self, tokens, targets):
        B, T = tokens.size(0), tokens.size(1)
        x = self.tok(tokens) + self.pos
        x = x + self.attn(self.ln1(x))
        x = x + self.fc2(self.gelu(self.fc1(self.ln2(x))))
        logits = self.head(self.lnf(x))
        return self.loss_fn(logits.view(B * T, self.vocab), targets.view(B * T))


class ResMLPWithLoss(nn.Module):
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
        y_hat = self.out(h)
        return ((y_hat - y) ** 2).mean()


# ----------------------------------------------------------------------------- data
def make_cnn_data():
    rng = np.random.default_rng(0)
    n = 256
    # Class k brightens one 8x8 quadrant (k // 3) of one channel (k % 3); the label is then the fixed
    # rule "argmax over the 10 (channel, quadrant) means". Pixels are quantised to multiples of 1/4
    # in [-2, 2] so that the (compressed) npz stays small.
    k = rng.integers(0, 10, size=n)
    x = rng.standard_normal((n, 3, 16, 16))
    for i in range(n):
        c, q = k[i] % 3, k[i] // 3
        x[i, c, (q // 2) * 8:(q // 2) * 8 + 8, (q % 2) * 8:(q % 2) * 8 + 8] += 0.75
    x = (np.clip(np.round(x * 4.0), -8, 8) / 4.0).astype(np.float32)
    region_means = np.stack([x[:, c % 3, (c // 3 // 2) * 8:(c // 3 // 2) * 8 + 8,
                               (c // 3 % 2) * 8:(c // 3 % 2) * 8 + 8].mean(axis=(1, 2)) for c in range(10)], 1)
    y = np.argmax(region_means, axis=1).astype(np.int64)
    return {"x": x, "y": y}


def make_transformer_data():
    rng = np.random.default_rng(0)
    perm = rng.permutation(64)
    tokens = np.empty((64, 16), dtype=np.int64)
    tokens[:, 0] = rng.integers(0, 64, size=64)
    for t in range(1, 16):
        tokens[:, t] = perm[tokens[:, t - 1]]
    # next token: targets[:, t] = tokens[:, t+1] = perm[tokens[:, t]] (also for the last position)
    targets = perm[tokens].astype(np.int64)
    assert (targets[:, :-1] == tokens[:, 1:]).all()
    return {"tokens": tokens, "targets": targets}


def make_resmlp_data():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 16)).astype(np.float32)
    a = (rng.standard_normal((16, 4)) / 4.0).astype(np.float32)
    b = (rng.standard_normal((16, 4)) / 4.0).astype(np.float32)
    y = (0.5 * (x @ a) + np.tanh(x @ b)).astype(np.float32)
    return {"x": x, "y": y}


# ----------------------------------------------------------------------------- helpers
def out(name):
    return os.path.join(HERE, name)


def savez(name, fn, **arrays):
    # np.savez stamps zip entries with the wall clock; pin it so files are reproducible.
    fixed = types.SimpleNamespace(time=lambda: 0.0, localtime=lambda t=None: (1980, 1, 1, 0, 0, 0, 0, 1, -1))
    with unittest.mock.patch.object(zipfile, "time", fixed):
        fn(out(name), **arrays)


def batch(data, names, bsz, i):
    n = len(data[names[0]])
    idx = (np.arange(bsz) + i * bsz) % n
    return tuple(torch.from_numpy(data[k][idx]) for k in names)


def vi(v):
    t = v.type.tensor_type
    return (v.name, onnx.TensorProto.DataType.Name(t.elem_type),
            [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim])


def shape_chains(m):
    """Reshape nodes whose shape input is Concat(Unsqueeze(Gather(Shape(.))) ...)."""
    prod = {o: n for n in m.graph.node for o in n.output}
    src = lambda name: prod.get(name)
    found = []
    for n in m.graph.node:
        if n.op_type != "Reshape":
            continue
        c = src(n.input[1])
        if c is None or c.op_type != "Concat":
            continue
        ok = False
        for ci in c.input:
            u = src(ci)
            if u is None or u.op_type != "Unsqueeze":
                continue
            g = src(u.input[0])
            # Gather directly, or Gather feeding shape arithmetic (Mul) for B*T
            stack = [g]
            while stack:
                g = stack.pop()
                if g is None:
                    continue
                if g.op_type == "Gather" and src(g.input[0]) is not None and src(g.input[0]).op_type == "Shape":
                    ok = True
                elif g.op_type in ("Mul", "Add", "Cast"):
                    stack.extend(src(i) for i in g.input)
        if ok:
            found.append(n.name)
    return found


def describe(m, label):
    opset = {o.domain: o.version for o in m.opset_import}
    print(f"=== {label}: ir_version={m.ir_version} opset_import={opset}")
    print("  inputs: ", [vi(v) for v in m.graph.input])
    print("  outputs:", [vi(v) for v in m.graph.output])
    print("  initializers:", [(t.name, onnx.TensorProto.DataType.Name(t.data_type), list(t.dims))
                              for t in m.graph.initializer])
    counts = collections.Counter(n.op_type for n in m.graph.node)
    print(f"  nodes: {len(m.graph.node)}  op counts: {dict(sorted(counts.items()))}")
    for n in m.graph.node:
        if n.op_type in ("Constant", "Identity", "BatchNormalization", "Gelu", "Softmax",
                         "LayerNormalization", "SoftmaxCrossEntropyLoss", "ReduceMean", "Pow",
                         "Conv", "MaxPool", "Flatten", "Gemm", "Erf", "Reshape"):
            attrs = {}
            for a in n.attribute:
                v = onnx.helper.get_attribute_value(a)
                if isinstance(v, onnx.TensorProto):
                    arr = onnx.numpy_helper.to_array(v)
                    v = f"tensor {onnx.TensorProto.DataType.Name(v.data_type)}{list(arr.shape)}={arr.tolist()}"
                attrs[a.name] = v
            print(f"    {n.op_type:<24} name={n.name!r} in={list(n.input)} out={list(n.output)} attrs={attrs}")
    print("  Shape->Gather->Unsqueeze->Concat->Reshape chains feeding:", shape_chains(m))
    return counts


def export(model, args, fname, input_names, opset, batch_dim="static"):
    """batch_dim: "static" -- plain export, input shapes from `args`;
    "dynamic" -- dynamic_axes makes axis 0 of every input the dim_param "batch";
    "pinned" -- exported as "dynamic", then axis 0 of every input is pinned back to the batch size
    (what onnxruntime.tools.make_dynamic_shape_fixed does): static input shapes, while the graph keeps
    the exporter's Shape->Gather->Unsqueeze->Concat->Reshape arithmetic (a static export has
    the exporter fold x.size(i) into Constants instead)."""
    path = out(fname)
    dyn = None if batch_dim == "static" else {k: {0: "batch"} for k in input_names}
    torch.onnx.export(model, args, path, dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=opset, input_names=input_names,
                      output_names=["loss"], dynamic_axes=dyn)
    m = onnx.load(path)
    if batch_dim == "pinned":
        for v, a in zip(m.graph.input, args):
            d = v.type.tensor_type.shape.dim[0]
            assert d.dim_param == "batch"
            d.Clear()
            d.dim_value = a.shape[0]
        onnx.save(m, path)
    onnx.checker.check_model(m, full_check=True)
    assert {o.domain: o.version for o in m.opset_import}.get("", 0) == opset
    return path, m


def ort_check(path, model, args, input_names):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ort_loss = float(sess.run(["loss"], {k: a.numpy() for k, a in zip(input_names, args)})[0])
    state = copy.deepcopy(model.state_dict())  # a training-mode forward updates BN running stats
    with torch.no_grad():
        pt_loss = model(*args).item()
    model.load_state_dict(state)
    diff = abs(pt_loss - ort_loss)
    print(f"  first-batch loss: torch={pt_loss!r} ort={ort_loss!r} |diff|={diff:.3g}")
    assert diff <= 1e-5 * max(1.0, abs(pt_loss)), "onnxruntime disagrees with torch"


def trajectories(name, model, init_state, data, input_names, bsz, final_npz_keys=None):
    for run, (opt_cls, hp) in RUNS.items():
        model.load_state_dict(init_state)
        model.train()
        opt = opt_cls(model.parameters(), **hp)
        losses = []
        for i in range(STEPS):
            args = batch(data, input_names, bsz, i)
            opt.zero_grad()
            loss = model(*args)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        with open(out(f"{name}_ref_{run}.csv"), "w") as f:
            f.write("step,loss\n" + "".join(f"{i},{l!r}\n" for i, l in enumerate(losses)))
        print(f"  {run:<5} first3={losses[:3]} last={losses[-1]!r}")
        if run == "adam" and final_npz_keys is not None:
            sd = model.state_dict()
            savez(f"{name}_ref_adam_final.npz", np.savez,
                  **{k: sd[k].detach().numpy().copy() for k in final_npz_keys})
    model.load_state_dict(init_state)


def family(name, model_cls, data, input_names, bsz, savez_fn, final_npz=False, batch_dim="static",
           extra=()):
    savez(f"{name}_data.npz", savez_fn, **data)
    print(f"--- {name}: data " + ", ".join(f"{k} {v.dtype}{list(v.shape)}" for k, v in data.items()))
    torch.manual_seed(0)
    model = model_cls()
    model.train()
    seed_state = copy.deepcopy(model.state_dict())
    args = batch(data, input_names, bsz, 0)
    results = {}
    for fname, opset, bd in [(f"{name}.onnx", 17, batch_dim)] + list(extra):
        model.load_state_dict(seed_state)
        path, m = export(model, args, fname, input_names, opset, bd)
        # The exporter traces one training-mode forward on `args`, which updates BatchNorm's running
        # stats in place before they are written as initializers: the file holds the model *after*
        # that forward, and the PyTorch references start from exactly the file's initializers.
        state = copy.deepcopy(model.state_dict())
        results[fname] = describe(m, fname)
        inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
        params = {k: list(v.shape) for k, v in model.named_parameters()}
        assert all(k in inits and list(inits[k].shape) == s for k, s in params.items()), \
            "a parameter is not an initializer"
        assert all(np.array_equal(v, state[k].numpy()) for k, v in inits.items()), "initializer != torch state"
        print("  initializers that are not parameters:", sorted(set(inits) - set(params)))
        print("  initializers changed by the export's traced forward:",
              [k for k in inits if not torch.equal(seed_state[k], state[k])])
        assert [v.name for v in m.graph.input] == input_names
        assert [vi(v) for v in m.graph.output] == [("loss", "FLOAT", [])]
        ort_check(path, model, args, input_names)
        if bd == "dynamic":  # another batch size through the same file
            ort_check(path, model, batch(data, input_names, 2 * bsz, 0), input_names)
        if fname == f"{name}.onnx":
            start_state, final_keys = state, ([t.name for t in m.graph.initializer] if final_npz else None)
        else:
            assert all(torch.equal(start_state[k], v) for k, v in state.items())
    trajectories(name, model, start_state, data, input_names, bsz, final_keys)
    return results


def bn_check(data):
    """What the exporter wrote for BatchNormalization's running statistics, and how they compare."""
    m = onnx.load(out("cnn.onnx"))
    bn = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn) == 1 and any(a.name == "training_mode" and a.i == 1 for a in bn[0].attribute)
    bn = bn[0]
    assert len(bn.output) == 3, "BatchNormalization has no running mean/var outputs"
    graph_outs = {o.name for o in m.graph.output}
    consumed = {i for n in m.graph.node for i in n.input}
    print(f"  BatchNormalization running-stat outputs {list(bn.output[1:])}: graph outputs="
          f"{[o in graph_outs for o in bn.output[1:]]}, consumed by a node={[o in consumed for o in bn.output[1:]]};"
          f" state inputs {list(bn.input[3:])}")
    init = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in m.graph.initializer}
    xb, yb = batch(data, ["x", "y"], 8, 0)
    torch.manual_seed(0)
    model = CNNWithLoss().train()
    with torch.no_grad():
        model(xb, yb)
    print("  exported bn.running_mean/var == torch's after one forward on batch 0 (the export's trace):",
          torch.equal(init["bn.running_mean"], model.bn.running_mean),
          torch.equal(init["bn.running_var"], model.bn.running_var))
    # One more step from the file's state, in onnxruntime (running stats exposed) and in torch.
    for o in bn.output[1:]:
        m.graph.output.append(onnx.helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, [8]))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    _, rm, rv = sess.run(None, {"x": xb.numpy(), "y": yb.numpy()})
    model.load_state_dict(init, strict=False)
    with torch.no_grad():
        h = model.conv1(xb)
        model(xb, yb)
    n = h.numel() // h.shape[1]
    pop = init["bn.running_var"] * 0.9 + 0.1 * h.var(dim=(0, 2, 3), unbiased=False)
    print(f"  one step, |ort - torch|: running_mean {np.abs(rm - model.bn.running_mean.numpy()).max():.3g},"
          f" running_var {np.abs(rv - model.bn.running_var.numpy()).max():.3g}; |ort - (0.9*var + 0.1*population"
          f" var)| {np.abs(rv - pop.numpy()).max():.3g}. torch uses the unbiased batch variance (factor N/(N-1),"
          f" N={n}); the ONNX spec and onnxruntime the population variance")


def main():
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    torch.set_default_dtype(torch.float32)
    warnings.filterwarnings("ignore", "You are using the legacy TorchScript", DeprecationWarning)

    r = family("cnn", CNNWithLoss, make_cnn_data(), ["x", "y"], 8, np.savez_compressed, final_npz=True)
    bn_check(make_cnn_data())

    r = family("transformer", TransformerWithLoss, make_transformer_data(), ["tokens", "targets"], 4,
               np.savez, batch_dim="pinned",
               extra=[("transformer_gelu20.onnx", 20, "pinned"), ("transformer_dynbatch.onnx", 17, "dynamic")])
    for f in r:
        assert len(shape_chains(onnx.load(out(f)))) == 6, f"{f}: no Shape->...->Reshape chains"
    assert [vi(v) for v in onnx.load(out("transformer.onnx")).graph.input] == \
        [("tokens", "INT64", [4, 16]), ("targets", "INT64", [4, 16])]
    assert r["transformer.onnx"]["Erf"] == 1 and r["transformer.onnx"]["Gelu"] == 0
    assert r["transformer_gelu20.onnx"]["Gelu"] == 1 and r["transformer_gelu20.onnx"]["Erf"] == 0

    r = family("resmlp", ResMLPWithLoss, make_resmlp_data(), ["x", "y"], 16, np.savez)
    assert all(r["resmlp.onnx"][op] == 1 for op in ("Sub", "Pow", "ReduceMean"))

    for f in sorted(os.listdir(HERE)):
        if f.startswith(("cnn", "transformer", "resmlp")):
            size = os.path.getsize(out(f))
            print(f"{f:<32} {size:>8} bytes")
            assert size < 300 * 1024, f"{f} is too large"


if __name__ == "__main__":
    main()
