#!/usr/bin/env bash
# Memory (issue 6 part 2, issue 8 part 4 on the CPU): the planned step memory of the
# activation-dominated transformer block (1 layer, batch 32, seq 256, d 512, 8 heads,
# hidden 2048, vocab 512) compiled for fp16 with Adam, by class, next to the fp32 baseline
# (mpc-opt --report=memory). Goals: fp16 planned peak <= 0.55 x the fp32 planned peak, and
# <= 0.6 x the sum of all the step's tensor sizes without reuse. A missed goal is reported,
# not an error. Then, on the small models, mpc-run's measured CPU peak against the plan.
# Usage: bench/memory.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=memory
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

block=$bench_tmp/block.onnx
"$DEBIAN_PY" bench/make_transformer_stack.py --layers=1 --batch=32 --seq=256 --d=512 --heads=8 \
  --hidden=2048 --vocab=512 -o "$block"
echo "== planned memory: transformer block, batch 32, seq 256, d 512, 8 heads, hidden 2048, vocab 512;"
echo "   mpc-opt --precision=fp16 --optimizer=adam --report=memory ($(bench_machine_line))"
"$bin/mpc-opt" "$block" -o "$bench_tmp/block.train.onnx" --precision=fp16 --optimizer=adam \
  --report=memory --report-json="$bench_tmp/block.json"

# peak_fp16 peak_fp32 no_reuse_fp16 from the report
read -r peak16 peak32 noreuse16 < <("$DEBIAN_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["planned"]["peak_bytes"], r["fp32_baseline"]["peak_bytes"], r["planned"]["no_reuse_bytes"])' "$bench_tmp/block.json")
vs_fp32=$(ratio "$peak16" "$peak32")
vs_noreuse=$(ratio "$peak16" "$noreuse16")
goal1=$(verdict "$vs_fp32" 0.55 'a <= b')
goal2=$(verdict "$vs_noreuse" 0.6 'a <= b')
echo
echo "goal fp16 peak <= 0.55 x fp32 peak:     $peak16 / $peak32 = $vs_fp32  $goal1"
echo "goal fp16 peak <= 0.6 x no-reuse bytes: $peak16 / $noreuse16 = $vs_noreuse  $goal2"
[ "$goal1$goal2" = PASSPASS ] || echo "(a goal is missed: reported as measured, the script does not fail on it)"
"$DEBIAN_PY" - "$bench_tmp/block.json" >>"$bench_records" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
print(json.dumps({"model": "transformer_block_b32_t256_d512", "report": r}))
EOF
bench_record goal=fp16_vs_fp32_peak fp16_peak_bytes="$peak16" fp32_peak_bytes="$peak32" ratio="$vs_fp32" limit=0.55 verdict="$goal1"
bench_record goal=fp16_peak_vs_no_reuse fp16_peak_bytes="$peak16" no_reuse_bytes="$noreuse16" ratio="$vs_noreuse" limit=0.6 verdict="$goal2"

# The same block with the policy's opt-ins: the attention softmax stored in fp16
# (its math stays fp32 in the kernel), and activation recompute.
echo
echo "== variants of the block (planned peak, fp16 vs the fp32 baseline compiled alike, and vs"
echo "   the plain fp32 step: the default flags' fp32 baseline)"
printf "%-40s %12s %12s %7s %13s\n" flags fp16-MiB fp32-MiB ratio vs-plain-fp32
for flags in "" "--fp16-ops=Softmax" "--recompute=auto" "--fp16-ops=Softmax --recompute=auto"; do
  # shellcheck disable=SC2086
  "$bin/mpc-opt" "$block" -o "$bench_tmp/variant.onnx" --precision=fp16 --optimizer=adam $flags \
    --report-json="$bench_tmp/variant.json" >/dev/null
  read -r v16 v32 < <("$DEBIAN_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["planned"]["peak_bytes"], r["fp32_baseline"]["peak_bytes"])' "$bench_tmp/variant.json")
  printf "%-40s %12s %12s %7s %13s\n" "${flags:-(default)}" "$(awk -v b="$v16" 'BEGIN{printf "%.1f", b/1048576}')" \
    "$(awk -v b="$v32" 'BEGIN{printf "%.1f", b/1048576}')" "$(ratio "$v16" "$v32")" "$(ratio "$v16" "$peak32")"
  bench_record variant="${flags:-default}" fp16_peak_bytes="$v16" fp32_peak_bytes="$v32" ratio="$(ratio "$v16" "$v32")" \
    plain_fp32_peak_bytes="$peak32" ratio_vs_plain_fp32="$(ratio "$v16" "$peak32")"
done

echo
echo "== measured vs planned on the CPU: mpc-run --steps=3 peak against the plan (fp16, Adam)"
printf "%-12s %14s %14s %14s %14s %7s\n" model planned-bytes measured-bytes planned-live measured-live equal
for model in mlp_seed cnn transformer; do
  step=$bench_tmp/$model.train.onnx
  "$bin/mpc-opt" "models/$model.onnx" -o "$step" --precision=fp16 --optimizer=adam --report-json="$bench_tmp/$model.json"
  summary=$("$bin/mpc-run" "$step" --device=cpu --data="models/${model}_data.npz" --steps=3 --quiet | grep '^summary:')
  # "... peak memory X (cpu; N bytes, live M)"
  measured=$(sed -n 's/.*(cpu; \([0-9]*\) bytes, live \([0-9]*\)).*/\1 \2/p' <<<"$summary")
  read -r measured_peak measured_live <<<"${measured:-n/a n/a}"
  read -r planned_peak planned_live < <("$DEBIAN_PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))["planned"]
print(r["peak_bytes"], r["live_peak_bytes"])' "$bench_tmp/$model.json")
  equal=no
  [ "$measured_peak" = "$planned_peak" ] && [ "$measured_live" = "$planned_live" ] && equal=yes
  printf "%-12s %14s %14s %14s %14s %7s\n" "$model" "$planned_peak" "$measured_peak" "$planned_live" "$measured_live" "$equal"
  bench_record model="$model" planned_peak_bytes="$planned_peak" measured_peak_bytes="$measured_peak" \
    planned_live_bytes="$planned_live" measured_live_bytes="$measured_live" equal="$([ $equal = yes ] && echo true || echo false)"
done
bench_write_json "$json"
