#!/usr/bin/env bash
# GPU training step (issue 8 parts 3 and 4), run by tools/gpu-check.sh on a machine with a GPU:
# mpc-run --device=cuda against PyTorch AMP (autocast + GradScaler + fused Adam, CUDA) on the
# same transformer stack with the same weights and batches, at a size that fills the chip
# (default 12 blocks, d 768, 12 heads, hidden 3072, seq 512, batch 16, vocab 8192).
#
#   step      median ms of STEPS steps after WARMUP, fp16, Adam lr 1e-4, both sides; the ratio
#             mpc / torch (goal: below 1, faster than PyTorch AMP eager)
#   matmul    the step's matrix-product FLOPs (3x the forward's: the backward computes both
#             operand gradients; counted from the model's sizes) over the step time, against
#             the cuBLAS fp16 peak that mpc-gpu-gemm measures at 8192^3 on the same GPU: the
#             share of the peak the whole step reaches (a lower bound on the products' own rate)
#   optimizer mpc's unscale + Adam kernels over the model's parameters, bytes/s against a
#             device copy (mpc-gpu-optimizer)
#   compile   the same PyTorch AMP step with the module under torch.compile (inductor): the
#             stronger anchor; its compilation happens in the warm-up steps (COMPILE=0 skips it)
#   memory    mpc's planned peak (mpc-opt --report-json), its arenas' peak (mpc-run's summary) and the
#             device's measured peak (mpc-run's 'cuda memory:' line: cudaMemGetInfo, workspaces and libraries included)
#             against torch.cuda.max_memory_allocated() of the same step
#
# Prints a table and writes RESULTS.json. A missing PyTorch (or a PyTorch without CUDA) skips
# its column with a line. Usage: bench/gpu_step.sh BIN_DIR [RESULTS.json]
#   env: LAYERS D HEADS HIDDEN SEQ BATCH VOCAB STEPS WARMUP PRECISION (fp16|bf16);
#   STACK_MODEL and STACK_DATA: a model and data made for those sizes (the GPU bundle carries
#   them) instead of bench/make_transformer_stack.py's, which needs numpy and onnx;
#   PROFILE_STEPS=N (cuda) then runs the same compiled step N more steps with
#   MPC_CUDA_PROFILE=1 and prints its "cuda profile:" lines (per-op device times; that run
#   has no CUDA graphs and no part in the timings); DEVICE=cpu
#   runs both sides on the CPU (mpc's emulated precision against torch fp32) to try the
#   script on a machine without a GPU, at small sizes.
set -euo pipefail
name=gpu_step
bin=$(cd "${1:?usage: bench/gpu_step.sh BIN_DIR [RESULTS.json]}" && pwd)
json=$(realpath -m "${2:-bench/results/$name-$(date +%F).json}")
cd "$(dirname "$0")/.."
# On the GPU machine the python3 first on PATH holds numpy, onnx and torch.
DEBIAN_PY=${DEBIAN_PY:-python3}
source bench/lib.sh
layers=${LAYERS:-12} d=${D:-768} heads=${HEADS:-12} hidden=${HIDDEN:-3072}
seq=${SEQ:-512} batch=${BATCH:-16} vocab=${VOCAB:-8192}
steps=${STEPS:-20} warmup=${WARMUP:-5} precision=${PRECISION:-fp16} device=${DEVICE:-cuda}
amp=$precision
[ "$device" = cuda ] || amp=none

step=$bench_tmp/stack.$precision.onnx
if [ -n "${STACK_MODEL:-}" ] || [ -n "${STACK_DATA:-}" ]; then
  # Carried in the GPU bundle (tools/gpu-check.sh --bundle), made for the sizes above.
  model=${STACK_MODEL:?STACK_DATA needs STACK_MODEL too} data=${STACK_DATA:?STACK_MODEL needs STACK_DATA too}
  for f in "$model" "$data"; do
    [ -s "$f" ] || { echo "gpu_step: $f: no such file (STACK_MODEL/STACK_DATA)" >&2; exit 1; }
  done
else
  model=$bench_tmp/stack.onnx data=$bench_tmp/stack_data.npz
  "$DEBIAN_PY" bench/make_transformer_stack.py --layers="$layers" --d="$d" --heads="$heads" \
    --hidden="$hidden" --seq="$seq" --batch="$batch" --vocab="$vocab" -o "$model" \
    --data-out="$data" --samples=$((batch * 4))
fi
"$bin/mpc-opt" "$model" -o "$step" --precision="$precision" --optimizer=adam --lr=1e-4 \
  --report-json="$bench_tmp/memory.json" >/dev/null
