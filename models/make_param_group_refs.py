#!/usr/bin/env python3
"""make_param_group_refs.py -- PyTorch references for mpc-opt's --no-weight-decay.

The recipe transformers' Trainer and timm use: two parameter groups, weight
decay on the weights and none on biases and normalisation weights. The MLP
seed (make_mlp_seed.py's weights, data and batch order) trained 30 steps:

  mlp_seed_ref_groups_<run>.csv        "step,loss,lr"
  mlp_seed_ref_groups_<run>_final.npz  the parameters after the 30 steps

Runs (the mpc-opt flags that ask for the same thing are in RUNS):
  adamw_bias     AdamW(1e-2, weight_decay=0.1); biases in a group without decay
  sgd_bias       SGD(0.05, momentum=0.9, weight_decay=1e-2); the same groups
  adamw_cosine   adamw_bias under get_cosine_schedule_with_warmup(3, 30)

Regenerate:  python3 models/make_param_group_refs.py   (torch and
transformers from pip; deterministic: re-running gives identical files)
"""
import os
import sys

import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_lr_schedule_refs import seed_model, train  # noqa: E402

RUNS = {
    # name: (optimizer, its arguments, scheduler factory or None, flags)
    "adamw_bias": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1), None,
                   "--optimizer=adamw --lr=0.01 --weight-decay=0.1 "
                   "--no-weight-decay=bias"),
    "sgd_bias": (torch.optim.SGD, dict(lr=0.05, momentum=0.9, weight_decay=1e-2), None,
                 "--optimizer=sgd --lr=0.05 --momentum=0.9 --weight-decay=0.01 "
                 "--no-weight-decay=bias"),
    "adamw_cosine": (torch.optim.AdamW, dict(lr=1e-2, weight_decay=0.1),
                     lambda o: transformers.get_cosine_schedule_with_warmup(o, 3, 30),
                     "--optimizer=adamw --lr=0.01 --weight-decay=0.1 "
                     "--no-weight-decay=bias --lr-schedule=cosine --warmup-steps=3 "
                     "--total-steps=30"),
}


def main():
    model, data = seed_model()
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    for run, (opt_cls, hp, make_sched, flags) in RUNS.items():
        model.load_state_dict(init_state)
        decay = [p for n, p in model.named_parameters() if "bias" not in n]
        no_decay = [p for n, p in model.named_parameters() if "bias" in n]
        wd = hp.pop("weight_decay")
        opt = opt_cls([{"params": decay, "weight_decay": wd},
                       {"params": no_decay, "weight_decay": 0.0}], **hp)
        hp["weight_decay"] = wd
        sched = make_sched(opt) if make_sched else None
        rows = train(model, data, opt, sched, f"groups_{run}")
        print(f"{run:<14} {flags}\n  last: {rows[-1].strip()}")


if __name__ == "__main__":
    main()
