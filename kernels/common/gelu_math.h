// GELU (exact erf form and tanh approximation), its derivative, and the
// derivative of erf: shared by the CPU kernels (kernels/cpu/activation.cpp)
// and the CUDA kernels (kernels/cuda/gelu.cu).
//
// The constants and operation order are PyTorch's CPU gelu kernels'
// (aten/src/ATen/native/cpu). Only erf, tanh and exp come from elsewhere and
// may differ in the last ulp: CUDA's math library on the GPU (float_math.h),
// and for the CPU's fp32 erf form SLEEF's vector erf and exp
// (kernels/cpu/vector_math.h).
#pragma once

#include "kernels/common/float_math.h"

namespace mpc {

// The erf form in pieces, so that a caller can take erf and exp of whole
// arrays at once (kernels/cpu/vector_math.h) and finish with the same
// expressions: geluForward(x) is geluFromErf(x, erf(geluErfArgument(x))).

/// What the erf form takes erf of: x / sqrt(2).
template <typename T> MPC_HD T geluErfArgument(T x) { return x * T(M_SQRT1_2); }
/// What its derivative takes exp of: -x^2 / 2.
template <typename T> MPC_HD T geluExpArgument(T x) { return T(-0.5) * x * x; }
/// x Phi(x), given e = erf(x / sqrt(2)).
template <typename T> MPC_HD T geluFromErf(T x, T e) {
  return x * T(0.5) * (T(1) + e);
}
/// Phi(x) + x phi(x), given e = erf(x / sqrt(2)) and p = exp(-x^2 / 2).
template <typename T> MPC_HD T geluDerivativeFromErfExp(T x, T e, T p) {
  const T pdfScale = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
  T cdf = T(0.5) * (T(1) + e);
  T pdf = pdfScale * p;
  return cdf + x * pdf;
}

template <typename T> MPC_HD T geluForward(T x, bool tanhForm) {
  if (tanhForm) {
    const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
    T inner = beta * (x + kappa * x * x * x);
    return T(0.5) * x * (T(1) + tanhOf(inner));
  }
  return geluFromErf(x, erfOf(geluErfArgument(x)));
}

template <typename T> MPC_HD T geluDerivative(T x, bool tanhForm) {
  if (tanhForm) {
    const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
    T xSq = x * x;
    T inner = beta * (x + kappa * xSq * x);
    T t = tanhOf(inner);
    T left = T(0.5) * x, right = T(1) + t;
    T innerDerivative = beta * (T(1) + T(3) * kappa * xSq);
    return T(0.5) * right + left * (T(1) - t * t) * innerDerivative;
  }
  return geluDerivativeFromErfExp(x, erfOf(geluErfArgument(x)),
                                  expOf(geluExpArgument(x)));
}

/// mpc.ErfGrad: dY * 2/sqrt(pi) * exp(-X^2).
template <typename T> MPC_HD T erfGradValue(T g, T x) {
  const T twoOverSqrtPi = T(1.1283791670955126);
  return g * twoOverSqrtPi * expOf(-x * x);
}

} // namespace mpc
