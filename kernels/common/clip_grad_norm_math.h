// mpc.ClipGradNorm's scalar arithmetic, shared by the CPU kernel
// (kernels/cpu/optimizer.cpp) and the CUDA kernel (kernels/cuda/
// clip_grad_norm.cu): torch.nn.utils.clip_grad_norm_'s order of operations
// in fp32. The per-tensor sums of squares are where the backends differ
// (the CPU adds in index order, the GPU per block in a fixed tree).
#pragma once

#include "kernels/common/float_math.h"

namespace mpc {

/// Adds one gradient's norm, sqrt(its sum of squares), to the running sum
/// of squared norms, as torch stacks the per-tensor norms and takes their
/// norm.
MPC_HD void clipAddTensorNorm(float &sumOfNormSquares, float tensorSquares) {
  float norm = sqrtOf(tensorSquares);
  sumOfNormSquares += norm * norm;
}

/// min(1, max_norm / (total + 1e-6)), written as torch computes it
/// (max_norm * reciprocal); a NaN total gives NaN, as torch.clamp keeps it.
MPC_HD float clipGradNormCoefficient(float totalNorm, float maxNorm) {
  float coef = maxNorm * (1.0f / (totalNorm + float(1e-6)));
  return 1.0f < coef ? 1.0f : coef;
}

} // namespace mpc
