// recompute: activation checkpointing on the compiled step.
//
// A forward value the backward reads is normally kept alive from the forward
// to its backward use ("saved"), which is what makes training memory grow
// with depth and batch. This pass instead recomputes chosen saved values in
// the backward, just before their first backward use, from values the
// backward keeps anyway, and points the backward at the copy; the forward
// value then dies in the forward. The copies are the same ops with the same
// attributes on the same inputs, so the numbers are bit-identical. Each
// chosen value gets its own copy of its chain, made where it is needed, so
// no recomputed value lives longer than its backward use needs (a chain
// member used at several places is recomputed at each: cheap ops only).
//
//   (default)             auto, as far as its copies add no more than 3 %
//                         of the step's FLOPs, and only where the planned
//                         peak does not grow; nothing on a model without a
//                         training step or loss
//   --recompute=auto      every saved value a chain of cheap elementwise
//                         nodes (activations, casts, the pieces of GELU)
//                         computes from values the backward keeps anyway;
//                         and every saved output of an fp32 softmax island
//                         whose input is a Cast from a narrower (fp16/bf16)
//                         value, recomputed from that value, which costs
//                         half the bytes to keep (with the fp16 copy of the
//                         island's output that the next matrix product
//                         reads)
//   --recompute=A,B       the outputs of the nodes named A and B (a chain of
//                         named nodes is recomputed together)
//   --memory-budget=SIZE  (implies auto) whatever it takes, matrix products
//                         and whole blocks included, for the planned peak
//                         to fit SIZE, at the fewest recompute FLOPs found
//                         (passes/recompute_budget.cpp)
//
// Runs after cleanup (so no cast merging undoes the copies) and before
// plan-memory; after fold-widening-casts, so an island may be one
// mpc.SoftmaxTo reading the fp16 value.
#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"
#include "passes/flop_count.h"
#include "passes/fold_widening_casts.h"
#include "passes/memory_report.h"
#include "passes/pass.h"
#include "passes/recompute_budget.h"
#include "support/diagnostics.h"

#include <algorithm>
#include <functional>
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
  // mpc.Gelu / mpc.GeluTanh: the GELU that fuse-gelu makes of an opset < 20
  // export, as cheap as Gelu; mpc.AddTo: an Add with its Casts folded in.
  bool fused = n.domain() == kMpcDomain &&
               (n.opType() == "Gelu" || n.opType() == "GeluTanh" ||
                n.opType() == "AddTo");
  return (fused || (n.domain().empty() && ops.count(n.opType()))) &&
         n.numOutputs() == 1;
}

/// Longest chain of cheap nodes recomputed for one saved value.
constexpr int kMaxChainDepth = 8;

