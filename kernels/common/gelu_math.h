// GELU (exact erf form and tanh approximation), its derivative, and the
// derivative of erf: shared by the CPU kernels (kernels/cpu/transformer.cpp)
// and the CUDA kernels (kernels/cuda/gelu.cu).
//
// The constants and operation order are PyTorch's CPU gelu kernels'
// (aten/src/ATen/native/cpu); on the GPU only erf, tanh and exp come from
// CUDA's math library (float_math.h) and may differ in the last ulp.
#pragma once

#include "kernels/common/float_math.h"

namespace mpc {

template <typename T> MPC_HD T geluForward(T x, bool tanhForm) {
  if (tanhForm) {
    const T beta = T(M_SQRT2 * M_2_SQRTPI * 0.5), kappa = T(0.044715);
    T inner = beta * (x + kappa * x * x * x);
    return T(0.5) * x * (T(1) + tanhOf(inner));
  }
  return x * T(0.5) * (T(1) + erfOf(x * T(M_SQRT1_2)));
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
  const T alpha = T(M_SQRT1_2), pdfScale = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
  T cdf = T(0.5) * (T(1) + erfOf(x * alpha));
  T pdf = pdfScale * expOf(T(-0.5) * x * x);
  return cdf + x * pdf;
}

/// mpc.ErfGrad: dY * 2/sqrt(pi) * exp(-X^2).
template <typename T> MPC_HD T erfGradValue(T g, T x) {
  const T twoOverSqrtPi = T(1.1283791670955126);
  return g * twoOverSqrtPi * expOf(-x * x);
}

} // namespace mpc
