#!/usr/bin/env python3
"""make_adafactor_refs.py -- PyTorch references for mpc-opt --optimizer=adafactor.

torch.optim.Adafactor on the MLP seed (make_mlp_seed.py's weights, data and
batch order; a 2-D weight keeps row and column factors, a bias one moment),
30 steps:

  mlp_seed_ref_adafactor_<run>.csv        "step,loss,lr"
  mlp_seed_ref_adafactor_<run>_final.npz  the parameters after the 30 steps

Runs (the mpc-opt flags that ask for the same thing are in RUNS):
  default     Adafactor() (lr 1e-2, beta2_decay -0.8, eps (None, 1e-3), d 1)
  wd_cosine   Adafactor(lr=0.05, weight_decay=0.01) under transformers'
              get_cosine_schedule_with_warmup(3, 30) (rho = min(lr, 1/sqrt(t))
              follows the scheduled rate)
  tuned       Adafactor(lr=0.02, beta2_decay=-0.5, eps=(1e-6, 1e-2), d=2)

Regenerate:  python3 models/make_adafactor_refs.py   (torch and transformers
from pip; deterministic: re-running gives identical files)
"""
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_lr_schedule_refs import seed_model, train  # noqa: E402

RUNS = {
    "default": (dict(), None, "--optimizer=adafactor"),
    "wd_cosine": (dict(lr=0.05, weight_decay=0.01),
                  lambda o: transformers.get_cosine_schedule_with_warmup(o, 3, 30),
                  "--optimizer=adafactor --lr=0.05 --weight-decay=0.01 "
                  "--lr-schedule=cosine --warmup-steps=3 --total-steps=30"),
    "tuned": (dict(lr=0.02, beta2_decay=-0.5, eps=(1e-6, 1e-2), d=2.0), None,
              "--optimizer=adafactor --lr=0.02 --beta2-decay=-0.5 --eps=1e-6 "
              "--eps2=1e-2 --clip-threshold=2"),
}


def main():
    model, data = seed_model()
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    for run, (hp, make_sched, flags) in RUNS.items():
        model.load_state_dict(init_state)
        opt = torch.optim.Adafactor(model.parameters(), foreach=False, **hp)
        rows = train(model, data, opt, make_sched(opt) if make_sched else None,
                     f"adafactor_{run}")
        print(f"{run:<10} {flags}\n  last: {rows[-1].strip()}")


if __name__ == "__main__":
    main()
