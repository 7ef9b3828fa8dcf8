#!/usr/bin/env bash
# tools/gpu-check.sh (make gpu-check): the CUDA backend's checks on a machine
# with an NVIDIA GPU, in one run that ends well inside 10 minutes.
#
#   build        configure for sm_90 only (CMAKE_CUDA_ARCHITECTURES=90) into
#                build-gpu/ and build the four binaries it needs on all cores,
#                or unpack prebuilt ones (--prebuilt, see below)
#   backend-ops  every op of the CUDA backend against the CPU backend
#   onnx-node    ONNX's node test cases claimed in tests/onnx-node/claimed.txt
#                on the CUDA backend (those whose ops all have device code),
#                when Debian's libonnx-testdata is installed
#   trajectories models/mlp_seed.onnx (Adam 1e-2), transformer.onnx,
#                resmlp.onnx, cnn.onnx (Conv, BatchNormalization, MaxPool
#                on cuDNN and the pooling kernels), encoder_layer.onnx,
#                norm_cnn.onnx, act_mlp.onnx, reduce_head.onnx,
#                resize_cnn.onnx, einsum_attn.onnx, rnn_lm.onnx and the
#                model-library gpt2_tiny, llama_tiny, swin_tiny and
#                convnext_tiny, and the dynamo exporter's gpt2_plain_dynamo,
#                cnn_dynamo and attention_dynamo; a --data-parallel step on
#                one rank (also the CNN with --sync-batchnorm), and 2 NCCL
#                ranks (mpc-run --nproc-per-node=2) where 2 GPUs are
#                (torch.nn's TransformerEncoderLayer, GroupNorm,
#                InstanceNorm2d, LSTM, GRU, the activations, reductions,
#                Resizes and Einsums the importer lowers; Adam 1e-3)
#                compiled for fp16 and fp32, plus the opset-20 Gelu
#                transformer, the transformer with --max-grad-norm=1, the
#                MLP with --lr-schedule=cosine and with --grad-accum=2
#                --ema-decay=0.99 in fp16: 50 steps each with
#                --device=cuda and --device=cpu, the largest relative loss
#                difference (limits: fp32 1e-4, fp16 1e-2) and the skipped
#                steps (must match); about 2 s of GPU time per run
#   graphs       the device-resident step (mpc-run's default on cuda) with
#                CUDA graphs on and off and staged (--cuda-resident=off),
#                200 steps of the fp16 MLP and transformer: the loss
#                columns of graphs on/off must be identical; ms/step of each
#                (mean after step 2) goes in the table's notes
#   gemm-bench   cuBLAS fp16/bf16 TFLOP/s at 4096^3 and 8192^3
#   step-bench   bench/gpu_step.sh: mpc-run --device=cuda against PyTorch AMP
#                (autocast + GradScaler + fused Adam) on a 12-block d768 seq512
#                batch16 transformer stack, fp16: step ms, the step's matmul
#                TFLOP/s against the cuBLAS peak, the unscale+Adam kernels'
#                bytes/s against a device copy, and peak memory (planned,
#                measured, torch.cuda.max_memory_allocated); gpu_step.json
#                and, for fp16, 7 more steps of the same compiled step
#                with MPC_CUDA_PROFILE=1 (no CUDA graphs, not timed; the
#                first left out):
#                device ms per op and the slowest nodes; and the same PyTorch
#                step under torch.compile (inductor), the stronger anchor.
#                A bundle carries the model and data (made where numpy and
#                onnx are); a source build makes them here
#
# Before any stage, the driver must be new enough for the CUDA toolkit the
# binaries were built with (CUDA 13 needs R580 or newer): else the check
# stops with that one line. Stage graphs compiles the two models itself when
# the trajectories stage did not, and fails when it compared none.
#
# GPU_CHECK_STAGES=backend-ops,onnx-node,trajectories,graphs,gemm-bench,step-bench
# (any of them, comma-separated) runs only those, GPU_CHECK_GTEST_FILTER
# narrows backend-ops to the tests it names (gtest's --gtest_filter); GPU_CHECK_SECONDS (570)
# is the time for everything.
#
# Every stage has a time limit and its own log under the results folder
# (default build-gpu/results/DATE); a short table is printed last, and also
# written to summary.txt there. Exit code 0 only when every stage passed.
#
# The GPU machine may lack the host build's packages (ONNX, protobuf, gtest,
# OpenBLAS). Then build on a machine that has them and carry the result:
#   tools/gpu-check.sh --bundle gpu-bundle.tar.xz   # here: sm_90 binaries +
#                                                   # the shared libraries the
#                                                   # GPU machine lacks
#   tools/gpu-check.sh --prebuilt gpu-bundle.tar.xz # there: skip the build
#
# Through this workplace's device tool (which brings back at most 8 files
# from $OUT): run with --results /tmp/gc, then copy /tmp/gc/summary.txt and
# /tmp/gc/gpu-check.log (every stage's log in one file) into $OUT. A bundle
# travels in a folder that .git/info/exclude ignores, named in `carry`. As
# run on the H200 on 2026-12-04 (five calls, 35-170 s each plus ~40 s to
# start): here, `make gpu-bundle` (`tools/gpu-check.sh --bundle
# .gpu/gpu-bundle.tar.xz` and, for onnx-node, `tar -C
# /usr/share/libonnx-testdata/data -cJf .gpu/node.tar.xz node`, 1.2 MB, in
# .gpu/, which it adds to .git/info/exclude);
# there, with carry [".gpu"]: `mkdir -p /usr/share/libonnx-testdata/data &&
# tar -C /usr/share/libonnx-testdata/data -xJf .gpu/node.tar.xz;
# tools/gpu-check.sh --prebuilt .gpu/gpu-bundle.tar.xz --results /tmp/gc;
# cp /tmp/gc/summary.txt /tmp/gc/gpu-check.log /tmp/gc/*.json $OUT/`. The
# whole check took 141 s there on 2026-12-04, onnx-node 86 s of it.
#
# Usage: tools/gpu-check.sh [--prebuilt BUNDLE] [--results DIR] [--jobs N]
#        tools/gpu-check.sh --bundle BUNDLE
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${GPU_CHECK_BUILD:-$root/build-gpu}
jobs=$(nproc 2>/dev/null || echo 4)
results=""
prebuilt=""
bundle=""
while [ $# -gt 0 ]; do
  case "$1" in
  --prebuilt) prebuilt=${2:?--prebuilt needs a bundle}; shift 2 ;;
  --results) results=${2:?--results needs a folder}; shift 2 ;;
  --jobs) jobs=${2:?--jobs needs a number}; shift 2 ;;
  --bundle) bundle=${2:?--bundle needs a file name}; shift 2 ;;
  -h | --help) sed -n '/^set -euo/q; 2,$p' "$0"; exit 0 ;;
  *) echo "gpu-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

