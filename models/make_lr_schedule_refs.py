#!/usr/bin/env python3
"""make_lr_schedule_refs.py -- PyTorch references for mpc-opt's --lr-schedule.

The MLP seed model (make_mlp_seed.py: its weights, its data, batches in order)
trained 30 steps by torch.optim with the schedulers users attach, calling
scheduler.step() after every optimizer.step():

  mlp_seed_ref_sched_<run>.csv        "step,loss,lr": the loss before step i's
                                      update and the rate that update used
  mlp_seed_ref_sched_<run>_final.npz  the parameters after the 30 steps

Runs (the mpc-opt flags that ask for the same thing are in RUNS):
  sgd_cosine          SGD(0.05, momentum 0.9), transformers'
                      get_cosine_schedule_with_warmup(5, 30)
  adamw_linear        AdamW(1e-2), get_linear_schedule_with_warmup(4, 20):
                      from update 20 on the rate is 0 and nothing moves
  adam_cosine_min     Adam(1e-2), get_cosine_with_min_lr_schedule_with_warmup
                      (0, 30, min_lr_rate=0.1)
  sgd_constant_warmup SGD(0.1), get_constant_schedule_with_warmup(10)
  sgd_step            SGD(0.1, momentum 0.9), torch's StepLR(7, gamma=0.5)
  adam_exponential    Adam(1e-2), torch's ExponentialLR(0.9)
  adamw_polynomial    AdamW(1e-2), get_polynomial_decay_schedule_with_warmup
                      (3, 20, lr_end=1e-4, power=2): past update 20, lr_end
  sgd_inverse_sqrt    SGD(0.1, momentum 0.9), get_inverse_sqrt_schedule(5)
  adam_restarts       Adam(1e-2), get_cosine_with_hard_restarts_schedule_
                      with_warmup(2, 30, num_cycles=3)
  adamw_wsd           AdamW(1e-2), get_wsd_schedule(4, 10, num_training_steps=26,
                      warmup_type="cosine", decay_type="1-sqrt", min_lr_ratio=0.1):
                      past update 26, the floor

And the schedulers alone, 120 updates each, with a base rate a float holds
exactly (so mpc's fp32 attribute is the same number):

  lr_schedule_ref.csv                 "case,step,lr" (repr of the Python float)

Regenerate:  python3 models/make_lr_schedule_refs.py   (torch and
transformers from pip; deterministic: re-running gives identical files)
"""
import os
import sys

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_mlp_seed import MLPWithLoss, batch, savez  # noqa: E402

STEPS = 30
sched = torch.optim.lr_scheduler

RUNS = {
    # name: (optimizer, its arguments, scheduler factory, mpc-opt flags)
    "sgd_cosine": (torch.optim.SGD, dict(lr=0.05, momentum=0.9),
                   lambda o: transformers.get_cosine_schedule_with_warmup(o, 5, 30),
                   "--optimizer=sgd --lr=0.05 --momentum=0.9 --lr-schedule=cosine "
                   "--warmup-steps=5 --total-steps=30"),
    "adamw_linear": (torch.optim.AdamW, dict(lr=1e-2),
                     lambda o: transformers.get_linear_schedule_with_warmup(o, 4, 20),
                     "--optimizer=adamw --lr=0.01 --lr-schedule=linear "
                     "--warmup-steps=4 --total-steps=20"),
    "adam_cosine_min": (torch.optim.Adam, dict(lr=1e-2),
                        lambda o: transformers.get_cosine_with_min_lr_schedule_with_warmup(
                            o, 0, 30, min_lr_rate=0.1),
                        "--optimizer=adam --lr=0.01 --lr-schedule=cosine "
                        "--total-steps=30 --min-lr-ratio=0.1"),
    "sgd_constant_warmup": (torch.optim.SGD, dict(lr=0.1),
                            lambda o: transformers.get_constant_schedule_with_warmup(o, 10),
                            "--optimizer=sgd --lr=0.1 --warmup-steps=10"),
    "sgd_step": (torch.optim.SGD, dict(lr=0.1, momentum=0.9),
                 lambda o: sched.StepLR(o, step_size=7, gamma=0.5),
                 "--optimizer=sgd --lr=0.1 --momentum=0.9 --lr-schedule=step "
                 "--lr-step-size=7 --lr-gamma=0.5"),
    "adam_exponential": (torch.optim.Adam, dict(lr=1e-2),
                         lambda o: sched.ExponentialLR(o, gamma=0.9),
                         "--optimizer=adam --lr=0.01 --lr-schedule=exponential "
                         "--lr-gamma=0.9"),
    "adamw_polynomial": (torch.optim.AdamW, dict(lr=1e-2),
                         lambda o: transformers.get_polynomial_decay_schedule_with_warmup(
                             o, 3, 20, lr_end=1e-4, power=2.0),
                         "--optimizer=adamw --lr=0.01 --lr-schedule=polynomial "
                         "--warmup-steps=3 --total-steps=20 --lr-end=1e-4 --lr-power=2"),
    "sgd_inverse_sqrt": (torch.optim.SGD, dict(lr=0.1, momentum=0.9),
                         lambda o: transformers.get_inverse_sqrt_schedule(o, 5),
                         "--optimizer=sgd --lr=0.1 --momentum=0.9 "
                         "--lr-schedule=inverse_sqrt --warmup-steps=5"),
    "adam_restarts": (torch.optim.Adam, dict(lr=1e-2),
                      lambda o: transformers.get_cosine_with_hard_restarts_schedule_with_warmup(
                          o, 2, 30, num_cycles=3),
                      "--optimizer=adam --lr=0.01 --lr-schedule=cosine_with_restarts "
                      "--warmup-steps=2 --total-steps=30 --lr-cycles=3"),
    "adamw_wsd": (torch.optim.AdamW, dict(lr=1e-2),
                  lambda o: transformers.get_wsd_schedule(
                      o, 4, 10, num_training_steps=26, warmup_type="cosine",
                      decay_type="1-sqrt", min_lr_ratio=0.1),
                  "--optimizer=adamw --lr=0.01 --lr-schedule=warmup_stable_decay "
                  "--warmup-steps=4 --lr-decay-steps=10 --total-steps=26 "
                  "--lr-warmup-type=cosine --lr-decay-type=1-sqrt --min-lr-ratio=0.1"),
}

