// What the fusion passes (fuse-gelu, fuse-rmsnorm) share after they replace
// a matched pattern by one node: the constants only the pattern read go too.
#pragma once

#include "passes/ir/graph.h"

#include <unordered_set>
#include <vector>

namespace mpc {

/// Of `operands` (values the removed pattern's nodes read), removes those
/// nothing reads any more that are constants: initializers that are not
/// state, and Constant nodes' outputs (their nodes are added to `removed`).
void removeUnreadConstants(Graph &g, const std::vector<Value *> &operands,
                           std::unordered_set<Node *> &removed);

} // namespace mpc
