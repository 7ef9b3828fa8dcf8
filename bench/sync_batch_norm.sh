#!/usr/bin/env bash
# --sync-batchnorm on a real batch-norm network: torchvision's resnet18 (10 classes, 32x32
# images, 20 batch norms; exported by torch.onnx's TorchScript exporter in training mode with
# a symbolic batch), fp32 SGD (lr 0.01), 2 ranks of 8 images against one process of 16:
#   - how far each run's loss lies from the one process's: at step 1 (the forward alone,
#     before any update: what the statistics change) and over 3 steps; next to the same
#     step compiled with --sync-batchnorm in one process (a world of one: the plain batch
#     norm up to the order of its sums), which shows how much a reordering alone moves
#     this network (batch norms over the 16 values of layer4's 1x1 maps amplify rounding),
#   - ms per step of the 2 ranks with and without --sync-batchnorm (fp32 and fp16; median
#     of each run's steps after 2 warm-up steps, median of 3 rounds, paired per round):
#     the price of the global statistics (3 all-reduces and 2 extra passes over X per
#     batch norm, 2 more passes in the backward); and, for scale, one process's step on
#     all 16 images (fp32, 1 thread): what 2 ranks gain on a network whose 42 MiB of
#     gradients cross ranks every step.
# Skipped with a line without mpirun and the MPI world plugin, or without torch and
# torchvision in $PY.
# Usage: bench/sync_batch_norm.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=sync_batch_norm
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

if ! command -v mpirun >/dev/null || [ ! -e "$bin/libmpc_mpi_world.so" ]; then
  echo "sync batch norm: skipped (no mpirun or no $bin/libmpc_mpi_world.so: apt-get install libopenmpi-dev openmpi-bin, rebuild)"
  exit 0
fi
if ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
  echo "sync batch norm: skipped ($PY cannot import torch and torchvision: pip install torch torchvision)"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

"$PY" "$(dirname "$0")/export_resnet18.py" "$bench_tmp/resnet18.onnx" "$bench_tmp/data.npz" 2>/dev/null
model=$bench_tmp/resnet18.onnx
data=$bench_tmp/data.npz
sgd=(--optimizer=sgd --lr=0.01)
compile() { "$bin/mpc-opt" "$model" "${sgd[@]}" "$@"; }
compile --batch=16 --precision=fp32 -o "$bench_tmp/one.onnx"
compile --batch=16 --precision=fp32 --data-parallel --sync-batchnorm -o "$bench_tmp/one_sync.onnx"
for p in fp32 fp16; do
  compile --batch=8 --precision=$p --data-parallel -o "$bench_tmp/local_$p.onnx"
  compile --batch=8 --precision=$p --data-parallel --sync-batchnorm -o "$bench_tmp/sync_$p.onnx"
done

ranks() { mpirun -np 2 -x OPENBLAS_NUM_THREADS=1 "$bin/mpc-run" "$@" --data="$data" --quiet >/dev/null; }
# Relative distance of log $1's loss from log $2's at step $3 (0: the largest over the
# first 3 steps).
distance() {
  paste -d, "$1" "$2" | tail -n +2 | awk -F, -v at="$3" \
    '{d = ($2 - $7) / $7; if (d < 0) d = -d; if ((at == 0 && NR <= 3) || NR == at) m = d > m ? d : m}
     END{printf "%.2g", m}'
}

"$bin/mpc-run" "$bench_tmp/one.onnx" --data="$data" --steps=3 --log="$bench_tmp/one.csv" --quiet >/dev/null
"$bin/mpc-run" "$bench_tmp/one_sync.onnx" --data="$data" --steps=3 --log="$bench_tmp/one_sync.csv" --quiet >/dev/null
ranks "$bench_tmp/sync_fp32.onnx" --steps=3 --log="$bench_tmp/sync.csv"
ranks "$bench_tmp/local_fp32.onnx" --steps=3 --log="$bench_tmp/local.csv"

steps=12
declare -A ms
one_ms=""
for p in fp32 fp16; do
  for kind in local sync; do
    ms[$kind$p]=""
  done
  for round in 1 2 3; do
    for kind in local sync; do
      ranks "$bench_tmp/${kind}_$p.onnx" --steps=$steps --log="$bench_tmp/t.csv"
      ms[$kind$p]+="$(median_log_ms "$bench_tmp/t.csv" 2) "
    done
    if [ $p = fp32 ]; then
      "$bin/mpc-run" "$bench_tmp/one.onnx" --data="$data" --steps=$steps --log="$bench_tmp/t.csv" --quiet >/dev/null
      one_ms+="$(median_log_ms "$bench_tmp/t.csv" 2) "
    fi
  done
done

echo "== sync batch norm: resnet18 (32x32, 20 batch norms), SGD, 2 ranks x 8 images vs 1 process x 16 ($(bench_machine_line))"
printf '%-52s %14s %16s\n' "run (fp32)" "loss, step 1" "steps 1-3, max"
for kind in one_sync sync local; do
  case $kind in
  one_sync) label="1 process x 16, --sync-batchnorm (world of one)" ;;
  sync) label="2 ranks x 8, --sync-batchnorm" ;;
  local) label="2 ranks x 8, per-rank statistics" ;;
  esac
  d1=$(distance "$bench_tmp/$kind.csv" "$bench_tmp/one.csv" 1)
  d3=$(distance "$bench_tmp/$kind.csv" "$bench_tmp/one.csv" 0)
  printf '%-52s %14s %16s\n' "$label" "$d1" "$d3"
  bench_record model=resnet18 precision=fp32 run=$kind ranks=$([ $kind = one_sync ] && echo 1 || echo 2) \
    loss_distance_step1=$d1 loss_distance_steps1to3=$d3
done
printf '%-52s %12s %12s %10s\n' "ms per step, 2 ranks x 8" "local stats" "sync" "sync/local"
for p in fp32 fp16; do
  read -r ml _ _ <<<"$(median_min_max ${ms[local$p]})"
  read -r msync _ _ <<<"$(median_min_max ${ms[sync$p]})"
  read -r r rmin rmax <<<"$(paired_ratios "${ms[sync$p]}" "${ms[local$p]}")"
  printf '%-52s %12s %12s %10s\n' "$p (median of 3 rounds; ratio paired, $rmin-$rmax)" "$ml" "$msync" "$r"
  bench_record model=resnet18 precision=$p ranks=2 per_rank_batch=8 steps=$steps \
    "local_ms=$(json_list ${ms[local$p]})" "sync_ms=$(json_list ${ms[sync$p]})" sync_over_local=$r
done
read -r mo _ _ <<<"$(median_min_max $one_ms)"
read -r speed smin smax <<<"$(paired_ratios "$one_ms" "${ms[localfp32]}")"
echo "1 process x 16, fp32: $mo ms per step; 2 ranks x 8 (per-rank statistics) process $speed x its samples/s (paired per round, $smin-$smax)"
bench_record model=resnet18 precision=fp32 ranks=1 batch=16 steps=$steps "one_process_ms=$(json_list $one_ms)" \
  ranks_speedup=$speed
bench_write_json "$json"
