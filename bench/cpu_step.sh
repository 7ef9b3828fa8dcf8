#!/usr/bin/env bash
# CPU training step (issue 8 part 2): mpc-run's fp32 step on the CPU backend against
# PyTorch eager fp32 on the CPU (bench/torch_step.py: the same model with the same weights,
# the same batches, the same thread count), Adam lr 1e-3, for the four model families, the two
# made of torch.nn's own modules (models/make_torch_modules_models.py: nn.TransformerEncoderLayer
# under a causal mask; a CNN with GroupNorm and InstanceNorm2d; an MLP through nine activations;
# a contrastive head through F.normalize, logsumexp, amin and an L1 norm; an encoder-decoder
# through F.interpolate's nearest and bilinear modes; attention written with torch.einsum; an
# LSTM and a GRU)
# and one transformer stack
# (4 blocks, d 128, seq 64, batch 8). Then mpc's fp16 and bf16 steps
# (emulated on the CPU) against its own fp32 step.
# Goals: mpc at least as fast as PyTorch on every family; fp16/bf16 within 1.5x of fp32.
#
# A small model's step takes 10-50 us; on this shared 2-core machine a step's time jumps
# between regimes about 1.5x apart that last 0.1-0.5 s, so one process's median of 30 steps
# lay wholly in one of them (cnn fp16/fp32 read 1.54 in one run and 0.74 in the next). So,
# per model:
# - each process times enough steps to run STEP_SECONDS (a short fp32 calibration run sets
#   the count, at least MIN_STEPS; tens of thousands for the small models), after WARMUP;
# - ROUNDS rounds, each one process per precision and a PyTorch measurement, one after
#   another, the order rotating from round to round: a drift in the machine's load hits all
#   of a round alike, and the ratios (fp16/fp32, mpc/PyTorch) are taken within each round
#   (paired) and reported as their median over the rounds and their spread (min-max);
# - PyTorch runs as one process per model (`import torch` takes seconds) that answers a
#   request per round (torch_step.py --serve).
# Each value is the median over the rounds of each process's median step ms. A second table
# gives CPU ms per step (user + system): for mpc, a process's CPU time less that of a process
# of WARMUP steps only (the loading cancels out) over the timed steps, which with the step
# counts above is well over the 1 ms resolution of bash's time; PyTorch's is measured in
# process, around each step. The verdicts are on the medians of the paired ratios; each
# names the worst single round beside it.
# The PyTorch column is skipped with a line when torch is not importable.
# Usage: bench/cpu_step.sh [BUILD_DIR] [RESULTS.json]
#   env ROUNDS (5), WARMUP (5 steps), STEP_SECONDS (0.4: timed seconds per process),
#   MIN_STEPS (30), STEPS (a fixed number of timed steps for every model instead of the
#   calibration), FAMILIES (the models to run, by name; default all), BENCH_THREADS (lib.sh). 170-200 s on the shared 2-core machine at load
#   3-7; ROUNDS=11 STEP_SECONDS=0.15 MIN_STEPS=10 (more, shorter rounds) took 260 s at load 7.
set -euo pipefail
name=cpu_step
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin
rounds=${ROUNDS:-5}
warmup=${WARMUP:-5}
step_seconds=${STEP_SECONDS:-0.4}
min_steps=${MIN_STEPS:-30}
fixed_steps=${STEPS:-}

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
  "encoder_layer models/encoder_layer.onnx models/encoder_layer_data.npz"
  "norm_cnn models/norm_cnn.onnx models/norm_cnn_data.npz"
  "act_mlp models/act_mlp.onnx models/act_mlp_data.npz"
  "reduce_head models/reduce_head.onnx models/reduce_head_data.npz"
  "resize_cnn models/resize_cnn.onnx models/resize_cnn_data.npz"
  "einsum_attn models/einsum_attn.onnx models/einsum_attn_data.npz"
  "rnn_lm models/rnn_lm.onnx models/rnn_lm_data.npz"
)
# The model-library architectures (models/make_library_models.py): PyTorch builds them with
# torchvision and transformers, so they run where those import (pip install torchvision transformers).
library=(gpt2_tiny llama_tiny swin_tiny convnext_tiny)
if [ $have_torch = 0 ] || "$PY" -c "import torchvision, transformers" 2>/dev/null; then
  for f in "${library[@]}"; do runs+=("$f models/$f.onnx models/${f}_data.npz"); done
