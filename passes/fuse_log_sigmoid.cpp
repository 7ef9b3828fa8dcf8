// fuse-log-sigmoid: log(sigmoid(x)) written as Log(Sigmoid(x)) becomes one
// stable mpc.LogSigmoid(x).
//
// torch's dynamo exporter writes binary_cross_entropy_with_logits as
//   Sub(Mul(Sub(1, y), z), Log(Sigmoid(z)))
// and logsigmoid and multilabel_soft_margin_loss with the same
// Log(Sigmoid(.)); hand-written BCE adds Log(Sub(1, Sigmoid(z))), and
// log1p(-sigmoid(z)) exports as Log(Add(Neg(Sigmoid(z)), 1)). Log of a
// rounded sigmoid loses log sigmoid(z) once sigmoid(z) is near 1 (all of it
// above z = 8 in fp16, z = 17 in fp32) and is -inf once it underflows;
// PyTorch computes these losses from the logits (and autocast keeps them in
// fp32). mpc.LogSigmoid (ir/mpc_ops.h) computes min(z, 0) -
// log1p(exp(-|z|)), exact to a few ulp everywhere; autocast makes it an fp32
// island, and its gradient is one mpc.LogSigmoidGrad, dY sigmoid(-z).
//
// Matched, for a Log node L:
//   L(Sigmoid(x))                          -> LogSigmoid(x)
//   L(Sub(1, Sigmoid(x)))                  -> LogSigmoid(Neg(x))
//   L(Add(Neg(Sigmoid(x)), 1)) (either order) -> LogSigmoid(Neg(x))
// with 1 a one-element constant equal to 1 and L's output of x's type (the
// constant adds no axes). The sigmoid and the arithmetic stay where
// something else reads them. Refused: any other constant (log(sigmoid(x) +
// eps) is not log sigmoid), and a Log whose result is clamped from below by
// Max with a constant (F.binary_cross_entropy's clamp at -100 of the log of
// a probability that may round to 0 or 1: the clamp, and so the rounding, is
// what that model computes; autocast's loss islands keep its sigmoid in
// fp32 instead).
//
// Runs after infer-shapes and fold-constants and before autodiff, on the
// main graph and on a training algorithm the model already has.
#include "ir/mpc_ops.h"
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"

#include <optional>
#include <unordered_set>

namespace mpc {
namespace {

/// A one-element floating constant's value (an initializer that is not
/// state, or a Constant node's), else nullopt.
std::optional<double> scalarValue(const Value *v) {
  if (!v || v->isGraphInput() || (v->isInitializer() && v->isState))
    return std::nullopt;
  TensorPtr t = constantValue(*v);
  if (!t || t->numel() != 1 || !isFloating(t->dtype))
    return std::nullopt;
  return t->getAsDouble(0);
}

/// v's producer when it is the ONNX op `op`.
Node *producerOf(const Value *v, const char *op) {
  Node *p = v ? v->producer() : nullptr;
  return p && p->isOp("", op) && p->numOutputs() == 1 ? p : nullptr;
}

/// Whether v is a one-element constant equal to 1.
bool isOne(const Value *v) { return scalarValue(v) == std::optional(1.0); }

/// Whether the Log's output is read by a Max with a constant operand (a
/// clamp from below, F.binary_cross_entropy's).
bool clampedFromBelow(const Value &logOut) {
  for (const Use &u : logOut.uses()) {
    const Node *m = u.user;
    if (!m->isOp("", "Max"))
      continue;
    for (const Value *in : m->inputs())
      if (in && in != &logOut && constantValue(*in))
        return true;
  }
  return false;
}

struct LogSigmoidMatch {
  Node *log = nullptr;
  Value *x = nullptr;          ///< the logits
  bool negate = false;         ///< log(1 - sigmoid(x)) = log sigmoid(-x)
  std::vector<Node *> pattern; ///< the nodes between x and the Log
};

std::optional<LogSigmoidMatch> matchLog(Node &log) {
  if (!log.isOp("", "Log") || log.numInputs() != 1 || log.numOutputs() != 1 ||
      !log.input(0) || !log.output(0) || clampedFromBelow(*log.output(0)))
    return std::nullopt;
  LogSigmoidMatch m;
  m.log = &log;
  Value *a = log.input(0);
  if (Node *s = producerOf(a, "Sigmoid")) {
    m.x = s->input(0);
    m.pattern = {s};
  } else if (Node *sub = producerOf(a, "Sub")) {
    Node *s = producerOf(sub->input(1), "Sigmoid");
    if (!s || !isOne(sub->input(0)))
      return std::nullopt;
    m.x = s->input(0);
    m.negate = true;
    m.pattern = {s, sub};
  } else if (Node *add = producerOf(a, "Add")) {
    int oneAt = isOne(add->input(1)) ? 1 : isOne(add->input(0)) ? 0 : -1;
    if (oneAt < 0)
      return std::nullopt;
    Node *neg = producerOf(add->input(size_t(1 - oneAt)), "Neg");
    Node *s = neg ? producerOf(neg->input(0), "Sigmoid") : nullptr;
    if (!s)
      return std::nullopt;
    m.x = s->input(0);
    m.negate = true;
    m.pattern = {s, neg, add};
  } else {
    return std::nullopt;
  }
  if (!m.x || !isFloating(m.x->dtype) || !sameType(*log.output(0), *m.x))
    return std::nullopt;
  return m;
}

/// Replaces the Log by mpc.LogSigmoid (of Neg(x) when negated); the Log's
/// output keeps its name. The pattern's nodes that nothing else reads go.
void rewrite(Graph &g, const LogSigmoidMatch &m,
             std::unordered_set<Node *> &removed) {
  Node *log = m.log;
  std::string name = log->name();
  std::string prefix = name.substr(0, name.rfind('/') + 1);
  Value *in = m.x;
  if (m.negate) {
    Node *neg = g.createNode("Neg", {m.x}, 1, prefix + "neg_logits", "", log);
    neg->output(0)->copyTypeFrom(*m.x);
    in = neg->output(0);
  }
  Node *ls = g.createNode("LogSigmoid", {in}, 1, prefix + "LogSigmoid",
                          kMpcDomain, log);
  Value *out = log->output(0);
  std::string outName = out->name();
  ls->output(0)->copyTypeFrom(*out);
  g.replaceAllUsesWith(out, ls->output(0));
  g.removeNode(log);
  removed.insert(log);
  g.renameValue(ls->output(0), outName);
  std::vector<Value *> operands;
  // Readers before what they read: the pattern is in producer order.
  for (auto it = m.pattern.rbegin(); it != m.pattern.rend(); ++it) {
    Node *n = *it;
    const Value *o = n->output(0);
    if (!o->uses().empty() || o->isGraphOutput())
      continue;
    for (Value *v : n->inputs())
      if (v && v != m.x)
        operands.push_back(v);
    g.removeNode(n);
    removed.insert(n);
  }
  removeUnreadConstants(g, operands, removed);
}

} // namespace

void runFuseLogSigmoid(Model &model, PassContext &ctx) {
  fuseEachGraph(model, ctx,
                [&](Graph &g, Node &n, std::unordered_set<Node *> &removed) {
                  std::optional<LogSigmoidMatch> m = matchLog(n);
                  if (!m)
                    return false;
                  rewrite(g, *m, removed);
                  ++ctx.stats[m->negate ? "fused-log-one-minus-sigmoid"
                                        : "fused-log-sigmoid"];
                  return true;
                });
}

} // namespace mpc
