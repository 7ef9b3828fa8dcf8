#!/usr/bin/env python3
"""The mpc Python module against the CLIs it binds (ctest python-module).

Compiles the seed MLP with mpc.compile as docs/mpc-opt.md's first example
does, trains it 20 steps from numpy batches cut as mpc-run cuts --data
(batch i = samples [i*B, (i+1)*B) of its epoch, no --shuffle) and checks:
  - the losses equal, bit for bit, mpc-run's --log on the same step and data;
  - a checkpoint saved at step 10 and resumed gives the same 10 later losses;
  - a bad batch (missing input, wrong dtype, wrong shape, unknown input) and
    a bad compile flag raise mpc.Error naming the input or flag, and leave
    the trainer as it was;
  - explain() and memory_report() equal mpc-opt --explain and --report-json;
  - state_dict() holds the model's parameters under their names and shapes;
  - evaluate() returns the forward's loss; export_inference() writes a model;
  - predict() equals mpc-run --infer on that model, from x alone, at any
    batch size;
  - grad_norm is the norm mpc-run logs for a step compiled with clipping;
  - a --grad-accum=2 step takes 2 x B samples, as mpc-run's log says;
  - where torch imports, a DataLoader over the same arrays gives the same
    losses (skipped with a line otherwise).
Usage: test_module.py --bin=build/bin --source=. --work=DIR (PYTHONPATH
holding build/python).
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys

import numpy as np

import mpc

STEPS = 20
SAVE_AT = 10


def f32_bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def assert_same_losses(got, want, what):
    got, want = f32_bits(got), f32_bits(want)
    assert got.shape == want.shape, f"{what}: {got.shape} losses, want {want.shape}"
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (
        f"{what}: step {bad[0] + 1} loss "
        f"{got[bad[0]].view(np.float32)} != {want[bad[0]].view(np.float32)}")


def batches(data, batch, first, count):
    """mpc-run's batches first..first+count-1 of data without --shuffle."""
    n = len(next(iter(data.values())))
    per_epoch = n // batch
    for i in range(first, first + count):
        k = i % per_epoch
        yield {name: a[k * batch:(k + 1) * batch] for name, a in data.items()}


def csv_losses(path):
    with open(path) as f:
        return [float(row["loss"]) for row in csv.DictReader(f)]


