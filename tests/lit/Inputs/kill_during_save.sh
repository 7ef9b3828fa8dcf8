#!/bin/bash
# Kill-during-save driver for tests/lit/tools/mpc-run-kill-during-save.test.
#
# usage: kill_during_save.sh MODEL DIR
# Runs mpc-run MODEL --save-every=1 (a checkpoint every step) in the
# background, SIGKILLs it after a jittered delay, and checks that the
# checkpoint, whenever one exists, loads and resumes for one step. Each run
# resumes from the previous run's checkpoint, so a kill must never leave it
# broken. Leftover CKPT.tmp.<pid> files (a kill between create and rename)
# are acceptable; they are counted and removed.
set -u
model=$1
dir=$2
ckpt=$dir/ckpt.onnx
rm -f "$ckpt" "$ckpt".tmp.*
kills=0
resumed=0
leftover=0
for delay in 0.6 0.9 1.2 1.5 1.8 2.1; do
  d="$delay$((RANDOM % 10))"
  resume=()
  [ -e "$ckpt" ] && resume=(--resume="$ckpt")
  mpc-run "$model" --synthetic --steps=100000000 --save="$ckpt" \
    --save-every=1 --quiet "${resume[@]}" > /dev/null 2> "$dir/run.err" &
  pid=$!
  sleep "$d"
  kill -KILL "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  kills=$((kills + 1))
  n=$(ls "$ckpt".tmp.* 2> /dev/null | wc -l)
  leftover=$((leftover + n))
  rm -f "$ckpt".tmp.*
  if [ -e "$ckpt" ]; then
    if ! mpc-run "$model" --synthetic --resume="$ckpt" --steps=1 --quiet \
      > /dev/null 2> "$dir/resume.err"; then
      echo "FAIL: the checkpoint does not resume after a kill at ${d}s:"
      cat "$dir/resume.err"
      exit 1
    fi
    resumed=$((resumed + 1))
  fi
done
echo "kills $kills resumed $resumed leftover-tmp $leftover"
[ "$resumed" -gt 0 ] || { echo "FAIL: no checkpoint was ever written"; exit 1; }
