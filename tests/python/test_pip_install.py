#!/usr/bin/env python3
"""`pip install .` builds the module `make` builds (ctest python-pip-install).

Installs the source tree with pip into a fresh target directory (no build
isolation, no index: the machine's setuptools, nothing downloaded; the build
is the project's CMake build in --build, the one ctest runs from), then, in a
separate interpreter that sees only that directory, imports mpc from there,
compiles the seed MLP and takes a step. The installed module is the built one
byte for byte. Exits 77 (skipped, with a line) where pip or setuptools do not
import.
Usage: test_pip_install.py --source=. --build=build --work=DIR
"""
import argparse
import filecmp
import glob
import os
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    import importlib.util
    for name in ("pip", "setuptools"):  # found, not imported: pip runs them
        if importlib.util.find_spec(name) is None:
            print(f"python-pip-install: skipped: no {name} for {sys.executable}")
            return 77
    shutil.rmtree(args.work, ignore_errors=True)
    site = os.path.join(args.work, "site")
    env = dict(os.environ, MPC_BUILD_DIR=args.build, MPC_JOBS="1")
    env.pop("PYTHONPATH", None)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                    "--no-build-isolation", "--no-deps", "--no-index",
                    "--target", site, args.source], check=True, env=env)

    installed = glob.glob(os.path.join(site, "mpc.*.so"))
    assert len(installed) == 1, installed
    built = os.path.join(args.build, "python", os.path.basename(installed[0]))
    assert filecmp.cmp(installed[0], built, shallow=False), (
        f"{installed[0]} differs from {built}")
    # A CUDA build's backend plugin travels beside the module (device="cuda").
    plugin = os.path.join(args.build, "bin", "libmpc_cuda_backend.so")
    if os.path.exists(plugin):
        assert filecmp.cmp(os.path.join(site, "libmpc_cuda_backend.so"),
                           plugin, shallow=False), "the CUDA plugin"

    model = os.path.join(os.path.abspath(args.source), "models", "mlp_seed.onnx")
    npz = os.path.join(os.path.abspath(args.source), "models",
                       "mlp_seed_data.npz")
    probe = f"""
import os, sys
import numpy as np
import mpc
assert os.path.dirname(mpc.__file__) == {site!r}, mpc.__file__
step = mpc.compile({model!r}, precision="fp16", optimizer="adam", lr=1e-2)
tr = mpc.Trainer(step)
data = np.load({npz!r})
loss = tr.step({{k: v[:tr.batch] for k, v in data.items()}})
assert np.isfinite(loss) and tr.step_count == 1, loss
print("python-pip-install: imported", mpc.__file__, "loss", loss)
"""
    env = dict(os.environ, PYTHONPATH=site)
    subprocess.run([sys.executable, "-c", probe], check=True, env=env,
                   cwd=args.work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
