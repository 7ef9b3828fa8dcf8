// A sum in sixteen lanes: the fixed order the CPU's row reductions (softmax
// rows, layer-norm statistics and gradients) add in.
//
// Term j goes into lane j mod 16, each lane in element order, and the
// lanes join pairwise (lane k += lane k + 8, then + 4, + 2, + 1). A fixed
// order, so the same bits on any thread count and CPU, without a serial
// sum's chain of one add's latency per element (a serial row of 512 waits
// some 2000 cycles on it; the lanes stay in vector registers). The GPU's
// rows sum in another fixed order (32 strided lanes and a warp tree).
#pragma once

#include "ir/host_device.h"

#include <cstdint>

namespace mpc {

/// The sum over j < len of term(j), a T, in the lanes above.
template <typename T, typename Term>
MPC_HD T laneSum(int64_t len, const Term &term) {
  constexpr int kLanes = 16;
  T lane[kLanes] = {};
  int64_t j = 0;
  for (; j + kLanes <= len; j += kLanes)
    for (int k = 0; k < kLanes; ++k)
      lane[k] += term(j + k);
  for (int k = 0; j < len; ++j, ++k)
    lane[k] += term(j);
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int k = 0; k < width; ++k)
      lane[k] += lane[k + width];
  return lane[0];
}

} // namespace mpc
