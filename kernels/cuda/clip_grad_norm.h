// Host entry point of the CUDA ClipGradNorm kernel (kernels/cuda/
// clip_grad_norm.cu): the global gradient norm over many tensors and the
// clip, all on the device.
//
// Three launches on one stream, no host synchronisation: per-chunk sums of
// squares (one block per chunk of kUnscaleChunk elements, a fixed tree
// inside the block), one thread adding each tensor's chunks in order into
// its norm and those into the total (clip_grad_norm_math.h, the CPU's
// scalar arithmetic) and writing the coefficient to the device, then every
// gradient scaled by that coefficient read on the device.
#pragma once

#include "ir/types.h"
#include "kernels/cuda/optimizer.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

namespace mpc {
namespace cuda {

/// One gradient: n elements of dtype (fp32, fp16, bf16) at src, clipped
/// into dst (same dtype; nullptr: the output is not wanted).
struct ClipTensor {
  const void *src = nullptr;
  void *dst = nullptr;
  int64_t n = 0;
  DType dtype = DType::F32;
  /// Spelled out and zeroed: an uploaded table has no padding bytes
  /// (NodeStaging::upload compares tables byte for byte).
  uint8_t unused[7] = {};
};

/// The chunks of every tensor (UnscaleChunk, in tensor order) and, per
/// tensor, the index of its first chunk (numTensors + 1 entries).
struct ClipPlan {
  std::vector<UnscaleChunk> chunks;
  std::vector<int64_t> firstChunk;
};
ClipPlan clipPlan(const std::vector<ClipTensor> &tensors);

/// Device copies of the host tables, scratch of numChunks + 1 floats, and
/// the fp32 total-norm output.
struct ClipLaunch {
  const ClipTensor *tensors = nullptr;
  int32_t numTensors = 0;
  const UnscaleChunk *chunks = nullptr;
  int64_t numChunks = 0;
  const int64_t *firstChunk = nullptr;
  float *scratch = nullptr;
  float *totalNorm = nullptr;
  float maxNorm = 1.0f;
};
void launchClipGradNorm(const ClipLaunch &launch, cudaStream_t stream);

} // namespace cuda
} // namespace mpc
