// log sigmoid and its derivative, computed stably: shared by the CPU kernels
// (kernels/cpu/activation.cpp) and the CUDA kernels (kernels/cuda/
// log_sigmoid.cu).
//
// log(sigmoid(x)) written as Log(Sigmoid(x)) loses everything once sigmoid
// rounds to 1 (x > 8 in fp16, x > 17 in fp32) and is -inf once it underflows
// (x < -88 in fp32); PyTorch's log_sigmoid and
// binary_cross_entropy_with_logits use the form below, exact to a few ulp
// for every x:  log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)).
#pragma once

#include "kernels/common/float_math.h"

namespace mpc {

#if defined(__CUDA_ARCH__)
MPC_HD float log1pOf(float x) { return ::log1pf(x); }
MPC_HD double log1pOf(double x) { return ::log1p(x); }
#else
MPC_HD float log1pOf(float x) { return std::log1p(x); }
MPC_HD double log1pOf(double x) { return std::log1p(x); }
#endif

/// log(sigmoid(x)) = -softplus(-x).
template <typename T> MPC_HD T logSigmoidValue(T x) {
  T negAbs = x < T(0) ? x : -x;
  return (x < T(0) ? x : T(0)) - log1pOf(expOf(negAbs));
}

/// d/dx log(sigmoid(x)) = sigmoid(-x) = 1 / (1 + exp(x)), from e = exp(-|x|)
/// so that it neither overflows nor cancels: e / (1 + e) for x >= 0 (tiny
/// values keep their relative precision), 1 / (1 + e) for x < 0.
template <typename T> MPC_HD T logSigmoidDerivative(T x) {
  T negAbs = x < T(0) ? x : -x;
  T e = expOf(negAbs); // in (0, 1]
  return x < T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

/// mpc.LogSigmoidGrad: dY * sigmoid(-X).
template <typename T> MPC_HD T logSigmoidGradValue(T g, T x) {
  return g * logSigmoidDerivative(x);
}

} // namespace mpc
