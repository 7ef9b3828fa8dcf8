#!/usr/bin/env python3
"""Compile time of two or more mpc-opt builds, run interleaved on one model.

On a shared VM the same binary's median compile time moves by tens of percent
from one batch of runs to the next, so comparing a batch of build A with a
later batch of build B measures the machine as much as the builds. Here the
builds take turns (A B, then B A, ...), so both see the same load, and each
gets the median and the fastest of its wall and CPU (user + system) times.

Usage: bench/compare_builds.py RUNS MODEL MPC_OPT... [-- FLAG...]
       (default flags: --precision=fp16 --optimizer=adam)
Example: bench/compare_builds.py 21 /tmp/stack64.onnx /tmp/old-mpc-opt build/bin/mpc-opt
"""
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def main(argv):
    if "--" in argv:
        cut = argv.index("--")
        args, flags = argv[:cut], argv[cut + 1:]
    else:
        args, flags = argv, ["--precision=fp16", "--optimizer=adam"]
    if len(args) < 3:
        sys.exit(__doc__.strip())
    runs, model, builds = int(args[0]), args[1], args[2:]
    times = {b: ([], []) for b in builds}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.onnx")
        for i in range(runs):
            for build in builds if i % 2 == 0 else builds[::-1]:
                # A new file each run, as a first compile writes one (see
                # compile_time.sh: replacing a file makes ext4 wait for it).
                if os.path.exists(out):
                    os.remove(out)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run([build, model, "-o", out] + flags, check=True)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime -
                                                            before.ru_stime)
                times[build][0].append(wall * 1e3)
                times[build][1].append(cpu * 1e3)
    print(f"{runs} interleaved runs each, load at the end "
          f"{open('/proc/loadavg').read().split()[0]}")
    for build in builds:
        wall, cpu = times[build]
        print(f"{build}: wall median {statistics.median(wall):.1f} ms "
              f"(fastest {min(wall):.1f}), CPU median "
              f"{statistics.median(cpu):.1f} ms (fastest {min(cpu):.1f})")


if __name__ == "__main__":
    main(sys.argv[1:])
