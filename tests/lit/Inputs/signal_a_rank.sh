#!/bin/bash
# Starts a launch (the arguments after LOG: `mpc-run --nproc-per-node=N ...`
# or `mpirun -np N mpc-run ...`), waits until rank 0 has logged two steps to
# LOG, sends SIGNAL to rank RANK (the launcher's child whose RANK= or
# OMPI_COMM_WORLD_RANK= variable says so), and reports how the launch ended:
#   rc=<launcher's exit code>
#   seconds=<whole seconds (rounded down) from the signal to the launcher's exit>
#   left=<processes of the launch still running a second after it exited>
# The ranks' stderr goes to this script's stderr. A rank left behind (a
# failure of the launcher) is killed here, after it is counted.
#
#   signal_a_rank.sh STOP|KILL RANK LOG mpc-run --nproc-per-node=2 ...
#   signal_a_rank.sh STOP|KILL RANK LOG mpirun -np 2 mpc-run ...
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
  if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qxE "(OMPI_COMM_WORLD_)?RANK=$rank"; then
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
# A process that is gone but not yet reaped (a zombie: mpirun's ranks are
# reaped by init after mpirun exits) is not left behind.
running() {
  [ -r "/proc/$1/stat" ] || return 1
  state=$(sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f1)
  [ "$state" != Z ] && [ "$state" != X ]
}
# A launcher that is not its ranks' last parent (mpirun) may exit a moment
# before the ranks it killed are gone: allow them a second.
for _ in $(seq 10); do
  alive=0
  for p in $launcher $ranks; do
    running "$p" && alive=1
  done
  [ $alive = 0 ] && break
  sleep 0.1
done
left=0
for p in $launcher $ranks; do
  if running "$p"; then
    left=$((left + 1))
    kill -9 "$p" 2>/dev/null
  fi
done
echo "left=$left"
