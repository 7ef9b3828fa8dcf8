#!/usr/bin/env python3
"""mpc-run --tensorboard read back by TensorBoard's own reader.

Trains the seed MLP 20 steps with --log, --eval-data and --tensorboard, and
reads the event file with tensorboard's EventAccumulator: every step's
train/loss, train/loss_scale, train/skipped and train/lr is the --log row's
(as a float32), train/samples_per_sec is the batch over the row's ms, and
eval/loss is the --eval-log row's at steps 10 and 20. The file's records
are framed as TFRecords (length, masked CRC-32C, data, masked CRC-32C),
checked here with a CRC of this file's own. A CNN with a logits output
adds eval/accuracy and eval/top5 beside its --eval-log columns, and a
data-parallel run writes one file (rank 0's). A step compiled with
--max-grad-norm adds train/grad_norm, --log's grad_norm at every step, the
inf or nan of an overflowed fp16 step included; one without has none.

Exit 77 (skipped) when the python3 running it cannot import tensorboard.
"""
import argparse
import csv
import glob
import math
import os
import shutil
import struct
import subprocess
import sys

try:
    import numpy as np
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:
    print("tensorboard-events: skipped: %s (pip install tensorboard)" % e)
    sys.exit(77)

ARGS = None
FAILURES = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        FAILURES.append(what)


def run(*cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                       env=dict(os.environ, MPC_DEVICE="cpu"))
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s%s" % (
            r.returncode, " ".join(map(str, cmd)), r.stdout, r.stderr))
    return r


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def check_framing(path):
    data = open(path, "rb").read()
    at, records, ok = 0, 0, True
    while at < len(data):
        header = data[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[at + 8:at + 12])
        body = data[at + 12:at + 12 + length]
        (bcrc,) = struct.unpack("<I", data[at + 12 + length:at + 16 + length])
        ok = ok and hcrc == masked(crc32c(header)) and len(body) == length \
            and bcrc == masked(crc32c(body))
        at += 16 + length
        records += 1
    check(ok and at == len(data) and records > 1,
          "%d TFRecords, every length and CRC checks" % records)