targets=(mpc-opt mpc-run mpc-backend-ops mpc-gpu-gemm mpc-gpu-optimizer mpc-onnx-node)
# mpc-run's CUDA backend, which it loads from beside itself (building mpc-run
# builds it); it travels in the bundle with the binaries.
plugin=libmpc_cuda_backend.so
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

configure_and_build() { # build-dir log
  cmake -S "$root" -B "$1" -DCMAKE_BUILD_TYPE=Release -DMPC_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 >"$2" 2>&1 &&
    cmake --build "$1" -j"$jobs" --target "${targets[@]}" >>"$2" 2>&1
}

# --- --bundle: build here, pack the binaries and their libraries ------------
if [ -n "$bundle" ]; then
  dir=$(mktemp -d)
  trap 'rm -rf "$dir"' EXIT
  echo "gpu-check: building ${targets[*]} for sm_90 in $build-bundle"
  if ! configure_and_build "$build-bundle" "$dir/build.log"; then
    tail -n 30 "$dir/build.log" >&2
    echo "gpu-check: the bundle build failed (log above)" >&2
    exit 1
  fi
  mkdir -p "$dir/mpc/bin" "$dir/mpc/lib"
  for t in "${targets[@]}" "$plugin"; do
    cp "$build-bundle/bin/$t" "$dir/mpc/bin/"
    strip "$dir/mpc/bin/$t"
  done
  # The CPU backend dlopens OpenBLAS (kernels/cpu/blas.cpp), so ldd does not
  # list it: it travels under its run-time name, and its own libraries
  # (Debian's is built with gfortran, which a CUDA image rarely has) with
  # the binaries' below.
  openblas=$(ldconfig -p | awk '$1 == "libopenblas.so.0" {print $NF; exit}')
  [ -z "$openblas" ] || cp -L "$openblas" "$dir/mpc/lib/libopenblas.so.0"
  # Libraries a stock CUDA machine may lack; never the C/C++ runtime, the
  # driver or the CUDA toolkit's own (cuBLASLt alone is half a gigabyte),
  # nor cuDNN: libcudnn.so.9 is a small loader of sub-libraries (half a
  # gigabyte) that ldd does not list, so the GPU machine needs cuDNN 9.
  for f in "${targets[@]/#/$build-bundle/bin/}" "$build-bundle/bin/$plugin" $openblas; do
    ldd "$f"
  done | awk '$3 ~ /^\// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn)\.so' |
    while read -r lib; do cp -L "$lib" "$dir/mpc/lib/"; done
  # The toolkit the binaries were built with: its driver floor is checked there.
  nvcc --version | sed -nE 's/.*release ([0-9]+\.[0-9]+).*/\1/p' | head -n 1 >"$dir/mpc/CUDA_VERSION"
  # The step benchmark's model and data (bench/gpu_step.sh's default sizes), made here where
  # numpy and onnx are: the GPU machine's Python may lack them. --tile keeps the 400 MB of
  # weights to a few MB of xz (each weight's values repeat; step times do not depend on them).
  mkdir -p "$dir/mpc/bench"
  if ! "${DEBIAN_PY:-python3}" "$root/bench/make_transformer_stack.py" --layers=12 --d=768 --heads=12 \
    --hidden=3072 --seq=512 --batch=16 --vocab=8192 --tile=4099 -o "$dir/mpc/bench/stack.onnx" \
    --data-out="$dir/mpc/bench/stack_data.npz" --samples=64 >"$dir/stack.log" 2>&1; then
    cat "$dir/stack.log" >&2
    echo "gpu-check: could not make the step benchmark's model (bench/make_transformer_stack.py, above)" >&2
    exit 1
  fi
  printf '%s\n' LAYERS=12 D=768 HEADS=12 HIDDEN=3072 SEQ=512 BATCH=16 VOCAB=8192 >"$dir/mpc/bench/stack.env"
  # The commit the binaries come from, for the results' JSON (bench/lib.sh).
  {
    git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown
    if [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null)" ]; then
      echo 1
    else
      echo 0
    fi
  } >"$dir/mpc/COMMIT"
  XZ_OPT=${XZ_OPT:--T0} tar -C "$dir" -cJf "$bundle" mpc
  echo "gpu-check: wrote $bundle ($(du -h "$bundle" | cut -f1)): $(ls "$dir/mpc/lib" | tr '\n' ' ')"
  exit 0
