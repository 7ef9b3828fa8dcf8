// cleanup: dead-code elimination, duplicate casts merged, identity casts,
// Identity nodes and identity Transposes gone.
//
// Runs last (any pass order is valid: correctness never depends on it). Works
// on the main graph and the training algorithm. Values that are graph outputs
// are never renamed or removed, because update_binding refers to them by name.
// A removed copy that metadata names (a parameter's gradient made by an
// Identity or an identity Transpose) is named by the value it copied once the
// pass is done: the pipeline mends such names (Model::updateValueReferences).
// State initializers are kept even when unused: they are the model's state.
#include "passes/pass.h"

#include <map>
#include <tuple>

namespace mpc {
namespace {

bool outputsAreGraphOutputs(const Node &n) {
  for (const Value *o : n.outputs())
    if (o && o->isGraphOutput())
      return true;
  return false;
}

bool isDead(const Node &n) {
  for (const Value *o : n.outputs())
    if (o && (!o->uses().empty() || o->isGraphOutput()))
      return false;
  return true;
}

/// Removes Casts to the dtype their input already has.
int64_t removeIdentityCasts(Graph &g) {
  int64_t removed = 0;
  for (Node *n : g.nodeList()) {
    if (!n->isOp("", "Cast") || !n->input(0))
      continue;
    Value *in = n->input(0);
    auto to = fromOnnxDataType(int(n->attrInt("to", 0)));
    if (!to || in->dtype != *to || outputsAreGraphOutputs(*n))
      continue;
    g.replaceAllUsesWith(n->output(0), in);
    g.removeNode(n);
    ++removed;
  }
  return removed;
}

/// Whether n copies its input unchanged: Identity, or a Transpose whose
/// perm keeps every axis in place.
bool isNoOp(const Node &n) {
  if (n.isOp("", "Identity"))
    return true;
  if (!n.isOp("", "Transpose") || !n.hasAttr("perm"))
    return false;
  std::vector<int64_t> perm = n.attrInts("perm");
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return true;
}

/// Removes Identity nodes and identity Transposes (torch's dynamo exporter
/// writes an Identity per clone and alias and Transpose<perm = [0, 1]> for
/// some permutes; the SplitToSequence lowering leaves an Identity per
/// SequenceAt): their readers read the input instead, with no copy.
int64_t removeIdentities(Graph &g) {
  int64_t removed = 0;
  for (Node *n : g.nodeList()) {
    if (!isNoOp(*n) || n->numInputs() != 1 || !n->input(0) || !n->output(0) ||
        outputsAreGraphOutputs(*n))
      continue;
    g.replaceAllUsesWith(n->output(0), n->input(0));
    g.removeNode(n);
    ++removed;
  }
  return removed;
}

/// Merges Casts of the same value to the same type into the first one.
int64_t mergeDuplicateCasts(Graph &g) {
  int64_t merged = 0;
  std::map<std::pair<Value *, int64_t>, Node *> first;
  for (Node *n : g.nodeList()) {
    if (!n->isOp("", "Cast") || !n->input(0))
      continue;
    auto key = std::make_pair(n->input(0), n->attrInt("to", 0));
    auto it = first.find(key);
    if (it == first.end()) {
      first.emplace(key, n);
      continue;
    }
    if (outputsAreGraphOutputs(*n))
      continue;
    g.replaceAllUsesWith(n->output(0), it->second->output(0));
    g.removeNode(n);
    ++merged;
  }
  return merged;
}

/// Removes nodes whose outputs nobody reads, last to first.
int64_t removeDeadNodes(Graph &g) {
  int64_t removed = 0;
  auto nodes = g.nodeList();
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it)
    if (isDead(**it)) {
      g.removeNode(*it);
      ++removed;
    }
  return removed;
}

int64_t removeUnusedConstants(Graph &g) {
  int64_t removed = 0;
  for (Value *init : std::vector<Value *>(g.initializers()))
    if (!init->isState && init->uses().empty() && !init->isGraphOutput()) {
      g.removeInitializer(init);
      ++removed;
    }
  return removed;
}

/// Returns how many changes it made (0: the graph is as it was).
int64_t cleanupGraph(Graph &g, Statistics &stats) {
  int64_t changes[] = {removeIdentityCasts(g), removeIdentities(g),
                       mergeDuplicateCasts(g), removeDeadNodes(g),
                       removeUnusedConstants(g)};
  stats["identity-casts-removed"] += changes[0];
  stats["identities-removed"] += changes[1];
  stats["casts-merged"] += changes[2];
  stats["dead-nodes-removed"] += changes[3];
  stats["unused-constants-removed"] += changes[4];
  return changes[0] + changes[1] + changes[2] + changes[3] + changes[4];
}

} // namespace

void runCleanup(Model &model, PassContext &ctx) {
  int64_t changes = cleanupGraph(*model.graph, ctx.stats);
  if (model.training)
    changes += cleanupGraph(*model.training->algorithm, ctx.stats);
  ctx.changedNothing = changes == 0;
}

} // namespace mpc