else
  echo "torchvision or transformers is not importable by $PY: ${library[*]} are skipped" \
    "(pip install torchvision transformers)"
fi
runs+=("stack $stack $bench_tmp/stack_data.npz")
if [ -n "${FAMILIES:-}" ]; then # a subset, e.g. FAMILIES="encoder_layer norm_cnn"
  chosen=()
  for run in "${runs[@]}"; do
    [[ " $FAMILIES " == *" ${run%% *} "* ]] && chosen+=("$run")
  done
  runs=("${chosen[@]}")
fi

# CPU seconds (user + system) that the command takes (its output is discarded).
cpu_s() {
  local TIMEFORMAT='%3U %3S' t
  t=$({ time "$@" >/dev/null 2>&1; } 2>&1)
  awk -v t="$t" 'BEGIN{split(t, a, " "); printf "%.6f", a[1] + a[2]}'
}

# Timed steps per process for the step STEP on DATA: STEPS when set, else enough for
# STEP_SECONDS by the median of a short run (at least MIN_STEPS). The one count serves every
# precision and round, so that all of them train through the same batches.
timed_steps() {
  if [ -n "$fixed_steps" ]; then
    echo "$fixed_steps"
    return
  fi
  "$bin/mpc-run" "$1" --device=cpu --data="$2" --steps=$((warmup + 10)) --log="$bench_tmp/calibrate.csv" --quiet >/dev/null
  awk -v ms="$(median_log_ms "$bench_tmp/calibrate.csv" "$warmup")" -v s="$step_seconds" -v lo="$min_steps" \
    'BEGIN{n = int(s * 1000 / (ms > 0.001 ? ms : 0.001)) + 1; print (n > lo ? n : lo)}'
}

# "median-step-ms cpu-ms" of one mpc-run process of WARMUP + N steps of STEP on DATA, its log
# in LOG. cpu-ms is the CPU time per timed step: that of the process less that of one of WARMUP
# steps (both write the log), over N; "n/a" below 0.1 s of difference, where the kernel's
# accounting would be a coarse part of it.
mpc_measure() {
  local c0 c1
  c0=$(cpu_s "$bin/mpc-run" "$1" --device=cpu --data="$2" --steps="$warmup" --log="$4" --quiet)
  c1=$(cpu_s "$bin/mpc-run" "$1" --device=cpu --data="$2" --steps=$((warmup + $3)) --log="$4" --quiet)
  echo "$(median_log_ms "$4" "$warmup")" \
    "$(awk -v a="$c0" -v b="$c1" -v n="$3" "$bench_awk_fmt"'BEGIN{if (b - a < 0.1) print "n/a"; else print fmt((b - a) * 1000 / n)}')"
}

