// Recognisers of the decomposed losses autocast runs in fp32 (loss_islands.h).
#include "passes/loss_islands.h"

#include "ir/mpc_ops.h"
#include "passes/shape_inference.h"

#include <optional>
#include <unordered_set>
#include <vector>

namespace mpc {
namespace {

const LossIslandKind kLogOfSigmoid = {
    "log-of-sigmoid",
    "a sigmoid whose log is taken (binary_cross_entropy of probabilities, "
    "log(sigmoid + eps)): in fp16 it rounds to 1 above x = 8 and its log to "
    "0, so it runs in fp32 as torch's fp32 reference does"};
const LossIslandKind kBceWithLogits = {
    "bce-with-logits",
    "binary_cross_entropy_with_logits' (1 - y) z - log sigmoid(z): fp32 as "
    "in torch autocast's fp32 list"};
const LossIslandKind kLogSumExp = {
    "logsumexp",
    "x - max(x) before an exp (logsumexp, softmax or log_softmax spelled "
    "out): the difference of two fp16 values is exact in fp32 only; torch "
    "autocast runs logsumexp and log_softmax in fp32"};
const LossIslandKind kMse = {
    "mse-loss", "mse_loss' squared difference: squares overflow fp16 above "
                "256 (torch autocast's fp32 list)"};
const LossIslandKind kL1 = {
    "l1-loss",
    "l1_loss' difference, fully reduced (torch autocast's fp32 list)"};
const LossIslandKind kHuber = {
    "huber-loss", "huber_loss / smooth_l1_loss: a square below the threshold "
                  "(torch autocast's fp32 list)"};

class Recogniser {
public:
  Recogniser(const Graph &g, const Value *loss) {
    if (!loss || !loss->producer()) {
      for (const auto &n : g.nodes())
        forward_.insert(n.get());
      return;
    }
    std::vector<const Node *> stack = {loss->producer()};
    while (!stack.empty()) {
      const Node *n = stack.back();
      stack.pop_back();
      if (!forward_.insert(n).second)
        continue;
      for (const Value *v : n->inputs())
        if (v && v->producer())
          stack.push_back(v->producer());
    }
  }

  std::unordered_map<const Node *, const LossIslandKind *> run(const Graph &g) {
    for (const auto &owned : g.nodes()) {
      const Node *n = owned.get();
      if (!forward_.count(n))
        continue;
      if (n->isOp("", "Sigmoid"))
        logOfSigmoid(*n);
      else if (n->isOp(kMpcDomain, "LogSigmoid"))
        bceWithLogits(*n);
      else if (n->isOp("", "Sub") && !logSumExpShift(*n))
        regression(*n);
    }
    return std::move(found_);
  }

private:
  /// The uses of v by forward nodes.
  std::vector<const Node *> users(const Value *v) const {
    std::vector<const Node *> out;
    if (v)
      for (const Use &u : v->uses())
        if (forward_.count(u.user))
          out.push_back(u.user);
    return out;
  }

  static bool isFloat(const Value *v) { return v && isFloating(v->dtype); }

  /// A one-element constant.
  static bool isScalarConstant(const Value *v) {
    if (!v || v->isGraphInput() || (v->isInitializer() && v->isState))
      return false;
    TensorPtr t = constantValue(*v);
    return t && t->numel() == 1;
  }

  void mark(const Node *n, const LossIslandKind &k) { found_.emplace(n, &k); }

  /// Sigmoid -> {Neg, Add/Sub with a one-element constant}* -> Log, on
  /// every forward path.
  void logOfSigmoid(const Node &s) {
    std::vector<const Node *> chain = {&s};
    if (!allReachLog(s.output(0), chain, 0))
      return;
    for (const Node *n : chain)
      mark(n, kLogOfSigmoid);
  }

  bool allReachLog(const Value *v, std::vector<const Node *> &chain,
                   int depth) const {
    std::vector<const Node *> us = users(v);
    if (us.empty() || v->isGraphOutput() || depth > 4)
      return false;
    for (const Node *u : us) {
      if (u->isOp("", "Log"))
        continue;
      bool step =
          u->isOp("", "Neg") ||
          ((u->isOp("", "Add") || u->isOp("", "Sub")) && u->numInputs() == 2 &&
           (isScalarConstant(u->input(0)) || isScalarConstant(u->input(1))));
      if (!step || u->numOutputs() != 1)
        return false;
      chain.push_back(u);
      if (!allReachLog(u->output(0), chain, depth + 1))
        return false;
    }
    return true;
  }