/// Softmax and LogSoftmax: the fp32 islands autocast widens its fp16 input
/// for, and whose backward reads the island's own fp32 output; and
/// mpc.SoftmaxTo / DivSoftmaxTo, the same island with its widening Cast (and
/// the attention's scaling Div) folded in.
/// The mpc ones may also write the island's Cast down (Ylow, output 1).
bool isRecomputableIsland(const Node &n) {
  return (n.numOutputs() == 1 && n.domain().empty() &&
          (n.opType() == "Softmax" || n.opType() == "LogSoftmax")) ||
         ((n.numOutputs() == 1 || n.numOutputs() == 2) &&
          (n.isOp(kMpcDomain, "SoftmaxTo") ||
           n.isOp(kMpcDomain, "DivSoftmaxTo")));
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
    const std::string *loss = readMeta(model, meta::kLoss);
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

/// Recomputes each of `chosen` (saved forward values) in the backward just
/// before its first backward use, from a private copy of its chain: the
/// producer of a value in `chain` is copied (once per chosen value), any
/// other value is read as it is. Returns how many values were recomputed.
size_t recompute(Model &model, Graph &g, const Schedule &s,
                 const std::vector<const Value *> &chosen,
                 const std::unordered_set<const Value *> &chain) {
  std::vector<std::pair<const Value *, Value *>> copies;
  std::vector<Node *> made;
  for (const Value *v : chosen) {
    int64_t at = s.firstBackwardUse(v);
    if (at < 0)
      continue;
    Node *before = s.nodes.at(size_t(at));
    std::unordered_map<const Value *, Value *> copyOf;
    std::function<Value *(Value *)> copy = [&](Value *u) -> Value * {
      if (!u || !chain.count(u))
        return u;
      auto it = copyOf.find(u);
      if (it != copyOf.end())
        return it->second;
      const Node &n = *u->producer();
      std::vector<Value *> inputs;
      for (Value *in : n.inputs())
        inputs.push_back(copy(in));
      // The copy writes the outputs up to u (a softmax island's Ylow needs
      // its Y; Y alone needs no Ylow).
      size_t k = 0;
      while (n.output(k) != u)
        ++k;
      Node *c = g.createNode(n.opType(), inputs, int(k + 1),
                             n.name() + "_recompute", n.domain(), before);
      for (const auto &kv : n.attributes())
        c->setAttr(kv.first, kv.second);
      for (size_t i = 0; i <= k; ++i)
        c->output(i)->copyTypeFrom(*n.output(i));
      made.push_back(c);
      return copyOf[u] = c->output(k);
    };
    copies.emplace_back(v, copy(const_cast<Value *>(v)));
  }
  // Only the step's own backward nodes are pointed at the copies (the
  // copies are not in the schedule, and read the originals' chains).
  for (const auto &vc : copies) {
    std::vector<Use> uses = vc.first->uses();
    for (const Use &u : uses) {
      auto idx = s.index.find(u.user);
      if (idx != s.index.end() && int64_t(idx->second) > s.lossIndex)
        u.user->setInput(size_t(u.index), vc.second);
    }
  }
  // A copied softmax island writes the Cast down that the backward's
  // products read of its Y (shrink-saved's Cast again of the forward's Y)
  // as its own Ylow.
  foldCastsDownIntoSoftmaxes(model, g, made);
  return copies.size();
}

/// What --recompute=auto takes: the saved values, largest first, and every
/// value their chains recompute.
struct AutoChoice {
  std::vector<const Value *> chosen;
  std::unordered_set<const Value *> chain;
};

AutoChoice chooseAuto(const Schedule &s) {
  AutoChoice a;
  auto isConstant = [](const Value *v) {
    return v->isInitializer() || v->isGraphInput() ||
           (v->producer() && v->producer()->domain().empty() &&
            v->producer()->opType() == "Constant");
  };
  // fp32 islands fed by a widening Cast: keeping the narrow value and
  // recomputing Cast + island in the backward replaces the island's saved
  // fp32 output (4 bytes an element) by the fp16 input (2 bytes). The
  // Cast's output must have no backward use of its own.
  std::unordered_set<const Value *> narrowRoots;
  for (const Node *n : s.nodes) {
    if (!s.inForward(n) || !isRecomputableIsland(*n) || !n->output(0))
      continue;
    const Value *out = n->output(0);
    if (!s.isSaved(out) || out->isGraphOutput())
      continue;
    // SoftmaxTo and DivSoftmaxTo read the narrow value itself; a Softmax
    // reads its Cast.
    const Value *wide = n->domain().empty() ? n->input(0) : nullptr;
    const Value *narrow = n->input(0);
    if (wide) {
      const Node *cast = wide->producer();
      if (!cast || !cast->domain().empty() || cast->opType() != "Cast" ||
          s.isSaved(wide) || wide->isGraphOutput() || !cast->input(0))
        continue;
      narrow = cast->input(0);
    }
    if (!narrow)
      continue;
    size_t keepCost = s.keptAnyway(narrow) ? 0 : byteSize(*narrow);
    if (byteSize(*out) == 0 || byteSize(*narrow) == 0 ||
        keepCost >= byteSize(*out))
      continue;
    a.chain.insert(out);
    if (wide)
      a.chain.insert(wide);
    if (const Value *low = n->output(1); low && s.isSaved(low))
      a.chain.insert(low);
    narrowRoots.insert(narrow);
  }
  // Values a chain of cheap nodes computes from values the backward keeps
  // anyway (saved outputs of other ops, parameters, inputs, constants) or
  // from an island's output. A saved chain member is recomputed too, so a
  // value never stays saved only because another chain reads it.
  std::unordered_map<const Value *, bool> memo;
  std::function<bool(const Value *, int)> cheap = [&](const Value *v,
                                                      int depth) -> bool {
    if (a.chain.count(v))
      return true;
    auto it = memo.find(v);
    if (it != memo.end())
      return it->second;
    const Node *p = v->producer();
    bool ok = depth < kMaxChainDepth && p && s.inForward(p) &&
              isCheapElementwise(*p) && !v->isGraphOutput() &&
              byteSize(*v) > 0 && !narrowRoots.count(v);
    for (size_t i = 0; ok && i < p->numInputs(); ++i) {
      const Value *in = p->input(i);
      ok = !in || isConstant(in) || cheap(in, depth + 1) || s.isSaved(in);
    }
    // A "no" from the depth limit may be a "yes" from a shallower start.
    if (ok || depth == 0)
      memo[v] = ok;
    return ok;
  };
  for (const Node *n : s.nodes)
    if (s.inForward(n))
      for (const Value *o : n->outputs())
        if (o && s.isSaved(o) && cheap(o, 0))
          a.chosen.push_back(o);
  for (const auto &kv : memo)
    if (kv.second)
      a.chain.insert(kv.first);
  std::stable_sort(a.chosen.begin(), a.chosen.end(),
                   [](const Value *x, const Value *y) {
                     return byteSize(*x) > byteSize(*y);
                   });
  return a;
}

/// The most of the step's FLOPs that the default recomputation may add.
constexpr double kDefaultMaxShare = 0.03;

/// The FLOPs of the copies recompute() makes for v: each chain member's
/// producer once.
int64_t copyFlops(const Value *v,
                  const std::unordered_set<const Value *> &chain,
                  std::unordered_set<const Value *> &seen) {
  if (!v || !chain.count(v) || !seen.insert(v).second)
    return 0;
  const Node &n = *v->producer();
  int64_t f = nodeFlops(n);
  for (const Value *in : n.inputs())
    f = saturatingAdd(f, copyFlops(in, chain, seen));
  return f;
}

/// The default's choice: of auto's values, the most bytes per recompute
/// FLOP first, as long as their copies add no more than kDefaultMaxShare of
/// the step's FLOPs (elementwise chains and softmax islands next to matrix
/// products cost far less; a step of elementwise ops only may not).
std::vector<const Value *>
withinDefaultShare(const Model &model, std::vector<const Value *> chosen,
                   const std::unordered_set<const Value *> &chain) {
  const double limit = kDefaultMaxShare * double(countStepFlops(model).total());
  std::vector<std::pair<const Value *, int64_t>> costs;
  for (const Value *v : chosen) {
    std::unordered_set<const Value *> seen;
    costs.emplace_back(v, copyFlops(v, chain, seen));
  }
  std::stable_sort(costs.begin(), costs.end(),
                   [](const auto &a, const auto &b) {
                     return double(byteSize(*a.first)) *
                                double(std::max<int64_t>(b.second, 1)) >
                            double(byteSize(*b.first)) *
                                double(std::max<int64_t>(a.second, 1));
                   });
  std::unordered_set<const Value *> kept;
  double spent = 0;
  for (const auto &[v, flops] : costs)
    if (spent + double(flops) <= limit) {
      spent += double(flops);
      kept.insert(v);
    }
  // recompute() copies in the order given; keep auto's (largest first).
  std::vector<const Value *> ordered;
  for (const Value *v : chosen)
    if (kept.count(v))
      ordered.push_back(v);
  return ordered;
}

} // namespace