# The largest of the arguments that are numbers ("n/a" when none is).
largest() {
  local v nums=()
  for v in "$@"; do [ "$v" = n/a ] || nums+=("$v"); done
  [ ${#nums[@]} -gt 0 ] && median_min_max "${nums[@]}" | cut -d' ' -f3 || echo n/a
}

# The argument, or null (JSON) when torch is not there.
null_without_torch() {
  [ $have_torch = 1 ] && echo "$1" || echo null
}

# "median (min-max)" of a median_min_max triple, for the tables.
with_spread() {
  [ "$1" = n/a ] && echo n/a || echo "$1 ($2-$3)"
}

row_format="%-12s %5s %12s %9s %9s %20s %9s %9s %20s %20s"
echo "== CPU step, Adam: median over $rounds rounds of each process's median wall ms (N timed steps" \
  "after $warmup; mpc/PyTorch N below), paired ratios: median (min-max) over the rounds ($(bench_machine_line))"
printf "$row_format %s\n" model batch N mpc-fp32 torch-fp32 mpc/torch mpc-fp16 mpc-bf16 fp16/32 bf16/32 \
  "first loss mpc / torch, mpc fp32 last"
all_faster=PASS
all_within=PASS
cpu_faster=PASS
cpu_within=PASS
worst_vs_torch=0
worst_half=0
cpu_worst_vs_torch=0
cpu_worst_half=0
cpu_rows=()
kinds=(fp32 fp16 bf16 torch)
for run in "${runs[@]}"; do
  read -r family model data <<<"$run"
  batch=$("$DEBIAN_PY" -c 'import onnx, sys; print(onnx.load(sys.argv[1]).graph.input[0].type.tensor_type.shape.dim[0].dim_value)' "$model")
  for p in fp32 fp16 bf16; do
    "$bin/mpc-opt" "$model" -o "$bench_tmp/$family.$p.onnx" --precision="$p" --optimizer=adam --lr=1e-3
  done
  n=$(timed_steps "$bench_tmp/$family.fp32.onnx" "$data")
  if [ $have_torch = 1 ]; then
    coproc TORCH { "$PY" bench/torch_step.py "$family" "$model" "$data" --serve --warmup="$warmup" \
      --steps="${fixed_steps:-$min_steps}" --min-seconds="$([ -n "$fixed_steps" ] && echo 0 || echo "$step_seconds")" \
      --threads="$BENCH_THREADS" --optimizer=adam --lr=1e-3; }
    torch_pid=$TORCH_PID torch_in=${TORCH[1]} torch_out=${TORCH[0]}
  fi
  # Per kind, the rounds' values in round order (space-separated).
  declare -A wall=() cpu=()
  torch_first=n/a
  torch_n=n/a
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ${#kinds[@]}; k++)); do
      kind=${kinds[(r + k) % ${#kinds[@]}]}
      if [ "$kind" != torch ]; then
        read -r w c < <(mpc_measure "$bench_tmp/$family.$kind.onnx" "$data" "$n" "$bench_tmp/$family.$kind.csv")
      elif [ $have_torch = 1 ]; then
        echo round >&"$torch_in"
        read -r out <&"$torch_out"
        read -r w c torch_first torch_n < <("$DEBIAN_PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print("%.4g %.4g %.8g %d" % (r["median_ms"], r["mean_cpu_ms"], r["first_loss"], r["steps"]))' "$out")
      else
        w=n/a c=n/a
      fi
      wall[$kind]+="$w "
      cpu[$kind]+="$c "
    done
  done
  if [ $have_torch = 1 ]; then
    exec {torch_in}>&- # the end of its input: it exits
    wait "$torch_pid"
  fi
  # The losses and skipped steps of the last round's processes (every round trains the same
  # steps); a skipped step (fp16's loss scaling) does no update and takes less time.
  mpc_first=$(sed -n 2p "$bench_tmp/$family.fp32.csv" | cut -d, -f2)
  declare -A last=() skipped=()
  for p in fp32 fp16 bf16; do
    last[$p]=$(tail -1 "$bench_tmp/$family.$p.csv" | cut -d, -f2)
    skipped[$p]=$(awk -F, 'NR > 1 {s += $4} END {print s + 0}' "$bench_tmp/$family.$p.csv")
  done
  # "median min max" of each column and of each paired ratio.
  read -r fp32 _ <<<"$(median_min_max ${wall[fp32]})"
  read -r fp16 _ <<<"$(median_min_max ${wall[fp16]})"
  read -r bf16 _ <<<"$(median_min_max ${wall[bf16]})"
  read -r torch_ms _ <<<"$(median_min_max ${wall[torch]})"
  read -r vs_torch vs_torch_min vs_torch_max <<<"$(paired_ratios "${wall[fp32]}" "${wall[torch]}")"
  read -r r16 r16_min r16_max <<<"$(paired_ratios "${wall[fp16]}" "${wall[fp32]}")"
  read -r rb16 rb16_min rb16_max <<<"$(paired_ratios "${wall[bf16]}" "${wall[fp32]}")"
  read -r cpu32 _ <<<"$(median_min_max ${cpu[fp32]})"
  read -r cpu16 _ <<<"$(median_min_max ${cpu[fp16]})"
  read -r cpub16 _ <<<"$(median_min_max ${cpu[bf16]})"
  read -r torch_cpu _ <<<"$(median_min_max ${cpu[torch]})"
  read -r cpu_vs_torch cpu_vs_torch_min cpu_vs_torch_max <<<"$(paired_ratios "${cpu[fp32]}" "${cpu[torch]}")"
  read -r cpu_r16 cpu_r16_min cpu_r16_max <<<"$(paired_ratios "${cpu[fp16]}" "${cpu[fp32]}")"
  read -r cpu_rb16 cpu_rb16_min cpu_rb16_max <<<"$(paired_ratios "${cpu[bf16]}" "${cpu[fp32]}")"
  [ "$(verdict "$vs_torch" 1 'a <= b')" = FAIL ] && all_faster=FAIL
  [ "$(verdict "$r16" 1.5 'a <= b')" = FAIL ] && all_within=FAIL
  [ "$(verdict "$rb16" 1.5 'a <= b')" = FAIL ] && all_within=FAIL
  [ "$(verdict "$cpu_vs_torch" 1 'a <= b')" = FAIL ] && cpu_faster=FAIL
  [ "$(verdict "$cpu_r16" 1.5 'a <= b')" = FAIL ] && cpu_within=FAIL
  [ "$(verdict "$cpu_rb16" 1.5 'a <= b')" = FAIL ] && cpu_within=FAIL
  worst_vs_torch=$(largest "$worst_vs_torch" "$vs_torch_max")
  cpu_worst_vs_torch=$(largest "$cpu_worst_vs_torch" "$cpu_vs_torch_max")
  worst_half=$(largest "$worst_half" "$r16_max" "$rb16_max")
  cpu_worst_half=$(largest "$cpu_worst_half" "$cpu_r16_max" "$cpu_rb16_max")
  printf "$row_format %s\n" "$family" "$batch" "$n/$torch_n" "$fp32" "$torch_ms" \
    "$(with_spread "$vs_torch" "$vs_torch_min" "$vs_torch_max")" "$fp16" "$bf16" \
    "$(with_spread "$r16" "$r16_min" "$r16_max")" "$(with_spread "$rb16" "$rb16_min" "$rb16_max")" \
    "$mpc_first / $torch_first, ${last[fp32]}"
  cpu_rows+=("$(printf "$row_format" "$family" "$batch" "$n/$torch_n" "$cpu32" "$torch_cpu" \
    "$(with_spread "$cpu_vs_torch" "$cpu_vs_torch_min" "$cpu_vs_torch_max")" "$cpu16" "$cpub16" \
    "$(with_spread "$cpu_r16" "$cpu_r16_min" "$cpu_r16_max")" "$(with_spread "$cpu_rb16" "$cpu_rb16_min" "$cpu_rb16_max")")")
  bench_record model="$family" batch="$batch" mpc_fp32_ms="$fp32" torch_fp32_ms="$(null_without_torch "$torch_ms")" \
    mpc_vs_torch="$vs_torch" mpc_fp16_ms="$fp16" mpc_bf16_ms="$bf16" fp16_vs_fp32="$r16" bf16_vs_fp32="$rb16" \
    mpc_fp32_cpu_ms="$cpu32" torch_fp32_cpu_ms="$(null_without_torch "$torch_cpu")" \
    cpu_mpc_vs_torch="$cpu_vs_torch" mpc_fp16_cpu_ms="$cpu16" mpc_bf16_cpu_ms="$cpub16" \
    cpu_fp16_vs_fp32="$cpu_r16" cpu_bf16_vs_fp32="$cpu_rb16" \
    mpc_first_loss="$mpc_first" torch_first_loss="$torch_first" mpc_fp32_last_loss="${last[fp32]}" \
    mpc_fp16_last_loss="${last[fp16]}" mpc_bf16_last_loss="${last[bf16]}" steps=$((warmup + n)) \
    rounds="$rounds" warmup="$warmup" timed_steps="$n" torch_timed_steps="$(null_without_torch "$torch_n")" \
    mpc_fp16_skipped="${skipped[fp16]}" mpc_bf16_skipped="${skipped[bf16]}" \
    mpc_vs_torch_min="$vs_torch_min" mpc_vs_torch_max="$vs_torch_max" \
    fp16_vs_fp32_min="$r16_min" fp16_vs_fp32_max="$r16_max" bf16_vs_fp32_min="$rb16_min" bf16_vs_fp32_max="$rb16_max" \
    cpu_mpc_vs_torch_min="$cpu_vs_torch_min" cpu_mpc_vs_torch_max="$cpu_vs_torch_max" \
    cpu_fp16_vs_fp32_min="$cpu_r16_min" cpu_fp16_vs_fp32_max="$cpu_r16_max" \
    cpu_bf16_vs_fp32_min="$cpu_rb16_min" cpu_bf16_vs_fp32_max="$cpu_rb16_max" \
    mpc_fp32_ms_rounds="$(json_list ${wall[fp32]})" mpc_fp16_ms_rounds="$(json_list ${wall[fp16]})" \
    mpc_bf16_ms_rounds="$(json_list ${wall[bf16]})" torch_fp32_ms_rounds="$(json_list ${wall[torch]})" \
    mpc_fp32_cpu_ms_rounds="$(json_list ${cpu[fp32]})" mpc_fp16_cpu_ms_rounds="$(json_list ${cpu[fp16]})" \
    mpc_bf16_cpu_ms_rounds="$(json_list ${cpu[bf16]})" torch_fp32_cpu_ms_rounds="$(json_list ${cpu[torch]})"
done
echo "(mpc/torch < 1: mpc is faster; the first losses agree when both train the same model on the same batch)"
echo "== the same steps in CPU ms per step (user + system; mean over the timed steps; median over the rounds)"
printf "$row_format\n" model batch N mpc-fp32 torch-fp32 mpc/torch mpc-fp16 mpc-bf16 fp16/32 bf16/32
printf '%s\n' "${cpu_rows[@]}"
if [ $have_torch = 1 ]; then
  echo "goal mpc fp32 at least as fast as PyTorch eager fp32 on every model: $all_faster" \
    "(CPU time: $cpu_faster; worst single round $worst_vs_torch, CPU time $cpu_worst_vs_torch)"
else
  all_faster=n/a
  cpu_faster=n/a
  worst_vs_torch=n/a
  cpu_worst_vs_torch=n/a
  echo "torch is not importable by $PY: the PyTorch column is skipped (pip install torch onnx)"
fi
echo "goal fp16 and bf16 within 1.5x of mpc fp32 on every model: $all_within" \
  "(CPU time: $cpu_within; worst single round $worst_half, CPU time $cpu_worst_half)"
bench_record goal=mpc_vs_torch limit=1 verdict="$all_faster" rounds="$rounds" worst_round="$worst_vs_torch"
bench_record goal=half_vs_fp32 limit=1.5 verdict="$all_within" rounds="$rounds" worst_round="$worst_half"
bench_record goal=cpu_mpc_vs_torch limit=1 verdict="$cpu_faster" rounds="$rounds" worst_round="$cpu_worst_vs_torch"
bench_record goal=cpu_half_vs_fp32 limit=1.5 verdict="$cpu_within" rounds="$rounds" worst_round="$cpu_worst_half"
bench_write_json "$json"
