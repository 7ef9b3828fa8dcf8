#!/usr/bin/env bash
# Measures how closely mpc-run's fp32 training follows PyTorch's: for each
# committed reference trajectory (models/*_ref_*.csv, 30 steps), compiles the
# model with the same optimizer, trains 30 steps on the same data and prints
# the largest relative loss difference over the steps. Also prints how far
# fp16 and bf16 runs stay from the fp32 run.
# Usage: bench/parity.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
bin=$build/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# model reference optimizer-flags
runs=(
  "mlp_seed mlp_seed_ref_sgd.csv --optimizer=sgd --lr=0.05 --momentum=0.9 --weight-decay=1e-4"
  "mlp_seed mlp_seed_ref_sgd_nesterov.csv --optimizer=sgd --lr=0.05 --momentum=0.9 --nesterov"
  "mlp_seed mlp_seed_ref_adam.csv --optimizer=adam --lr=1e-3"
  "mlp_seed mlp_seed_ref_adamw.csv --optimizer=adamw --lr=1e-3 --weight-decay=0.01"
  "mlp_seed mlp_seed_ref_adam_clip.csv --optimizer=adam --lr=1e-2 --max-grad-norm=0.1"
  "transformer transformer_ref_sgd.csv --optimizer=sgd --lr=0.05 --momentum=0.9"
  "transformer transformer_ref_adam.csv --optimizer=adam --lr=1e-3"
  "resmlp resmlp_ref_sgd.csv --optimizer=sgd --lr=0.05 --momentum=0.9"
  "resmlp resmlp_ref_adam.csv --optimizer=adam --lr=1e-3"
  "cnn cnn_ref_sgd.csv --optimizer=sgd --lr=0.05 --momentum=0.9"
  "cnn cnn_ref_adam.csv --optimizer=adam --lr=1e-3"
)

maxrel() { # two step,loss CSVs (mpc's log, PyTorch's reference) -> max |a-b|/|b|
  paste -d, <(tail -n +2 "$1" | cut -d, -f2) <(tail -n +2 "$2" | cut -d, -f2) |
    awk -F, '{d=($1-$2)/$2; if(d<0)d=-d; if(d>m)m=d} END{printf "%.2e", m}'
}

printf "%-12s %-30s %-10s %-10s %-10s\n" model reference fp32-vs-pt fp16-vs-32 bf16-vs-32
for run in "${runs[@]}"; do
  read -r model ref flags <<<"$run"
  if ! "$bin/mpc-opt" "models/$model.onnx" -o "$tmp/$model.onnx" --precision=fp32 $flags 2>"$tmp/err"; then
    printf "%-12s %-30s %s\n" "$model" "$ref" "does not compile yet: $(head -c 100 "$tmp/err")"
    continue
  fi
  "$bin/mpc-run" "$tmp/$model.onnx" --device=cpu --data="models/${model}_data.npz" --steps=30 --log="$tmp/fp32.csv" --quiet >/dev/null
  cols=("$(maxrel "$tmp/fp32.csv" "models/$ref")")
  for p in fp16 bf16; do
    "$bin/mpc-opt" "models/$model.onnx" -o "$tmp/$model.$p.onnx" --precision=$p $flags
    "$bin/mpc-run" "$tmp/$model.$p.onnx" --device=cpu --data="models/${model}_data.npz" --steps=30 --log="$tmp/$p.csv" --quiet >/dev/null
    cols+=("$(maxrel "$tmp/$p.csv" "$tmp/fp32.csv")")
  done
  printf "%-12s %-30s %-10s %-10s %-10s\n" "$model" "$ref" "${cols[@]}"
done
