// CumSum's scan along one line, shared by the CPU kernel and the GPU kernel
// (one thread per line): the running sum is kept in Acc (fp32 for fp32,
// fp16 and bf16, fp64 for fp64, int64 wrapping for integers) and each
// output is converted from it, so both backends give the same bits.
#pragma once

#include "ir/host_device.h"

#include <cstdint>
#include <type_traits>

namespace mpc {

/// y[t] = the sum of x over the positions before t in the scan's direction
/// (exclusive) or up to and including t (inclusive); reverse scans from
/// the end. load(t) returns x[t] as Acc, store(t, acc) writes y[t].
template <typename Acc, typename Load, typename Store>
MPC_HD void cumsumLine(int64_t len, bool exclusive, bool reverse, Load load,
                       Store store) {
  Acc acc = Acc(0);
  for (int64_t s = 0; s < len; ++s) {
    int64_t t = reverse ? len - 1 - s : s;
    if (exclusive)
      store(t, acc);
    if constexpr (std::is_integral_v<Acc>)
      acc = Acc(uint64_t(acc) + uint64_t(load(t))); // wraps, no UB
    else
      acc = acc + load(t);
    if (!exclusive)
      store(t, acc);
  }
}

} // namespace mpc
