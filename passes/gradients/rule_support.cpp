// The helpers of rule_support.h, shared by the rules of several categories.
#include "passes/gradients/rule_support.h"

#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <algorithm>

namespace mpc {

std::string nodeHint(const Node &n) {
  return n.name().empty() ? n.opType() : n.name();
}

Node *withOutputs(Graph &g, Node *node, int64_t opset, size_t count,
                  const std::vector<std::string> &suffixes) {
  bool missing = node->numOutputs() < count;
  bool holes = false;
  for (size_t i = 0; i < node->numOutputs(); ++i) {
    missing |= i < count && !node->output(i);
    holes |= !node->output(i);
  }
  if (!missing)
    return node;
  std::string base = sanitizeIdentifier(nodeHint(*node));
  if (!holes) {
    for (size_t i = node->numOutputs(); i < count; ++i)
      node->addOutput(g.uniqueValueName(base + "_" + suffixes[i]));
    inferNode(*node, opset);
    return node;
  }
  size_t slots = std::max(count, node->numOutputs());
  std::vector<std::string> names;
  for (size_t i = 0; i < slots; ++i) {
    if (Value *old = node->output(i))
      names.push_back(g.uniqueValueName(old->name() + "_new"));
    else if (i < count)
      names.push_back(g.uniqueValueName(base + "_" + suffixes[i]));
    else
      names.push_back("");
  }
  std::string nodeName = node->name();
  node->setName(nodeName + "_replaced");
  Node *fresh = g.createNodeWithOutputs(node->opType(), node->inputs(), names,
                                        nodeName, node->domain(), node);
  for (const auto &kv : node->attributes())
    fresh->setAttr(kv.first, kv.second);
  for (size_t i = 0; i < node->numOutputs(); ++i)
    if (Value *old = node->output(i))
      fresh->output(i)->copyTypeFrom(*old);
  inferNode(*fresh, opset);
  std::vector<std::pair<Value *, std::string>> renames;
  for (size_t i = 0; i < node->numOutputs(); ++i)
    if (Value *old = node->output(i)) {
      renames.push_back({fresh->output(i), old->name()});
      g.replaceAllUsesWith(old, fresh->output(i));
    }
  g.removeNode(node);
  for (const auto &r : renames)
    g.renameValue(r.first, r.second);
  return fresh;
}

int64_t normalizedAxis(GradientContext &ctx, const Value &x, int64_t dflt) {
  int64_t r = ctx.rankOf(x);
  int64_t a = ctx.node().attrInt("axis", dflt);
  if (a < -r || a >= r)
    errorAt(ctx.node()) << "axis " << a << " is out of range for rank " << r;
  return a < 0 ? a + r : a;
}

void setUnaryGrad(GradientContext &ctx, Value *deriv) {
  ctx.setInputGrad(0, ctx.mul(ctx.outGrad(0), deriv, ctx.gradName(0)));
}

} // namespace mpc
