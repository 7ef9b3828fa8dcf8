#!/usr/bin/env bash
# Compiles model $2 with the mpc-opt flags in $4.. twice, --data-parallel
# and --data-parallel --shard-optimizer --world-size=$1, trains each for 20
# steps on $1 ranks of mpc-run --nproc-per-node (data $3, with an eval set
# and both exports), and prints "same bits: <flags>" when the two runs log
# the same loss, scale, skips and grad norm at every step and the same eval
# loss, and write the same checkpoint state, inference model and
# safetensors; else the first difference. Work files go in $OUT; $EVAL_FLAGS
# (optional) adds mpc-run flags for the evaluation (--eval-metrics=...).
set -euo pipefail
ranks=$1 model=$2 data=$3
shift 3
dir=${OUT:?}/$ranks-$(echo "$*" | tr -c 'A-Za-z0-9=.\n-' _)
mkdir -p "$dir"
here=$(dirname "$0")
for kind in dp sh; do
  extra=()
  [ $kind = sh ] && extra=(--shard-optimizer --world-size="$ranks")
  mpc-opt "$model" -o "$dir/$kind.onnx" --data-parallel "$@" "${extra[@]}" >/dev/null
  mpc-run --nproc-per-node="$ranks" "$dir/$kind.onnx" --data="$data" --steps=20 \
    --eval-data="$data" --eval-every=10 --eval-log="$dir/$kind.eval.csv" ${EVAL_FLAGS:-} \
    --log="$dir/$kind.csv" --save="$dir/$kind.ckpt.onnx" \
    --export-inference="$dir/$kind.inf.onnx" --export-safetensors="$dir/$kind.st" --quiet >/dev/null
  # step,loss,loss_scale,skipped,(ms),grad_norm: all but the time.
  cut -d, -f1-4,6 "$dir/$kind.csv" > "$dir/$kind.cut"
done
diff "$dir/dp.cut" "$dir/sh.cut" > /dev/null || { echo "logs differ: $*"; exit 0; }
diff "$dir/dp.eval.csv" "$dir/sh.eval.csv" > /dev/null || { echo "eval logs differ: $*"; exit 0; }
cmp -s "$dir/dp.st" "$dir/sh.st" || { echo "safetensors differ: $*"; exit 0; }
cmp -s "$dir/dp.inf.onnx" "$dir/sh.inf.onnx" || { echo "inference models differ: $*"; exit 0; }
state=$("$PYTHON" "$here/compare_state.py" "$dir/dp.ckpt.onnx" "$dir/sh.ckpt.onnx")
case $state in
  *" states identical") echo "same bits: $*" ;;
  *) echo "$state: $*" ;;
esac
