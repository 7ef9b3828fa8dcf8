#!/usr/bin/env bash
# Peak resident memory of mpc-run training from a data set bigger than its
# step: a directory of .npy files (--data=DIR, mapped and read a batch at a
# time) of SIZE_GB gigabytes for a wide MLP (4096 inputs, 64 hidden, 10
# classes, batch 64: a 1 MiB batch), trained STEPS steps with --shuffle
# under /usr/bin/time -f %M. The data is written with numpy, a chunk at a
# time (open_memmap), so writing it takes no more memory than training.
#
#   bench/stream_data.sh [BUILD_BIN] [SIZE_GB] [STEPS]
#   (defaults: build/bin 2.4 2400; 2400 steps x 64 samples x 16 KiB read
#   the whole 2.4 GB once). Not part of make test: it writes SIZE_GB to
#   $TMPDIR and takes minutes.
set -euo pipefail
bin=${1:-build/bin}
size_gb=${2:-2.4}
steps=${3:-2400}
py=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/mpc-stream.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$py" - "$work" "$size_gb" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

work, size_gb = sys.argv[1], float(sys.argv[2])
d, h, c, b = 4096, 64, 10, 64
rng = np.random.default_rng(0)
w1 = (rng.standard_normal((h, d)) / np.sqrt(d)).astype(np.float32)
w2 = (rng.standard_normal((c, h)) / np.sqrt(h)).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("Gemm", ["x", "w1"], ["a"], transB=1),
     helper.make_node("Relu", ["a"], ["r"]),
     helper.make_node("Gemm", ["r", "w2"], ["logits"], transB=1),
     helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"])],
    "wide_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [b, d]),
     helper.make_tensor_value_info("y", TensorProto.INT64, [b])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
m.ir_version = 8
onnx.save(m, work + "/wide_mlp.onnx")
n = int(size_gb * 1e9) // (d * 4)
x = np.lib.format.open_memmap(work + "/x.npy",
                              mode="w+", dtype=np.float32, shape=(n, d))
y = np.lib.format.open_memmap(work + "/y.npy", mode="w+", dtype=np.int64,
                              shape=(n,))
chunk = 8192
for i in range(0, n, chunk):
    k = min(chunk, n - i)
    x[i:i + k] = rng.standard_normal((k, d), dtype=np.float32)
    y[i:i + k] = rng.integers(0, c, k)
x.flush()
y.flush()
del x, y
print(f"data: {n} samples of {d} float32, {n * (d * 4 + 8) / 1e9:.2f} GB")
PY
mkdir "$work/data"
mv "$work/x.npy" "$work/y.npy" "$work/data/"
"$bin/mpc-opt" "$work/wide_mlp.onnx" -o "$work/wide.onnx" --optimizer=adam
/usr/bin/time -f %M -o "$work/rss" env MPC_DEVICE=cpu "$bin/mpc-run" \
  "$work/wide.onnx" --data="$work/data" --steps="$steps" --shuffle --seed=1 \
  --quiet
du -sh "$work/data" | cut -f1 | sed 's/^/data on disk: /'
echo "peak RSS: $(($(cat "$work/rss") / 1024)) MiB ($(cat "$work/rss") KiB)"
