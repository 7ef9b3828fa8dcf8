# Kill-during-save driver for tests/lit/tools/mpc-run-kill-log.test.
#
# usage: kill_log_vs_checkpoint.py MODEL DIR
# Runs mpc-run MODEL --save-every=3 --log (a checkpoint every few steps, the
# log beside it) and SIGKILLs it at jittered moments, each run resuming from
# the last one's checkpoint with the same log. After every kill the log must
# not be behind the checkpoint: it holds every step 1..S of the checkpoint's
# S, each once and in order (rows past S, and a row cut short, are allowed:
# the resumed run cuts them). At the end one run resumes to completion: the
# log is then steps 1..N exactly, with one header, and no CKPT.tmp.PID file
# of the killed writers is left (the next save removes them).
import os
import random
import signal
import subprocess
import sys
import time

import onnx

model, work = sys.argv[1], sys.argv[2]
ckpt, log = os.path.join(work, "ckpt.onnx"), os.path.join(work, "log.csv")
for name in os.listdir(work):
    os.remove(os.path.join(work, name))


def checkpoint_step():
    m = onnx.load(ckpt)
    return int({p.key: p.value for p in m.metadata_props}["mpc.run.steps_done"])


def log_steps(allow_torn):
    text = open(log).read()
    lines = text.split("\n")
    if lines[-1] != "":
        if not allow_torn:
            sys.exit("FAIL: the log ends in a cut row: %r" % lines[-1])
    lines = lines[:-1]  # the cut row, or '' after the last newline
    if not lines or not lines[0].startswith("step,"):
        sys.exit("FAIL: the log has no header: %r" % text[:80])
    steps = [int(l.split(",")[0]) for l in lines[1:]]
    if steps != list(range(1, len(steps) + 1)):
        sys.exit("FAIL: the log's steps are not 1..N in order: %s" % steps)
    return steps


kills = checked = 0
for delay in (0.5, 0.7, 0.9, 1.1, 1.3):
    args = ["mpc-run", model, "--synthetic", "--steps=100000000",
            "--save=" + ckpt, "--save-every=3", "--log=" + log, "--quiet"]
    if os.path.exists(ckpt):
        args.append("--resume=" + ckpt)
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    time.sleep(delay + random.random() / 10)
    p.send_signal(signal.SIGKILL)
    err = p.communicate()[1]
    if p.returncode != -signal.SIGKILL:
        sys.exit("FAIL: mpc-run ended before the kill: %s" % err.decode())
    kills += 1
    if not os.path.exists(ckpt):
        continue
    s = checkpoint_step()
    steps = log_steps(allow_torn=True)
    if len(steps) < s:
        sys.exit("FAIL: after a kill the log ends at step %d, the checkpoint "
                 "is at step %d" % (len(steps), s))
    checked += 1

s = checkpoint_step()
subprocess.run(["mpc-run", model, "--synthetic", "--steps=4", "--save=" + ckpt,
                "--resume=" + ckpt, "--log=" + log, "--quiet"], check=True,
               stdout=subprocess.DEVNULL)
steps = log_steps(allow_torn=False)
if len(steps) != s + 4:
    sys.exit("FAIL: resumed at step %d for 4 steps, the log has %d rows"
             % (s, len(steps)))
left = [n for n in os.listdir(work) if ".tmp." in n]
if left:
    sys.exit("FAIL: temp files left after the next save: %s" % left)
print("kills %d checked %d continuous yes leftover-tmp 0" % (kills, checked))
