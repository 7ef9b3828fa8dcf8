// What the fusion passes share (fusion_rewrite.h).
#include "passes/fusion_rewrite.h"

namespace mpc {

void removeUnreadConstants(Graph &g, const std::vector<Value *> &operands,
                           std::unordered_set<Node *> &removed) {
  for (Value *v : operands) {
    if (!v->isLive() || !v->uses().empty() || v->isGraphOutput())
      continue;
    if (v->isInitializer() && !v->isState && !v->isGraphInput())
      g.removeInitializer(v);
    else if (Node *c = v->producer(); c && c->isOp("", "Constant")) {
      g.removeNode(c);
      removed.insert(c);
    }
  }
}

void fuseEachGraph(
    Model &model, PassContext &ctx,
    const std::function<bool(Graph &, Node &, std::unordered_set<Node *> &)>
        &fuseAt) {
  int64_t fused = 0;
  auto walk = [&](Graph &g) {
    std::unordered_set<Node *> removed;
    for (Node *n : g.nodeList())
      if (!removed.count(n) && fuseAt(g, *n, removed))
        ++fused;
  };
  walk(*model.graph);
  if (model.training)
    walk(*model.training->algorithm);
  ctx.changedNothing = fused == 0;
}

} // namespace mpc
