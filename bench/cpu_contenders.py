#!/usr/bin/env python3
"""cpu_contenders.py -- mpc's CPU training step against the tools a user would pick instead.

Contenders, per model and thread count:
  mpc fp32, bf16 and fp16 (oneDNN's native bf16 products and convolutions; fp16 is emulated:
  oneDNN 2.6 has no native fp16 CPU kernels), mpc fp32 with OPENBLAS_CORETYPE=Prescott (the
  fast path must not depend on OpenBLAS's core detection), PyTorch eager fp32, PyTorch CPU
  autocast bf16 (torch.autocast("cpu", torch.bfloat16) around forward and loss), torch.compile
  fp32 (inductor; TORCH_COMPILE=0 leaves it out) and ONNX Runtime training fp32
  (onnxruntime-training-cpu's generate_artifacts on the same ONNX, AdamW; run by ORT_PYTHON,
  default build/ort-venv/bin/python, made by tools/setup.sh; skipped when absent).
  Adam(W), lr 1e-3; mpc-run --synthetic batches, the others random batches of the same shapes
  (a step's time does not depend on the values). mpc runs with --threads=N, PyTorch with
  torch.set_num_threads(N), ORT with N intra-op threads.
Models (each exported from the PyTorch module that PyTorch trains, so all run the same network):
  gpt     GPT-2-like LM: bench/make_transformer_stack.py (pre-LN blocks, causal attention)
  bert    BERT-like encoder: nn.TransformerEncoderLayer stack (post-LN, GELU), mean-pooled head
  resnet  torchvision ResNet-18, 10 classes, 64x64 images
  mlp     wide MLP 1024-4096-4096-10 with ReLU
One run: ROUNDS rounds, in each every contender once (one process per mpc measurement, one
long-lived worker per other contender, model and thread count answering a request per
measurement), the order rotating from round to round, so that the machine's load drift hits all
alike. Each measurement is the median of STEPS timed steps after WARMUP; the table gives the
median over rounds and the ratio to PyTorch autocast bf16 (the acceptance bar) from paired
rounds, and each contender's peak RSS (the largest over its processes).
Results: bench/results/cpu_contenders-DATE.json and a Markdown table on stdout.

Usage: python3 bench/cpu_contenders.py [BUILD_DIR]     (BUILD_DIR default: build)
  env ROUNDS (3), STEPS (3), WARMUP (2), THREADS ("1 2"), MODELS ("gpt bert resnet mlp"),
  SIZE (issue|small: issue (default) = the sizes of the issue's table; small is ~4x less work),
  TORCH_COMPILE (1; 0 leaves torch.compile out), ORT_PYTHON, OUT (the results file; default
  bench/results/cpu_contenders-DATE.json for the whole run, cpu_contenders-DATE-subset.json when
  MODELS or THREADS name a subset, so a partial run never replaces a whole one)
Needs torch and torchvision (pip) and a built mpc (mpc-opt, mpc-run).
"""
import datetime
import json
import os
import resource
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


def peak_rss_mib():
    """This process's peak RSS since its exec (VmHWM; ru_maxrss would carry its parent's over)."""
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def torch_worker(name, cfg_json, onnx_path, threads, warmup, steps, kind):
    """Answers each stdin line with one JSON measurement of `kind` (fp32|bf16|compile)."""
    import torch
    torch.set_num_threads(int(threads))
    warmup, steps = int(warmup), int(steps)
    cfg = json.loads(cfg_json)
    m, example = torch_module(name, cfg, onnx_path)
    m.train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    fwd = torch.compile(m) if kind == "compile" else m

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "bf16"):
            loss = fwd(*example)
        loss.backward()
        opt.step()

    print(json.dumps({"ready": True}), flush=True)
    first = True
    for _ in sys.stdin:
        t0 = time.perf_counter()
        for _ in range(warmup):
            step()
        setup_s = time.perf_counter() - t0 if first else None
        first = False
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            ms.append((time.perf_counter() - t0) * 1e3)
        print(json.dumps({"median_ms": statistics.median(ms), "peak_rss_mib": peak_rss_mib(),
                          "first_warmup_s": setup_s}), flush=True)


