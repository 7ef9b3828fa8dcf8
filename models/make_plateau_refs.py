#!/usr/bin/env python3
"""make_plateau_refs.py -- torch's ReduceLROnPlateau on fixed metric sequences.

mpc-run's --lr-schedule=reduce_lr_on_plateau (ir/lr_plateau.h) steps
the same rule with each validation loss; these are torch's rates for the
same sequences of metrics (mode "min", threshold_mode "rel"):

  lr_plateau_ref.csv   "case,eval,metric,lr": the rate after
                       scheduler.step(metric) of eval k

Cases (optimizer lr 0.5):
  defaults   factor 0.1, patience 10, threshold 1e-4, cooldown 0, min_lr 0
  tuned      factor 0.5, patience 2, threshold 1e-2, cooldown 1,
             min_lr 0.01 (reached, then held)

Regenerate:  python3 models/make_plateau_refs.py   (torch from pip)
"""
import math
import os

import torch

HERE = os.path.dirname(os.path.abspath(__file__))

CASES = {
    "defaults": dict(),
    "tuned": dict(factor=0.5, patience=2, threshold=1e-2, cooldown=1, min_lr=0.01),
}


def metrics():
    """Falling, then a plateau with noise and a few relative improvements
    either side of the thresholds."""
    out = []
    for k in range(80):
        if k < 15:
            out.append(2.0 - 0.1 * k)
        else:
            out.append(0.6 + 0.004 * math.sin(k) - (0.05 if k in (30, 31, 55) else 0.0))
    return out


def main():
    lines = ["case,eval,metric,lr\n"]
    for case, kwargs in CASES.items():
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        for k, m in enumerate(metrics()):
            sched.step(m)
            lines.append(f"{case},{k},{m!r},{opt.param_groups[0]['lr']!r}\n")
    with open(os.path.join(HERE, "lr_plateau_ref.csv"), "w") as f:
        f.write("".join(lines))
    print(f"lr_plateau_ref.csv: {len(CASES)} cases x {len(metrics())} evaluations")


if __name__ == "__main__":
    main()
