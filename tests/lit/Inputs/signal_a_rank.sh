#!/bin/bash
# Starts `mpc-run --nproc-per-node=N ...` (the arguments after LOG), waits
# until rank 0 has logged two steps to LOG, sends SIGNAL to local rank RANK
# (found by its RANK= variable), and reports how the launch ended:
#   rc=<launcher's exit code>
#   seconds=<whole seconds from the signal to the launcher's exit>
#   left=<processes of the launch still there after it exited>
# The ranks' stderr goes to this script's stderr. A rank left behind (a
# failure of the launcher) is killed here, after it is counted.
#
#   signal_a_rank.sh STOP|KILL RANK LOG mpc-run --nproc-per-node=2 ...
sig=$1 rank=$2 log=$3
shift 3
rm -f "$log"
"$@" &
launcher=$!
for _ in $(seq 600); do
  [ "$(cat "$log" 2>/dev/null | wc -l)" -ge 3 ] && break
  sleep 0.1
done
ranks=$(pgrep -P "$launcher")
target=
for p in $ranks; do
  if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$rank"; then
    target=$p
  fi
done
if [ -z "$target" ]; then
  echo "no rank $rank among: $ranks"
  kill -9 $launcher $ranks 2>/dev/null
  exit 1
fi
kill -"$sig" "$target"
start=$(date +%s%N)
wait "$launcher"
rc=$?
end=$(date +%s%N)
echo "rc=$rc"
echo "seconds=$(((end - start) / 1000000000))"
left=0
for p in $launcher $ranks; do
  if kill -0 "$p" 2>/dev/null; then
    left=$((left + 1))
    kill -9 "$p" 2>/dev/null
  fi
done
echo "left=$left"
