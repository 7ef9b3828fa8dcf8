// switchToInferenceMode: training-mode BatchNormalization and Dropout ->
// inference mode.
#include "passes/inference_mode.h"

#include "ir/builder.h"

namespace mpc {

int64_t switchToInferenceMode(Graph &g) {
  int64_t changed = 0;
  for (Node *n : g.nodeList()) {
    // Dropout without its training_mode input is the identity (and its
    // mask all true), as model.eval() makes it. The exporter's training
    // mode writes the input as a constant true.
    if (n->opType() == "Dropout" && n->domain().empty() && n->numInputs() > 2 &&
        n->input(2)) {
      n->truncateInputs(2);
      ++changed;
      continue;
    }
    if (n->opType() != "BatchNormalization" || !n->domain().empty() ||
        n->attrInt("training_mode", 0) == 0)
      continue;
    bool statsRead = false;
    for (size_t i = 1; i < n->numOutputs(); ++i)
      if (Value *o = n->output(i))
        statsRead |= !o->uses().empty() || o->isGraphOutput();
    if (statsRead)
      continue; // the graph itself consumes them: leave it as it is
    // A new node with only Y: ONNX allows the statistic outputs only in
    // training mode.
    Builder b(g, n);
    Builder::Attrs attrs;
    for (const auto &kv : n->attributes())
      if (kv.first != "training_mode")
        attrs.push_back(kv);
    Node *m = b.node("BatchNormalization", n->inputs(), 1, attrs, n->name());
    m->output(0)->copyTypeFrom(*n->output(0));
    Value *y = n->output(0);
    bool wasOutput = y->isGraphOutput();
    std::string name = y->name();
    g.replaceAllUsesWith(y, m->output(0));
    g.removeNode(n); // frees the output names
    if (wasOutput)
      g.renameValue(m->output(0), name);
    ++changed;
  }
  return changed;
}

} // namespace mpc
