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
#include <vector>

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

/// mpc.AllGather's shape form, AllGather(s1..sn) <world_size, shapes>:
/// output i's dims are in `shapes` (its rank, then its dims, for each
/// output in turn) rather than taken from a whole value of its type, which
/// a sharded fp32 master (kept only as chunks) has none of; output i has
/// si's dtype. Returns the n shapes, or nothing for the form with `like`
/// inputs (no `shapes`); an Error naming the node for a list that does not
/// parse into n shapes of dims >= 0.
inline std::vector<std::vector<int64_t>> allGatherShapes(const Node &node,
                                                         size_t n) {
  const Attribute *a = node.attr("shapes");
  if (!a)
    return {};
  std::vector<std::vector<int64_t>> shapes;
  const std::vector<int64_t> &v = a->ints;
  size_t at = 0;
  while (at < v.size() && shapes.size() < n) {
    const int64_t rank = v[at++];
    if (rank < 0 || rank > int64_t(v.size() - at))
      break;
    std::vector<int64_t> dims(v.begin() + int64_t(at),
                              v.begin() + int64_t(at) + rank);
    at += size_t(rank);
    bool ok = true;
    for (int64_t d : dims)
      ok = ok && d >= 0;
    if (!ok)
      break;
    shapes.push_back(std::move(dims));
  }
  if (shapes.size() != n || at != v.size()) {
    ErrorBuilder b(node);
    b << "shapes does not hold " << n
      << " shapes (each its rank, then its dims >= 0)";
    b.raise();
  }
  return shapes;
}

} // namespace mpc
