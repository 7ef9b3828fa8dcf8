#!/usr/bin/env bash
# The data-parallel world's cost on 2 ranks (mpc-run --nproc-per-node=2, no MPI): torchvision's
# resnet18 (bench/export_resnet18.py; 42 MiB of fp32 gradients each step), fp32 SGD (lr 0.01),
# 8 images per rank, --sync-batchnorm; ms per step (median of each run's steps after 2 warm-up
# steps, median of 3 rounds) over the Gloo world, beside one process on all 16 images (the same
# work without communication), interleaved per round and paired. It also counts the step's
# collectives (the compiled model's mpc.AllReduce nodes and their bytes): what the world carries.
# The hand-written TCP world that Gloo replaced was measured the same way before it went
# (bench/results/gloo_vs_tcp_world-2026-12-06.json, docs/benchmarks.md).
# Skipped with a line without torch and torchvision in $PY.
#
# --latency: the world's collectives alone on 2 ranks (mpc-unit-tests'
# GlooWorldBench.DISABLED_CollectiveLatency, ranks as threads): microseconds per reduce-scatter
# (allToAll), all-gather and both (one mpc.AllReduce's traffic) of 1 KiB, 64 KiB and 16 MiB per
# rank, median of 3 runs (each a median of 5 rounds).
# Usage: bench/gloo_world.sh [--latency] [BUILD_DIR] [RESULTS.json]
set -euo pipefail
name=gloo_world
latency=
if [ "${1:-}" = --latency ]; then
  latency=1
  name=gloo_latency
  shift
fi
build=${1:-build}
json=${2:-bench/results/$name-$(date +%F).json}
source "$(dirname "$0")/lib.sh"
bin=$build/bin

if [ -n "$latency" ]; then
  for run in 1 2 3; do
    "$bin/mpc-unit-tests" --gtest_also_run_disabled_tests \
      --gtest_filter=GlooWorldBench.DISABLED_CollectiveLatency | grep '^latency ' >>"$bench_tmp/lat.txt"
  done
  echo "== Gloo world collectives, 2 ranks (threads), us per call, median of 3 ($(bench_machine_line))"
  printf '%-10s %16s %14s %14s\n' "bytes" "reduce-scatter" "all-gather" "all-reduce"
  for bytes in $(awk '{sub("bytes=", "", $2); print $2}' "$bench_tmp/lat.txt" | sort -un); do
    row=()
    for key in reduce_scatter_us all_gather_us all_reduce_us; do
      vals=$(grep "bytes=$bytes " "$bench_tmp/lat.txt" | tr ' ' '\n' | sed -n "s/^$key=//p")
      row+=("$(median $vals)")
      eval "${key}_list=\$(json_list \$vals)"
    done
    printf '%-10s %16s %14s %14s\n' "$bytes" "${row[@]}"
    bench_record world=gloo ranks=2 bytes="$bytes" reduce_scatter_us="${row[0]}" \
      all_gather_us="${row[1]}" all_reduce_us="${row[2]}" \
      "reduce_scatter_runs=$reduce_scatter_us_list" "all_gather_runs=$all_gather_us_list" \
      "all_reduce_runs=$all_reduce_us_list"
  done
  bench_write_json "$json"
  exit 0
fi

if ! "$PY" -c "import torch, torchvision" 2>/dev/null; then
  echo "gloo world: skipped ($PY cannot import torch and torchvision: pip install torch torchvision)"
  exit 0
fi
"$PY" "$(dirname "$0")/export_resnet18.py" "$bench_tmp/resnet18.onnx" "$bench_tmp/data.npz" 2>/dev/null
data=$bench_tmp/data.npz
"$bin/mpc-opt" "$bench_tmp/resnet18.onnx" --batch=8 --precision=fp32 --optimizer=sgd --lr=0.01 \
  --data-parallel --sync-batchnorm -o "$bench_tmp/dp.onnx"
"$bin/mpc-opt" "$bench_tmp/resnet18.onnx" --batch=16 --precision=fp32 --optimizer=sgd --lr=0.01 \
  -o "$bench_tmp/one.onnx"
# The step's collectives: each mpc.AllReduce node is one reduce-scatter and one all-gather of
# its inputs' bytes (sync batch norm's statistics forward and backward, the gradients' bucket).
"$PY" - "$bench_tmp/dp.onnx" >"$bench_tmp/collectives.txt" <<'PYEOF'
import sys, onnx
m = onnx.load(sys.argv[1], load_external_data=False)
graphs = [m.graph] + [t.algorithm for t in m.training_info]
numel = {}
for g in graphs:
    for t in g.initializer:
        n = 1
        for d in t.dims:
            n *= d
        numel[t.name] = n
    for v in list(g.value_info) + list(g.input) + list(g.output):
        dims = v.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            n = 1
            for d in dims:
                n *= d.dim_value
            numel[v.name] = n
sizes = []
for g in graphs:
    for node in g.node:
        if node.domain == "mpc" and node.op_type == "AllReduce":
            sizes.append(sum(4 * numel.get(x, 0) for x in node.input if x))
sizes.sort()
small = [s for s in sizes if s <= 64 << 10]
print(len(sizes), len(small), sum(small), sum(sizes) - sum(small), max(sizes) if sizes else 0)
PYEOF
read -r n_coll n_small small_bytes large_bytes largest <"$bench_tmp/collectives.txt"
steps=12
ranks() { "$bin/mpc-run" --nproc-per-node=2 "$bench_tmp/dp.onnx" --data="$data" --steps=$steps --quiet "$@" >/dev/null; }

worlds=(gloo)

declare -A ms
for round in 1 2 3; do
  for w in "${worlds[@]}"; do
    ranks --log="$bench_tmp/$w.csv"
    ms[$w]+="$(median_log_ms "$bench_tmp/$w.csv" 2) "
  done
  "$bin/mpc-run" "$bench_tmp/one.onnx" --data="$data" --steps=$steps --log="$bench_tmp/one.csv" --quiet >/dev/null
  ms[one]+="$(median_log_ms "$bench_tmp/one.csv" 2) "
done

echo "== data-parallel world: resnet18 (32x32), fp32 SGD, sync batch norm, 2 ranks x 8 images, $steps steps, median of 3 ($(bench_machine_line))"
printf '%-34s %12s %26s\n' "run" "ms per step" "vs 1 process (paired)"
for w in "${worlds[@]}" one; do
  read -r m _ _ <<<"$(median_min_max ${ms[$w]})"
  read -r r rmin rmax <<<"$(paired_ratios "${ms[$w]}" "${ms[one]}")"
  case $w in
  gloo) label="2 ranks, Gloo world" ;;
  one) label="1 process x 16 images" ;;
  esac
  printf '%-34s %12s %26s\n' "$label" "$m" "$r ($rmin-$rmax)"
  bench_record model=resnet18 world=$w steps=$steps "ms=$(json_list ${ms[$w]})" ratio_to_one_process=$r
done
echo "collectives per step: $n_coll mpc.AllReduce ($n_small of at most 64 KiB, $small_bytes bytes in all;" \
  "the rest $large_bytes bytes, the largest $largest), each a reduce-scatter and an all-gather"
bench_record model=resnet18 allreduce_per_step=$n_coll small_allreduce_per_step=$n_small \
  small_allreduce_bytes=$small_bytes large_allreduce_bytes=$large_bytes largest_allreduce_bytes=$largest
bench_write_json "$json"
