// Host entry point of the CUDA kernel of the random ops (RandomUniform,
// RandomNormal, their *Like forms, Bernoulli; kernels/cuda/random.cu): each
// element is drawn from (base, i) by the rules of kernels/common/
// random_math.h, which the CPU kernels use too.
#pragma once

#include "ir/types.h"
#include "kernels/common/random_math.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

/// out[i] (n elements of dtype t, fp32/fp16/bf16) := the kind's draw at
/// (base, i): Uniform low + (high - low) u with (a, b) = (low, high);
/// Normal mean + scale z with (a, b) = (mean, scale); Bernoulli 1 where
/// u < p[i] (p of dtype pType, fp32/fp16/bf16). With `seedOnDevice` the
/// kernel uses base ^ *seedOnDevice (the device-resident step's seed, so a
/// replayed CUDA graph draws anew at every step).
void launchRandom(RandomKind kind, DType t, void *out, int64_t n, uint64_t base,
                  float a, float b, const void *p, DType pType,
                  cudaStream_t stream, const uint64_t *seedOnDevice = nullptr);

} // namespace cuda
} // namespace mpc
