// Deterministic warp reductions for the row kernels (softmax, layer norm,
// ClipGradNorm's per-block partials).
//
// Each lane holds a partial over its strided share of a row; the butterfly
// below combines the 32 partials in a fixed tree (xor offsets 16, 8, 4, 2,
// 1), so a row's sum is the same bits on every run and every GPU, and every
// lane ends with the result. The order differs from the CPU backend's index
// order, which is why tests/backend-ops compares these kernels with a
// tolerance. Maximums combine with softmaxMax, which is exact in any order.
#pragma once

#include "kernels/common/softmax_math.h"

namespace mpc {
namespace cuda {

constexpr unsigned kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float warpSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ inline float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1)
    v = softmaxMax(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

/// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024):
/// warp sums, then warp 0 adds those in warp order. Every thread gets the
/// result; `shared` holds 32 floats.
__device__ inline float blockSum(float v, float *shared) {
  unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warpSum(v);
  __syncthreads(); // shared may still be read from an earlier call
  if (lane == 0)
    shared[warp] = v;
  __syncthreads();
  unsigned warps = blockDim.x / kWarp;
  v = lane < warps ? shared[lane] : 0.0f;
  if (warp == 0)
    v = warpSum(v);
  if (threadIdx.x == 0)
    shared[0] = v;
  __syncthreads();
  return shared[0];
}

} // namespace cuda
} // namespace mpc
