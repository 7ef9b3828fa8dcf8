// Per-element rules of the piecewise ops, shared by the CPU kernels
// (kernels/cpu/elementwise.cpp, activation.cpp) and the CUDA kernels
// (kernels/cuda/clip_variadic.cu, leaky_relu.cu): LeakyRelu, Clip, Max/Min and
// their gradients.
//
// C is the compute type (float for fp32/fp16/bf16 storage, double for fp64,
// the integer itself for Clip/Max/Min on integers); each rule is a handful
// of comparisons, so both backends give the same bits. NaN rules follow
// PyTorch: Clip keeps a NaN input, Max/Min propagate a NaN operand, and a
// NaN never equals the extremum, so its gradient is 0.
#pragma once

#include "ir/host_device.h"

#include <type_traits>

namespace mpc {

/// LeakyRelu: v for v > 0, else alpha * v. A NaN v comes back as it is:
/// alpha * NaN keeps the NaN's bits on x86 but is the canonical NaN on a
/// GPU, and both backends must give the same bytes.
template <typename C> MPC_HD C leakyReluValue(C v, C alpha) {
  return !(v <= C(0)) ? v : alpha * v;
}

/// LeakyReluGrad: dY where X > 0, else alpha * dY.
template <typename C> MPC_HD C leakyReluGradValue(C g, C x, C alpha) {
  return x > C(0) ? g : alpha * g;
}

/// Clip: max(v, lo) then min(., hi) for the bounds that are present, so
/// lo > hi gives hi (PyTorch's clamp); a NaN v fails both comparisons.
template <typename C>
MPC_HD C clipValue(C v, bool hasLo, C lo, bool hasHi, C hi) {
  if (hasLo && v < lo)
    v = lo;
  if (hasHi && v > hi)
    v = hi;
  return v;
}

/// ClipGrad: dY where lo <= X <= hi (absent bounds are -inf/+inf), else 0.
template <typename C> MPC_HD C clipGradValue(C g, C x, C lo, C hi) {
  return x >= lo && x <= hi ? g : C(0);
}

/// Max (isMax) or Min of the running value a and the next operand v; the
/// first NaN met wins and stays.
template <typename C> MPC_HD C extremumFold(bool isMax, C a, C v) {
  bool take = isMax ? v > a : v < a;
  if (take || v != v)
    a = a != a ? a : v;
  return a;
}

/// Sum's step: integers wrap (two's complement, no undefined overflow),
/// floating values add in C.
template <typename C> MPC_HD C sumFold(C a, C v) {
  if constexpr (std::is_integral<C>::value)
    return C(typename std::make_unsigned<C>::type(a) +
             typename std::make_unsigned<C>::type(v));
  else
    return a + v;
}

/// ExtremumGrad's share of dY for one input: dY split evenly among the
/// `ties` inputs equal to the extremum, this one among them when `mine`.
template <typename C> MPC_HD C extremumGradShare(C g, bool mine, C ties) {
  return mine ? g / ties : C(0);
}

} // namespace mpc