# Schedulers alone: (case, factory of the scheduler on an optimizer of lr 0.5).
ALONE = [
    ("linear_w10_t100", lambda o: transformers.get_linear_schedule_with_warmup(o, 10, 100)),
    ("cosine_w10_t100", lambda o: transformers.get_cosine_schedule_with_warmup(o, 10, 100)),
    ("cosine_w0_t50_min0.25", lambda o: transformers.get_cosine_with_min_lr_schedule_with_warmup(
        o, 0, 50, min_lr_rate=0.25)),
    ("cosine_annealing_t50_eta0.125", lambda o: sched.CosineAnnealingLR(o, T_max=50, eta_min=0.125)),
    ("constant_w7", lambda o: transformers.get_constant_schedule_with_warmup(o, 7)),
    ("step_s10_g0.5", lambda o: sched.StepLR(o, step_size=10, gamma=0.5)),
    ("exponential_g0.96875", lambda o: sched.ExponentialLR(o, gamma=0.96875)),
    ("restarts_w10_t100_c3", lambda o: transformers.get_cosine_with_hard_restarts_schedule_with_warmup(
        o, 10, 100, num_cycles=3)),
    ("polynomial_w10_t100_end0.01_p2", lambda o: transformers.get_polynomial_decay_schedule_with_warmup(
        o, 10, 100, lr_end=0.01, power=2.0)),
    ("polynomial_w0_t50", lambda o: transformers.get_polynomial_decay_schedule_with_warmup(o, 0, 50)),
    ("inverse_sqrt_w10", lambda o: transformers.get_inverse_sqrt_schedule(o, 10)),
    ("inverse_sqrt_w0_t200", lambda o: transformers.get_inverse_sqrt_schedule(o, 0, timescale=200)),
    ("wsd_w10_s30_d40", lambda o: transformers.get_wsd_schedule(o, 10, 40, num_stable_steps=30)),
    ("wsd_cos_sqrt_min0.25", lambda o: transformers.get_wsd_schedule(
        o, 12, 50, num_training_steps=100, warmup_type="cosine", decay_type="1-sqrt",
        min_lr_ratio=0.25)),
    ("wsd_sqrt_linear", lambda o: transformers.get_wsd_schedule(
        o, 8, 20, num_stable_steps=5, warmup_type="1-sqrt", decay_type="linear",
        min_lr_ratio=0.5)),
]


def out(name):
    return os.path.join(HERE, name)


def seed_model():
    """The MLP seed at its initial weights (torch.manual_seed(0)) and its data."""
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    loaded = np.load(out("mlp_seed_data.npz"))
    data = {"x": loaded["x"], "y": loaded["y"]}
    torch.manual_seed(0)
    return MLPWithLoss(), data


def train(model, data, opt, scheduler, name):
    """STEPS steps from the model's current weights; writes
    mlp_seed_ref_<name>.csv ("step,loss,lr") and mlp_seed_ref_<name>_final.npz."""
    rows = []
    for i in range(STEPS):
        xb, yb = batch(data, i)
        opt.zero_grad()
        loss = model(xb, yb)
        loss.backward()
        lr = opt.param_groups[0]["lr"]
        opt.step()
        if scheduler is not None:
            scheduler.step()
        rows.append(f"{i},{loss.item()!r},{lr!r}\n")
    with open(out(f"mlp_seed_ref_{name}.csv"), "w") as f:
        f.write("step,loss,lr\n" + "".join(rows))
    savez(f"mlp_seed_ref_{name}_final.npz", np.savez,
          **{k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    return rows


def main():
    model, data = seed_model()
    init_state = {k: v.clone() for k, v in model.state_dict().items()}

    for run, (opt_cls, hp, make_sched, flags) in RUNS.items():
        model.load_state_dict(init_state)
        opt = opt_cls(model.parameters(), **hp)
        rows = train(model, data, opt, make_sched(opt), f"sched_{run}")
        print(f"{run:<20} {flags}\n  last: {rows[-1].strip()}")

    lines = ["case,step,lr\n"]
    for case, make_sched in ALONE:
        opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
        scheduler = make_sched(opt)
        for i in range(120):
            lines.append(f"{case},{i},{opt.param_groups[0]['lr']!r}\n")
            opt.step()
            scheduler.step()
    with open(out("lr_schedule_ref.csv"), "w") as f:
        f.write("".join(lines))
    print(f"lr_schedule_ref.csv: {len(ALONE)} cases x 120 updates")


if __name__ == "__main__":
    main()
