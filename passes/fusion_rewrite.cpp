// The fusion passes' shared clean-up (fusion_rewrite.h).
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

} // namespace mpc
