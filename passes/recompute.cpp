// recompute: activation checkpointing on the compiled step.
//
// A forward value the backward reads is normally kept alive from the forward
// to its backward use ("saved"), which is what makes training memory grow
// with depth and batch. This pass instead recomputes chosen saved values in
// the backward, just before their first backward use, from inputs the
// backward keeps anyway, and points the backward at the copy; the forward
// value then dies in the forward. The copy is the same op with the same
// attributes on the same inputs, so the numbers are bit-identical.
//
//   --recompute=auto      every saved output of a cheap elementwise node
//                         (activations, casts, the pieces of GELU) whose
//                         inputs are saved anyway, largest first; with
//                         --memory-budget=BYTES only until the planned peak
//                         fits the budget
//   --recompute=A,B       the outputs of the nodes named A and B (chains of
//                         named nodes are recomputed together)
//
// Runs after cleanup (so no cast merging undoes the copies) and before
// plan-memory.
#include "passes/memory_report.h"
#include "passes/pass.h"
#include "passes/support/diagnostics.h"

#include <algorithm>
#include <iostream>
#include <unordered_map>
#include <unordered_set>

namespace mpc {

namespace {

/// Ops cheap enough to run twice: elementwise, no randomness, one output.
bool isCheapElementwise(const Node &n) {
  static const std::unordered_set<std::string> ops = {
      "Relu", "LeakyRelu", "Add",      "Sub",  "Mul",  "Div",     "Neg",
      "Abs",  "Exp",       "Log",      "Sqrt", "Tanh", "Sigmoid", "Erf",
      "Gelu", "Cast",      "Identity", "Pow",  "Clip",
  };
  return n.domain().empty() && ops.count(n.opType()) && n.numOutputs() == 1;
}

/// The step in schedule order, with where the forward ends.
struct Schedule {
  std::vector<Node *> nodes;
  std::unordered_map<const Node *, size_t> index;
  int64_t lossIndex = -1;

  explicit Schedule(const Model &model, Graph &g) {
    nodes = g.nodeList();
    for (size_t i = 0; i < nodes.size(); ++i)
      index[nodes[i]] = i;
    const std::string *loss = model.meta("mpc.loss");
    const Value *l = loss ? g.findValue(*loss) : nullptr;
    if (l && l->producer())
      lossIndex = int64_t(index.at(l->producer()));
  }
  bool inForward(const Node *n) const {
    return int64_t(index.at(n)) <= lossIndex;
  }
  /// Index of the first backward node reading v, or -1.
  int64_t firstBackwardUse(const Value *v) const {
    int64_t first = -1;
    for (const Use &u : v->uses()) {
      int64_t i = int64_t(index.at(u.user));
      if (i > lossIndex && (first < 0 || i < first))
        first = i;
    }
    return first;
  }
  /// A forward value the backward reads.
  bool isSaved(const Value *v) const {
    return v->producer() && inForward(v->producer()) &&
           firstBackwardUse(v) >= 0;
  }
  /// Alive in the backward whatever this pass does.
  bool keptAnyway(const Value *v) const {
    if (v->isInitializer() || v->isGraphInput())
      return true;
    const Node *p = v->producer();
    return (p && p->domain().empty() && p->opType() == "Constant") ||
           isSaved(v);
  }
};

/// Bytes of a value (0 when its size is not known).
size_t byteSize(const Value &v) {
  size_t bytes = 0;
  return valueByteSize(v, bytes) ? bytes : 0;
}

/// Recomputes `chosen` (forward values) in the backward; returns how many.
size_t recompute(Graph &g, const Schedule &s,
                 const std::vector<const Value *> &chosen) {
  std::unordered_set<const Value *> set(chosen.begin(), chosen.end());
  // Where each copy is needed: before its first backward use, or before the
  // copy of a chosen value computed from it, whichever is earlier.
  std::vector<const Value *> order(chosen);
  std::sort(order.begin(), order.end(), [&](const Value *a, const Value *b) {
    return s.index.at(a->producer()) < s.index.at(b->producer());
  });
  std::unordered_map<const Value *, int64_t> needAt;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Value *v = *it;
    int64_t at = s.firstBackwardUse(v);
    for (const Use &u : v->uses())
      for (const Value *w : u.user->outputs())
        if (w && set.count(w) && needAt.count(w) &&
            (at < 0 || needAt.at(w) < at))
          at = needAt.at(w);
    needAt[v] = at;
  }
  std::unordered_map<const Value *, Value *> copyOf;
  for (const Value *v : order) {
    const Node &n = *v->producer();
    std::vector<Value *> inputs;
    for (Value *in : n.inputs())
      inputs.push_back(in && copyOf.count(in) ? copyOf.at(in) : in);
    Node *before = s.nodes.at(size_t(needAt.at(v)));
    Node *copy = g.createNode(n.opType(), inputs, 1, n.name() + "_recompute",
                              n.domain(), before);
    for (const auto &kv : n.attributes())
      copy->setAttr(kv.first, kv.second);
    copy->output(0)->copyTypeFrom(*v);
    copyOf[v] = copy->output(0);
  }
  for (const Value *v : order) {
    Value *mutableV = const_cast<Value *>(v);
    std::vector<Use> uses = mutableV->uses();
    for (const Use &u : uses) {
      auto idx = s.index.find(u.user);
      bool backward = idx == s.index.end() // a copy made above
                          ? false
                          : int64_t(idx->second) > s.lossIndex;
      if (backward)
        u.user->setInput(size_t(u.index), copyOf.at(v));
    }
  }
  return order.size();
}

} // namespace