fi

# --- the checks ---------------------------------------------------------------
[ -n "$results" ] || results=$build/results/$(date +%Y%m%d-%H%M%S)
mkdir -p "$results"
# 9.5 minutes for everything; GPU_CHECK_SECONDS shortens it to fit a lease.
deadline=$((SECONDS + ${GPU_CHECK_SECONDS:-570}))
failed=0
table=()
notes=()

# want STAGE: whether GPU_CHECK_STAGES (default: all) names STAGE.
want() { [ -z "${GPU_CHECK_STAGES:-}" ] || [[ ",$GPU_CHECK_STAGES," == *",$1,"* ]]; }

# run_stage NAME LIMIT_S CMD...: runs CMD with its output in NAME.log, under
# the smaller of LIMIT_S and the time left; records a row of the table.
run_stage() {
  local name=$1 limit=$2 left=$((deadline - SECONDS)) rc=0 status start=$SECONDS
  shift 2
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -lt 5 ]; then
    table+=("$(printf '%-30s %-9s %5s  %s' "$name" SKIPPED - "no time left")")
    failed=1
    return 1
  fi
  echo "== $name (up to ${limit}s)"
  timeout --kill-after=5 "$limit" "$@" >"$results/$name.log" 2>&1 || rc=$?
  case $rc in
  0) status=ok ;;
  124 | 137) status=TIMEOUT ;;
  *) status="FAIL($rc)" ;;
  esac
  table+=("$(printf '%-30s %-9s %4ss  %s' "$name" "$status" $((SECONDS - start)) "$name.log")")
  if [ $rc -ne 0 ]; then
    failed=1
    tail -n 15 "$results/$name.log" | sed 's/^/   | /'
  fi
  return $rc
}

