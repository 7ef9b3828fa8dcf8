#!/usr/bin/env bash
# make fuzz: runs every libFuzzer target of a build for SECONDS each.
#
# usage: tests/fuzz/run_fuzz.sh BUILD_DIR SECONDS [TARGET...]
#
# Seeds each target with its checked-in corpus (tests/fuzz/corpus/T), its
# regressions and files of the repository (models, lit and unit inputs,
# ONNX's backend test data when installed), keeps the grown corpus in
# BUILD_DIR/fuzz-corpus/T between runs, and writes what it finds (crash-*,
# leak-*, timeout-*, oom-* inputs, and each target's log) to
# BUILD_DIR/findings/T/. Prints seconds, executions, exec/s and findings per
# target; exits 1 when anything was found.
set -euo pipefail

build=$(cd "$1" && pwd)
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
testdata=/usr/share/libonnx-testdata/data
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(onnx-model onnx-text npy npz tensor-pb checkpoint
  external-data flags)

# Extra seeds from the repository, by target (globs that match nothing are
# skipped).
extra_seeds() {
  case "$1" in
  onnx-model) ls "$root"/models/*.onnx "$root"/tests/lit/Inputs/*.onnx \
                 "$testdata"/node/*/model.onnx "$testdata"/simple/*/model.onnx ;;
  onnx-text)  ls "$root"/models/*.onnxtext ;;
  npy)        ls "$root"/tests/unit/Inputs/*.npy ;;
  npz)        ls "$root"/tests/lit/Inputs/*.npz "$root"/tests/unit/Inputs/*.npz \
                 "$root"/models/*.npz ;;
  tensor-pb)  ls "$testdata"/node/*/test_data_set_0/input_0.pb ;;
  checkpoint) ls "$root"/tests/lit/Inputs/*.onnx ;;
  esac 2>/dev/null || true
}

# Longest input each target generates: a little above its largest real seed.
max_len() {
  case "$1" in
  onnx-model) echo 65536 ;; onnx-text) echo 16384 ;; npy) echo 4096 ;;
  npz) echo 65536 ;; tensor-pb) echo 8192 ;; checkpoint) echo 32768 ;;
  external-data) echo 4096 ;; flags) echo 2048 ;;
  esac
}

dictionary() {
  case "$1" in
  onnx-model | onnx-text | checkpoint) echo "$here/onnx-text.dict" ;;
  npy) echo "$here/npy.dict" ;;
  npz) echo "$here/npz.dict" ;;
  flags) echo "$here/flags.dict" ;;
  esac
}

summary="$build/findings/summary.txt"
mkdir -p "$build/findings"
printf "%-11s %8s %10s %8s %9s\n" target seconds execs exec/s findings >"$summary"
found=0
for t in "${targets[@]}"; do
  bin="$build/bin/fuzz-$t"
  [ -x "$bin" ] || { echo "run_fuzz: $bin is missing (build target mpc-fuzzers)" >&2; exit 1; }
  seeds="$build/fuzz-seeds/$t"
  rm -rf "$seeds"
  mkdir -p "$seeds" "$build/fuzz-corpus/$t" "$build/findings/$t"
  for f in "$here/corpus/$t"/* "$here/regressions/$t"/* $(extra_seeds "$t"); do
    [ -f "$f" ] || continue
    # Unique names: the path relative to / with slashes as underscores.
    cp "$f" "$seeds/$(echo "${f#/}" | tr / _)"
  done
  dict=()
  d=$(dictionary "$t")
  [ -n "$d" ] && dict=(-dict="$d")
  log="$build/findings/$t/fuzz.log"
  echo "run_fuzz: $t for ${seconds}s ($(ls "$seeds" | wc -l) seeds), log $log"
  start=$(date +%s)
  stamp="$build/findings/$t/.started"
  touch "$stamp"
  set +e
  # Each input runs in a scratch folder of its own (see fuzz_support.h).
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "$bin" "$build/fuzz-corpus/$t" "$seeds" \
      -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -malloc_limit_mb=2048 -max_len="$(max_len "$t")" "${dict[@]}" \
      -artifact_prefix="$build/findings/$t/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  elapsed=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  # Only this run's artifacts count; older ones stay for inspection.
  n=$(find "$build/findings/$t" -maxdepth 1 -type f -newer "$stamp" \
        \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [ "$rc" -ne 0 ] && [ "$n" -eq 0 ]; then
    n=1 # it stopped without an artifact (e.g. a failure at start-up)
    echo "run_fuzz: fuzz-$t exited $rc without an artifact; see $log" >&2
  fi
  [ "$n" -gt 0 ] && found=1 && grep -m1 -E "^==[0-9]+==ERROR|^SUMMARY|mpc-fuzz:|deadly signal|runtime error" "$log" >&2 || true
  printf "%-11s %8s %10s %8s %9s\n" "$t" "$elapsed" "${execs:-?}" "${rate:-?}" "$n" >>"$summary"
done
echo "run_fuzz: summary in $summary; findings under $build/findings/"
cat "$summary"
exit $found
