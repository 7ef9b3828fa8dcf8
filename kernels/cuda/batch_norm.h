// Host entry points of mpc's own batch-norm kernels (kernels/cuda/
// batch_norm.cu), beside cuDNN's forward and backward (runtime/cuda/
// run_normalization.cpp).
//
// launchBatchNormStats applies the running-statistics update the CPU kernel
// (kernels/cpu/normalization.cpp) defines, from the batch statistics cuDNN
// returns, so the momentum convention and the dtype of the statistics
// outputs are mpc's, not cuDNN's. launchBatchNormGradGiven is the backward
// of a batch norm that normalised with given statistics (inference mode,
// mean and var inputs of mpc.BatchNormalizationGrad), which cuDNN's
// backward (always the batch-statistics formula) does not compute.
#pragma once

#include "ir/types.h"

#include <cuda_runtime_api.h>

#include <cstdint>

namespace mpc {
namespace cuda {

struct BatchNormStatsArgs {
  /// From cuDNN: batch mean and unbiased batch variance (fp32, C each).
  const float *batchMean = nullptr, *batchVarUnbiased = nullptr;
  /// The node's input_mean and input_var as fp32.
  const float *inMean = nullptr, *inVar = nullptr;
  /// Outputs of dtype statType; any may be nullptr: running mean and var
  /// (inMean * m + batch * (1 - m), the variance unbiased), batch mean and
  /// biased batch variance.
  DType statType = DType::F32;
  void *runMean = nullptr, *runVar = nullptr;
  void *savedMean = nullptr, *savedVar = nullptr;
  int64_t channels = 0;
  int64_t count = 0; ///< values per channel (N * spatial), at least 2
  float momentum = 0.9f;
};

void launchBatchNormStats(const BatchNormStatsArgs &a, cudaStream_t stream);

struct BatchNormGradGivenArgs {
  DType dyType = DType::F32, xType = DType::F32, paramType = DType::F32;
  const void *dy = nullptr, *x = nullptr;
  /// fp32, C each.
  const float *scale = nullptr, *mean = nullptr, *var = nullptr;
  float epsilon = 1e-5f;
  /// dX in dY's dtype, dScale and dBias in paramType; any may be nullptr.
  void *dx = nullptr, *dScale = nullptr, *dBias = nullptr;
  /// fp32 scratch of n * channels each (per-row partial sums).
  float *rowSumDy = nullptr, *rowSumDyXhat = nullptr;
  int64_t n = 0, channels = 0, inner = 0;
};

/// dX = scale * inv_std * dY; dScale = sum dY * xhat; dBias = sum dY, with
/// inv_std = 1 / sqrt(var + epsilon), added in the CPU kernel's order (per
/// row of `inner` values, then the rows in batch order): the same bits.
void launchBatchNormGradGiven(const BatchNormGradGivenArgs &a,
                              cudaStream_t stream);

} // namespace cuda
} // namespace mpc