def ort_worker(name, cfg_json, onnx_path, threads, warmup, steps, artifacts_dir):
    """ONNX Runtime training (onnxruntime-training-cpu): artifacts from the same ONNX, AdamW."""
    import numpy as np
    import onnx
    import onnxruntime
    from onnxruntime import SessionOptions
    from onnxruntime.training import artifacts
    from onnxruntime.training.api import CheckpointState, Module, Optimizer
    warmup, steps = int(warmup), int(steps)
    onnxruntime.set_default_logger_severity(3)
    cfg = json.loads(cfg_json)
    m = onnx.load(onnx_path)
    # ORT's gradient builders read the optional outputs the exporter leaves off.
    want = {"LayerNormalization": 3, "Dropout": 2, "SoftmaxCrossEntropyLoss": 2}
    for i, n in enumerate(m.graph.node):
        while n.op_type in want and len(n.output) < want[n.op_type]:
            n.output.append(f"ort_extra_{i}_{len(n.output)}")
    # Trainable: float initializers, less a batch norm's running statistics.
    stats = {n.input[i] for n in m.graph.node if n.op_type == "BatchNormalization" for i in (3, 4)}
    params = [t.name for t in m.graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT and t.dims and t.name not in stats]
    os.makedirs(artifacts_dir, exist_ok=True)
    artifacts.generate_artifacts(m, requires_grad=params, frozen_params=[], loss=None,
                                 optimizer=artifacts.OptimType.AdamW, artifact_directory=artifacts_dir)
    del m
    state = CheckpointState.load_checkpoint(os.path.join(artifacts_dir, "checkpoint"))
    so = SessionOptions()
    so.log_severity_level = 3  # errors only: its graph passes log every rewrite
    so.intra_op_num_threads = int(threads)
    so.inter_op_num_threads = 1
    # No eval model: only training steps are timed (and a training-mode batch norm's eval form,
    # with its three outputs, does not load).
    module = Module(os.path.join(artifacts_dir, "training_model.onnx"), state, None, device="cpu",
                    session_options=so)
    optimizer = Optimizer(os.path.join(artifacts_dir, "optimizer_model.onnx"), module)
    optimizer.set_learning_rate(1e-3)
    module.train()
    rng = np.random.default_rng(0)
    if name == "gpt":
        b, t, v = cfg["batch"], cfg["seq"], cfg["vocab"]
        inputs = [rng.integers(0, v, (b, t)).astype(np.int64), rng.integers(0, v, (b, t)).astype(np.int64)]
    elif name == "bert":
        inputs = [rng.standard_normal((cfg["batch"], cfg["seq"], cfg["d"]), dtype=np.float32),
                  rng.integers(0, 2, (cfg["batch"],)).astype(np.int64)]
    elif name == "resnet":
        inputs = [rng.standard_normal((cfg["batch"], 3, cfg["hw"], cfg["hw"]), dtype=np.float32),
                  rng.integers(0, 10, (cfg["batch"],)).astype(np.int64)]
    else:
        inputs = [rng.standard_normal((cfg["batch"], 1024), dtype=np.float32),
                  rng.integers(0, 10, (cfg["batch"],)).astype(np.int64)]

    def step():
        module(*inputs)
        optimizer.step()
        module.lazy_reset_grad()

    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        for _ in range(warmup):
            step()
        ms = []
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            ms.append((time.perf_counter() - t0) * 1e3)
        print(json.dumps({"median_ms": statistics.median(ms), "peak_rss_mib": peak_rss_mib()}), flush=True)


# --- mpc ---------------------------------------------------------------------------------------

