// The sharded optimizer's chunking and attribute rules (mpc.ReduceScatter,
// mpc.RankShard, mpc.AllGather, mpc.ShardedClipGradNorm; ir/mpc_ops.h),
// shared by the shape rules, the CPU kernels (kernels/cpu/collective.cpp),
// the CUDA runners and the trainer's checkpoint gather, so that every
// layer cuts a value into the same chunks and refuses the same nodes.
#pragma once

#include "ir/graph.h"
#include "support/diagnostics.h"

#include <cstdint>
#include <string>

namespace mpc {

/// The most ranks --world-size takes (the chunk arithmetic and the
/// per-rank message sizes stay far from overflow below it).
constexpr int64_t kMaxShardWorldSize = 1 << 16;

/// Elements of each rank's chunk of a value of `numel` elements cut into
/// `worldSize` chunks: ceil(numel / worldSize).
inline int64_t shardChunk(int64_t numel, int64_t worldSize) {
  return (numel + worldSize - 1) / worldSize;
}

/// The node's `world_size`: an Error naming the node unless it is an
/// integer from 1 to kMaxShardWorldSize.
inline int64_t shardWorldSizeOf(const Node &node) {
  int64_t n = node.attrInt("world_size", 0);
  if (n >= 1 && n <= kMaxShardWorldSize)
    return n;
  ErrorBuilder b(node);
  b << "world_size " << n << " is not from 1 to " << kMaxShardWorldSize;
  b.raise();
}

/// An Error naming the node when the world it runs in (`ranks` ranks) is
/// not the one it was compiled for: its chunks would be cut for another
/// number of ranks.
inline void checkShardWorld(const Node &node, int64_t worldSize, int ranks) {
  if (ranks == worldSize)
    return;
  ErrorBuilder b(node);
  b << "its optimizer state is sharded for " << worldSize
    << " ranks (mpc-opt --world-size=" << worldSize << ") but it runs on "
    << ranks << (ranks == 1 ? " rank" : " ranks");
  b.raise();
}

} // namespace mpc
