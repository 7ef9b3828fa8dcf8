#!/usr/bin/env bash
# Memory budget: the curve budget -> planned peak and -> recompute FLOPs of mpc-opt --memory-budget
# on an 8-block transformer stack (d 256, seq 128, batch 16; fp16, Adam), budgets as fractions of
# the stack's fp32 plan (its --report=memory fp32 baseline). Goal: 0.39 x the fp32 plan is met
# with at most one extra forward of FLOPs. Then the compile time of a budget on a ~10k-node step
# (64 blocks, small dims) against the same compile without one. A missed goal is reported, not an error.
# Usage: bench/memory_budget.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=memory_budget
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

stack=$bench_tmp/stack8.onnx
"$DEBIAN_PY" bench/make_transformer_stack.py --layers=8 --d=256 --seq=128 --batch=16 -o "$stack"
"$bin/mpc-opt" "$stack" -o "$bench_tmp/plain.onnx" --optimizer=adam --report-json="$bench_tmp/plain.json"
read -r fp32 plain < <("$DEBIAN_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["fp32_baseline"]["peak_bytes"], r["planned"]["peak_bytes"])' "$bench_tmp/plain.json")
echo "== 8-block transformer stack (d 256, seq 128, batch 16), fp16 + Adam: mpc-opt --memory-budget=B"
echo "   fp32 plan $fp32 bytes, fp16 plan without a budget $plain bytes ($(bench_machine_line))"
printf "%8s %12s %12s %8s %10s %10s %8s\n" budget/fp32 budget peak peak/fp32 recompute/fwd recompute/step ms
goal=MISS
for f in 0.80 0.70 0.60 0.55 0.50 0.45 0.42 0.39 0.37 0.35 0.33 0.30; do
  budget=$(awk -v a="$fp32" -v f="$f" 'BEGIN { printf "%d", a * f }')
  t0=$(date +%s%N)
  if "$bin/mpc-opt" "$stack" -o "$bench_tmp/b.onnx" --optimizer=adam --memory-budget="$budget" \
    --report-json="$bench_tmp/b.json" 2>"$bench_tmp/err"; then
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    read -r peak fwd rec frac < <("$DEBIAN_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["planned"]["peak_bytes"], r["flops"]["forward"], r["flops"]["recompute"], r["flops"]["recompute_fraction"])' "$bench_tmp/b.json")
    perfwd=$(awk -v a="$rec" -v b="$fwd" 'BEGIN { printf "%.3f", a / b }')
    printf "%8s %12s %12s %8s %10s %10.3f %8s\n" "$f" "$budget" "$peak" "$(ratio "$peak" "$fp32")" "$perfwd" "$frac" "$ms"
    bench_record budget_fraction="$f" budget_bytes="$budget" peak_bytes="$peak" fp32_plan_bytes="$fp32" \
      forward_flops="$fwd" recompute_flops="$rec" recompute_forwards="$perfwd" recompute_fraction_of_step="$frac" compile_ms="$ms"
    if [ "$f" = 0.39 ] && [ "$peak" -le "$budget" ] && awk -v x="$perfwd" 'BEGIN { exit !(x <= 1) }'; then goal=PASS; fi
  else
    printf "%8s %12s  %s\n" "$f" "$budget" "$(cat "$bench_tmp/err")"
    bench_record budget_fraction="$f" budget_bytes="$budget" fp32_plan_bytes="$fp32" error="$(cat "$bench_tmp/err")"
  fi
done
echo "goal 0.39 x fp32 plan met at <= 1 extra forward: $goal"
bench_record goal=budget_0.39_at_most_one_forward verdict="$goal"

# Compile time on a ~10k-node step: 64 blocks, small dims (the search's cost grows with the step).
big=$bench_tmp/stack64.onnx
"$DEBIAN_PY" bench/make_transformer_stack.py --layers=64 --d=64 --heads=4 --seq=32 --batch=8 --vocab=128 --hidden=256 -o "$big"
"$bin/mpc-opt" "$big" -o "$bench_tmp/big.onnx" --optimizer=adam --report-json="$bench_tmp/big.json" --stats 2>"$bench_tmp/big.stats"
nodes=$("$DEBIAN_PY" -c 'import onnx, sys; print(len(onnx.load(sys.argv[1]).training_info[0].algorithm.node))' "$bench_tmp/big.onnx")
read -r bigfp32 < <("$DEBIAN_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["fp32_baseline"]["peak_bytes"])' "$bench_tmp/big.json")
bigbudget=$(awk -v a="$bigfp32" 'BEGIN { printf "%d", a * 0.7 }')
plain_ms=$(time_ms "$bin/mpc-opt" "$big" -o "$bench_tmp/big.onnx" --optimizer=adam)
budget_ms=$(time_ms "$bin/mpc-opt" "$big" -o "$bench_tmp/big.onnx" --optimizer=adam --memory-budget="$bigbudget")
"$bin/mpc-opt" "$big" -o "$bench_tmp/big.onnx" --optimizer=adam --memory-budget="$bigbudget" --stats 2>"$bench_tmp/big.stats"
trials=$(sed -n 's/^recompute.budget_trials: //p' "$bench_tmp/big.stats")
bigpeak=$(sed -n 's/^plan-memory.peak_bytes: //p' "$bench_tmp/big.stats")
echo
echo "== compile time, 64-block stack ($nodes nodes in the step): without a budget ${plain_ms} ms, with"
echo "   --memory-budget=0.7 x fp32 plan ($bigbudget bytes, planned $bigpeak) ${budget_ms} ms, $trials plans tried"
bench_record model=stack64 step_nodes="$nodes" compile_ms_plain="$plain_ms" compile_ms_budget="$budget_ms" \
  budget_bytes="$bigbudget" peak_bytes="$bigpeak" planner_trials="$trials"
bench_write_json "$json"
