#!/usr/bin/env python3
"""cpu_contenders.py -- mpc's CPU training step against the tools a user would pick instead.

Contenders, per model and thread count:
  mpc fp32, mpc bf16 (oneDNN's native bf16 products and convolutions), mpc bf16 emulated
  (MPC_CPU_EXACT_HALF=1: widened to fp32 sgemm, the path before oneDNN), PyTorch eager fp32 and
  PyTorch CPU autocast bf16 (torch.autocast("cpu", torch.bfloat16) around forward and loss).
  Adam, lr 1e-3, on both sides; mpc-run --synthetic batches, PyTorch random
  batches of the same shapes (a step's time does not depend on the values).
Models (each exported from the PyTorch module that PyTorch trains, so both run the same network):
  gpt     GPT-like LM: bench/make_transformer_stack.py (pre-LN blocks, causal attention)
  bert    BERT-like encoder: nn.TransformerEncoderLayer stack (post-LN, GELU), mean-pooled head
  resnet  torchvision ResNet-18, 10 classes, 64x64 images
  mlp     wide MLP 1024-4096-4096-10 with ReLU
One run: ROUNDS rounds, in each every contender once (one process per mpc measurement, one
long-lived PyTorch worker per model and thread count answering a request per measurement), the
order rotating from round to round, so that the shared machine's load drift hits all alike.
Each measurement is the median of STEPS timed steps after WARMUP; the table gives the median
over rounds and the ratio to PyTorch autocast bf16 (the acceptance bar) from paired rounds.
Results: bench/results/cpu_contenders-DATE.json and a Markdown table on stdout.

Usage: python3 bench/cpu_contenders.py [BUILD_DIR]
  env ROUNDS (3), STEPS (8), WARMUP (3), THREADS ("1 2"), MODELS ("gpt bert resnet mlp"),
  SIZE (small|issue: issue = the sizes of the issue's table; small (default) is ~4x less work)
Needs torch and torchvision (pip) and a built mpc (mpc-opt, mpc-run).
"""
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def sizes(kind):
    if kind == "issue":
        return dict(gpt=dict(layers=4, d=512, heads=8, seq=128, batch=8, vocab=1024),
                    bert=dict(layers=4, d=768, heads=12, seq=128, batch=8),
                    resnet=dict(batch=32, hw=64), mlp=dict(batch=256, width=4096))
    return dict(gpt=dict(layers=2, d=256, heads=4, seq=64, batch=8, vocab=512),
                bert=dict(layers=2, d=256, heads=4, seq=64, batch=8),
                resnet=dict(batch=8, hw=64), mlp=dict(batch=64, width=4096))


# --- the PyTorch modules -----------------------------------------------------------------------

def torch_module(name, cfg, onnx_path):
    """(module, example inputs) for a model; gpt loads the stack file's weights."""
    import torch
    import torch.nn as nn
    torch.manual_seed(0)
    if name == "gpt":
        sys.path.insert(0, HERE)
        import torch_models
        m = torch_models.load_model("stack", onnx_path)
        b, t, v = cfg["batch"], cfg["seq"], cfg["vocab"]
        return m, (torch.randint(0, v, (b, t)), torch.randint(0, v, (b, t)))
    if name == "bert":
        class Bert(nn.Module):
            def __init__(self, d, heads, layers):
                super().__init__()
                layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                                   batch_first=True)
                self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
                self.head = nn.Linear(d, 2)

            def forward(self, x, y):
                return nn.functional.cross_entropy(self.head(self.enc(x).mean(1)), y)
        m = Bert(cfg["d"], cfg["heads"], cfg["layers"])
        return m, (torch.randn(cfg["batch"], cfg["seq"], cfg["d"]), torch.randint(0, 2, (cfg["batch"],)))
    if name == "resnet":
        import torchvision.models as tv
        sys.path.insert(0, os.path.join(ROOT, "models"))
        from library_models import ClassifierWithLoss
        m = ClassifierWithLoss(tv.resnet18(num_classes=10))
        return m, (torch.randn(cfg["batch"], 3, cfg["hw"], cfg["hw"]), torch.randint(0, 10, (cfg["batch"],)))
    if name == "mlp":
        class Mlp(nn.Module):
            def __init__(self, w):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(1024, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(),
                                         nn.Linear(w, 10))

            def forward(self, x, y):
                return nn.functional.cross_entropy(self.net(x), y)
        m = Mlp(cfg["width"])
        return m, (torch.randn(cfg["batch"], 1024), torch.randint(0, 10, (cfg["batch"],)))
    raise ValueError(name)


def export(name, cfg, path):
    import torch
    m, example = torch_module(name, cfg, None)
    torch.onnx.export(m.train(), example, path, input_names=["x", "y"], output_names=["loss"],
                      dynamo=False, training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False, opset_version=17)


def torch_worker(name, cfg_json, onnx_path, threads, warmup, steps):
    """Answers each stdin line (fp32|bf16) with one JSON measurement."""
    import torch
    torch.set_num_threads(int(threads))
    warmup, steps = int(warmup), int(steps)
    cfg = json.loads(cfg_json)
    m, example = torch_module(name, cfg, onnx_path)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)

    def step(amp):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp == "bf16"):
            loss = m(*example)
        loss.backward()
        opt.step()

    for line in sys.stdin:
        amp = line.strip()
        for _ in range(warmup):
            step(amp)
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step(amp)
            ms.append((time.perf_counter() - t0) * 1e3)
        print(json.dumps({"median_ms": statistics.median(ms)}), flush=True)


