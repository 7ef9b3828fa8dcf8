// A node's broadcast geometry for the CUDA kernels, with the node named in
// the error when its rank is above what the kernels index.
#pragma once

#include "kernels/cpu/cpu_util.h"
#include "kernels/cuda/broadcast_geometry.h"

#include <stdexcept>
#include <vector>

namespace mpc {
namespace cuda {

/// makeBroadcastGeometry for `node`'s output `out` and its K operands `in`;
/// a rank above kMaxKernelRank is the node's error, not an exception.
template <int K>
BroadcastGeometry<K>
nodeBroadcastGeometry(const Node &node, const std::vector<int64_t> &out,
                      const std::vector<int64_t> (&in)[K]) {
  try {
    return makeBroadcastGeometry<K>(out, in);
  } catch (const std::length_error &) {
    cpu::fail(node, "rank ", out.size(),
              " is above the cuda kernels' limit of ", kMaxKernelRank);
  }
}

} // namespace cuda
} // namespace mpc
