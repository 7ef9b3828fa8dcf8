#!/usr/bin/env bash
# CPU training step (issue 8 part 2): mpc-run's fp32 step on the CPU backend against
# PyTorch eager fp32 on the CPU (bench/torch_step.py: the same model with the same weights,
# the same batches, the same thread count), Adam lr 1e-3, median ms of STEPS steps after
# WARMUP, for the four model families and one transformer stack (4 blocks, d 128, seq 64,
# batch 8). Then mpc's fp16 and bf16 steps (emulated on the CPU) against its own fp32 step.
# Goals: mpc at least as fast as PyTorch on every family; fp16/bf16 within 1.5x of fp32.
# A second table gives the same steps in CPU time per step, which holds up on a loaded
# machine where the wall-clock medians do not.
# The PyTorch column is skipped with a line when torch is not importable.
# Usage: bench/cpu_step.sh [BUILD_DIR] [RESULTS.json]   (env STEPS, WARMUP, BENCH_THREADS)
set -euo pipefail
name=cpu_step
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin
steps=${STEPS:-30}
warmup=${WARMUP:-5}

have_torch=1
if ! "$PY" -c "import torch, onnx" 2>/dev/null; then
  have_torch=0
fi

stack=$bench_tmp/stack.onnx
"$DEBIAN_PY" bench/make_transformer_stack.py --layers=4 --d=128 --heads=4 --seq=64 --batch=8 \
  --vocab=256 --hidden=512 -o "$stack" --data-out="$bench_tmp/stack_data.npz" --samples=64
# family model data
runs=(
  "mlp_seed models/mlp_seed.onnx models/mlp_seed_data.npz"
  "cnn models/cnn.onnx models/cnn_data.npz"
  "transformer models/transformer.onnx models/transformer_data.npz"
  "resmlp models/resmlp.onnx models/resmlp_data.npz"
  "stack $stack $bench_tmp/stack_data.npz"
)

# CPU seconds (user + system) that the command takes (its output is discarded).
cpu_s() {
  local TIMEFORMAT='%U %S' t
  t=$({ time "$@" >/dev/null 2>&1; } 2>&1)
  awk -v t="$t" 'BEGIN{split(t, a, " "); printf "%.6f", a[1] + a[2]}'
}

# "median-step-ms first-loss last-loss cpu-ms" of mpc-run on MODEL DATA PRECISION. cpu-ms is
# the CPU time per timed step: that of WARMUP + STEPS steps less that of WARMUP steps (the
# loading cancels out), over STEPS; the machine's other processes disturb it far less than
# the wall clock. "n/a" below 0.1 s of difference, where the kernel's CPU accounting is too
# coarse (the small models' steps take microseconds).
mpc_step() {
  local step=$bench_tmp/$(basename "$1" .onnx).$3.onnx log=$bench_tmp/log.csv
  "$bin/mpc-opt" "$1" -o "$step" --precision="$3" --optimizer=adam --lr=1e-3
  local c0 c1
  c0=$(cpu_s "$bin/mpc-run" "$step" --device=cpu --data="$2" --steps="$warmup" --quiet)
  c1=$(cpu_s "$bin/mpc-run" "$step" --device=cpu --data="$2" --steps=$((warmup + steps)) --log="$log" --quiet)
  echo "$(median_log_ms "$log" "$warmup") $(sed -n 2p "$log" | cut -d, -f2) $(tail -1 "$log" | cut -d, -f2)" \
    "$(awk -v a="$c0" -v b="$c1" -v n="$steps" 'BEGIN{if (b - a < 0.1) print "n/a"; else printf "%.3f", (b - a) * 1000 / n}')"
}

echo "== CPU step, Adam, median ms of $steps steps after $warmup ($(bench_machine_line))"
printf "%-12s %6s %10s %10s %9s %10s %10s %9s %9s %s\n" model batch mpc-fp32 torch-fp32 mpc/torch \
  mpc-fp16 mpc-bf16 fp16/32 bf16/32 "first loss mpc / torch, mpc fp32 last"