void runRecompute(Model &model, PassContext &ctx) {
  const CompileOptions &o = ctx.options;
  const bool budget = o.memoryBudget > 0;
  if (o.recompute == "none" && !budget) {
    ctx.changedNothing = true;
    return;
  }
  // The default (auto, not asked for): a forward-only model, or a step
  // without a loss, has nothing to recompute and compiles as it is.
  const bool byDefault = !o.recomputeGiven && !budget && o.recompute == "auto";
  if (byDefault && (!model.training || !readMeta(model, meta::kLoss))) {
    ctx.changedNothing = true;
    return;
  }
  const char *flag = budget ? "--memory-budget" : "--recompute";
  if (budget && o.recompute != "none" && o.recompute != "auto")
    throw Error("--memory-budget: chooses what to recompute itself; it does "
                "not take --recompute=" +
                o.recompute);
  if (!model.training)
    throw Error(std::string(flag) +
                ": the model has no training step to recompute in");
  Graph &g = *model.training->algorithm;
  Schedule s(model, g);
  if (s.lossIndex < 0 && byDefault) {
    ctx.changedNothing = true;
    return;
  }
  if (s.lossIndex < 0)
    throw Error(std::string(flag) +
                ": the step has no loss (mpc.loss) to tell the forward from "
                "the backward");
  if (budget) {
    recomputeToBudget(model, ctx);
    return;
  }
  std::vector<const Value *> chosen;
  std::unordered_set<const Value *> chain;
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
      chain.insert(n->output(0));
    }
  } else {
    AutoChoice a = chooseAuto(s);
    chosen = std::move(a.chosen);
    chain = std::move(a.chain);
    if (byDefault)
      chosen = withinDefaultShare(model, chosen, chain);
  }

  size_t bytes = 0;
  for (const Value *v : chosen)
    bytes += byteSize(*v);
  // The default keeps its choice only where the planned peak does not grow
  // (a copy made in the backward can land on the backward's peak, or take
  // an in-place write's place): the step as it was otherwise.
  std::unique_ptr<Graph> before;
  size_t peakBefore = 0;
  if (byDefault && !chosen.empty()) {
    try {
      peakBefore = planCompiledModel(model, /*asWritten=*/false).arenaBytes;
      before = g.clone();
    } catch (const Error &) {
      // No plan (shapes the planner cannot size): keep the choice, as
      // --recompute=auto would.
    }
  }
  size_t made = recompute(model, g, s, chosen, chain);
  if (before &&
      planCompiledModel(model, /*asWritten=*/false).arenaBytes > peakBefore) {
    model.training->algorithm = std::move(before);
    ctx.stats["default_undone_for_peak"] += int64_t(made);
    ctx.changedNothing = true;
    return;
  }
  ctx.stats["recomputed_values"] += int64_t(made);
  ctx.stats["recomputed_bytes"] += int64_t(bytes);
}

} // namespace mpc
