#!/usr/bin/env python3
"""amp_saved.py -- bytes saved for the backward: PyTorch AMP (CPU autocast fp16) next to mpc's fp16 step.

For four models -- the transformer block (batch 32, seq 256, d 512, 8 heads, hidden 2048, vocab 512), a
GPT-2-like stack (8 blocks, d 256, seq 128, batch 16), the repo's CNN (models/cnn.onnx, batch 8) and
torchvision's ResNet-18 (bench/export_resnet18.py, batch 16 of 3x32x32) -- this builds the PyTorch module
the ONNX file was made from (bench/torch_models.py; ResNet-18's from its own initializers) and counts

  PyTorch: the bytes autograd saves for the backward during one forward, counted with
    torch.autograd.graph.saved_tensors_hooks: each storage once (by data_ptr), leaving out the leaf
    parameters and the batch itself but counting the fp16 copies autocast makes of the weights. Under
    torch.autocast("cpu", dtype=torch.float16) (AMP) and in plain fp32.
  mpc: `mpc-opt MODEL --precision=fp16 --optimizer=adam --report-json=F`'s
    planned.saved_for_backward.bytes: every buffer holding a value the step makes at or before the loss
    node that a node after the loss node reads (the activations and the fp16 working copies of weights
    the backward reads), each buffer once -- what is live across the loss, as autograd holds its saved
    tensors when backward starts. fp32_baseline.saved_for_backward.bytes is the same for
    --precision=fp32. The default compile recomputes cheap values (softmax islands from their fp16 input,
    elementwise chains) within 3 % of the step's FLOPs; the last columns are the fp16 step compiled with
    --recompute=none, what it keeps without that, and the default's recompute share of the step's FLOPs.

Prints a table (MiB and mpc / AMP) and writes the numbers as JSON (bench/lib.sh's layout). Goals: mpc /
AMP <= 0.8 on the block and the stack, <= 1.0 on the CNNs; a missed goal is reported, not an error.

Usage: bench/amp_saved.py [BUILD_DIR] [RESULTS.json]   (needs torch, torchvision, onnx: pip's python3)
"""
import datetime
import json
import os
import subprocess
import sys
import tempfile

import onnx
import onnx.numpy_helper
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_models  # noqa: E402  (bench/)

MIB = 1024.0 * 1024.0

# (name, how the ONNX file is made, torch family, mpc-opt's extra flags, AMP goal)
BLOCK = ["--layers=1", "--batch=32", "--seq=256", "--d=512", "--heads=8", "--hidden=2048", "--vocab=512"]
STACK = ["--layers=8", "--batch=16", "--seq=128", "--d=256"]  # 4 heads, hidden 4d, vocab 128 (the defaults)


def count_saved(module, inputs, amp):
    """Bytes autograd saves for the backward of module(*inputs): each storage once, without the leaf
    parameters and the inputs (autocast's fp16 copies of the weights are not leaves: counted)."""
    skip = {p.untyped_storage().data_ptr() for p in module.parameters()}
    skip |= {x.untyped_storage().data_ptr() for x in inputs}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in skip:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if amp:
            with torch.autocast("cpu", dtype=torch.float16):
                loss = module(*inputs)
        else:
            loss = module(*inputs)
    del loss
    return sum(seen.values())


def graph_inputs(path, batch=None):
    """Random data for the file's data inputs (ints as class labels < 10), a symbolic batch made `batch`."""
    model = onnx.load(path)
    inits = {t.name for t in model.graph.initializer}
    g = torch.Generator().manual_seed(0)
    xs = []
    for i in model.graph.input:
        if i.name in inits:
            continue
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in i.type.tensor_type.shape.dim]
        if i.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            xs.append(torch.randint(0, 10, dims, generator=g))
        else:
            xs.append(torch.randn(dims, generator=g))
    return xs


def resnet18_module(path):
    """torchvision's resnet18 with the exported file's weights (the exporter names them as state_dict)."""
    import torchvision.models as tv
    sys.path.insert(0, os.path.join(ROOT, "models"))
    from library_models import ClassifierWithLoss
    module = ClassifierWithLoss(tv.resnet18(num_classes=10))
    weights = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
               for t in onnx.load(path).graph.initializer}
    state = module.state_dict()
    module.load_state_dict({k: weights.get(k, v) for k, v in state.items()})
    return module


