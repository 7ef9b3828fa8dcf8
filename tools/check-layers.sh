#!/usr/bin/env bash
# Checks that no layer of mpc includes a header of a layer above it.
#
# The layers, bottom up (docs/design.md), and what each may include:
#   ir/, support/   the foundation         ir/ support/
#   kernels/        CPU and CUDA kernels   + kernels/
#   passes/         the compiler           + passes/
#   runtime/        executor, backends     + runtime/   (it uses the compiler)
#   tools/          the mains              + tools/
#   python/         the Python module      + python/    (beside tools/)
# Every `#include "dir/..."` of a source under ROOT is checked; an include
# without a folder names a file beside the includer. Exit 1 with one line
# per upward include (file:line: what it includes, and what its layer may).
#
# Usage: tools/check-layers.sh ROOT
set -euo pipefail
root=${1:?usage: check-layers.sh ROOT}
cd "$root"

allowed() { # the top folders a file in folder $1 may include
  case $1 in
  ir | support) echo "ir support" ;;
  kernels) echo "ir support kernels" ;;
  passes) echo "ir support kernels passes" ;;
  runtime) echo "ir support kernels passes runtime" ;;
  tools) echo "ir support kernels passes runtime tools" ;;
  python) echo "ir support kernels passes runtime python" ;;
  esac
}

status=0
for layer in ir support kernels passes runtime tools python; do
  [ -d "$layer" ] || continue
  ok=" $(allowed "$layer") "
  while IFS=: read -r file line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]+)".*/\1/' <<<"$text")
    case $inc in */*) ;; *) continue ;; esac # beside the includer
    top=${inc%%/*}
    # Only folders that are layers count (e.g. "onnx/onnx_pb.h" is ONNX's).
    [ -n "$(allowed "$top")" ] || continue
    if [[ $ok != *" $top "* ]]; then
      echo "$file:$line: includes \"$inc\": $layer/ may include only$(sed 's/ \(\w\+\)/ \1\//g' <<<" $(allowed "$layer")")" >&2
      status=1
    fi
  done < <(grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$layer" \
             --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' \
             --include='*.inc' --include='*.c' || true)
done
[ $status = 0 ] || echo "check-layers: an upward include (see docs/design.md, \"Layers\")" >&2
exit $status
