#!/usr/bin/env bash
# --grad-comm-dtype on 2 ranks (mpc-run --nproc-per-node=2: the Gloo world, no MPI): torchvision's
# resnet18 (bench/export_resnet18.py; 42 MiB of fp32 gradients each step), fp32 SGD (lr 0.01),
# 8 images per rank, --sync-batchnorm (so that 2 ranks train the one-process model). Per wire type (fp32, bf16, fp16): ms per step (median of each run's steps after
# 2 warm-up steps, median of 3 rounds; the ratio to fp32 paired per round), and how far its losses lie
# from the fp32 wire's (relative; bf16 keeps 8 significant bits of each gradient, fp16 11): at step 2,
# the first update's, and the largest over the run; and the fp32 wire over MPI (mpirun) beside Gloo,
# where mpirun is.
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
    --data-parallel --sync-batchnorm --grad-comm-dtype=$w -o "$bench_tmp/$w.onnx"
done
ranks() { "$bin/mpc-run" --nproc-per-node=2 "$@" --data="$data" --quiet >/dev/null; }
# For scale: one process on all 16 images (fp32) differs from the fp32 wire's 2 ranks only in the
# order of its sums.
"$bin/mpc-opt" "$bench_tmp/resnet18.onnx" --batch=16 --precision=fp32 --optimizer=sgd --lr=0.01 \
  -o "$bench_tmp/one.onnx"
"$bin/mpc-run" "$bench_tmp/one.onnx" --data="$data" --steps=12 --log="$bench_tmp/one.csv" --quiet >/dev/null

# The fp32 wire over MPI too, where mpirun and the MPI world plugin are: the transport's cost
# beside Gloo's, and whether its log has the same bits.
mpi=0
if command -v mpirun >/dev/null && [ -e "$bin/libmpc_mpi_world.so" ]; then
  mpi=1
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi

declare -A ms
steps=12
for round in 1 2 3; do
  for w in "${wires[@]}"; do
    ranks "$bench_tmp/$w.onnx" --steps=$steps --log="$bench_tmp/$w.csv"
    ms[$w]+="$(median_log_ms "$bench_tmp/$w.csv" 2) "
  done
  if [ $mpi = 1 ]; then
    mpirun -np 2 -x OPENBLAS_NUM_THREADS "$bin/mpc-run" "$bench_tmp/fp32.onnx" --data="$data" \
      --steps=$steps --log="$bench_tmp/mpi.csv" --quiet >/dev/null
    ms[mpi]+="$(median_log_ms "$bench_tmp/mpi.csv" 2) "
  fi
done
# Relative loss distance of log $1 from the fp32 wire's at step $2 (0: the largest over the
# 12 steps; resnet18 on random images amplifies any difference from step 3 or so: the step-2
# loss is the first update's).
distance_at() {
  paste -d, "$1" "$bench_tmp/fp32.csv" | tail -n +2 | awk -F, -v at="$2" \
    '{d = ($2 - $7) / $7; if (d < 0) d = -d; if (at == 0 || NR == at) m = d > m ? d : m} END{printf "%.2g", m}'
}

echo "== gradient communication: resnet18 (32x32), fp32 SGD, 2 ranks x 8 images over Gloo, sync batch norm ($(bench_machine_line))"
printf '%-6s %12s %22s %14s %16s\n' "wire" "ms per step" "vs fp32 (paired)" "loss, step 2" "steps 1-12, max"
for w in "${wires[@]}"; do
  read -r m _ _ <<<"$(median_min_max ${ms[$w]})"
  read -r r rmin rmax <<<"$(paired_ratios "${ms[$w]}" "${ms[fp32]}")"
  d2=$(distance_at "$bench_tmp/$w.csv" 2)
  dmax=$(distance_at "$bench_tmp/$w.csv" 0)
  printf '%-6s %12s %22s %14s %16s\n' "$w" "$m" "$r ($rmin-$rmax)" "$d2" "$dmax"
  bench_record model=resnet18 ranks=2 per_rank_batch=8 steps=$steps wire=$w "ms=$(json_list ${ms[$w]})" \
    ratio_to_fp32=$r loss_distance_step2=$d2 loss_distance_max=$dmax
done
if [ $mpi = 1 ]; then
  read -r m _ _ <<<"$(median_min_max ${ms[mpi]})"
  read -r r rmin rmax <<<"$(paired_ratios "${ms[mpi]}" "${ms[fp32]}")"
  same=no
  cmp -s <(cut -d, -f1-4 "$bench_tmp/mpi.csv") <(cut -d, -f1-4 "$bench_tmp/fp32.csv") && same=yes
  printf '%-6s %12s %22s   same bits as Gloo: %s\n' "fp32, mpirun" "$m" "$r ($rmin-$rmax)" "$same"
  bench_record model=resnet18 ranks=2 per_rank_batch=8 steps=$steps wire=fp32 transport=mpi \
    "ms=$(json_list ${ms[mpi]})" ratio_to_gloo=$r same_bits_as_gloo=$same
else
  echo "fp32 over MPI: skipped (no mpirun or no $bin/libmpc_mpi_world.so)"
fi
d2=$(distance_at "$bench_tmp/one.csv" 2)
dmax=$(distance_at "$bench_tmp/one.csv" 0)
printf '%-42s %14s %16s\n' "1 process x 16, fp32 (the order of sums)" "$d2" "$dmax"
bench_record model=resnet18 ranks=1 batch=16 steps=12 loss_distance_step2=$d2 loss_distance_max=$dmax
bench_write_json "$json"
