// Softmax and log-softmax along one axis, forward and backward: the
// per-element formulas and the row statistics, shared by the CPU kernels
// (kernels/cpu/activation.cpp, fused.cpp) and the CUDA kernels
// (kernels/cuda/softmax.cu).
//
// A row's statistics are a maximum (exact in any order) and a sum. The CPU
// adds in index order (softmaxRowStats below); the GPU adds a warp's lane
// partials in a fixed tree, so its sums may differ in the last bits, and
// its exp/log are CUDA's (and the CPU's fp32 softmax takes its
// exponentials from kernels/cpu/vector_math.h). Everything else, the
// per-element arithmetic here, is the same operations in the same order on
// both (nvcc builds with --fmad=false). T is float (fp32, fp16, bf16 storage)
// or double (fp64).
#pragma once

#include "kernels/common/float_math.h"

#include <cstdint>

namespace mpc {

/// The running maximum of a row: std::max(m, v), which keeps m unless
/// m < v, so NaNs never enter it (they reach the output through the sum).
template <typename T> MPC_HD T softmaxMax(T m, T v) { return m < v ? v : m; }

/// A term of the row's sum of exponentials.
template <typename T> MPC_HD T softmaxExpTerm(T x, T max) {
  return expOf(x - max);
}

/// Softmax from a row's term e = softmaxExpTerm(x, max) and the sum of its
/// terms. A kernel that kept the terms (the CPU's) divides them instead of
/// taking every exponential twice; with the same exp, the bits are
/// softmaxValue's.
template <typename T> MPC_HD T softmaxFromTerm(T e, T sum) { return e / sum; }

/// Softmax of x given the row's maximum and sum of exp(x - max).
template <typename T> MPC_HD T softmaxValue(T x, T max, T sum) {
  return softmaxFromTerm(softmaxExpTerm(x, max), sum);
}

/// Log-softmax of x given the row's maximum and log(sum of exp(x - max)).
template <typename T> MPC_HD T logSoftmaxValue(T x, T max, T logSum) {
  return x - max - logSum;
}

/// A term of SoftmaxGrad's row sum (dY * Y) or LogSoftmaxGrad's (dY).
template <bool Log, typename T> MPC_HD T softmaxGradTerm(T g, T y) {
  return Log ? g : g * y;
}

/// dX of SoftmaxGrad (Y * (dY - sum(dY * Y))) or LogSoftmaxGrad
/// (dY - exp(Y) * sum(dY)) given the row's sum.
template <bool Log, typename T> MPC_HD T softmaxGradValue(T g, T y, T sum) {
  return Log ? g - expOf(y) * sum : y * (g - sum);
}

/// The statistics of one row of len elements read through load(j), in the
/// CPU backend's order: the maximum, then the exponentials added in index
/// order.
template <typename T> struct SoftmaxRowStats { T max, sum; };
template <typename T, typename Load>
MPC_HD SoftmaxRowStats<T> softmaxRowStats(int64_t len, const Load &load) {
  T mx = -T(INFINITY);
  for (int64_t j = 0; j < len; ++j)
    mx = softmaxMax(mx, T(load(j)));
  T sum = 0;
  for (int64_t j = 0; j < len; ++j)
    sum += softmaxExpTerm(T(load(j)), mx);
  return {mx, sum};
}

/// expOf of each element of a row, one at a time: softmaxRowTerms' default.
struct ExpEachElement {
  template <typename T> MPC_HD void operator()(T *row, int64_t len) const {
    for (int64_t j = 0; j < len; ++j)
      row[j] = expOf(row[j]);
  }
};

/// Softmax's statistics of a row held in `row` (compute type), which is
/// overwritten with the terms exp(x - max): the same maximum and the same
/// sum, added in the same order, as softmaxRowStats. `expRow(row, len)`
/// takes the exponentials of the differences x - max in place; by default
/// expOf per element (softmaxExpTerm's), the CPU's fp32 softmax passes its
/// vector exp (kernels/cpu/vector_math.h), a whole row at once.
template <typename T, typename ExpRow = ExpEachElement>
MPC_HD SoftmaxRowStats<T> softmaxRowTerms(int64_t len, T *row,
                                          ExpRow expRow = {}) {
  T mx = -T(INFINITY);
  for (int64_t j = 0; j < len; ++j)
    mx = softmaxMax(mx, row[j]);
  for (int64_t j = 0; j < len; ++j)
    row[j] = row[j] - mx;
  expRow(row, len);
  T sum = 0;
  for (int64_t j = 0; j < len; ++j)
    sum += row[j];
  return {mx, sum};
}

} // namespace mpc
