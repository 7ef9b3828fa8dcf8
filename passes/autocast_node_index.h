// AutocastNodeIndex: a node's position in the node list autocast decided.
//
// Autocast keeps what it decided for each node (its dtype, the dtype it
// wants at each input, its policy class) in vectors parallel to the node
// list, and looks a node up by pointer for every use it inspects. Nodes have
// no dense id, but their outputs do (Value::id()), so the position is kept
// by the id of the node's first output: one array read per lookup, where a
// std::unordered_map<const Node *, ...> hashed, walked a bucket and, when
// filled, allocated a heap node per entry. A node with no output at all
// (rare) is kept in a small hash map.
//
// Nodes created after the index was built (autocast's own Casts) are not
// found: find() returns npos for them. The index must not outlive a change
// of a listed node's outputs.
#pragma once

#include "ir/graph.h"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace mpc {

class AutocastNodeIndex {
public:
  static constexpr size_t npos = size_t(-1);

  /// Indexes `nodes` (all of graph g).
  AutocastNodeIndex(const Graph &g, const std::vector<Node *> &nodes)
      : g_(&g), nodes_(&nodes), byOutputId_(g.numValueIds(), kNone) {
    for (size_t k = 0; k < nodes.size(); ++k) {
      if (const Value *o = firstOutput(*nodes[k]))
        byOutputId_[o->id()] = uint32_t(k);
      else
        withoutOutputs_[nodes[k]] = k;
    }
  }

  /// n's position in the list, or npos when n is not in it.
  size_t find(const Node *n) const {
    if (const Value *o = firstOutput(*n)) {
      if (o->id() < byOutputId_.size()) {
        uint32_t k = byOutputId_[o->id()];
        if (k != kNone && (*nodes_)[k] == n)
          return k;
      }
      return npos;
    }
    auto it = withoutOutputs_.find(n);
    return it == withoutOutputs_.end() ? npos : it->second;
  }

private:
  static constexpr uint32_t kNone = uint32_t(-1);

  /// n's first non-null output of this graph, or nullptr.
  const Value *firstOutput(const Node &n) const {
    for (const Value *o : n.outputs())
      if (o)
        return o->owner() == g_ ? o : nullptr;
    return nullptr;
  }

  const Graph *g_;
  const std::vector<Node *> *nodes_;
  std::vector<uint32_t> byOutputId_;
  std::unordered_map<const Node *, size_t> withoutOutputs_;
};

} // namespace mpc
