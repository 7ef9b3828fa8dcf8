#!/usr/bin/env bash
# The digest of what mpc-opt writes for every model in models/, under a few
# flag sets: the output's bytes when the compile succeeds, the exit status and
# the message when it is refused. A refactor that must leave the compiler's
# behaviour unchanged leaves this list unchanged (tests/compile_digests.txt,
# checked by the compile-digests test; regenerate it with
#   tools/compile-digests.sh build/bin/mpc-opt > tests/compile_digests.txt
# only when a change is meant to change outputs, and say so in the commit).
#
# Usage: tools/compile-digests.sh MPC_OPT [MODELS_DIR]
set -euo pipefail
opt=$(realpath "$1")
models=$(realpath "${2:-$(dirname "$0")/../models}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"

# One flag set per line: the default recipe, bf16 with SGD and momentum,
# fp32 with gradient accumulation and clipping, and the text of a bf16 step with recomputation.
flagsets=(
  ""
  "--precision=bf16 --optimizer=sgd --momentum=0.9"
  "--precision=fp32 --optimizer=adam --grad-accum=2 --max-grad-norm=1"
  "--emit=text --precision=bf16 --recompute=auto"
)

cd "$models"
find . -name '*.onnx' | LC_ALL=C sort | while read -r m; do
  for i in "${!flagsets[@]}"; do
    rm -f "$work"/out.onnx*
    # shellcheck disable=SC2086
    if "$opt" "$m" -o "$work/out.onnx" ${flagsets[$i]} \
        >"$work/msg" 2>&1; then
      d=$(cat "$work"/out.onnx* | sha256sum | cut -c1-16)
    else
      rc=$?
      d="exit$rc:$(sha256sum <"$work/msg" | cut -c1-16)"
    fi
    printf '%s\t%s\t%s\n' "${m#./}" "$i" "$d"
  done
done
