// LayerNormalization forward and backward: the per-element formulas and the
// row statistics, shared by the CPU kernels (kernels/cpu/normalization.cpp)
// and the CUDA kernels (kernels/cuda/layer_norm.cu). mpc.RMSNormalization is
// the same with the mean taken as 0 (not `centered`): no bias, and its
// backward without the mean(g) term.
//
// The statistics are two-pass in fp32 (fp64 for fp64 X): the mean, then the
// mean of squared deviations (the biased variance, as PyTorch), so a large
// mean does not cancel the variance away as a one-pass sum of squares
// would. The CPU adds in lane_sum.h's sixteen lanes (layerNormRowStats); the
// GPU adds a warp's lane partials in a fixed tree, so its statistics may differ
// in the last bits, but given the same mean and inv_std every element below is
// the same operations in the same order on both (nvcc builds with
// --fmad=false, sqrt and division are IEEE on both).
#pragma once

#include "kernels/common/float_math.h"
#include "kernels/common/lane_sum.h"

#include <cstdint>

namespace mpc {

/// The mean of a row from its sum.
template <typename T> MPC_HD T layerNormMean(T sum, int64_t n) {
  return sum / T(n);
}

/// A term of the row's sum of squared deviations.
template <typename T> MPC_HD T layerNormSquaredDeviation(T x, T mean) {
  return (x - mean) * (x - mean);
}

/// 1 / sqrt(biased variance + epsilon) from the sum of squared deviations.
template <typename T>
MPC_HD T layerNormInvStd(T squares, int64_t n, double epsilon) {
  return T(1) / sqrtOf(squares / T(n) + T(epsilon));
}

/// Y = (X - mean) * inv_std * scale + bias.
template <typename T>
MPC_HD T layerNormValue(T x, T mean, T invStd, T scale, T bias) {
  return (x - mean) * invStd * scale + bias;
}

/// The normalised input xhat = (X - mean) * inv_std (the backward's).
template <typename T> MPC_HD T layerNormXhat(T x, T mean, T invStd) {
  return (x - mean) * invStd;
}

/// dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)), g = dY * scale.
template <typename T>
MPC_HD T layerNormGradInput(T invStd, T g, T meanG, T xhat, T meanGXhat) {
  return invStd * (g - meanG - xhat * meanGXhat);
}

/// mean and inv_std of one row of n elements read through load(j), in the
/// CPU backend's order (two passes, each in lane_sum.h's lanes). Not `centered`
/// (RMS normalisation, mpc.RMSNormalization): the mean is taken as 0, so
/// inv_std is 1 / sqrt(mean(x^2) + epsilon), and the backward drops mean(g).
template <typename T> struct LayerNormRowStats { T mean, invStd; };
template <typename T, typename Load>
MPC_HD LayerNormRowStats<T> layerNormRowStats(int64_t n, double epsilon,
                                              const Load &load,
                                              bool centered = true) {
  T mean = centered
               ? layerNormMean(
                     laneSum<T>(n, [&](int64_t j) { return T(load(j)); }), n)
               : T(0);
  T squares = laneSum<T>(n, [&](int64_t j) {
    return layerNormSquaredDeviation(T(load(j)), mean);
  });
  return {mean, layerNormInvStd(squares, n, epsilon)};
}

} // namespace mpc
