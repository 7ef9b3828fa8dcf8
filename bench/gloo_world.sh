#!/usr/bin/env bash
# The data-parallel world's cost on 2 ranks (mpc-run --nproc-per-node=2, no MPI): torchvision's
# resnet18 (bench/export_resnet18.py; 42 MiB of fp32 gradients each step), fp32 SGD (lr 0.01),
# 8 images per rank, --sync-batchnorm; ms per step (median of each run's steps after 2 warm-up
# steps, median of 3 rounds) over the Gloo world, beside one process on all 16 images (the same
# work without communication), interleaved per round and paired. The hand-written TCP world that
# Gloo replaced was measured the same way before it went (bench/results/gloo_world-2026-12-06.json,
# docs/benchmarks.md).
# Skipped with a line without torch and torchvision in $PY.
# Usage: bench/gloo_world.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=gloo_world
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

if ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
  echo "gloo world: skipped ($PY cannot import torch and torchvision: pip install torch torchvision)"
  exit 0
fi
"$PY" "$(dirname "$0")/export_resnet18.py" "$bench_tmp/resnet18.onnx" "$bench_tmp/data.npz" 2>/dev/null
data=$bench_tmp/data.npz
"$bin/mpc-opt" "$bench_tmp/resnet18.onnx" --batch=8 --precision=fp32 --optimizer=sgd --lr=0.01 \
  --data-parallel --sync-batchnorm -o "$bench_tmp/dp.onnx"
"$bin/mpc-opt" "$bench_tmp/resnet18.onnx" --batch=16 --precision=fp32 --optimizer=sgd --lr=0.01 \
  -o "$bench_tmp/one.onnx"
steps=12
ranks() { "$bin/mpc-run" --nproc-per-node=2 "$bench_tmp/dp.onnx" --data="$data" --steps=$steps --quiet "$@" >/dev/null; }

worlds=(gloo)

declare -A ms
for round in 1 2 3; do
  for w in "${worlds[@]}"; do
    ranks --log="$bench_tmp/$w.csv"
    ms[$w]+="$(median_log_ms "$bench_tmp/$w.csv" 2) "
  done
  "$bin/mpc-run" "$bench_tmp/one.onnx" --data="$data" --steps=$steps --log="$bench_tmp/one.csv" --quiet >/dev/null
  ms[one]+="$(median_log_ms "$bench_tmp/one.csv" 2) "
done

echo "== data-parallel world: resnet18 (32x32), fp32 SGD, sync batch norm, 2 ranks x 8 images, $steps steps, median of 3 ($(bench_machine_line))"
printf '%-34s %12s %26s\n' "run" "ms per step" "vs 1 process (paired)"
for w in "${worlds[@]}" one; do
  read -r m _ _ <<<"$(median_min_max ${ms[$w]})"
  read -r r rmin rmax <<<"$(paired_ratios "${ms[$w]}" "${ms[one]}")"
  case $w in
  gloo) label="2 ranks, Gloo world" ;;
  one) label="1 process x 16 images" ;;
  esac
  printf '%-34s %12s %26s\n' "$label" "$m" "$r ($rmin-$rmax)"
  bench_record model=resnet18 world=$w steps=$steps "ms=$(json_list ${ms[$w]})" ratio_to_one_process=$r
done
bench_write_json "$json"
