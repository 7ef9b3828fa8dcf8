#!/usr/bin/env python3
"""Checks the samples each step of an mpc-run log took against the epochs
mpc-run promises (runtime/run_length.h, runtime/data/dataset.h): step s
(1-based) is step k = (s-1) % P of epoch (s-1) // P, P = samples // G steps
an epoch, and takes samples order[k*G:(k+1)*G] of that epoch's order: 0..N-1,
or with --shuffle the permutation mpc-run draws for (seed, epoch) (std::
mt19937_64 seeded with seed * 0x9e3779b97f4a7c15 + epoch, then Fisher-Yates
from the top, j = rng() % (i + 1)).

The log is of batch_probe.onnxtext on x = 2^i: a step's loss is the sum of
its samples' x (times --scale micro-batches averaged), so its bits are the
samples it took.

  epoch_order.py LOG --samples=N --global-batch=G [--shuffle --seed=S] [--scale=K]
"""
import argparse
import csv
import sys

M64 = (1 << 64) - 1


class MT19937_64:
    def __init__(self, seed):
        self.mt = [seed & M64]
        for i in range(1, 312):
            prev = self.mt[-1]
            self.mt.append((6364136223846793005 * (prev ^ (prev >> 62)) + i) & M64)
        self.index = 312

    def __call__(self):
        if self.index == 312:
            for i in range(312):
                x = (self.mt[i] & 0xFFFFFFFF80000000) | (self.mt[(i + 1) % 312] & 0x7FFFFFFF)
                self.mt[i] = self.mt[(i + 156) % 312] ^ (x >> 1) ^ (0xB5026F5AA96619E9 if x & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & M64


def permutation(n, seed, epoch):
    rng = MT19937_64((seed * 0x9e3779b97f4a7c15 + epoch) & M64)
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = rng() % (i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def main():
    a = argparse.ArgumentParser()
    a.add_argument("log")
    a.add_argument("--samples", type=int, required=True)
    a.add_argument("--global-batch", type=int, required=True)
    a.add_argument("--shuffle", action="store_true")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--scale", type=int, default=1)
    args = a.parse_args()
    assert MT19937_64(5489)() == 14514284786278117030, "mt19937_64 is not the standard's"
    per_epoch = args.samples // args.global_batch
    rows = list(csv.DictReader(open(args.log)))
    for row in rows:
        step = int(row["step"])
        epoch, k = divmod(step - 1, per_epoch)
        order = (permutation(args.samples, args.seed, epoch) if args.shuffle
                 else list(range(args.samples)))
        expected = sorted(order[k * args.global_batch:(k + 1) * args.global_batch])
        bits = int(round(float(row["loss"]) * args.scale))
        got = [i for i in range(args.samples) if bits >> i & 1]
        if got != expected:
            print("step %d (epoch %d): took samples %s, expected %s" % (step, epoch + 1, got, expected))
            return 1
    print("order ok: %d steps, %d an epoch" % (len(rows), per_epoch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
