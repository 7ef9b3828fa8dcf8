// The update rule of ScatterND and ScatterElements (ONNX reductions none,
// add, mul, max, min): how one update u changes an output element o. The
// CPU kernels and the CUDA kernels (which apply a data element's updates
// in index order, as the CPU does) both ask this header, so the two
// backends give the same bits.
#pragma once

#include "ir/host_device.h"

#include <type_traits>

namespace mpc {

enum class ScatterReduction { None, Add, Mul, Max, Min };

/// o updated by u (bool: add is or, mul is and). Computed in the type the
/// kernel loads elements as (fp32 for fp16/bf16 storage) and rounded by its
/// store, once per update.
template <typename T> MPC_HD T scatterUpdate(ScatterReduction r, T o, T u) {
  switch (r) {
  case ScatterReduction::Add:
    if constexpr (std::is_same_v<T, bool>)
      return o || u;
    else
      return o + u;
  case ScatterReduction::Mul:
    if constexpr (std::is_same_v<T, bool>)
      return o && u;
    else
      return o * u;
  case ScatterReduction::Max:
    return u > o ? u : o;
  case ScatterReduction::Min:
    return u < o ? u : o;
  default:
    return u;
  }
}

} // namespace mpc
