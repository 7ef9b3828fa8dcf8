"""torch_step.py -- times PyTorch eager fp32 training steps on the CPU for one of the benchmark models.

The step is what mpc-run's step does and what the models' reference trajectories used:
zero_grad; loss = model(*batch); backward; optimizer.step(), batches in mpc-run's order.
Prints one JSON line: {"family", "threads", "batch", "warmup", "steps", "median_ms",
"mean_cpu_ms", "first_loss"}; first_loss is step 1's loss, which must equal mpc-run's (same weights, same
batch) -- a check that the PyTorch mirror is the same model.

Usage: python3 bench/torch_step.py FAMILY MODEL.onnx DATA.npz [--steps=N --warmup=W
           --threads=T --optimizer=adam|sgd --lr=F]
"""
import argparse
import json
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
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    ap.add_argument("--lr", type=float, default=1e-3)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    module = torch_models.load_model(a.family, a.model)
    module.train()
    params = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=a.lr) if a.optimizer == "adam" else torch.optim.SGD(params, lr=a.lr, momentum=0.9)
    names = torch_models.input_names(a.model)
    import onnx  # the batch is the model's static first input dimension

    first_input = next(i for i in onnx.load(a.model).graph.input if i.name == names[0])
    batch = first_input.type.tensor_type.shape.dim[0].dim_value
    data = torch_models.batches(a.data, names, batch)

    times, cpu_ms, first_loss = [], 0.0, None
    for i in range(a.warmup + a.steps):
        inputs = next(data)
        start, cpu_start = time.perf_counter(), time.process_time()
        opt.zero_grad(set_to_none=True)
        loss = module(*inputs)
        loss.backward()
        opt.step()
        elapsed = (time.perf_counter() - start) * 1e3
        cpu = (time.process_time() - cpu_start) * 1e3
        if first_loss is None:
            first_loss = loss.item()
        if i >= a.warmup:
            times.append(elapsed)
            cpu_ms += cpu
    # mean_cpu_ms: the process's CPU time per timed step (user + system), which the other
    # processes of a shared machine disturb far less than the wall clock.
    print(json.dumps({"family": a.family, "threads": a.threads, "batch": batch, "warmup": a.warmup,
                      "steps": a.steps, "median_ms": statistics.median(times),
                      "mean_cpu_ms": cpu_ms / a.steps, "first_loss": first_loss}))


if __name__ == "__main__":
    main()