finish() {
  # Every log in one file too (the device tool brings back only a few files).
  for f in "$results"/*.log "$results"/*.csv; do
    [ -e "$f" ] && [ "$(basename "$f")" != gpu-check.log ] || continue
    echo "===== $(basename "$f")"
    cat "$f"
  done >"$results/gpu-check.log"
  {
    echo
    echo "gpu-check $(date -u +%Y-%m-%dT%H:%MZ) on ${gpu:-unknown GPU}, $((SECONDS))s in all"
    printf '%-30s %-9s %5s  %s\n' stage status time log
    printf '%s\n' "${table[@]}"
    [ ${#notes[@]} -eq 0 ] || printf '%s\n' "${notes[@]}"
    echo "logs: $results"
  } | tee "$results/summary.txt"
  exit $failed
}

# nvidia-smi without a usable driver prints its complaint on stdout and
# fails: only a successful query names a GPU.
gpu="" stack_dir=""
if smi=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
  --format=csv,noheader 2>/dev/null); then
  gpu=$(printf '%s\n' "$smi" | head -n 1)
fi
if [ -z "$gpu" ]; then
  echo "gpu-check: nvidia-smi sees no GPU here; these checks need one" >&2
  table+=("$(printf '%-30s %-9s %5s  %s' gpu FAIL - "nvidia-smi found no GPU")")
  failed=1
  finish
fi
echo "gpu-check: $gpu; results in $results"

# need_driver CUDA_VERSION: stops the check with a note when the driver is older than
# the toolkit the binaries were built with needs (its minor-version compatibility
# floor: CUDA 13.x needs R580, 12.x R525, 11.x R450); a clear line instead of every
# stage failing with "driver version is insufficient".
need_driver() {
  local cuda=$1 major floor driver
  major=${cuda%%.*}
  case $major in
  '' | *[!0-9]*) return 0 ;;
  esac
  if [ "$major" -ge 13 ]; then floor=580
  elif [ "$major" -eq 12 ]; then floor=525
  elif [ "$major" -eq 11 ]; then floor=450
  else return 0; fi
  driver=$(printf '%s\n' "$smi" | head -n 1 | awk -F', *' '{print $2}')
  notes+=("driver $driver; binaries built with CUDA $cuda (needs R$floor or newer)")
  if ! [[ "${driver%%.*}" =~ ^[0-9]+$ ]]; then
    table+=("$(printf '%-30s %-9s %5s  %s' driver FAIL - "nvidia-smi gave no driver version ('$driver')")")
    failed=1
    finish
  fi
  if [ "${driver%%.*}" -lt "$floor" ]; then
    echo "gpu-check: the NVIDIA driver $driver is too old for CUDA $cuda, which needs R$floor or newer; update the driver or build with an older toolkit" >&2
    table+=("$(printf '%-30s %-9s %5s  %s' driver FAIL - "driver $driver < R$floor (CUDA $cuda)")")
    failed=1
    finish
  fi
}

# --- build or unpack ----------------------------------------------------------
if [ -n "$prebuilt" ]; then
  unpack=$(mktemp -d)
  run_stage unpack 60 tar -C "$unpack" -xJf "$prebuilt" || finish
  bin=$unpack/mpc/bin
  [ ! -f "$unpack/mpc/CUDA_VERSION" ] || need_driver "$(cat "$unpack/mpc/CUDA_VERSION")"
  [ ! -f "$unpack/mpc/bench/stack.env" ] || stack_dir=$unpack/mpc/bench
  if [ -f "$unpack/mpc/COMMIT" ]; then
    export MPC_BUILD_COMMIT MPC_BUILD_DIRTY
    { read -r MPC_BUILD_COMMIT && read -r MPC_BUILD_DIRTY; } <"$unpack/mpc/COMMIT"
    echo "gpu-check: the bundle was built from $MPC_BUILD_COMMIT$([ "$MPC_BUILD_DIRTY" = 1 ] && echo ' (with uncommitted changes)')"
  fi
  # The toolkit's libraries, the driver's folder, and pip's CUDA wheels where
  # the image has them instead of a toolkit (nvidia/cu13/lib, nvidia/cudnn/lib).
  libdirs=$unpack/mpc/lib
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/nvidia/lib64 /usr/local/nvidia/lib; do
    [ -d "$d" ] && libdirs=$libdirs:$d
  done
  pylibs=$(python3 -c 'import nvidia, os; print(":".join(os.path.join(r, d, "lib") for r in nvidia.__path__ for d in sorted(os.listdir(r)) if os.path.isdir(os.path.join(r, d, "lib"))))' 2>/dev/null || true)
  export LD_LIBRARY_PATH=$libdirs${pylibs:+:$pylibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  unresolved() {
    for t in "${targets[@]}" "$plugin"; do ldd "$bin/$t"; done
    if [ -f "$unpack/mpc/lib/libopenblas.so.0" ]; then ldd "$unpack/mpc/lib/libopenblas.so.0"; fi
  }
  # Anything still missing: look for it under the usual prefixes once.
  for lib in $(unresolved | awk '/not found/ {print $1}' | sort -u); do
    found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -n 1)
    if [ -n "$found" ]; then export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$(dirname "$found"); fi
  done
  echo "gpu-check: LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  missing=$(unresolved | grep 'not found' | sort -u || true)
  if [ -n "$missing" ]; then
    echo "gpu-check: the prebuilt binaries miss libraries here:" >&2
    echo "$missing" >&2
    table+=("$(printf '%-30s %-9s %5s  %s' libraries FAIL - "missing: $(echo "$missing" | awk '{print $1}' | tr '\n' ' ')")")
    failed=1
    finish
  fi
else
  if command -v nvcc >/dev/null; then
    need_driver "$(nvcc --version | sed -nE 's/.*release ([0-9]+\.[0-9]+).*/\1/p' | head -n 1)"
  fi
  if ! run_stage configure 180 cmake -S "$root" -B "$build" \
    -DCMAKE_BUILD_TYPE=Release -DMPC_ENABLE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90; then
    if grep -qE 'Could NOT find|Could not find a package' "$results/configure.log"; then
      notes+=("configure: this machine lacks the host packages; run 'tools/gpu-check.sh --bundle B.tar.xz' where they are, carry B.tar.xz, and run '--prebuilt B.tar.xz' here")
    fi
    finish
  fi
  run_stage build 420 cmake --build "$build" -j"$jobs" --target "${targets[@]}" || finish
  bin=$build/bin
fi
export MPC_SOURCE_DIR=$root

# --- backend-ops --------------------------------------------------------------
if want backend-ops; then
  run_stage backend-ops 180 "$bin/mpc-backend-ops" --gtest_color=no \
    ${GPU_CHECK_GTEST_FILTER:+--gtest_filter="$GPU_CHECK_GTEST_FILTER"} || true
  count() { # gtest's "[  PASSED  ] 12 tests" line -> 12
    grep -Eo "\[  $1 *\] [0-9]+ tests?" "$results/backend-ops.log" | grep -Eo '[0-9]+' | head -n 1 || true
  }
  passed=$(count PASSED) skipped=$(count SKIPPED) failures=$(count FAILED)
  notes+=("backend-ops: ${passed:-0} passed, ${skipped:-0} skipped, ${failures:-0} failed")
  if [ -n "$skipped" ] && [ "$skipped" != 0 ]; then
    notes+=("backend-ops: $(grep -m1 -o 'backend-ops skipped:.*' "$results/backend-ops.log" || echo 'tests were skipped')")
    table[${#table[@]} - 1]=$(printf '%-30s %-9s %5s  %s' backend-ops SKIPPED - "GPU unusable (see notes)")
    failed=1
  fi
fi

# --- ONNX's node tests (the claimed cases) on the device ----------------------
if want onnx-node; then
  node_data=/usr/share/libonnx-testdata/data/node
  if [ -d "$node_data" ]; then
    run_stage onnx-node 180 "$bin/mpc-onnx-node" --data-dir="$node_data" --device=cuda \
      --claimed="$root/tests/onnx-node/claimed.txt" \
      --known-failing="$root/tests/onnx-node/known-failing.txt" --jobs="$jobs" || failed=1
    while read -r line; do notes+=("$line"); done < <(grep -E '^onnx-node: ' "$results/onnx-node.log")
  else
    notes+=("onnx-node: skipped, no ONNX test data at $node_data (apt-get install libonnx-testdata)")
  fi
fi

# --- model trajectories on CUDA against the CPU -----------------------------
if want trajectories; then
  maxrel() { # two step,loss,... CSVs -> the largest |a - b| / |b| of the losses
    paste -d, <(tail -n +2 "$1" | cut -d, -f2) <(tail -n +2 "$2" | cut -d, -f2) |
      awk -F, '{d = ($1 - $2) / ($2 == 0 ? 1 : $2); if (d < 0) d = -d; if (d > m) m = d; n++}
               END {if (n == 0) print "nan"; else printf "%.2e", m}'
  }
  # trajectory NAME MODEL DATA LR PRECISION [MPC-OPT FLAGS...]: compiles MODEL,
  # runs 50 Adam steps on both devices, compares the losses and the skipped
  # steps (limits: fp32 1e-4, fp16 1e-2 relative).
  trajectory() {
    local name=$1 onnx=$2 data=$3 lr=$4 precision=$5 limit=1e-2 ok=1 device
    shift 5
    [ "$precision" = fp32 ] && limit=1e-4
    local tag=$name-$precision model=$results/$name.$precision.onnx
    run_stage "$tag-opt" 60 "$bin/mpc-opt" "$root/models/$onnx" -o "$model" \
      --precision="$precision" --optimizer=adam --lr="$lr" "$@" || return 0
    for device in cpu cuda; do
      run_stage "$tag-$device" 120 "$bin/mpc-run" "$model" \
        --data="$root/models/$data" --steps=50 --device=$device \
        --log="$results/$name.$precision.$device.csv" || ok=0
    done
    [ $ok = 1 ] || return 0
    local d skips_cpu skips_gpu verdict=ok
    d=$(maxrel "$results/$name.$precision.cuda.csv" "$results/$name.$precision.cpu.csv")
    skips_cpu=$(awk -F, 'NR > 1 {s += $4} END {print s + 0}' "$results/$name.$precision.cpu.csv")
    skips_gpu=$(awk -F, 'NR > 1 {s += $4} END {print s + 0}' "$results/$name.$precision.cuda.csv")
    if ! awk -v d="$d" -v l="$limit" 'BEGIN {exit !(d != "nan" && d + 0 <= l + 0)}' ||
      [ "$skips_cpu" != "$skips_gpu" ]; then
      verdict=FAIL
      failed=1
    fi
    notes+=("$name $precision, 50 Adam steps: max relative loss difference cuda vs cpu $d (limit $limit), skipped steps cpu $skips_cpu cuda $skips_gpu: $verdict")
  }
  for precision in fp16 fp32; do
    trajectory mlp_seed mlp_seed.onnx mlp_seed_data.npz 1e-2 $precision
    trajectory transformer transformer.onnx transformer_data.npz 1e-3 $precision
    trajectory resmlp resmlp.onnx resmlp_data.npz 1e-3 $precision
    trajectory cnn cnn.onnx cnn_data.npz 1e-3 $precision
    # torch.nn's own modules: TransformerEncoderLayer under a causal mask,
    # GroupNorm and InstanceNorm2d (lowered to LayerNormalization).
    trajectory encoder_layer encoder_layer.onnx encoder_layer_data.npz 1e-3 $precision
    trajectory norm_cnn norm_cnn.onnx norm_cnn_data.npz 1e-3 $precision
    trajectory act_mlp act_mlp.onnx act_mlp_data.npz 1e-3 $precision
    trajectory reduce_head reduce_head.onnx reduce_head_data.npz 1e-3 $precision
    trajectory resize_cnn resize_cnn.onnx resize_cnn_data.npz 1e-3 $precision
    trajectory einsum_attn einsum_attn.onnx einsum_attn_data.npz 1e-3 $precision
    trajectory rnn_lm rnn_lm.onnx rnn_lm_data.npz 1e-3 $precision
    # The model-library architectures: GPT-2, LLaMA, Swin, ConvNeXt.
    trajectory gpt2_tiny gpt2_tiny.onnx gpt2_tiny_data.npz 1e-3 $precision
    trajectory llama_tiny llama_tiny.onnx llama_tiny_data.npz 1e-3 $precision
    trajectory swin_tiny swin_tiny.onnx swin_tiny_data.npz 1e-3 $precision
    trajectory convnext_tiny convnext_tiny.onnx convnext_tiny_data.npz 1e-3 $precision
    # torch's dynamo exporter: GPT-2 as called (IsNaN, the folded mask), the
    # CNN with its restored training-mode batch norm, attention at opset 23.
    trajectory gpt2_plain_dynamo gpt2_plain_dynamo.onnx gpt2_tiny_data.npz 1e-3 $precision
    trajectory cnn_dynamo cnn_dynamo.onnx cnn_data.npz 1e-3 $precision
    trajectory attention_dynamo attention_dynamo.onnx gpt2_tiny_data.npz 1e-3 $precision
  done
  # The opset-20 Gelu variant, and gradient clipping (ClipGradNorm on the
  # device), in fp16 only: the same kernels otherwise.
  trajectory transformer_gelu20 transformer_gelu20.onnx transformer_data.npz 1e-3 fp16
  trajectory transformer_clip transformer.onnx transformer_data.npz 1e-3 fp16 --max-grad-norm=1.0
  # --lr-schedule: mpc.LearningRate on the device (cos and pow in double)
  # feeding the Adam kernels' lr in the captured graph; the losses follow
  # the CPU's through warmup and decay.
  trajectory mlp_seed_cosine mlp_seed.onnx mlp_seed_data.npz 1e-2 fp16 \
    --lr-schedule=cosine --warmup-steps=5 --total-steps=40 --min-lr-ratio=0.1
  # --grad-accum (its counter on the device: mpc.IncrementStep, never run
  # on a GPU before) with --ema-decay's average.
  trajectory mlp_seed_accum_ema mlp_seed.onnx mlp_seed_data.npz 1e-2 fp16 \
    --grad-accum=2 --ema-decay=0.99
  # A --data-parallel step on one rank: mpc.AllReduce (gradients and the
  # overflow flag) runs on the device as copies, in the captured graph; with
  # --sync-batchnorm the CNN's statistics (ReduceSum, the count from the
  # shape, AllReduce, the inference-form batch norm and its gradient).
  trajectory transformer_dp transformer.onnx transformer_data.npz 1e-3 fp16 --data-parallel
  trajectory cnn_syncbn cnn.onnx cnn_data.npz 1e-3 fp16 --data-parallel --sync-batchnorm
  # Several ranks need a GPU each (NCCL): with two GPUs, 2 ranks started by
  # mpc-run --nproc-per-node (the Gloo world; no MPI in the bundle) against
  # the same 2 ranks on the CPU.
  gpus=$(printf '%s\n' "$smi" | grep -c .)
  if [ "$gpus" -ge 2 ]; then
    model=$results/transformer_dp2.onnx
    if run_stage transformer_dp2-opt 60 "$bin/mpc-opt" "$root/models/transformer_dynbatch.onnx" \
      -o "$model" --batch=4 --precision=fp16 --optimizer=adam --lr=1e-3 --data-parallel; then
      ok=1
      for device in cpu cuda; do
        run_stage "transformer_dp2-$device" 120 "$bin/mpc-run" --nproc-per-node=2 "$model" \
          --data="$root/models/transformer_data.npz" --steps=50 --device=$device \
          --log="$results/transformer_dp2.$device.csv" || ok=0
      done
      if [ $ok = 1 ]; then
        d=$(maxrel "$results/transformer_dp2.cuda.csv" "$results/transformer_dp2.cpu.csv")
        verdict=ok
        awk -v d="$d" 'BEGIN {exit !(d != "nan" && d + 0 <= 1e-2)}' || { verdict=FAIL; failed=1; }
        notes+=("transformer 2 ranks (NCCL) fp16, 50 Adam steps: max relative loss difference cuda vs cpu $d (limit 1e-2): $verdict")
      fi
    fi
  else
    notes+=("multi-rank NCCL: skipped, $gpus GPU here (2 ranks need a GPU each)")
  fi
fi

# --- device-resident step: CUDA graphs on/off, staged; step times -----------
if want graphs; then
  msPerStep() { # a step,loss,loss_scale,skipped,ms CSV -> mean ms after step 2
    awk -F, 'NR > 3 {s += $5; n++} END {if (n == 0) print "nan"; else printf "%.3f", s / n}' "$1"
  }
  graphs_checked=0
  graphs_check() { # NAME ONNX DATA LR
    local name=$1 model=$results/$1.fp16.onnx data=$3 mode ok=1
    if [ ! -f "$model" ]; then # the trajectories stage did not run or compile it
      run_stage "graphs-$name-opt" 60 "$bin/mpc-opt" "$root/models/$2" -o "$model" \
        --precision=fp16 --optimizer=adam --lr="$4" || return 0
    fi
    for mode in on off staged; do
      local flags=(--cuda-graphs=$mode)
      [ $mode = staged ] && flags=(--cuda-resident=off)
      run_stage "graphs-$name-$mode" 120 "$bin/mpc-run" "$model" --data="$root/models/$data" \
        --steps=200 --device=cuda "${flags[@]}" --log="$results/graphs.$name.$mode.csv" || ok=0
    done
    [ $ok = 1 ] || return 0
    local same=identical
    if ! cmp -s <(cut -d, -f1-4 "$results/graphs.$name.on.csv") \
      <(cut -d, -f1-4 "$results/graphs.$name.off.csv"); then
      same=DIFFERENT
      failed=1
    fi
    graphs_checked=$((graphs_checked + 1))
    notes+=("graphs $name fp16, 200 steps: losses graphs on vs off $same; ms/step graphs $(msPerStep "$results/graphs.$name.on.csv"), no graphs $(msPerStep "$results/graphs.$name.off.csv"), staged $(msPerStep "$results/graphs.$name.staged.csv")")
  }
  graphs_check mlp_seed mlp_seed.onnx mlp_seed_data.npz 1e-2
  graphs_check transformer transformer.onnx transformer_data.npz 1e-3
  # A stage that compared nothing must not read as passed.
  if [ "$graphs_checked" -lt 2 ]; then
    table+=("$(printf '%-30s %-9s %5s  %s' graphs FAIL - "$graphs_checked of 2 models compared (logs above)")")
    failed=1
  fi
fi

# --- cuBLAS throughput ---------------------------------------------------------
if want gemm-bench; then
  if run_stage gemm-bench 120 "$bin/mpc-gpu-gemm"; then
    while read -r line; do notes+=("$line"); done < <(grep -E '^(gpu|gemm)' "$results/gemm-bench.log")
  fi
fi

# --- the training step against PyTorch AMP (issue 8 parts 3 and 4) -------------
# GPU_CHECK_PRECISIONS (default fp16) lists the precisions to time: "fp16 bf16"
# adds a step-bench-bf16 stage against PyTorch AMP in bf16 (gpu_step-bf16.json).
if want step-bench; then
  for precision in ${GPU_CHECK_PRECISIONS:-fp16}; do
    stage=step-bench json=gpu_step.json
    [ "$precision" = fp16 ] || stage=step-bench-$precision json=gpu_step-$precision.json
    profile=0
    [ "$precision" = fp16 ] && profile=7
    stack=()
    if [ -n "$stack_dir" ]; then # the bundle's model and data, made for these sizes
      mapfile -t stack <"$stack_dir/stack.env"
      stack+=(STACK_MODEL="$stack_dir/stack.onnx" STACK_DATA="$stack_dir/stack_data.npz")
    fi
    if run_stage "$stage" 300 env DEBIAN_PY=python3 PY=python3 PRECISION="$precision" \
      PROFILE_STEPS=$profile "${stack[@]}" "$root/bench/gpu_step.sh" "$bin" "$results/$json"; then
      while read -r line; do notes+=("$stage: $line"); done < <(sed -n '/^ *mpc  *torch/,$p' "$results/$stage.log" | grep -v '^results:')
      while read -r line; do notes+=("$stage profile: ${line#cuda profile: }"); done < <(grep '^cuda profile:' "$results/$stage.log" | head -n 22)
    fi
  done
fi

finish
