#!/usr/bin/env python3
"""Compile time of two or more mpc-opt builds, run interleaved on one model.

On a shared VM the same binary's median compile time moves by tens of percent
from one batch of runs to the next, so comparing a batch of build A with a
later batch of build B measures the machine as much as the builds. Here the
builds take turns (A B, then B A, ...), so both see the same load, and each
gets the median and the fastest of its wall and CPU (user + system) times,
its median system time and its median count of fresh pages (minor faults).

PAUSE=S (default 0) idles S seconds before each run, as a user's compile
starts on a quiet machine: this VM hands idle memory back to its host (free
page reporting), so a run after a pause pays a host fault for each page it
touches first, which back-to-back runs do not (README, "Why the pause").

Usage: [PAUSE=S] bench/compare_builds.py RUNS MODEL MPC_OPT... [-- FLAG...]
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
    pause = float(os.environ.get("PAUSE", "0"))
    times = {b: ([], [], [], []) for b in builds}  # wall, CPU, system, faults
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.onnx")
        for i in range(runs):
            for build in builds if i % 2 == 0 else builds[::-1]:
                # A new file each run, as a first compile writes one (see
                # compile_time.sh: replacing a file makes ext4 wait for it).
                if os.path.exists(out):
                    os.remove(out)
                if pause > 0:
                    time.sleep(pause)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run([build, model, "-o", out] + flags, check=True)
                wall = time.perf_counter() - start
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime -
                                                            before.ru_stime)
                times[build][0].append(wall * 1e3)
                times[build][1].append(cpu * 1e3)
                times[build][2].append((after.ru_stime - before.ru_stime) * 1e3)
                times[build][3].append(after.ru_minflt - before.ru_minflt)
    print(f"{runs} interleaved runs each, {pause:g} s idle before each, load "
          f"at the end {open('/proc/loadavg').read().split()[0]}")
    for build in builds:
        wall, cpu, system, faults = times[build]
        print(f"{build}: wall median {statistics.median(wall):.1f} ms "
              f"(fastest {min(wall):.1f}), CPU median "
              f"{statistics.median(cpu):.1f} ms (fastest {min(cpu):.1f}), "
              f"system median {statistics.median(system):.1f} ms, "
              f"minor faults median {statistics.median(faults):.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
