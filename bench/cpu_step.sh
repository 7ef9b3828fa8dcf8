#!/usr/bin/env bash
# CPU training step (issue 8 part 2): mpc-run's fp32 step on the CPU backend against
# PyTorch eager fp32 on the CPU (bench/torch_step.py: the same model with the same weights,
# the same batches, the same thread count), Adam lr 1e-3, median ms of STEPS steps after
# WARMUP, for the four model families and one transformer stack (4 blocks, d 128, seq 64,
# batch 8). Then mpc's fp16 and bf16 steps (emulated on the CPU) against its own fp32 step.
# Goals: mpc at least as fast as PyTorch on every family; fp16/bf16 within 1.5x of fp32.
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

# "median-step-ms first-loss last-loss" of mpc-run on MODEL DATA PRECISION.
mpc_step() {
  local step=$bench_tmp/$(basename "$1" .onnx).$3.onnx log=$bench_tmp/log.csv
  "$bin/mpc-opt" "$1" -o "$step" --precision="$3" --optimizer=adam --lr=1e-3
  "$bin/mpc-run" "$step" --data="$2" --steps=$((warmup + steps)) --log="$log" --quiet >/dev/null
  echo "$(median_log_ms "$log" "$warmup") $(sed -n 2p "$log" | cut -d, -f2) $(tail -1 "$log" | cut -d, -f2)"
}

echo "== CPU step, Adam, median ms of $steps steps after $warmup ($(bench_machine_line))"
printf "%-12s %6s %10s %10s %9s %10s %10s %9s %9s %s\n" model batch mpc-fp32 torch-fp32 mpc/torch \
  mpc-fp16 mpc-bf16 fp16/32 bf16/32 "first loss mpc / torch, mpc fp32 last"
all_faster=PASS
all_within=PASS
for run in "${runs[@]}"; do
  read -r family model data <<<"$run"
  batch=$("$DEBIAN_PY" -c 'import onnx, sys; print(onnx.load(sys.argv[1]).graph.input[0].type.tensor_type.shape.dim[0].dim_value)' "$model")
  read -r fp32 mpc_first mpc_last < <(mpc_step "$model" "$data" fp32)
  read -r fp16 _ fp16_last < <(mpc_step "$model" "$data" fp16)
  read -r bf16 _ bf16_last < <(mpc_step "$model" "$data" bf16)
  torch_ms=n/a
  torch_first=n/a
  if [ $have_torch = 1 ]; then
    out=$("$PY" bench/torch_step.py "$family" "$model" "$data" --steps="$steps" --warmup="$warmup" \
      --threads="$BENCH_THREADS" --optimizer=adam --lr=1e-3)
    read -r torch_ms torch_first < <("$DEBIAN_PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print("%.3f %.8g" % (r["median_ms"], r["first_loss"]))' "$out")
  fi
  vs_torch=$(ratio "$fp32" "$torch_ms")
  r16=$(ratio "$fp16" "$fp32")
  rb16=$(ratio "$bf16" "$fp32")
  [ "$(verdict "$vs_torch" 1 'a <= b')" = FAIL ] && all_faster=FAIL
  [ "$(verdict "$r16" 1.5 'a <= b')" = FAIL ] && all_within=FAIL
  [ "$(verdict "$rb16" 1.5 'a <= b')" = FAIL ] && all_within=FAIL
  printf "%-12s %6s %10s %10s %9s %10s %10s %9s %9s %s\n" "$family" "$batch" "$fp32" "$torch_ms" "$vs_torch" \
    "$fp16" "$bf16" "$r16" "$rb16" "$mpc_first / $torch_first, $mpc_last"
  bench_record model="$family" batch="$batch" mpc_fp32_ms="$fp32" torch_fp32_ms="$([ $have_torch = 1 ] && echo "$torch_ms" || echo null)" \
    mpc_vs_torch="$vs_torch" mpc_fp16_ms="$fp16" mpc_bf16_ms="$bf16" fp16_vs_fp32="$r16" bf16_vs_fp32="$rb16" \
    mpc_first_loss="$mpc_first" torch_first_loss="$torch_first" mpc_fp32_last_loss="$mpc_last" \
    mpc_fp16_last_loss="$fp16_last" mpc_bf16_last_loss="$bf16_last" steps=$((warmup + steps))
done
echo "(mpc/torch < 1: mpc is faster; the first losses agree when both train the same model on the same batch)"
if [ $have_torch = 1 ]; then
  echo "goal mpc fp32 at least as fast as PyTorch eager fp32 on every model: $all_faster"
else
  all_faster=n/a
  echo "torch is not importable by $PY: the PyTorch column is skipped (pip install torch onnx)"
fi
echo "goal fp16 and bf16 within 1.5x of mpc fp32 on every model: $all_within"
bench_record goal=mpc_vs_torch limit=1 verdict="$all_faster"
bench_record goal=half_vs_fp32 limit=1.5 verdict="$all_within"
bench_write_json "$json"
