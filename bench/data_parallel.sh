#!/usr/bin/env bash
# Data parallel on the CPU (SPEC "Scale"): samples/s of one fp16 Adam step of the
# transformer block (models/transformer_dynbatch.onnx) on a global batch of 64, trained
#   - by one process on 1 thread,
#   - by one process on N threads (OpenBLAS),
#   - by `mpirun -np N mpc-run` on N ranks of 64/N samples, 1 thread each
#     (mpc-opt --data-parallel),
# with N the machine's cores (at most 8), median of 3 rounds of 200 steps; the speedup is
# the ranks' samples/s over the one-thread process's, paired per round. Skipped with a line
# when mpirun or the MPI world plugin is missing.
# Usage: bench/data_parallel.sh [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=data_parallel
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin
models=models

if ! command -v mpirun >/dev/null || [ ! -e "$bin/libmpc_mpi_world.so" ]; then
  echo "data parallel: skipped (no mpirun or no $bin/libmpc_mpi_world.so: apt-get install libopenmpi-dev openmpi-bin, rebuild)"
  exit 0
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(getconf _NPROCESSORS_ONLN) # not nproc: lib.sh sets OMP_NUM_THREADS, which nproc obeys
ranks=$((cores > 8 ? 8 : cores))
global=64
if [ "$ranks" -lt 2 ] || [ $((global % ranks)) -ne 0 ]; then
  echo "data parallel: skipped ($cores cores: needs 2 to 8 dividing $global)"
  exit 0
fi
per=$((global / ranks))
"$bin/mpc-opt" $models/transformer_dynbatch.onnx --batch=$global --precision=fp16 --optimizer=adam \
  -o "$bench_tmp/one.onnx"
"$bin/mpc-opt" $models/transformer_dynbatch.onnx --batch=$per --precision=fp16 --optimizer=adam \
  --data-parallel -o "$bench_tmp/dp.onnx"
data=$models/transformer_data.npz
steps=200

# samples/s from mpc-run's summary line.
samples_per_s() { sed -n 's/.*  \([0-9]*\) samples\/s.*/\1/p'; }

one1=() oneN=() dp=()
for round in 1 2 3; do
  one1+=("$(OPENBLAS_NUM_THREADS=1 "$bin/mpc-run" "$bench_tmp/one.onnx" --data=$data --steps=$steps --quiet | samples_per_s)")
  oneN+=("$(OPENBLAS_NUM_THREADS=$ranks "$bin/mpc-run" "$bench_tmp/one.onnx" --data=$data --steps=$steps --quiet | samples_per_s)")
  dp+=("$(mpirun -np "$ranks" -x OPENBLAS_NUM_THREADS=1 "$bin/mpc-run" "$bench_tmp/dp.onnx" --data=$data --steps=$steps --quiet | samples_per_s)")
done
read -r m1 _ _ <<<"$(median_min_max "${one1[@]}")"
read -r mN _ _ <<<"$(median_min_max "${oneN[@]}")"
read -r md _ _ <<<"$(median_min_max "${dp[@]}")"
read -r speed smin smax <<<"$(paired_ratios "${dp[*]}" "${one1[*]}")"

echo "== data parallel: transformer block, fp16 Adam, global batch $global, $steps steps, median of 3 ($(bench_machine_line))"
printf '%-36s %12s\n' "run" "samples/s"
printf '%-36s %12s\n' "1 process, 1 thread" "$m1"
printf '%-36s %12s\n' "1 process, $ranks threads" "$mN"
printf '%-36s %12s\n' "$ranks ranks x $per samples, 1 thread" "$md"
echo "speedup of $ranks ranks over 1 thread: $speed (paired per round, min $smin, max $smax)"
bench_record model=transformer_dynbatch precision=fp16 optimizer=adam global_batch=$global ranks=$ranks \
  steps=$steps "one_thread=$(json_list "${one1[@]}")" "one_process_threads=$(json_list "${oneN[@]}")" \
  "ranks_samples_per_s=$(json_list "${dp[@]}")" speedup=$speed
bench_write_json "$json"