def mpc_step_ms(build, model, threads, warmup, steps, env_extra):
    """(median ms/step, peak RSS MiB) of one mpc-run process."""
    env = dict(os.environ, **env_extra)
    with tempfile.NamedTemporaryFile(suffix=".csv") as log:
        p = subprocess.Popen([f"{build}/bin/mpc-run", model, "--device=cpu", "--synthetic",
                              f"--threads={threads}", f"--steps={warmup + steps}", f"--log={log.name}",
                              "--quiet"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            raise subprocess.CalledProcessError(p.returncode, p.args)
        rows = open(log.name).read().split("\n")[1:]
        ms = [float(r.split(",")[4]) for r in rows if r][warmup:]
    return statistics.median(ms), usage.ru_maxrss / 1024


def kernels_line(build, model, threads):
    r = subprocess.run([f"{build}/bin/mpc-run", model, "--device=cpu", "--synthetic", "--steps=1",
                        f"--threads={threads}", "--quiet", "--verbose"], capture_output=True, text=True)
    return next((l for l in r.stderr.splitlines() if l.startswith("cpu kernels:")), "")


class Worker:
    """A long-lived contender process answering one JSON line per request."""

    def __init__(self, argv, threads):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)

    def wait_ready(self):
        """Waits for the worker's set-up (imports, model, ORT's artifacts): run beside the first
        round's measurements, it slowed them 2-3x."""
        line = self.p.stdout.readline()
        if not line or not json.loads(line).get("ready"):
            raise RuntimeError(f"worker {self.p.args[3:5]} did not start (exit {self.p.poll()})")

    def measure(self):
        self.p.stdin.write("go\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.p.args[3:5]} ended (exit {self.p.wait()})")
        return json.loads(line)

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


ALL_MODELS = ["gpt", "bert", "resnet", "mlp"]


def fail(msg):
    print(f"cpu_contenders.py: {msg}", file=sys.stderr)
    sys.exit(1)


def env_int(name, default, low):
    text = os.environ.get(name, str(default))
    try:
        v = int(text)
    except ValueError:
        v = None
    if v is None or v < low:
        fail(f"{name}: expected an integer >= {low}, got '{text}'")
    return v


def parse_args():
    """The build directory and the env settings, checked before anything runs or is written."""
    args = sys.argv[1:]
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0)
    if len(args) > 1:
        fail(f"expected at most one argument (the build directory), got {len(args)}: {' '.join(args)}")
    if args and args[0].startswith("-"):
        fail(f"unknown option '{args[0]}' (usage: python3 bench/cpu_contenders.py [BUILD_DIR])")
    build = os.path.abspath(args[0] if args else os.path.join(ROOT, "build"))
    for tool in ("mpc-opt", "mpc-run"):
        if not os.access(os.path.join(build, "bin", tool), os.X_OK):
            fail(f"{build}: not a build directory (no bin/{tool})")
    rounds, steps = env_int("ROUNDS", 3, 1), env_int("STEPS", 3, 1)
    warmup = env_int("WARMUP", 2, 0)
    threads_text = os.environ.get("THREADS", "1 2")
    try:
        thread_counts = [int(t) for t in threads_text.split()]
    except ValueError:
        thread_counts = []
    if not thread_counts or any(t < 1 or t > 1024 for t in thread_counts):
        fail(f"THREADS: expected thread counts in [1, 1024] separated by spaces, got '{threads_text}'")
    models = os.environ.get("MODELS", " ".join(ALL_MODELS)).split()
    bad = [m for m in models if m not in ALL_MODELS]
    if not models or bad:
        fail(f"MODELS: expected names among {' '.join(ALL_MODELS)}, got '{os.environ.get('MODELS', '')}'")
    size = os.environ.get("SIZE", "issue")
    if size not in ("issue", "small"):
        fail(f"SIZE: expected issue or small, got '{size}'")
    compile_text = os.environ.get("TORCH_COMPILE", "1")
    if compile_text not in ("0", "1"):
        fail(f"TORCH_COMPILE: expected 0 or 1, got '{compile_text}'")
    whole = sorted(set(models)) == sorted(ALL_MODELS) and sorted(set(thread_counts)) == [1, 2]
    name = "cpu_contenders-DATE.json" if whole else "cpu_contenders-DATE-subset.json"
    out = os.path.abspath(os.environ.get("OUT", os.path.join(HERE, "results", name)))
    if os.path.isdir(out):
        fail(f"OUT: {out} is a directory")
    return build, rounds, steps, warmup, thread_counts, models, size, compile_text == "1", out


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(*sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--export":
        export(sys.argv[2], json.loads(sys.argv[3]), sys.argv[4])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--ort-worker":
        ort_worker(*sys.argv[2:])
        return
    build, rounds, steps, warmup, thread_counts, models, size, use_compile, out = parse_args()
    ort_python = os.environ.get("ORT_PYTHON", os.path.join(build, "ort-venv", "bin", "python"))
    have_ort = os.path.exists(ort_python)
    cfgs = sizes(size)
    tmp = tempfile.mkdtemp(prefix="cpu_contenders.")
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    load = open("/proc/loadavg").read().split()[:3]
    started = time.time()
    results = {"date": datetime.date.today().isoformat(), "cpu": cpu, "cores": os.cpu_count(),
               "load_start": load, "size": size, "rounds": rounds, "steps": steps, "warmup": warmup,
               "command": "python3 bench/cpu_contenders.py " + " ".join(sys.argv[1:]),
               "env": {k: os.environ[k] for k in ("ROUNDS", "STEPS", "WARMUP", "THREADS", "MODELS", "SIZE",
                                                  "TORCH_COMPILE", "ORT_PYTHON", "OUT") if k in os.environ},
               "notes": [], "rows": []}
    if not have_ort:
        results["notes"].append(f"ONNX Runtime training skipped: no {ort_python} (tools/setup.sh makes it)")
    kinds = ["mpc fp32", "mpc bf16", "mpc fp16", "mpc fp32 OPENBLAS_CORETYPE=Prescott", "torch fp32",
             "torch autocast bf16"]
    if use_compile:
        kinds.append("torch.compile fp32")
    if have_ort:
        kinds.append("ORT training fp32")
    for name in models:
        cfg = cfgs[name]
        src = os.path.join(tmp, f"{name}.onnx")
        try:
            if name == "gpt":
                subprocess.run(["/usr/bin/python3", os.path.join(HERE, "make_transformer_stack.py"),
                                f"--layers={cfg['layers']}", f"--d={cfg['d']}", f"--heads={cfg['heads']}",
                                f"--seq={cfg['seq']}", f"--batch={cfg['batch']}", f"--vocab={cfg['vocab']}",
                                f"--hidden={4 * cfg['d']}", "-o", src], check=True, stdout=subprocess.DEVNULL)
            else:  # in a child: this process stays small, so its children's ru_maxrss are theirs
                subprocess.run([sys.executable, __file__, "--export", name, json.dumps(cfg), src], check=True)
            compiled = {}
            for p in ("fp32", "bf16", "fp16"):
                compiled[p] = os.path.join(tmp, f"{name}.{p}.onnx")
                subprocess.run([f"{build}/bin/mpc-opt", src, "-o", compiled[p], f"--precision={p}",
                                "--optimizer=adam", "--lr=1e-3"], check=True, stdout=subprocess.DEVNULL)
        except (subprocess.CalledProcessError, Exception) as e:  # noqa: BLE001 (reported, run goes on)
            print(f"{name}: skipped ({e})", file=sys.stderr)
            results["notes"].append(f"{name}: skipped ({e})")
            continue
        for threads in thread_counts:
            workers = {}
            ms = {k: [] for k in kinds}
            rss = {k: 0.0 for k in kinds}
            failed = {}
            for kind in kinds:
                args = [name, json.dumps(cfg), src, str(threads), str(warmup), str(steps)]
                if kind.startswith("torch"):
                    sub = "bf16" if "bf16" in kind else "compile" if "compile" in kind else "fp32"
                    workers[kind] = Worker([sys.executable, __file__, "--torch-worker", *args, sub], threads)
                elif kind.startswith("ORT"):
                    workers[kind] = Worker([ort_python, __file__, "--ort-worker", *args,
                                            os.path.join(tmp, f"ort_{name}_{threads}")], threads)
            for kind, w in workers.items():
                try:
                    w.wait_ready()
                except Exception as e:  # noqa: BLE001 (reported, the others go on)
                    failed[kind] = str(e)
                    results["notes"].append(f"{name} {threads}t {kind}: failed ({e})")
                    print(f"{name} {threads}t {kind}: failed ({e})", file=sys.stderr)
            for r in range(rounds):
                for i in range(len(kinds)):
                    kind = kinds[(r + i) % len(kinds)]
                    if kind in failed:
                        continue
                    try:
                        if kind in workers:
                            m = workers[kind].measure()
                            if m.get("first_warmup_s") is not None and "compile" in kind:
                                results["notes"].append(
                                    f"{name} {threads}t torch.compile: first {warmup} steps "
                                    f"(compilation) {m['first_warmup_s']:.1f} s")
                            t, peak = m["median_ms"], m["peak_rss_mib"]
                        else:
                            p = kind.split()[1]
                            extra = {"OPENBLAS_CORETYPE": "Prescott"} if "CORETYPE" in kind else {}
                            t, peak = mpc_step_ms(build, compiled[p], threads, warmup, steps, extra)
                    except Exception as e:  # noqa: BLE001 (reported, the others go on)
                        failed[kind] = str(e)
                        results["notes"].append(f"{name} {threads}t {kind}: failed ({e})")
                        print(f"{name} {threads}t {kind}: failed ({e})", file=sys.stderr)
                        continue
                    ms[kind].append(t)
                    rss[kind] = max(rss[kind], peak)
            for w in workers.values():
                w.close()
            bar = ms["torch autocast bf16"]
            row = {"model": name, "config": cfg, "threads": threads,
                   "median_ms": {k: statistics.median(v) for k, v in ms.items() if v},
                   "rounds_ms": ms, "peak_rss_mib": {k: round(v, 1) for k, v in rss.items() if v},
                   "ratio_to_torch_autocast_bf16": {
                       k: statistics.median([a / b for a, b in zip(v, bar)]) for k, v in ms.items()
                       if v and len(v) == len(bar)},
                   "kernels": kernels_line(build, compiled["bf16"], threads)}
            results["rows"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    results["load_end"] = open("/proc/loadavg").read().split()[:3]
    results["wall_s"] = round(time.time() - started, 1)
    if not results["rows"]:  # nothing measured: keep any earlier results file as it is
        fail("no model was measured (" + "; ".join(results["notes"]) + ")")
    out = out.replace("DATE", results["date"])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out + ".tmp", "w") as f:  # written whole, then renamed: never a partial file
        json.dump(results, f, indent=1)
    os.replace(out + ".tmp", out)
    print(f"{results['date']}, {cpu}, {os.cpu_count()} cores, load at start {' '.join(load)}, "
          f"{rounds} rounds x {steps} steps after {warmup} (median ms/step; in brackets: paired ratio "
          f"to PyTorch autocast bf16, lower is faster), {results['wall_s']:.0f} s\n")
    print("| model | threads | " + " | ".join(kinds) + " |")
    print("|---|---|" + "---|" * len(kinds))
    for row in results["rows"]:
        cells = [f"{row['median_ms'][k]:.1f} ({row['ratio_to_torch_autocast_bf16'].get(k, float('nan')):.2f})"
                 if k in row["median_ms"] else "-" for k in kinds]
        print(f"| {row['model']} | {row['threads']} | " + " | ".join(cells) + " |")
    print("\npeak RSS (MiB)\n")
    print("| model | threads | " + " | ".join(kinds) + " |")
    print("|---|---|" + "---|" * len(kinds))
    for row in results["rows"]:
        cells = [f"{row['peak_rss_mib'][k]:.0f}" if k in row["peak_rss_mib"] else "-" for k in kinds]
        print(f"| {row['model']} | {row['threads']} | " + " | ".join(cells) + " |")
    for n in results["notes"]:
        print(f"note: {n}")
    print(f"\nresults: {os.path.relpath(out, ROOT)}")


if __name__ == "__main__":
    main()