# --- mpc ---------------------------------------------------------------------------------------

def mpc_step_ms(build, model, threads, warmup, steps, env_extra):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), **env_extra)
    with tempfile.NamedTemporaryFile(suffix=".csv") as log:
        subprocess.run([f"{build}/bin/mpc-run", model, "--device=cpu", "--synthetic",
                        f"--steps={warmup + steps}", f"--log={log.name}", "--quiet"],
                       env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        rows = open(log.name).read().split("\n")[1:]
        ms = [float(r.split(",")[4]) for r in rows if r][warmup:]
    return statistics.median(ms)


def kernels_line(build, model, threads):
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    r = subprocess.run([f"{build}/bin/mpc-run", model, "--device=cpu", "--synthetic", "--steps=1",
                        "--quiet", "--verbose"], env=env, capture_output=True, text=True)
    return next((l for l in r.stderr.splitlines() if l.startswith("cpu kernels:")), "")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(*sys.argv[2:])
        return
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build"))
    rounds = int(os.environ.get("ROUNDS", 3))
    steps = int(os.environ.get("STEPS", 8))
    warmup = int(os.environ.get("WARMUP", 3))
    thread_counts = [int(t) for t in os.environ.get("THREADS", "1 2").split()]
    models = os.environ.get("MODELS", "gpt bert resnet mlp").split()
    size = os.environ.get("SIZE", "small")
    cfgs = sizes(size)
    tmp = tempfile.mkdtemp(prefix="cpu_contenders.")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    results = {"date": datetime.date.today().isoformat(), "cpu": cpu, "load_start": load,
               "size": size, "rounds": rounds, "steps": steps, "warmup": warmup,
               "command": "python3 bench/cpu_contenders.py " + " ".join(sys.argv[1:]), "rows": []}
    kinds = ["mpc fp32", "mpc bf16", "mpc bf16 emulated", "torch fp32", "torch autocast bf16"]
    for name in models:
        cfg = cfgs[name]
        src = os.path.join(tmp, f"{name}.onnx")
        try:
            if name == "gpt":
                subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_transformer_stack.py"),
                                f"--layers={cfg['layers']}", f"--d={cfg['d']}", f"--heads={cfg['heads']}",
                                f"--seq={cfg['seq']}", f"--batch={cfg['batch']}", f"--vocab={cfg['vocab']}",
                                f"--hidden={4 * cfg['d']}", "-o", src], check=True, stdout=subprocess.DEVNULL)
            else:
                export(name, cfg, src)
            compiled = {}
            for p in ("fp32", "bf16"):
                compiled[p] = os.path.join(tmp, f"{name}.{p}.onnx")
                subprocess.run([f"{build}/bin/mpc-opt", src, "-o", compiled[p], f"--precision={p}",
                                "--optimizer=adam", "--lr=1e-3"], check=True, stdout=subprocess.DEVNULL)
        except (subprocess.CalledProcessError, Exception) as e:  # noqa: BLE001 (reported, run goes on)
            print(f"{name}: skipped ({e})", file=sys.stderr)
            continue
        for threads in thread_counts:
            worker = subprocess.Popen([sys.executable, __file__, "--torch-worker", name, json.dumps(cfg),
                                       src, str(threads), str(warmup), str(steps)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                      env=dict(os.environ, OMP_NUM_THREADS=str(threads)))
            ms = {k: [] for k in kinds}
            for r in range(rounds):
                for i in range(len(kinds)):
                    kind = kinds[(r + i) % len(kinds)]
                    if kind.startswith("torch"):
                        worker.stdin.write(("bf16" if "bf16" in kind else "fp32") + "\n")
                        worker.stdin.flush()
                        ms[kind].append(json.loads(worker.stdout.readline())["median_ms"])
                    else:
                        p = "fp32" if "fp32" in kind else "bf16"
                        extra = {"MPC_CPU_EXACT_HALF": "1"} if "emulated" in kind else {}
                        ms[kind].append(mpc_step_ms(build, compiled[p], threads, warmup, steps, extra))
            worker.stdin.close()
            worker.wait()
            bar = ms["torch autocast bf16"]
            row = {"model": name, "config": cfg, "threads": threads,
                   "median_ms": {k: statistics.median(v) for k, v in ms.items()},
                   "rounds_ms": ms,
                   "ratio_to_torch_autocast_bf16": {
                       k: statistics.median([a / b for a, b in zip(v, bar)]) for k, v in ms.items()},
                   "kernels": kernels_line(build, compiled["bf16"], threads)}
            results["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    out = os.path.join(HERE, "results", f"cpu_contenders-{results['date']}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"{results['date']}, {cpu}, load at start {' '.join(load)}, {rounds} rounds x {steps} steps "
          f"(median ms/step; in brackets: paired ratio to PyTorch autocast bf16, lower is faster)\n")
    print("| model | threads | " + " | ".join(kinds) + " |")
    print("|---|---|" + "---|" * len(kinds))
    for row in results["rows"]:
        cells = [f"{row['median_ms'][k]:.1f} ({row['ratio_to_torch_autocast_bf16'][k]:.2f})" for k in kinds]
        print(f"| {row['model']} | {row['threads']} | " + " | ".join(cells) + " |")
    print(f"\nresults: {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