def mpc_report(build, path, extra, tmp):
    report = os.path.join(tmp, "report.json")
    subprocess.run([os.path.join(build, "bin", "mpc-opt"), path, "-o", os.path.join(tmp, "step.onnx"),
                    "--precision=fp16", "--optimizer=adam", f"--report-json={report}", *extra],
                   check=True, stdout=subprocess.DEVNULL)
    return json.load(open(report))


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        ROOT, "bench", "results", f"amp_saved-{datetime.date.today().isoformat()}.json")
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "1")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def stack_file(name, flags):
            path = os.path.join(tmp, name + ".onnx")
            subprocess.run([sys.executable, os.path.join(HERE, "make_transformer_stack.py"), *flags, "-o", path],
                           check=True)
            return path

        resnet = os.path.join(tmp, "resnet18.onnx")
        subprocess.run([sys.executable, os.path.join(HERE, "export_resnet18.py"), resnet,
                        os.path.join(tmp, "resnet18_data.npz")], check=True, capture_output=True)
        models = [
            ("transformer_block", stack_file("block", BLOCK), "stack", [], None, 0.8),
            ("gpt2_like_stack_L8", stack_file("stack", STACK), "stack", [], None, 0.8),
            ("cnn", os.path.join(ROOT, "models", "cnn.onnx"), "cnn", [], None, 1.0),
            ("resnet18", resnet, "resnet18", ["--batch=16"], 16, 1.0),
        ]
        for name, path, family, extra, batch, goal in models:
            module = resnet18_module(path) if family == "resnet18" else torch_models.load_model(family, path)
            module.train()
            inputs = graph_inputs(path, batch)
            amp = count_saved(module, inputs, amp=True)
            fp32 = count_saved(module, inputs, amp=False)
            r = mpc_report(build, path, extra, tmp)
            mpc16 = r["planned"]["saved_for_backward"]["bytes"]
            mpc32 = r["fp32_baseline"]["saved_for_backward"]["bytes"]
            recompute = r.get("flops", {}).get("recompute_fraction")
            # The same step without recomputation (the default recomputes cheap values).
            none = mpc_report(build, path, extra + ["--recompute=none"], tmp)
            none16 = none["planned"]["saved_for_backward"]["bytes"]
            ratio = mpc16 / amp
            rows.append({"model": name, "torch_amp_fp16_saved_bytes": amp, "torch_fp32_saved_bytes": fp32,
                         "mpc_fp16_saved_bytes": mpc16, "mpc_fp32_saved_bytes": mpc32,
                         "mpc_fp16_peak_bytes": r["planned"]["peak_bytes"], "mpc_over_amp": round(ratio, 3),
                         "goal": goal, "verdict": "PASS" if ratio <= goal else "FAIL",
                         "mpc_fp16_recompute_flops_fraction": recompute,
                         "mpc_fp16_recompute_none_saved_bytes": none16,
                         "recompute_none_over_amp": round(none16 / amp, 3)})

    print("saved for the backward (MiB): PyTorch %s CPU autocast fp16 (saved_tensors_hooks) vs "
          "mpc-opt --precision=fp16 --optimizer=adam (saved_for_backward)" % torch.__version__)
    head = (f"{'model':<20} {'torch-fp32':>10} {'torch-AMP':>10} {'mpc-fp32':>10} {'mpc-fp16':>10} {'mpc/AMP':>8} "
            f"{'goal':>6} {'':4} {'recomp-FLOPs':>12} {'no-recomp':>10} {'/AMP':>6}")
    print(head)
    for r in rows:
        print(f"{r['model']:<20} {r['torch_fp32_saved_bytes'] / MIB:10.2f} {r['torch_amp_fp16_saved_bytes'] / MIB:10.2f} "
              f"{r['mpc_fp32_saved_bytes'] / MIB:10.2f} {r['mpc_fp16_saved_bytes'] / MIB:10.2f} "
              f"{r['mpc_over_amp']:8.3f} {'<=' + str(r['goal']):>6} {r['verdict']:4} "
              f"{r['mpc_fp16_recompute_flops_fraction'] or 0:12.5f} "
              f"{r['mpc_fp16_recompute_none_saved_bytes'] / MIB:10.2f} {r['recompute_none_over_amp']:6.3f}")
    print("(recomp-FLOPs: the default's recomputation / the step's FLOPs; no-recomp: mpc-fp16 with --recompute=none)")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=ROOT).stdout.strip()
    doc = {"benchmark": "amp_saved", "date": datetime.date.today().isoformat(),
           "machine": {"nproc": os.cpu_count(), "cpu": cpu}, "torch": torch.__version__, "commit": commit,
           "results": rows}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
