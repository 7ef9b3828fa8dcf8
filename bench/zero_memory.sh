#!/usr/bin/env bash
# --shard-optimizer's per-rank memory (ZeRO stages 1-2): a 4-block transformer stack
# (bench/make_transformer_stack.py, d=256, hidden 1024, vocab 1024: 3.7 M parameters), fp16 AdamW
# with dynamic loss scaling and --max-grad-norm=1, 2 sequences of 64 tokens per rank, over 1, 2 and 4
# ranks of mpc-run --nproc-per-node (the Gloo world). Per rank count, unsharded --data-parallel
# beside --shard-optimizer --world-size=N: the plan's optimizer state and persistent state and
# planned arena per rank (mpc-opt --report-json), rank 0's measured arena over 3 steps (mpc-run's
# "peak memory"), and whether the two runs log the same bits (loss, scale, skips, grad norm).
# Usage: bench/zero_memory.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=zero_memory
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

model=$bench_tmp/stack.onnx
"$DEBIAN_PY" bench/make_transformer_stack.py --layers=4 --d=256 --heads=4 --seq=64 --batch=2 \
  --vocab=1024 --hidden=1024 -o "$model" --data-out="$bench_tmp/data.npz" --samples=32
flags=(--precision=fp16 --optimizer=adamw --max-grad-norm=1 --data-parallel)
"$bin/mpc-opt" "$model" "${flags[@]}" -o "$bench_tmp/dp.onnx" --report-json="$bench_tmp/dp.json" >/dev/null
for n in 1 2 4; do
  "$bin/mpc-opt" "$model" "${flags[@]}" --shard-optimizer --world-size=$n -o "$bench_tmp/z$n.onnx" \
    --report-json="$bench_tmp/z$n.json" >/dev/null
done
# Field $2 of report $1's planned memory (by_class.optimizer_state, persistent_bytes, peak_bytes).
plan() {
  "$DEBIAN_PY" -c "import json, sys; d = json.load(open(sys.argv[1]))['planned']; k = sys.argv[2]; print(d['by_class'][k] if k in d['by_class'] else d[k])" "$1" "$2"
}
# Rank 0's measured arena (bytes) of an N-rank run of model $2; its log in $3.
measured() {
  "$bin/mpc-run" --nproc-per-node="$1" "$2" --data="$bench_tmp/data.npz" --steps=3 --log="$3" \
    --quiet | sed -n 's/.*peak memory .*(cpu; \([0-9]*\) bytes.*/\1/p'
}
mib() { awk -v b="$1" 'BEGIN{printf "%.2f", b / 1048576}'; }

echo "== --shard-optimizer: per-rank memory, transformer stack (3.7 M parameters), fp16 AdamW ($(bench_machine_line))"
printf '%-6s %-10s %16s %16s %14s %16s %10s\n' "ranks" "state" "optimizer MiB" "persistent MiB" "planned MiB" "measured MiB" "same bits"
for n in 1 2 4; do
  ran_dp=$(measured $n "$bench_tmp/dp.onnx" "$bench_tmp/dp$n.csv")
  ran_z=$(measured $n "$bench_tmp/z$n.onnx" "$bench_tmp/z$n.csv")
  same=false
  if diff <(cut -d, -f1-4,6 "$bench_tmp/dp$n.csv") <(cut -d, -f1-4,6 "$bench_tmp/z$n.csv") >/dev/null; then
    same=true
  fi
  for kind in dp z; do
    report=$bench_tmp/$kind.json
    ran=$ran_dp
    label=unsharded
    if [ $kind = z ]; then
      report=$bench_tmp/z$n.json
      ran=$ran_z
      label=sharded
    fi
    opt=$(plan "$report" optimizer_state)
    persistent=$(plan "$report" persistent_bytes)
    peak=$(plan "$report" peak_bytes)
    printf '%-6s %-10s %16s %16s %14s %16s %10s\n' $n $label "$(mib $opt)" "$(mib $persistent)" \
      "$(mib $peak)" "$(mib $ran)" $same
    bench_record ranks=$n state=$label optimizer_state_bytes=$opt persistent_bytes=$persistent \
      planned_arena_bytes=$peak measured_arena_bytes_rank0=$ran same_bits_as_unsharded=$same
  done
done
bench_write_json "$json"
