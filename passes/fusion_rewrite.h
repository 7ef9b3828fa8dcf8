// What the fusion passes (fuse-gelu, fuse-rmsnorm, fuse-log-sigmoid) share:
// the walk over the model's graphs offering each node as a pattern's root,
// the check that the fused node's output can stand in for the pattern's,
// and, after they replace a matched pattern by one node, the removal of the
// constants only the pattern read.
#pragma once

#include "ir/graph.h"
#include "passes/pass.h"

#include <functional>
#include <unordered_set>
#include <vector>

namespace mpc {

/// a and b have one dtype and one shape (or both no rank).
inline bool sameType(const Value &a, const Value &b) {
  return a.dtype == b.dtype && a.hasShape == b.hasShape && a.dims == b.dims;
}

/// Of `operands` (values the removed pattern's nodes read), removes those
/// nothing reads any more that are constants: initializers that are not
/// state, and Constant nodes' outputs (their nodes are added to `removed`).
void removeUnreadConstants(Graph &g, const std::vector<Value *> &operands,
                           std::unordered_set<Node *> &removed);

/// Offers every node of the model's graphs (the main graph, then the
/// training algorithm when there is one) that no earlier rewrite removed to
/// `fuseAt`, which rewrites the pattern rooted there (adding the nodes it
/// removes to `removed`) and returns whether it did. The pass changed
/// nothing when no call did (matching only reads the graph).
void fuseEachGraph(
    Model &model, PassContext &ctx,
    const std::function<bool(Graph &, Node &, std::unordered_set<Node *> &)>
        &fuseAt);

} // namespace mpc
