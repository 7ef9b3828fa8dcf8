// The CUDA backend: the Backend interface (runtime/backend.h) on one GPU.
//
// This first increment keeps the executor's host tensors: for each node the
// backend copies the inputs into device buffers (from a caching allocator),
// runs device code (cuBLAS for matrix products with fp32 accumulation, the
// kernels of kernels/cuda/ for everything else), and copies the outputs
// back. The device code takes raw device pointers and sizes, never Tensors,
// so moving the backend onto device-resident buffers later changes only the
// staging. Ops without device code are refused by supports(), with why;
// shape and view ops (Shape, Reshape, ...) run on the host, where their
// inputs already are.
#pragma once

#include "runtime/backend.h"

#include <memory>
#include <string>
#include <vector>

namespace mpc {

struct CudaBackendOptions {
  /// Device ordinal.
  int device = 0;
  /// Fill every device output buffer with 0xFF bytes (NaN in fp32, fp16 and
  /// bf16) before its kernel runs, so an element a kernel forgets to write
  /// shows up as NaN (tests/backend-ops).
  bool poisonOutputs = false;
  /// Keep the executor's whole step on the device (Backend::deviceResident):
  /// one arena, no host round trip per node, one synchronisation per step.
  /// false: the staged backend (every node copies in and out; for
  /// debugging, and what backend-ops exercises per op).
  bool resident = true;
  /// Resident steps: capture the step as a CUDA graph on its second run for
  /// given shapes (the first sizes scratch and lets cuBLAS choose) and
  /// replay it after; MPC_CUDA_GRAPHS=0 in the environment turns it off too.
  bool graphs = true;
  /// cuDNN convolutions: deterministic algorithms first (two runs give the
  /// same bits). false: cuDNN's fastest by its heuristics, deterministic or
  /// not (mpc-run --cudnn-deterministic=false).
  bool cudnnDeterministic = true;
  /// fp16/bf16 convolutions channels-last where cuDNN's Tensor Core kernels
  /// prefer it (runtime/cuda/conv_plan.h); MPC_CUDA_CONV_NHWC=0 in the
  /// environment turns it off too.
  bool convNhwc = true;
  /// Tests: every capture is treated as failed at its end, as one the
  /// driver rejects would be (the step and all later ones run eagerly).
  bool failCaptures = false;
};

/// The CUDA backend, or nullptr with `whyNot` set to one line saying why
/// there is none: no driver, no device, a GPU older than the build's
/// targets, or a build without CUDA.
std::unique_ptr<Backend>
createCudaBackend(std::string &whyNot, const CudaBackendOptions &options = {});

/// Whether the CUDA backend runs `node`, with why not; the same answer its
/// supports() gives, available without a GPU (and false in a build without
/// CUDA).
bool cudaBackendSupports(const Node &node, std::string &why);

/// The ops the CUDA backend runs with device code ("Op", "mpc.Op"), sorted.
std::vector<std::string> cudaDeviceOps();
/// The shape and view ops it runs on the host.
std::vector<std::string> cudaHostOps();

/// Device-memory statistics of a CUDA backend (for tests and reports).
struct CudaMemoryStats {
  size_t deviceAllocations = 0; ///< cudaMalloc calls so far (arenas too)
  size_t cacheHits = 0;         ///< buffers served from the cache
  size_t peakReservedBytes = 0; ///< most device bytes held at once
  size_t arenaBytes = 0;        ///< the current step arena
  size_t graphCaptures = 0;     ///< CUDA graphs captured and instantiated
  size_t graphLaunches = 0;     ///< replays of a captured step
  size_t steps = 0;             ///< device-resident steps started
  /// The device-wide scratch workspace of resident steps (the hungriest
  /// node's scratch, shared by all).
  size_t workspaceBytes = 0;
  /// What the backend accounts for on the device: every arena, the
  /// workspace, the caching allocator's peak (nodes' tables, staged
  /// buffers), cuBLAS's workspace and the step's words.
  size_t accountedBytes = 0;
  /// The device's real footprint: the largest drop of cudaMemGetInfo's free
  /// memory since the backend started (runtime/cuda/device_peak.h); also
  /// holds cuDNN's and cuBLAS's own allocations. 0 when not measured.
  size_t measuredPeakBytes = 0;
  /// Page-locked host memory staging the step's copies.
  size_t pinnedHostBytes = 0;
};
/// The stats of `backend` if it is a CUDA backend (else all zero).
CudaMemoryStats cudaMemoryStats(const Backend &backend);

} // namespace mpc
