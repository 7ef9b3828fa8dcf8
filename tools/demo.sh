#!/usr/bin/env bash
# make demo: compile the seed's MLP into one fp16 training step and train it.
set -euo pipefail
build=${1:-build}
bin=$build/bin
out=$build/demo
mkdir -p "$out"

echo "== mpc-opt: models/mlp_seed.onnx -> fp16 step (dynamic loss scaling, fp32 master weights, Adam)"
"$bin/mpc-opt" models/mlp_seed.onnx -o "$out/mlp_seed.train.onnx" \
  --precision=fp16 --optimizer=adam --lr=1e-2 --stats
echo
echo "== mpc-run: 300 steps, batch 64, CPU backend (fp16 numerics emulated)"
"$bin/mpc-run" "$out/mlp_seed.train.onnx" --device=cpu --data=models/mlp_seed_data.npz \
  --steps=300 --log="$out/mlp_seed.log.csv" --save="$out/mlp_seed.ckpt.onnx" \
  --export-inference="$out/mlp_seed.trained.onnx"
echo
echo "log: $out/mlp_seed.log.csv   checkpoint: $out/mlp_seed.ckpt.onnx   trained model: $out/mlp_seed.trained.onnx"