def expect_error(what, fn, *needles):
    try:
        fn()
    except mpc.Error as e:
        msg = str(e)
        assert "\n" not in msg, f"{what}: a multi-line message: {msg!r}"
        for needle in needles:
            assert needle in msg, f"{what}: {needle!r} not in {msg!r}"
        return msg
    raise AssertionError(f"{what}: no mpc.Error")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    model = os.path.join(args.source, "models", "mlp_seed.onnx")
    npz = os.path.join(args.source, "models", "mlp_seed_data.npz")
    data = dict(np.load(npz))
    work = lambda name: os.path.join(args.work, name)

    assert issubclass(mpc.Error, RuntimeError)
    step = mpc.compile(model, precision="fp16", optimizer="adam", lr=1e-2)
    step.save(work("step.onnx"))

    def mpc_run_log(step_file, steps, column="loss"):
        """mpc-run's --log column for `steps` steps of the step on npz."""
        log = step_file + ".csv"
        subprocess.run([os.path.join(args.bin, "mpc-run"), step_file,
                        "--data=" + npz, f"--steps={steps}", "--device=cpu",
                        "--quiet", "--log=" + log],
                       check=True, stdout=subprocess.DEVNULL)
        with open(log) as f:
            return [row[column] for row in csv.DictReader(f)]

    # mpc-run on the same compiled step and data.
    want = [float(l) for l in mpc_run_log(work("step.onnx"), STEPS)]
    assert len(want) == STEPS

    # explain() and memory_report() say what mpc-opt --explain and
    # --report-json say of the same compile.
    opt = subprocess.run(
        [os.path.join(args.bin, "mpc-opt"), model, "--precision=fp16",
         "--optimizer=adam", "--lr=0.01", "--explain", "-o", work("opt.onnx"),
         "--report-json=" + work("report.json")],
        check=True, capture_output=True, text=True)
    assert step.explain() == opt.stdout, (step.explain(), opt.stdout)
    assert "cast-inserted" in step.explain()
    with open(work("report.json")) as f:
        assert step.memory_report() == json.load(f)
    report = step.memory_report()
    assert report["planned"]["precision"] == "fp16"
    assert report["fp32_baseline"]["precision"] == "fp32"
    assert 0 < report["ratio"] < 1, report["ratio"]

    # From the Step in memory, and from the file it saved.
    tr = mpc.Trainer(step, device="cpu", log=work("py.csv"))
    B = tr.batch
    assert tr.inputs == ["x", "y"] and B == 64, (tr.inputs, B)
    losses = []
    for i, batch in enumerate(batches(data, B, 0, STEPS)):
        losses.append(tr.step(batch))
        assert isinstance(losses[-1], float)
        assert tr.step_count == i + 1
        assert tr.skipped in (False, True) and tr.loss_scale > 0
        assert abs(tr.lr - 1e-2) < 1e-8, tr.lr
        if tr.step_count == SAVE_AT:
            tr.save(work("ck.onnx"))
    assert_same_losses(losses, want, "mpc.Trainer(step) vs mpc-run --log")
    assert losses[-1] < losses[0], losses
    del tr  # closes its log
    assert_same_losses(csv_losses(work("py.csv")), want, "Trainer(log=) CSV")

    from_file = mpc.Trainer(work("step.onnx"))
    assert_same_losses([from_file.step(b) for b in batches(data, B, 0, 3)],
                       want[:3], "mpc.Trainer(step.onnx)")

    # Save at step 10, resume: the later steps are the straight run's.
    resumed = mpc.Trainer.resume(work("ck.onnx"))
    assert resumed.step_count == SAVE_AT, resumed.step_count
    later = [resumed.step(b) for b in batches(data, B, SAVE_AT, STEPS - SAVE_AT)]
    assert_same_losses(later, want[SAVE_AT:], "resumed at step 10")

    # Bad batches: mpc.Error naming the input; the trainer is unchanged.
    good = next(batches(data, B, 0, 1))
    x, y = good["x"], good["y"]
    before = resumed.state_dict()
    expect_error("missing input", lambda: resumed.step({"x": x}), "'y'")
    expect_error("wrong dtype", lambda: resumed.step(
        {"x": x.astype(np.float64), "y": y}), "'x'", "fp64", "fp32")
    expect_error("wrong sample shape", lambda: resumed.step(
        {"x": x[:, :3], "y": y}), "'x'")
    expect_error("wrong batch size", lambda: resumed.step(
        {"x": x[:B - 1], "y": y[:B - 1]}), "'x'", str(B - 1),
        "drop_last=True")
    expect_error("unknown input", lambda: resumed.step(
        {"x": x, "y": y, "z": y}), "'z'")
    expect_error("label out of range", lambda: resumed.step(
        {"x": x, "y": y + 7}), "'y'")
    expect_error("not a dict", lambda: resumed.step([x, y]), "dict")
    # A DataLoader's (x, y) tuple passed as it comes: what a batch is and
    # the step's inputs, not "micro-batch 0".
    msg = expect_error("a tuple of arrays", lambda: resumed.step((x, y)),
                       "batch: expected a dict", "the step's inputs: x, y",
                       "got a tuple of ndarray")
    assert "micro-batch" not in msg.split(";")[0], msg
    assert resumed.step_count == STEPS
    after = resumed.state_dict()
    for name in before:
        assert np.array_equal(before[name], after[name]), name

    # Bad compile flags: mpc.Error naming the flag, as mpc-opt says it.
    expect_error("bad value", lambda: mpc.compile(model, lr="abc"), "--lr")
    expect_error("not a path", lambda: mpc.compile(3), "expected a path",
                 "got int")
    # An empty path names no file: refused, not a checkpoint that writes
    # nothing and says so nowhere.
    expect_error("empty checkpoint path", lambda: resumed.save(""),
                 "Trainer.save: the path is empty")
    expect_error("empty export path", lambda: resumed.export_inference(""),
                 "export_inference: the path is empty")
    expect_error("empty step path", lambda: step.save(""), "Step.save: the path is empty")
    expect_error("empty model path", lambda: mpc.Trainer(""), "the path is empty")
    # A FIFO would wait for a writer: refused by the model loader, at once.
    os.mkfifo(work("fifo.onnx"))
    expect_error("a FIFO as the model", lambda: mpc.compile(work("fifo.onnx")),
                 "is a FIFO, not a regular file")
    expect_error("a FIFO as the trainer's model",
                 lambda: mpc.Trainer(work("fifo.onnx")), "is a FIFO")
    # A step whose batch is symbolic needs the batch keyword, spelled as
    # Python gives it (mpc-run's --batch).
    dyn = mpc.compile(os.path.join(args.source, "models", "transformer_dynbatch.onnx"))
    msg = expect_error("symbolic batch", lambda: mpc.Trainer(dyn), "give batch=B")
    assert "--batch" not in msg, msg
    expect_error("unknown flag", lambda: mpc.compile(model, learning_rat=1),
                 "--learning-rat")
    expect_error("flag of another optimizer",
                 lambda: mpc.compile(model, optimizer="sgd", beta1=0.9),
                 "--beta1")
    # --memory-budget implies --recompute=auto, as mpc-opt takes it.
    assert mpc.compile(model, memory_budget="1GiB").memory_report()["ratio"] > 0
    expect_error("budget with recompute=none", lambda: mpc.compile(
        model, memory_budget="1GiB", recompute="none"), "--memory-budget")
    expect_error("missing model", lambda: mpc.compile(work("none.onnx")),
                 "none.onnx")
    expect_error("uncompiled model", lambda: mpc.Trainer(model), "mlp_seed.onnx")

    # state_dict: the model's parameters, their names and shapes.
    sd = resumed.state_dict()
    import onnx
    params = {t.name: tuple(t.dims) for t in onnx.load(model).graph.initializer}
    assert {k: v.shape for k, v in sd.items()} == params, (sd.keys(), params)
    assert all(v.dtype == np.float32 for v in sd.values())

    # evaluate: the forward's outputs (the loss here), in inference form.
    out = resumed.evaluate(good)
    assert list(out) == ["loss"] and out["loss"].shape == (), out
    assert np.isfinite(out["loss"])
    expect_error("evaluate, missing input",
                 lambda: resumed.evaluate({"x": x}), "'y'")
    resumed.export_inference(work("m.onnx"))
    assert os.path.getsize(work("m.onnx")) > 0

    # predict: what that exported model computes (mpc-run --infer on it),
    # from x alone, at any batch size; evaluate refuses a size the export
    # fixes.
    for rows in (B, 10):
        got = resumed.predict({"x": x[:rows]})
        np.save(work("x.npy"), x[:rows])
        shutil.rmtree(work("infer"), ignore_errors=True)
        subprocess.run([os.path.join(args.bin, "mpc-run"), work("m.onnx"),
                        "--infer", "--input", "x=" + work("x.npy"),
                        "--output-dir=" + work("infer"), "--device=cpu"],
                       check=True, stdout=subprocess.DEVNULL)
        (name, logits), = got.items()
        assert logits.shape == (rows, 2), logits.shape
        cli = np.load(os.path.join(work("infer"), os.listdir(work("infer"))[0]))
        assert np.array_equal(logits, cli), f"predict vs mpc-run --infer, {rows} rows"
    named = resumed.predict({"x": x}, outputs=[name])
    assert list(named) == [name] and np.array_equal(named[name], resumed.predict({"x": x})[name])
    expect_error("predict, labels given", lambda: resumed.predict(good), "'y'")
    expect_error("predict, unknown output",
                 lambda: resumed.predict({"x": x}, outputs=["nope"]), "'nope'")
    expect_error("predict, wrong sample shape",
                 lambda: resumed.predict({"x": x[:, :3]}), "'x'")
    expect_error("evaluate, a size the export fixes",
                 lambda: resumed.evaluate({"x": x[:10], "y": y[:10]}), "10", str(B))

    # A forward exported with a dynamic batch evaluates any batch size: two
    # samples give the mean loss of the same two given twice.
    dyn = mpc.Trainer(mpc.compile(
        os.path.join(args.source, "models", "transformer_dynbatch.onnx"),
        batch=4, optimizer="adam", lr=1e-3))
    rng = np.random.default_rng(1)
    toks = rng.integers(0, 8, (4, 16)).astype(np.int64)
    dyn.step({"tokens": toks, "targets": np.roll(toks, -1, axis=1)})
    two = {"tokens": toks[:2], "targets": np.roll(toks, -1, axis=1)[:2]}
    twice = {k: np.concatenate([v, v]) for k, v in two.items()}
    l2, l4 = dyn.evaluate(two)["loss"], dyn.evaluate(twice)["loss"]
    assert np.isclose(l2, l4, rtol=1e-6, atol=0), (l2, l4)
    logits = dyn.predict({"tokens": toks[:3]})
    (lname, lval), = logits.items()
    assert lval.shape[0] == 3 * 16, lval.shape  # (batch x length, vocab)

    # --grad-accum=2: a step takes 2 x B samples (micro-batches 2i, 2i+1 of
    # mpc-run's order), B alone is refused.
    accum = mpc.compile(model, precision="fp16", optimizer="adam", lr=1e-2,
                        grad_accum=2)
    accum.save(work("accum.onnx"))
    logged = mpc_run_log(work("accum.onnx"), 4)
    ta = mpc.Trainer(accum)
    assert ta.micro_batches == 2
    expect_error("one micro-batch of two", lambda: ta.step(good), "'x'", "128")
    # The loss is the mean of two fp32 losses, a double: compared as the log
    # prints it (%.9g).
    got = ["%.9g" % ta.step(b) for b in batches(data, 2 * B, 0, 4)]
    assert got == logged, (got, logged)

    # grad_norm: the norm mpc-run logs for a step that clips, None without.
    clip = mpc.compile(model, precision="fp16", optimizer="adam", lr=1e-2,
                       max_grad_norm=0.5)
    clip.save(work("clip.onnx"))
    logged = mpc_run_log(work("clip.onnx"), 3, "grad_norm")
    tc = mpc.Trainer(clip)
    assert tc.grad_norm is None
    norms = []
    for b in batches(data, B, 0, 3):
        tc.step(b)
        norms.append("%.9g" % tc.grad_norm)
    assert norms == logged, (norms, logged)
    assert mpc.Trainer(step).grad_norm is None

    # device: "cuda" without a usable GPU is one line saying why; the CUDA
    # plugin, where this build has one, resolves against the module once the
    # module is global (what device="cuda" does before loading it).
    expect_error("device gpu", lambda: mpc.Trainer(step, device="gpu"),
                 "'gpu'", "'cuda'")
    plugin = os.path.join(args.bin, "libmpc_cuda_backend.so")
    if not os.path.exists(plugin):
        expect_error("device cuda", lambda: mpc.Trainer(step, device="cuda"),
                     "device 'cuda'", "no CUDA backend")
    else:
        try:
            tg = mpc.Trainer(step, device="cuda")
        except mpc.Error as e:
            assert "device 'cuda'" in str(e) and "device='cpu'" in str(e), e
            print(f"python-module: no GPU here: {e}")
        else:
            got = [tg.step(b) for b in batches(data, B, 0, 3)]
            assert np.allclose(got, want[:3], rtol=5e-3), (got, want[:3])
            print("python-module: device='cuda' trains like mpc-run")
        load = ("import ctypes, os, sys, mpc\n"
                "if sys.argv[1] == 'global':\n"
                "    ctypes.CDLL(mpc.__file__,"
                " mode=os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_GLOBAL)\n"
                "ctypes.CDLL(sys.argv[2], mode=os.RTLD_NOW)\n")
        for how, ok in (("global", True), ("local", False)):
            r = subprocess.run([sys.executable, "-c", load, how, plugin],
                               capture_output=True, text=True)
            assert (r.returncode == 0) == ok, (how, r.stderr[-400:])
        print("python-module: the CUDA plugin links against the module")

    # A torch DataLoader over the same arrays feeds the same steps.
    try:
        import torch
        from torch.utils.data import DataLoader, TensorDataset
    except ImportError:
        print("python-module: torch does not import here: DataLoader check "
              "skipped")
    else:
        ds = TensorDataset(torch.from_numpy(data["x"]), torch.from_numpy(data["y"]))
        loader = DataLoader(ds, batch_size=B, shuffle=False, drop_last=True)
        tt = mpc.Trainer(step)
        got = []
        while len(got) < STEPS:
            for xb, yb in loader:
                if len(got) == STEPS:
                    break
                # torch tensors as they come (DLPack, used in place).
                got.append(tt.step({"x": xb, "y": yb}))
        assert_same_losses(got, want, "DataLoader")
        print("python-module: DataLoader losses equal mpc-run's")

        # Layouts: a transposed view, int32 labels, a Fortran-ordered numpy
        # array give the first step's loss; the caller's arrays are never
        # written.
        b0 = next(batches(data, B, 0, 1))
        xt = torch.from_numpy(np.ascontiguousarray(b0["x"].T)).t()
        assert not xt.is_contiguous()
        y32 = torch.from_numpy(b0["y"].astype(np.int32))
        keep_x, keep_y = xt.clone(), y32.clone()
        assert_same_losses([mpc.Trainer(step).step({"x": xt, "y": y32})],
                           want[:1], "transposed torch view, int32 labels")
        assert torch.equal(xt, keep_x) and torch.equal(y32, keep_y)
        fx = np.asfortranarray(b0["x"])
        assert_same_losses([mpc.Trainer(step).step({"x": fx, "y": b0["y"]})],
                           want[:1], "Fortran-ordered numpy array")
        x0 = b0["x"].copy()
        mpc.Trainer(step).step(b0)
        assert np.array_equal(b0["x"], x0), "the step wrote the caller's array"
        # What DLPack cannot give is an mpc.Error naming the input.
        msg = expect_error("tensor requiring grad", lambda: tt.step(
            {"x": torch.from_numpy(b0["x"]).requires_grad_(), "y": yb}),
            "'x'", "detach")
        # torch's one line, not the Python traceback pybind11 appends.
        assert "At:" not in msg and "\\n" not in msg, msg
        # A module handed to mpc.compile as it is: export it first.
        expect_error("a torch module", lambda: mpc.compile(torch.nn.Linear(3, 2)),
                     "expected a path", "got Linear", "torch.onnx.export(")
        expect_error("bf16 for an fp32 input", lambda: tt.step(
            {"x": torch.from_numpy(b0["x"]).bfloat16(), "y": yb}),
            "'x'", "bf16", "fp32")
        expect_error("complex tensor", lambda: tt.step(
            {"x": torch.from_numpy(b0["x"]).to(torch.complex64), "y": yb}),
            "'x'")
        print("python-module: torch tensors (DLPack) and numpy layouts ok")
    print(f"python-module: {STEPS} steps equal mpc-run's --log bit for bit; "
          "resume, errors, state_dict, evaluate ok")


if __name__ == "__main__":
    main()
