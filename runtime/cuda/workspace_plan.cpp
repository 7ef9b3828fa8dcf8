// The shared scratch workspace's offsets and growth (workspace_plan.h).
#include "runtime/cuda/workspace_plan.h"

#include "support/diagnostics.h"

#include <limits>

namespace mpc {
namespace cuda {

namespace {
size_t roundUp(size_t bytes, size_t step) {
  if (bytes > std::numeric_limits<size_t>::max() - (step - 1))
    throw Error("cuda: a scratch request of " + std::to_string(bytes) +
                " bytes overflows the workspace's size");
  return (bytes + step - 1) / step * step;
}
} // namespace

size_t ScratchCursor::take(size_t bytes) {
  size_t offset = used_;
  size_t end = roundUp(bytes, kScratchAlignment);
  if (end > std::numeric_limits<size_t>::max() - offset)
    throw Error("cuda: a node's scratch requests overflow the workspace's "
                "size");
  used_ = offset + end;
  return offset;
}

size_t grownWorkspaceCapacity(size_t capacity, size_t needed) {
  if (needed <= capacity)
    return capacity;
  return roundUp(needed, size_t(2) << 20);
}

} // namespace cuda
} // namespace mpc
