// The process-wide heap of the command-line tools.
//
// mpc-opt's compile is dominated by many small, short-lived allocations (IR
// nodes, values, names, protobuf messages): with glibc's malloc they were a
// third of its instructions. The tools link mimalloc (Debian's
// libmimalloc-dev), which replaces malloc/free for the whole process, protobuf
// and libstdc++ included, as ONNX Runtime does with its
// onnxruntime_USE_MIMALLOC option. Builds without it (MPC_MIMALLOC=OFF, and the
// sanitizer and fuzz builds, whose runtimes own malloc) keep glibc's.
#pragma once

namespace mpc {

/// Call first thing in main: sets the allocator's options (where there is one
/// to set) before the large allocations of a compile or a training run.
void configureProcessAllocator();

} // namespace mpc
