// The order TopK, ArgMax and ArgMin select by, shared by the CPU kernels
// (kernels/cpu/selection.cpp) and the GPU kernels (kernels/cuda/topk.cu), so
// both backends pick the same elements.
//
// Values compare as numbers; NaN ranks above every number, +inf included
// (torch.topk and torch.sort's order), and equal values keep the lower index
// first (ONNX's TopK tie rule), so the order is total and the result does not
// depend on how a backend sorts. ArgMax and ArgMin return the first NaN when
// a line holds one (the last with select_last_index), as numpy's and torch's
// argmax and argmin do. Integers have no NaN; `v != v` is then false.
#pragma once

#include "ir/host_device.h"

#include <cstdint>

namespace mpc {

/// a ranks above b: a > b, or a is NaN and b is not.
template <typename T> MPC_HD bool selectAbove(T a, T b) {
  return (a != a && b == b) || a > b;
}

/// Whether element (a at index ia) comes before (b at index ib) in TopK's
/// output: the larger first when `largest`, else the smaller first; equal
/// values (two NaNs included) by lower index.
template <typename T>
MPC_HD bool topkBefore(T a, int64_t ia, T b, int64_t ib, bool largest) {
  bool aFirst = largest ? selectAbove(a, b) : selectAbove(b, a);
  bool bFirst = largest ? selectAbove(b, a) : selectAbove(a, b);
  return aFirst || (!bFirst && ia < ib);
}

/// ArgMax (max) or ArgMin's scan along a line: whether v, met after `best`,
/// takes its place. A NaN wins and then stays (the first one, or with
/// `last` the last one); otherwise the larger (smaller) wins, and an equal
/// value only with `last` (select_last_index).
template <typename T>
MPC_HD bool argReplaces(T v, T best, bool max, bool last) {
  bool vNaN = v != v, bestNaN = best != best;
  if (bestNaN)
    return last && vNaN;
  if (vNaN)
    return true;
  if (max ? v > best : v < best)
    return true;
  return last && v == best;
}

} // namespace mpc
