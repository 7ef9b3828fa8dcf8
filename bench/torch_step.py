"""torch_step.py -- times PyTorch eager training steps for one of the benchmark models.

The step is what mpc-run's step does and what the models' reference trajectories used:
zero_grad; loss = model(*batch); backward; optimizer.step(), batches in mpc-run's order.
On the CPU (default) the step is fp32. With --device=cuda the batch is copied to the GPU
inside the step (as mpc-run copies it), Adam is torch's fused CUDA Adam, and --amp=fp16|bf16
is PyTorch AMP as its docs write it: autocast around the forward and the loss, a GradScaler
(fp16 only: bf16 needs none) around backward and step; each step ends with
torch.cuda.synchronize() so the wall clock covers the GPU's work. --compile runs the module under
torch.compile (inductor, its default backend; autocast and the GradScaler stay outside it): it
compiles in the first step, so give it warm-up steps.
Prints one JSON line: {"family", "device", "amp", "threads", "batch", "warmup", "steps",
"median_ms", "mean_cpu_ms", "first_loss", "max_memory_allocated"}; steps is the number of timed
steps, which --min-seconds=S raises (from the warm-up steps' median) so that they take at
least S seconds: a step of a few hundred microseconds needs thousands of steps for a median
and a CPU time that hold still from one process to the next. With --serve, one process (one
`import torch`, which takes seconds) answers each line read from stdin with one such
measurement (warm-up, then the timed steps, training on), so that a caller can interleave
several of them with its own measurements. first_loss is step 1's loss,
which must equal mpc-run's (same weights, same batch) -- a check that the PyTorch mirror is the
same model; max_memory_allocated is torch.cuda.max_memory_allocated() over the whole run
(null on the CPU).

Usage: python3 bench/torch_step.py FAMILY MODEL.onnx DATA.npz [--steps=N --warmup=W
           --min-seconds=S --serve --threads=T --optimizer=adam|sgd --lr=F --device=cpu|cuda
           --amp=none|fp16|bf16 --compile --profile=N]
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("family")
    ap.add_argument("model")
    ap.add_argument("data")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--min-seconds", type=float, default=0.0)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--amp", choices=["none", "fp16", "bf16"], default="none")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the module (inductor); it compiles in the first warm-up step")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="after the measurement, N more steps under torch.profiler: "
                         "the time per op to stderr")
    a = ap.parse_args()
    cuda = a.device == "cuda"
    if cuda and not torch.cuda.is_available():
        sys.exit("torch_step.py: --device=cuda but torch sees no GPU")
    if a.amp != "none" and not cuda:
        sys.exit("torch_step.py: --amp needs --device=cuda (PyTorch AMP on the GPU)")

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    module = torch_models.load_model(a.family, a.model).to(a.device)
    module.train()
    params = [p for p in module.parameters() if p.requires_grad]
    if a.compile:
        if a.warmup < 1:
            sys.exit("torch_step.py: --compile needs --warmup >= 1 (the first step compiles)")
        module = torch.compile(module)
    if a.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=a.lr, fused=True) if cuda else torch.optim.Adam(params, lr=a.lr)
    else:
        opt = torch.optim.SGD(params, lr=a.lr, momentum=0.9)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.amp)
    scaler = torch.amp.GradScaler("cuda") if a.amp == "fp16" else None
    names = torch_models.input_names(a.model)
    import onnx  # the batch is the model's static first input dimension

    first_input = next(i for i in onnx.load(a.model).graph.input if i.name == names[0])
    batch = first_input.type.tensor_type.shape.dim[0].dim_value
    data = torch_models.batches(a.data, names, batch)

    first_loss = []  # step 1's loss

    def step():
        """One training step: (wall ms, CPU ms)."""
        inputs = next(data)
        if cuda:
            torch.cuda.synchronize()
        start, cpu_start = time.perf_counter(), time.process_time()
        inputs = [t.to(a.device, non_blocking=True) for t in inputs]
        opt.zero_grad(set_to_none=True)
        if amp_dtype is not None:
            with torch.autocast("cuda", dtype=amp_dtype):
                loss = module(*inputs)
        else:
            loss = module(*inputs)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        if cuda:
            torch.cuda.synchronize()
        elapsed = (time.perf_counter() - start) * 1e3
        cpu = (time.process_time() - cpu_start) * 1e3
        if not first_loss:
            first_loss.append(loss.item())
        return elapsed, cpu

    def measure():
        """The warm-up steps, then the timed ones: the JSON line."""
        warm = [step()[0] for _ in range(a.warmup)]
        steps = a.steps
        if warm and a.min_seconds > 0:  # the warm-up's median sizes the timed run
            steps = max(steps, math.ceil(a.min_seconds * 1e3 / statistics.median(warm)))
        timed = [step() for _ in range(steps)]
        # mean_cpu_ms: the process's CPU time per timed step (user + system), which the other
        # processes of a shared machine disturb far less than the wall clock.
        return json.dumps({"family": a.family, "device": a.device, "amp": a.amp, "compile": a.compile,
                           "threads": a.threads,
                           "batch": batch, "warmup": a.warmup, "steps": steps,
                           "median_ms": statistics.median(t[0] for t in timed),
                           "mean_cpu_ms": sum(t[1] for t in timed) / steps, "first_loss": first_loss[0],
                           "max_memory_allocated": torch.cuda.max_memory_allocated() if cuda else None})

    if a.serve:
        for _ in sys.stdin:
            print(measure(), flush=True)
    else:
        print(measure())
    if a.profile > 0:
        from torch.profiler import ProfilerActivity, profile
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            for _ in range(a.profile):
                step()
        print(f"torch.profiler, {a.profile} steps:", file=sys.stderr)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20),
              file=sys.stderr)

if __name__ == "__main__":
    main()
