#!/usr/bin/env bash
# Installs the Debian packages mpc builds and tests with (idempotent, quiet when
# everything is already there). Called by `make`, so a fresh machine needs no
# other step. Extra package names given as arguments are installed too
# (tools/setup-fuzz.sh passes clang's).
set -euo pipefail

packages=(
  cmake g++ make pkg-config
  libonnx-dev libprotobuf-dev protobuf-compiler  # ONNX 1.12 schema, checker, parser
  libgtest-dev googletest                         # unit tests
  llvm-14-tools                                   # lit and FileCheck
  libopenblas-dev                                 # CPU matrix products
  libopenmpi-dev openmpi-bin                      # data parallel: mpirun -np N mpc-run
  libgloo-dev                                     # data parallel: torchrun / --nproc-per-node ranks
  libsleef-dev                                    # CPU vector erf/exp (GELU)
  libdnnl-dev                                     # oneDNN: CPU bf16 products, convolutions
  libre2-dev                                      # name patterns (--trainable, --fp32-nodes, ...)
  libmimalloc-dev                                 # the tools' heap (many small IR objects)
  zlib1g-dev                                      # deflate for .npz
  python3-numpy python3-onnx                      # lit tests make .npy and .onnx inputs
  libonnx-testdata                                # ONNX's backend node tests
  pybind11-dev python3-dev libdlpack-dev          # the mpc Python module (build/python)
  "$@"
)

# ONNX Runtime runs the --emit=step model in tests/ort (ctest ort-step, which
# skips without it): from PyPI for the python3 on PATH, once; a machine that
# cannot reach PyPI only loses that test.
# The test also builds its models with the onnx package and numpy, so all
# three must import (onnxruntime alone left the test skipped on a fresh
# machine: its wheel does not bring onnx).
# safetensors: the journey and safetensors-export tests read mpc-run
# --export-safetensors' files with the safetensors package.
if command -v python3 >/dev/null && ! python3 -c 'import onnxruntime, onnx, numpy, safetensors' 2>/dev/null; then
  echo "setup: pip install onnxruntime onnx numpy safetensors (for the ort-step, journey and safetensors tests)"
  python3 -m pip install -q --disable-pip-version-check onnxruntime onnx numpy safetensors >/dev/null 2>&1 ||
    echo "setup: could not install onnxruntime, onnx and safetensors; ort-step, journey and safetensors-export will be skipped"
fi
# tensorboard: the tensorboard-events test reads mpc-run --tensorboard's
# event files with TensorBoard's own EventAccumulator.
if command -v python3 >/dev/null && ! python3 -c 'import tensorboard' 2>/dev/null; then
  echo "setup: pip install tensorboard (for the tensorboard-events test)"
  python3 -m pip install -q --disable-pip-version-check tensorboard >/dev/null 2>&1 ||
    echo "setup: could not install tensorboard; tensorboard-events will be skipped"
fi
# ONNX Runtime training (onnxruntime-training-cpu, its last release 1.19.2):
# a contender of bench/cpu_contenders.py. Its package is also named
# onnxruntime, so it gets a venv of its own (build/ort-venv, over the system
# site-packages for the torch its Python API imports) beside the newer
# onnxruntime the tests use.
ortvenv="$(cd "$(dirname "$0")/.." && pwd)/build/ort-venv"
if command -v python3 >/dev/null && [ ! -x "$ortvenv/bin/python" ]; then
  echo "setup: venv build/ort-venv with onnxruntime-training-cpu (for bench/cpu_contenders.py)"
  { python3 -m venv --system-site-packages "$ortvenv" &&
    "$ortvenv/bin/pip" install -q --disable-pip-version-check onnxruntime-training-cpu==1.19.2 'numpy<2' onnx==1.16.2; } >/dev/null 2>&1 ||
    { rm -rf "$ortvenv"; echo "setup: could not install onnxruntime-training-cpu; bench/cpu_contenders.py skips ONNX Runtime training"; }
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