void runRecompute(Model &model, PassContext &ctx) {
  const CompileOptions &o = ctx.options;
  if (o.recompute == "none")
    return;
  if (!model.training)
    throw Error("--recompute: the model has no training step to recompute in");
  Graph &g = *model.training->algorithm;
  Schedule s(model, g);
  if (s.lossIndex < 0)
    throw Error("--recompute: the step has no loss (mpc.loss) to tell the "
                "forward from the backward");
  std::vector<const Value *> chosen;
  if (o.recompute != "auto") {
    std::unordered_set<std::string> seen;
    for (const std::string &name : splitList(o.recompute, ',')) {
      if (!seen.insert(name).second)
        continue;
      const Node *n = nullptr;
      for (const Node *m : s.nodes)
        if (m->name() == name)
          n = m;
      if (!n)
        throw Error("--recompute: no node named '" + name + "' in the step");
      if (!s.inForward(n))
        throw Error("--recompute: node '" + name + "' (" + n->opType() +
                    ") is not in the forward");
      if (n->numOutputs() != 1 || !n->output(0))
        throw Error("--recompute: node '" + name + "' (" + n->opType() +
                    ") has more than one output");
      if (n->opType() == "Dropout" || n->opType() == "RandomNormal" ||
          n->opType() == "RandomUniform")
        throw Error("--recompute: node '" + name + "' (" + n->opType() +
                    ") draws random numbers; a recomputed copy would differ");
      if (!s.isSaved(n->output(0)) || n->output(0)->isGraphOutput())
        throw Error("--recompute: node '" + name + "' (" + n->opType() +
                    "): the backward does not read its output, so there is "
                    "nothing to recompute");
      chosen.push_back(n->output(0));
    }
  } else {
    // Saved outputs of cheap nodes whose inputs the backward keeps anyway;
    // the inputs of a chosen value stay (so are not chosen themselves).
    std::vector<const Value *> candidates;
    for (const Node *n : s.nodes)
      if (s.inForward(n) && isCheapElementwise(*n) && n->output(0) &&
          s.isSaved(n->output(0)) && !n->output(0)->isGraphOutput() &&
          byteSize(*n->output(0)) > 0) {
        bool inputsKept = true;
        for (const Value *in : n->inputs())
          inputsKept = inputsKept && (!in || s.keptAnyway(in));
        if (inputsKept)
          candidates.push_back(n->output(0));
      }
    std::stable_sort(candidates.begin(), candidates.end(),
                     [](const Value *a, const Value *b) {
                       return byteSize(*a) > byteSize(*b);
                     });
    std::unordered_set<const Value *> pinned;
    for (const Value *v : candidates) {
      if (pinned.count(v))
        continue;
      chosen.push_back(v);
      for (const Value *in : v->producer()->inputs())
        if (in)
          pinned.insert(in);
    }
    // Every chosen input must stay: drop choices another choice reads.
    chosen.erase(
        std::remove_if(chosen.begin(), chosen.end(),
                       [&](const Value *v) { return pinned.count(v); }),
        chosen.end());
  }

  if (o.memoryBudget > 0 && o.recompute == "auto") {
    // The fewest of the largest candidates that bring the plan under budget.
    MemoryPlan before = planCompiledModel(model, /*asWritten=*/false);
    size_t taken = 0;
    if (before.arenaBytes > size_t(o.memoryBudget)) {
      for (taken = 1; taken <= chosen.size(); ++taken) {
        auto trial = std::make_unique<Model>();
        trial->opsets = model.opsets;
        trial->metadata = model.metadata;
        trial->graph = model.graph->clone();
        trial->training.emplace();
        trial->training->algorithm = g.clone();
        trial->training->updateBinding = model.training->updateBinding;
        Schedule ts(*trial, *trial->training->algorithm);
        std::vector<const Value *> prefix;
        for (size_t k = 0; k < taken; ++k)
          prefix.push_back(
              trial->training->algorithm->findValue(chosen[k]->name()));
        recompute(*trial->training->algorithm, ts, prefix);
        if (planCompiledModel(*trial, false).arenaBytes <=
            size_t(o.memoryBudget))
          break;
      }
      if (taken > chosen.size()) {
        std::cerr << "mpc-opt: note: --memory-budget=" << o.memoryBudget
                  << ": the planned peak stays above the budget after "
                     "recomputing all "
                  << chosen.size() << " candidates\n";
        taken = chosen.size();
      }
    }
    ctx.stats["planned_peak_before"] = int64_t(before.arenaBytes);
    chosen.resize(taken);
  }

  size_t bytes = 0;
  for (const Value *v : chosen)
    bytes += byteSize(*v);
  ctx.stats["recomputed_values"] += int64_t(recompute(g, s, chosen));
  ctx.stats["recomputed_bytes"] += int64_t(bytes);
}

} // namespace mpc