def accumulate(directory):
    acc = event_accumulator.EventAccumulator(
        directory, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return acc


def close(a, b, rel=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-30)


def test_mlp(work):
    d = np.load(os.path.join(ARGS.models_dir, "mlp_seed_data.npz"))
    np.savez(os.path.join(work, "train.npz"), x=d["x"][:768], y=d["y"][:768])
    np.savez(os.path.join(work, "val.npz"), x=d["x"][768:], y=d["y"][768:])
    model = os.path.join(work, "mlp.onnx")
    run(os.path.join(ARGS.bin, "mpc-opt"),
        os.path.join(ARGS.models_dir, "mlp_seed.onnx"), "-o", model,
        "--optimizer=adam", "--lr=1e-3", "--lr-schedule=cosine",
        "--total-steps=20", "--precision=fp16")
    tb = os.path.join(work, "tb", "run1")  # created, parents too
    log = os.path.join(work, "log.csv")
    eval_log = os.path.join(work, "eval.csv")
    run(os.path.join(ARGS.bin, "mpc-run"), model,
        "--data=" + os.path.join(work, "train.npz"), "--steps=20",
        "--log=" + log, "--tensorboard=" + tb,
        "--eval-data=" + os.path.join(work, "val.npz"), "--eval-every=10",
        "--eval-log=" + eval_log, "--quiet")
    files = glob.glob(os.path.join(tb, "events.out.tfevents.*"))
    check(len(files) == 1, "one event file in DIR: %s" % files)
    if files:
        check_framing(files[0])
    acc = accumulate(tb)
    tags = set(acc.Tags()["scalars"])
    want = {"train/loss", "train/lr", "train/loss_scale", "train/skipped",
            "train/samples_per_sec", "eval/loss"}
    check(want <= tags, "scalar tags %s" % sorted(tags))
    check("train/grad_norm" not in tags,
          "no train/grad_norm from a step that does not clip")
    rows = list(csv.DictReader(open(log)))
    check(len(rows) == 20, "20 rows in --log")

    def series(tag):
        return {e.step: e.value for e in acc.Scalars(tag)} if tag in tags \
            else {}

    loss = series("train/loss")
    check(sorted(loss) == list(range(1, 21)), "train/loss at steps 1..20")
    for column, tag in (("loss", "train/loss"), ("lr", "train/lr"),
                        ("loss_scale", "train/loss_scale"),
                        ("skipped", "train/skipped")):
        got = series(tag)
        bad = [r["step"] for r in rows
               if not close(got.get(int(r["step"]), float("nan")),
                            float(np.float32(float(r[column]))))]
        check(not bad, "%s is --log's %s at every step (off: %s)" % (
            tag, column, bad[:5]))
    rate = series("train/samples_per_sec")
    # --log's ms is rounded to 0.1 us (a CPU step of this MLP takes ~10 us).
    def within(rate, ms):
        lo, hi = 64e3 / (ms + 5e-5), 64e3 / max(ms - 5e-5, 1e-9)
        return lo * (1 - 1e-6) <= rate <= hi * (1 + 1e-6)
    bad = [r["step"] for r in rows
           if not within(rate.get(int(r["step"]), float("nan")),
                         float(r["ms"]))]
    check(not bad, "train/samples_per_sec is the batch (64) / ms (off: %s)" % bad[:5])
    evals = list(csv.DictReader(open(eval_log)))
    got = series("eval/loss")
    check([int(r["step"]) for r in evals] == [10, 20] and sorted(got) ==
          [10, 20] and all(close(got[int(r["step"])],
                                 float(np.float32(float(r["eval_loss"]))))
                           for r in evals),
          "eval/loss is --eval-log's at steps 10 and 20: %s" % got)

    # A second run into the same DIR writes a file beside the first.
    run(os.path.join(ARGS.bin, "mpc-run"), model,
        "--data=" + os.path.join(work, "train.npz"), "--steps=2",
        "--tensorboard=" + tb, "--quiet")
    check(len(glob.glob(os.path.join(tb, "events.out.tfevents.*"))) == 2,
          "a second run adds its own event file")


def same_float32(a, b):
    """a (an event's float) is b (a --log number) as a float32, nan too."""
    b = float(np.float32(b))
    return (math.isnan(a) and math.isnan(b)) or a == b or close(a, b)


def test_grad_norm(work):
    # The first batch overflows fp16 (1e6 inputs): a skipped step whose norm
    # is inf or nan; the steps after it train at half the scale.
    d = np.load(os.path.join(ARGS.models_dir, "mlp_seed_data.npz"))
    x = d["x"].copy()
    x[:64] = 1e6
    np.savez(os.path.join(work, "huge.npz"), x=x, y=d["y"])
    model = os.path.join(work, "mlp-clip.onnx")
    run(os.path.join(ARGS.bin, "mpc-opt"),
        os.path.join(ARGS.models_dir, "mlp_seed.onnx"), "-o", model,
        "--optimizer=adam", "--lr=1e-2", "--precision=fp16",
        "--max-grad-norm=0.5")
    tb = os.path.join(work, "tb-clip")
    log = os.path.join(work, "clip.csv")
    run(os.path.join(ARGS.bin, "mpc-run"), model,
        "--data=" + os.path.join(work, "huge.npz"), "--steps=6",
        "--log=" + log, "--tensorboard=" + tb, "--quiet")
    acc = accumulate(tb)
    tags = acc.Tags()["scalars"]
    rows = list(csv.DictReader(open(log)))
    got = {e.step: e.value for e in acc.Scalars("train/grad_norm")} \
        if "train/grad_norm" in tags else {}
    check(sorted(got) == list(range(1, 7)), "train/grad_norm at steps 1..6")
    bad = [r["step"] for r in rows
           if not same_float32(got.get(int(r["step"]), 0.0),
                               float(r["grad_norm"]))]
    check(not bad, "train/grad_norm is --log's grad_norm (off: %s)" % bad)
    check(rows[0]["skipped"] == "1" and not math.isfinite(got.get(1, 0.0)),
          "the overflowed step 1's norm is inf or nan: %r" % got.get(1))
    check(all(0 < got.get(s, 0.0) < math.inf for s in range(2, 7)),
          "steps 2..6 have finite norms: %s" % got)


def test_metrics(work):
    d = np.load(os.path.join(ARGS.models_dir, "cnn_data.npz"))
    np.savez(os.path.join(work, "ctrain.npz"), x=d["x"][:192], y=d["y"][:192])
    np.savez(os.path.join(work, "cval.npz"), x=d["x"][192:], y=d["y"][192:])
    model = os.path.join(work, "cnn.onnx")
    run(os.path.join(ARGS.bin, "mpc-opt"),
        os.path.join(ARGS.models_dir, "journey_cnn.onnx"), "-o", model,
        "--optimizer=adam", "--lr=1e-2", "--batch=8")
    tb = os.path.join(work, "tb-cnn")
    eval_log = os.path.join(work, "ceval.csv")
    run(os.path.join(ARGS.bin, "mpc-run"), model,
        "--data=" + os.path.join(work, "ctrain.npz"), "--steps=6",
        "--eval-data=" + os.path.join(work, "cval.npz"), "--eval-every=3",
        "--eval-log=" + eval_log, "--eval-metrics=accuracy,top5",
        "--tensorboard=" + tb, "--quiet")
    acc = accumulate(tb)
    rows = list(csv.DictReader(open(eval_log)))
    for metric in ("accuracy", "top5"):
        got = {e.step: e.value for e in acc.Scalars("eval/" + metric)} \
            if "eval/" + metric in acc.Tags()["scalars"] else {}
        check(sorted(got) == [3, 6] and all(
            close(got[int(r["step"])], float(np.float32(float(r[metric]))))
            for r in rows), "eval/%s is --eval-log's: %s" % (metric, got))


def test_data_parallel(work):
    model = os.path.join(work, "mlp-dp.onnx")
    run(os.path.join(ARGS.bin, "mpc-opt"),
        os.path.join(ARGS.models_dir, "mlp_seed.onnx"), "-o", model,
        "--optimizer=sgd", "--lr=0.1", "--data-parallel")
    tb = os.path.join(work, "tb-dp")
    log = os.path.join(work, "dp.csv")
    run(os.path.join(ARGS.bin, "mpc-run"), "--nproc-per-node=2", model,
        "--data=" + os.path.join(work, "train.npz"), "--steps=5",
        "--log=" + log, "--tensorboard=" + tb, "--quiet")
    files = glob.glob(os.path.join(tb, "events.out.tfevents.*"))
    check(len(files) == 1, "data parallel: rank 0 alone writes: %s" % files)
    acc = accumulate(tb)
    rows = list(csv.DictReader(open(log)))
    got = {e.step: e.value for e in acc.Scalars("train/loss")}
    check(sorted(got) == [1, 2, 3, 4, 5] and all(
        close(got[int(r["step"])], float(np.float32(float(r["loss"]))))
        for r in rows), "data parallel: train/loss is the ranks' mean, --log's")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--models-dir", required=True)
    p.add_argument("--work", required=True)
    ARGS = p.parse_args()
    shutil.rmtree(ARGS.work, ignore_errors=True)
    os.makedirs(ARGS.work)
    test_mlp(ARGS.work)
    test_grad_norm(ARGS.work)
    test_metrics(ARGS.work)
    test_data_parallel(ARGS.work)
    if FAILURES:
        print("%d check(s) failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
