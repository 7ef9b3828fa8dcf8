#!/usr/bin/env python3
"""make_ema_refs.py -- PyTorch references for mpc-opt --ema-decay.

torch.optim.swa_utils.AveragedModel(model, multi_avg_fn=
get_ema_multi_avg_fn(decay)) on the MLP seed (make_mlp_seed.py's weights,
data and batch order), update_parameters(model) after every optimizer.step():

  mlp_seed_ref_ema_<run>.npz   the averaged parameters after 30 steps

Runs:
  adamw_0.9    AdamW(1e-2), decay 0.9 (lerp's small-weight formula)
  sgd_0.25     SGD(0.05, momentum 0.9), decay 0.25 (its other formula)

Regenerate:  python3 models/make_ema_refs.py   (torch from pip;
deterministic: re-running gives identical files)
"""
import os
import sys

import numpy as np
import torch
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_lr_schedule_refs import STEPS, seed_model  # noqa: E402
from make_mlp_seed import batch, savez  # noqa: E402

RUNS = {
    "adamw_0.9": (torch.optim.AdamW, dict(lr=1e-2), 0.9),
    "sgd_0.25": (torch.optim.SGD, dict(lr=0.05, momentum=0.9), 0.25),
}


def main():
    model, data = seed_model()
    init_state = {k: v.clone() for k, v in model.state_dict().items()}
    for run, (opt_cls, hp, decay) in RUNS.items():
        model.load_state_dict(init_state)
        opt = opt_cls(model.parameters(), **hp)
        ema = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(decay))
        for i in range(STEPS):
            xb, yb = batch(data, i)
            opt.zero_grad()
            model(xb, yb).backward()
            opt.step()
            ema.update_parameters(model)
        params = {k: v.detach().numpy().copy()
                  for k, v in ema.module.state_dict().items()}
        savez(f"mlp_seed_ref_ema_{run}.npz", np.savez, **params)
        print(f"{run}: n_averaged={int(ema.n_averaged)}, "
              f"fc2.bias={params['fc2.bias'].tolist()}")


if __name__ == "__main__":
    main()
