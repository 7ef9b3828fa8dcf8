#!/usr/bin/env bash
# --grad-comm-dtype on 2 ranks (mpc-run --nproc-per-node=2: the TCP world, no MPI): torchvision's
# resnet18 (bench/export_resnet18.py; 42 MiB of fp32 gradients each step), fp32 SGD (lr 0.01),
# 8 images per rank. Per wire type (fp32, bf16, fp16): ms per step (median of each run's steps after
# 2 warm-up steps, median of 3 rounds; the ratio to fp32 paired per round), and how far its losses lie
# from the fp32 wire's over 10 steps (relative; bf16 keeps 8 significant bits of each gradient, fp16 11).
# Skipped with a line without torch and torchvision in $PY.
# Usage: bench/grad_comm.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=grad_comm
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

if ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
  echo "grad comm: skipped ($PY cannot import torch and torchvision: pip install torch torchvision)"
  exit 0
fi
"$PY" "$(dirname "$0")/export_resnet18.py" "$bench_tmp/resnet18.onnx" "$bench_tmp/data.npz" 2>/dev/null
data=$bench_tmp/data.npz
wires=(fp32 bf16 fp16)
for w in "${wires[@]}"; do
  "$bin/mpc-opt" "$bench_tmp/resnet18.onnx" --batch=8 --precision=fp32 --optimizer=sgd --lr=0.01 \
    --data-parallel --grad-comm-dtype=$w -o "$bench_tmp/$w.onnx"
done
ranks() { "$bin/mpc-run" --nproc-per-node=2 "$@" --data="$data" --quiet >/dev/null; }

declare -A ms distance
steps=12
for round in 1 2 3; do
  for w in "${wires[@]}"; do
    ranks "$bench_tmp/$w.onnx" --steps=$steps --log="$bench_tmp/$w.csv"
    ms[$w]+="$(median_log_ms "$bench_tmp/$w.csv" 2) "
  done
done
for w in "${wires[@]}"; do
  distance[$w]=$(paste -d, "$bench_tmp/$w.csv" "$bench_tmp/fp32.csv" | tail -n +2 | head -n 10 |
    awk -F, '{d = ($2 - $7) / $7; if (d < 0) d = -d; m = d > m ? d : m} END{printf "%.2g", m}')
done

echo "== gradient communication: resnet18 (32x32), fp32 SGD, 2 ranks x 8 images over TCP ($(bench_machine_line))"
printf '%-10s %14s %16s %22s\n' "wire" "ms per step" "vs fp32 (paired)" "loss vs fp32, 10 steps"
for w in "${wires[@]}"; do
  read -r m _ _ <<<"$(median_min_max ${ms[$w]})"
  read -r r rmin rmax <<<"$(paired_ratios "${ms[$w]}" "${ms[fp32]}")"
  printf '%-10s %14s %16s %22s\n' "$w" "$m" "$r ($rmin-$rmax)" "${distance[$w]}"
  bench_record model=resnet18 ranks=2 per_rank_batch=8 steps=$steps wire=$w "ms=$(json_list ${ms[$w]})" \
    ratio_to_fp32=$r loss_distance_10_steps=${distance[$w]}
done
bench_write_json "$json"
