// The per-channel and per-row math of mpc's batch-norm kernels
// (kernels/cuda/batch_norm.cu), MPC_HD so that the CPU tests replay it
// against the CPU kernel (kernels/cpu/normalization.cpp), whose formulas and
// order of operations these are.
#pragma once

#include "ir/host_device.h"

#include <cmath>
#include <cstdint>

namespace mpc {
namespace cuda {

/// 1 / sqrt(var + epsilon) in fp32.
MPC_HD float batchNormInvStd(float var, float epsilon) {
  return 1.0f / sqrtf(var + epsilon);
}

/// A running statistic after one training step: input * momentum + batch
/// * (1 - momentum) (ONNX's momentum; the variance is the unbiased one).
MPC_HD float batchNormRunning(float input, float batch, float momentum) {
  return input * momentum + batch * (1.0f - momentum);
}

/// The biased variance from the unbiased one over `count` values.
MPC_HD float batchNormBiasedVar(float unbiased, int64_t count) {
  return unbiased * (float(count) - 1.0f) / float(count);
}

/// One row's partial sums of the backward with given statistics: sum dY
/// and sum dY * xhat over `inner` values read through dy(i) and x(i).
template <typename Dy, typename X>
MPC_HD void batchNormGivenRowSums(const Dy &dy, const X &x, int64_t inner,
                                  float mean, float invStd, float &sumDy,
                                  float &sumDyXhat) {
  float s1 = 0.0f, s2 = 0.0f;
  for (int64_t i = 0; i < inner; ++i) {
    float g = dy(i);
    s1 += g;
    s2 += g * (x(i) - mean) * invStd;
  }
  sumDy = s1;
  sumDyXhat = s2;
}

/// dX of the backward with given statistics.
MPC_HD float batchNormGivenDx(float scale, float invStd, float dy) {
  return scale * invStd * dy;
}

} // namespace cuda
} // namespace mpc
