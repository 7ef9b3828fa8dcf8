#!/usr/bin/env bash
# make bench: runs every benchmark (bench/*.sh) against BUILD_DIR's tools, prints their tables
# (also to bench/results/tables-<date>.txt) and writes each one's JSON to
# bench/results/<name>-<date>.json. parity.sh (a few seconds)
# prints a table only; its rows are written as JSON here.
# Usage: bench/run_all.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
date=$(date +%F)
status=0
# The tables also go to bench/results/tables-<date>.txt, next to the JSON.
mkdir -p bench/results
exec > >(tee "bench/results/tables-$date.txt") 2>&1
for script in bench/compile_time.sh bench/memory.sh bench/memory_budget.sh bench/cpu_step.sh bench/data_parallel.sh \
  bench/sync_batch_norm.sh bench/grad_comm.sh bench/gloo_world.sh bench/zero_memory.sh; do
  echo "######## $script"
  "$script" "$build" "bench/results/$(basename "$script" .sh)-$date.json" || status=1
  echo
done

echo "######## bench/cpu_contenders.py"; python3 bench/cpu_contenders.py "$build" || status=1; echo

echo "######## bench/amp_saved.py"; python3 bench/amp_saved.py "$build" "bench/results/amp_saved-$date.json" || status=1; echo

echo "######## bench/parity.sh"
parity=$(mktemp)
trap 'rm -f "$parity"' EXIT
if bench/parity.sh "$build" | tee "$parity"; then
  /usr/bin/python3 - "$parity" "bench/results/parity-$date.json" <<'EOF'
import datetime, json, os, sys
lines = [l.split() for l in open(sys.argv[1]) if l.strip()]
head, rows = lines[0], lines[1:]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "unknown")
doc = {"benchmark": "parity", "date": datetime.date.today().isoformat(),
       "machine": {"nproc": os.cpu_count(), "cpu": cpu},
       "results": [dict(zip(head, r)) if len(r) == len(head) else {"line": " ".join(r)} for r in rows]}
with open(sys.argv[2], "w") as f:
    json.dump(doc, f, indent=1)
    f.write("\n")
print(f"results: {sys.argv[2]}")
EOF
else
  status=1
fi
exit $status