  /// Sub(Mul(w, z), L) or Sub(Mul(w, z), Mul(p, L)), L = LogSigmoid(z).
  void bceWithLogits(const Node &ls) {
    const Value *z = ls.input(0);
    for (const Node *u : users(ls.output(0))) {
      const Node *sub = u;
      const Value *term = ls.output(0); // what the Sub subtracts
      if (u->isOp("", "Mul")) {
        std::vector<const Node *> next = users(u->output(0));
        if (next.size() != 1)
          continue;
        sub = next[0];
        term = u->output(0);
      }
      if (!sub->isOp("", "Sub") || sub->input(1) != term)
        continue;
      const Node *m = sub->input(0) ? sub->input(0)->producer() : nullptr;
      if (!m || !m->isOp("", "Mul") || (m->input(0) != z && m->input(1) != z))
        continue;
      mark(m, kBceWithLogits);
      mark(sub, kBceWithLogits);
      if (u != sub)
        mark(u, kBceWithLogits);
    }
  }

  /// Sub(x, ReduceMax(x) keepdims) read only by Exp.
  bool logSumExpShift(const Node &sub) {
    const Value *x = sub.input(0), *m = sub.input(1);
    const Node *max = m ? m->producer() : nullptr;
    if (!isFloat(x) || !max || !max->isOp("", "ReduceMax") ||
        max->input(0) != x || max->attrInt("keepdims", 1) != 1)
      return false;
    std::vector<const Node *> us = users(sub.output(0));
    if (us.empty())
      return false;
    for (const Node *u : us)
      if (!u->isOp("", "Exp"))
        return false;
    mark(&sub, kLogSumExp);
    return true;
  }

  /// Whether n reduces over all axes (no axes attribute or input).
  static bool fullReduction(const Node &n) {
    if (!(n.isOp("", "ReduceMean") || n.isOp("", "ReduceSum")))
      return false;
    if (n.hasAttr("axes") && !n.attrInts("axes").empty())
      return false;
    if (n.numInputs() > 1 && n.input(1)) {
      TensorPtr t = constantValue(*n.input(1));
      return t && t->numel() == 0;
    }
    return true;
  }

  /// Every forward path from v runs through element-wise ops into a full
  /// reduction; sets sawWhere when a Where is on the way.
  bool reachesFullReduction(const Value *v, bool &sawWhere, int depth) const {
    std::vector<const Node *> us = users(v);
    if (us.empty() || v->isGraphOutput() || depth > 8)
      return false;
    static const char *const kElementwise[] = {
        "Mul",     "Div",         "Add",     "Sub",
        "Neg",     "Abs",         "Pow",     "Where",
        "Less",    "LessOrEqual", "Greater", "GreaterOrEqual",
        "Squeeze", "Unsqueeze",   "Reshape", "Identity",
        "Cast"};
    for (const Node *u : us) {
      if (fullReduction(*u))
        continue;
      bool elementwise = false;
      for (const char *op : kElementwise)
        elementwise = elementwise || u->isOp("", op);
      if (!elementwise || u->numOutputs() != 1)
        return false;
      sawWhere = sawWhere || u->isOp("", "Where");
      // A comparison's bool result only selects: it ends its path.
      if (!isFloat(u->output(0)))
        continue;
      if (!reachesFullReduction(u->output(0), sawWhere, depth + 1))
        return false;
    }
    return true;
  }

  /// Whether `a` and `b` are Subs of the same two operands.
  static bool sameSub(const Node *a, const Node *b) {
    return a && b && a->isOp("", "Sub") && b->isOp("", "Sub") &&
           a->input(0) == b->input(0) && a->input(1) == b->input(1);
  }

  /// Sub(a, b) squared or taken the absolute value of, fully reduced.
  bool regression(const Node &sub) {
    const Value *d = sub.output(0);
    if (!isFloat(d) || sub.numInputs() != 2)
      return false;
    std::vector<const Node *> us = users(d);
    if (us.size() != 1 || us[0]->numOutputs() != 1)
      return false;
    const Node *u = us[0];
    const LossIslandKind *kind = nullptr;
    bool sawWhere = false;
    if (u->isOp("", "Mul") && u->input(0) == d && u->input(1) == d) {
      kind = &kMse;
    } else if (u->isOp("", "Mul") && u->input(0) && u->input(1) &&
               sameSub(u->input(0)->producer(), u->input(1)->producer())) {
      kind = &kMse; // the exporter's mse_loss: Sub twice, multiplied
    } else if (u->isOp("", "Pow") && u->input(0) == d) {
      TensorPtr e = u->input(1) ? constantValue(*u->input(1)) : nullptr;
      if (!e || e->numel() != 1 || e->getAsDouble(0) != 2.0)
        return false;
      kind = &kMse;
    } else if (u->isOp("", "Abs")) {
      kind = &kL1;
    } else {
      return false;
    }
    if (!reachesFullReduction(u->output(0), sawWhere, 0))
      return false;
    if (kind == &kL1 && sawWhere)
      kind = &kHuber;
    mark(&sub, *kind);
    return true;
  }

  std::unordered_set<const Node *> forward_;
  std::unordered_map<const Node *, const LossIslandKind *> found_;
};

} // namespace

std::unordered_map<const Node *, const LossIslandKind *>
findLossIslands(const Graph &g, const Value *loss) {
  return Recogniser(g, loss).run(g);
}

} // namespace mpc