planned=$("$DEBIAN_PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["planned"]["peak_bytes"])' \
  "$bench_tmp/memory.json")

echo "== GPU step: transformer stack, $layers blocks, d $d, $heads heads, hidden $hidden, seq $seq," \
  "batch $batch, vocab $vocab; $precision, Adam; median of $steps steps after $warmup"
log=$bench_tmp/mpc.csv
if ! run=$("$bin/mpc-run" "$step" --device="$device" --data="$data" --steps=$((warmup + steps)) \
  --log="$log" --quiet 2>&1); then
  echo "gpu_step: mpc-run failed: $(tail -n 1 <<<"$run")" >&2
  exit 1
fi
summary=$(grep '^summary:' <<<"$run" || true)
mpc_ms=$(median_log_ms "$log" "$warmup")
mpc_first=$(sed -n 2p "$log" | cut -d, -f2)
# The device's real peak: "cuda memory: ... measured device peak 1288490188 bytes (cudaMemGetInfo; ...)"
# (the arenas plus the shared workspace, cuBLAS's and cuDNN's own memory); the summary's "peak memory"
# is the planned arena, kept as arena_bytes.
measured=$(sed -nE 's/^cuda memory: .*measured device peak ([0-9]+) bytes.*/\1/p' <<<"$run")
arena=$(sed -nE 's/.*peak memory [^(]*\([a-z]+; ([0-9]+) bytes.*/\1/p' <<<"$summary")

# Where mpc's step time goes, per op and node: a separate run, graphs off.
if [ "${PROFILE_STEPS:-0}" -gt 0 ] && [ "$device" = cuda ]; then
  MPC_CUDA_PROFILE=1 "$bin/mpc-run" "$step" --device=cuda --data="$data" \
    --steps="$PROFILE_STEPS" --quiet 2>&1 | grep '^cuda profile:' || true
fi

# torch_run [--compile]: PyTorch's step (eager, or torch.compile's inductor), as
# "median_ms first_loss max_memory_allocated", or three n/a with a line saying why.
torch_run() {
  local out
  if ! out=$("$PY" bench/torch_step.py stack "$model" "$data" --device="$device" --amp="$amp" \
    --steps="$steps" --warmup="$warmup" --optimizer=adam --lr=1e-4 "$@" 2>"$bench_tmp/torch.err"); then
    echo "PyTorch $*: failed: $(tail -n 1 "$bench_tmp/torch.err")" >&2
    echo "n/a n/a n/a"
    return 0
  fi
  "$DEBIAN_PY" -c 'import json, sys; r = json.loads(sys.argv[1]); m = r["max_memory_allocated"]; print("%.3f %.8g %s" % (r["median_ms"], r["first_loss"], "n/a" if m is None else m))' "$out"
}
torch_ms=n/a torch_first=n/a torch_mem=n/a
compile_ms=n/a compile_first=n/a compile_mem=n/a
if "$PY" -c 'import sys, torch, onnx; sys.exit(0 if sys.argv[1] == "cpu" or torch.cuda.is_available() else 1)' "$device" 2>/dev/null; then
  read -r torch_ms torch_first torch_mem < <(torch_run)
  # torch.compile compiles during the warm-up steps (tens of seconds for 12 blocks); only the
  # steps after them are timed. COMPILE=0 leaves this column out.
  if [ "${COMPILE:-1}" != 0 ]; then
    read -r compile_ms compile_first compile_mem < <(torch_run --compile)
  fi
else
  echo "PyTorch with CUDA is not importable by $PY: its columns are skipped"
fi

# Matrix-product FLOPs of one step: per block q, k, v, o (4 d x d), the two attention
# products (B H T T dh each), fc1 and fc2 (d x hidden); the head (d x vocab); x3 for the
# backward's two operand gradients.
flops=$(awk -v L="$layers" -v d="$d" -v h="$hidden" -v T="$seq" -v B="$batch" -v V="$vocab" \
  'BEGIN{N = B * T; f = L * (2*N*d*d*4 + 2*2*B*T*T*d + 2*N*d*h*2) + 2*N*d*V; printf "%.0f", 3 * f}')
peak_tflops=n/a
if gemm=$("$bin/mpc-gpu-gemm" 2>/dev/null); then
  peak_tflops=$(awk -v p="$precision" '$1 == "gemm" && $2 == p && $3 == "8192^3" {print $4}' <<<"$gemm" | head -n 1)
  [ -n "$peak_tflops" ] || peak_tflops=n/a
fi
compile_tflops=$(awk -v f="$flops" -v ms="$compile_ms" 'BEGIN{if (ms != "n/a" && ms + 0 > 0) printf "%.3g", f / (ms * 1e-3) / 1e12; else print "n/a"}')
mpc_tflops=$(awk -v f="$flops" -v ms="$mpc_ms" 'BEGIN{if (ms + 0 > 0) printf "%.3g", f / (ms * 1e-3) / 1e12; else print "n/a"}')
torch_tflops=$(awk -v f="$flops" -v ms="$torch_ms" 'BEGIN{if (ms != "n/a" && ms + 0 > 0) printf "%.3g", f / (ms * 1e-3) / 1e12; else print "n/a"}')
opt=$("$bin/mpc-gpu-optimizer" --layers="$layers" --d="$d" --hidden="$hidden" --seq="$seq" \
  --vocab="$vocab" 2>&1 || true)

vs_torch=$(ratio "$mpc_ms" "$torch_ms")
vs_compile=$(ratio "$mpc_ms" "$compile_ms")
goal=$(verdict "$vs_torch" 1 'a < b')
goal_compile=$(verdict "$vs_compile" 1 'a < b')
mib() { awk -v b="$1" 'BEGIN{if (b == "" || b == "n/a") print "n/a"; else printf "%.1f", b / 1048576}'; }
printf "%-26s %12s %12s %9s %14s %9s\n" "" mpc torch mpc/torch torch.compile mpc/comp
printf "%-26s %12s %12s %9s %14s %9s\n" "step ms" "$mpc_ms" "$torch_ms" "$vs_torch" "$compile_ms" "$vs_compile"
printf "%-26s %12s %12s %9s %14s\n" "first loss" "$mpc_first" "$torch_first" "" "$compile_first"
printf "%-26s %12s %12s %9s %14s %9s\n" "matmul TFLOP/s (step)" "$mpc_tflops" "$torch_tflops" \
  "$(ratio "$mpc_tflops" "$torch_tflops")" "$compile_tflops" "$(ratio "$mpc_tflops" "$compile_tflops")"
printf "%-26s %12s %12s %9s %14s %9s\n" "peak memory MiB (measured)" "$(mib "$measured")" \
  "$(mib "$torch_mem")" "$(ratio "$measured" "$torch_mem")" "$(mib "$compile_mem")" "$(ratio "$measured" "$compile_mem")"
printf "%-26s %12s\n" "peak memory MiB (planned)" "$(mib "$planned")"
printf "%-26s %12s\n" "peak memory MiB (arenas)" "$(mib "$arena")"
echo "cuBLAS $precision peak at 8192^3: $peak_tflops TFLOP/s; the step reaches $(ratio "$mpc_tflops" "$peak_tflops") of it" \
  "(torch $(ratio "$torch_tflops" "$peak_tflops"), torch.compile $(ratio "$compile_tflops" "$peak_tflops")); $(awk -v f="$flops" 'BEGIN{printf "%.2f", f / 1e12}') TFLOP of products a step"
grep '^optimizer' <<<"$opt" || echo "mpc-gpu-optimizer failed: $(tail -n 1 <<<"$opt")"
echo "goal mpc faster than PyTorch AMP eager: $goal; than torch.compile (inductor) AMP: $goal_compile"

bench_record model=stack layers="$layers" d="$d" heads="$heads" hidden="$hidden" seq="$seq" \
  batch="$batch" vocab="$vocab" precision="$precision" steps="$steps" warmup="$warmup" \
  mpc_ms="$mpc_ms" torch_amp_ms="$torch_ms" mpc_vs_torch="$vs_torch" verdict="$goal" \
  mpc_first_loss="$mpc_first" torch_first_loss="$torch_first" matmul_flops_per_step="$flops" \
  mpc_step_tflops="$mpc_tflops" torch_step_tflops="$torch_tflops" cublas_peak_tflops="$peak_tflops" \
  mpc_planned_peak_bytes="$planned" mpc_measured_peak_bytes="${measured:-null}" mpc_arena_peak_bytes="${arena:-null}" \
  torch_max_memory_allocated="$torch_mem" torch_compile_ms="$compile_ms" \
  mpc_vs_torch_compile="$vs_compile" verdict_compile="$goal_compile" \
  torch_compile_first_loss="$compile_first" torch_compile_step_tflops="$compile_tflops" \
  torch_compile_max_memory_allocated="$compile_mem" \
  optimizer="$(grep '^optimizer' <<<"$opt" | tr '\n' ';' || true)"
bench_write_json "$json"
