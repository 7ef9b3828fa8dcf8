// The shared scratch workspace of device-resident steps, planned on the
// host: where each of a node's scratch requests lands, and how far the one
// device-wide buffer must grow.
//
// Scratch (cuDNN workspaces, operands widened to fp32, explicitly padded
// inputs, sort temporaries) never outlives the node that asks for it, and
// every node runs in order on the backend's one stream, so all nodes can
// share one buffer: each node carves its requests front to back from offset
// 0 (ScratchCursor), and the buffer is as large as the hungriest node, not
// the sum over nodes. It only grows, in the warm-up step of a plan (a
// capture follows a step of the same shapes, so it never grows then), and
// when it grows every captured graph is dropped (they hold its address).
// Pure host arithmetic, tested without a GPU.
#pragma once

#include <cstddef>

namespace mpc {
namespace cuda {

/// Every piece is aligned to this (what cudaMalloc gives, and more than any
/// vector load or cuDNN asks for).
constexpr size_t kScratchAlignment = 256;

/// One node's requests, front to back.
class ScratchCursor {
public:
  /// The offset of a request of `bytes` (> 0), after the earlier ones.
  size_t take(size_t bytes);
  /// Bytes the node has asked for so far, alignment included.
  size_t used() const { return used_; }

private:
  size_t used_ = 0;
};

/// The capacity to grow a workspace of `capacity` bytes to so that it holds
/// `needed` bytes: `capacity` when it already does; else `needed` rounded up
/// to a 2 MiB step (so a plan whose nodes ask for slightly more one after
/// another does not reallocate at every node).
size_t grownWorkspaceCapacity(size_t capacity, size_t needed);

} // namespace cuda
} // namespace mpc