all_faster=PASS
all_within=PASS
cpu_faster=PASS
cpu_within=PASS
cpu_rows=()
for run in "${runs[@]}"; do
  read -r family model data <<<"$run"
  batch=$("$DEBIAN_PY" -c 'import onnx, sys; print(onnx.load(sys.argv[1]).graph.input[0].type.tensor_type.shape.dim[0].dim_value)' "$model")
  read -r fp32 mpc_first mpc_last cpu32 < <(mpc_step "$model" "$data" fp32)
  read -r fp16 _ fp16_last cpu16 < <(mpc_step "$model" "$data" fp16)
  read -r bf16 _ bf16_last cpub16 < <(mpc_step "$model" "$data" bf16)
  torch_ms=n/a
  torch_first=n/a
  torch_cpu=n/a
  if [ $have_torch = 1 ]; then
    out=$("$PY" bench/torch_step.py "$family" "$model" "$data" --steps="$steps" --warmup="$warmup" \
      --threads="$BENCH_THREADS" --optimizer=adam --lr=1e-3)
    read -r torch_ms torch_first torch_cpu < <("$DEBIAN_PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print("%.3f %.8g %.3f" % (r["median_ms"], r["first_loss"], r["mean_cpu_ms"]))' "$out")
  fi
  vs_torch=$(ratio "$fp32" "$torch_ms")
  r16=$(ratio "$fp16" "$fp32")
  rb16=$(ratio "$bf16" "$fp32")
  cpu_vs_torch=$(ratio "$cpu32" "$torch_cpu")
  cpu_r16=$(ratio "$cpu16" "$cpu32")
  cpu_rb16=$(ratio "$cpub16" "$cpu32")
  [ "$(verdict "$vs_torch" 1 'a <= b')" = FAIL ] && all_faster=FAIL
  [ "$(verdict "$r16" 1.5 'a <= b')" = FAIL ] && all_within=FAIL
  [ "$(verdict "$rb16" 1.5 'a <= b')" = FAIL ] && all_within=FAIL
  [ "$(verdict "$cpu_vs_torch" 1 'a <= b')" = FAIL ] && cpu_faster=FAIL
  [ "$(verdict "$cpu_r16" 1.5 'a <= b')" = FAIL ] && cpu_within=FAIL
  [ "$(verdict "$cpu_rb16" 1.5 'a <= b')" = FAIL ] && cpu_within=FAIL
  printf "%-12s %6s %10s %10s %9s %10s %10s %9s %9s %s\n" "$family" "$batch" "$fp32" "$torch_ms" "$vs_torch" \
    "$fp16" "$bf16" "$r16" "$rb16" "$mpc_first / $torch_first, $mpc_last"
  cpu_rows+=("$(printf "%-12s %6s %10s %10s %9s %10s %10s %9s %9s" "$family" "$batch" "$cpu32" "$torch_cpu" \
    "$cpu_vs_torch" "$cpu16" "$cpub16" "$cpu_r16" "$cpu_rb16")")
  bench_record model="$family" batch="$batch" mpc_fp32_ms="$fp32" torch_fp32_ms="$([ $have_torch = 1 ] && echo "$torch_ms" || echo null)" \
    mpc_vs_torch="$vs_torch" mpc_fp16_ms="$fp16" mpc_bf16_ms="$bf16" fp16_vs_fp32="$r16" bf16_vs_fp32="$rb16" \
    mpc_fp32_cpu_ms="$cpu32" torch_fp32_cpu_ms="$([ $have_torch = 1 ] && echo "$torch_cpu" || echo null)" \
    cpu_mpc_vs_torch="$cpu_vs_torch" mpc_fp16_cpu_ms="$cpu16" mpc_bf16_cpu_ms="$cpub16" \
    cpu_fp16_vs_fp32="$cpu_r16" cpu_bf16_vs_fp32="$cpu_rb16" \
    mpc_first_loss="$mpc_first" torch_first_loss="$torch_first" mpc_fp32_last_loss="$mpc_last" \
    mpc_fp16_last_loss="$fp16_last" mpc_bf16_last_loss="$bf16_last" steps=$((warmup + steps))
done
echo "(mpc/torch < 1: mpc is faster; the first losses agree when both train the same model on the same batch)"
echo "== the same steps in CPU ms per step (user + system; mean of the $steps timed steps)"
printf "%-12s %6s %10s %10s %9s %10s %10s %9s %9s\n" model batch mpc-fp32 torch-fp32 mpc/torch \
  mpc-fp16 mpc-bf16 fp16/32 bf16/32
printf '%s\n' "${cpu_rows[@]}"
if [ $have_torch = 1 ]; then
  echo "goal mpc fp32 at least as fast as PyTorch eager fp32 on every model: $all_faster (CPU time: $cpu_faster)"
else
  all_faster=n/a
  cpu_faster=n/a
  echo "torch is not importable by $PY: the PyTorch column is skipped (pip install torch onnx)"
fi
echo "goal fp16 and bf16 within 1.5x of mpc fp32 on every model: $all_within (CPU time: $cpu_within)"
bench_record goal=mpc_vs_torch limit=1 verdict="$all_faster"
bench_record goal=half_vs_fp32 limit=1.5 verdict="$all_within"
bench_record goal=cpu_mpc_vs_torch limit=1 verdict="$cpu_faster"
bench_record goal=cpu_half_vs_fp32 limit=1.5 verdict="$cpu_within"
bench_write_json "$json"
