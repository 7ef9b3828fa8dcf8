// The activations mpc lowers at import (activation_lowering.h).
#include "passes/onnx/activation_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <cmath>

namespace mpc {
namespace {

float floatAttr(const Node &n, const char *name, float dflt) {
  const Attribute *a = n.attr(name);
  return a ? a->f : dflt;
}

/// Builds one lowering in front of the node it replaces.
class Lowering {
public:
  Lowering(Graph &g, Node *n, int64_t opset)
      : t_(floatInputType(*n)), b_(g, n), opset_(opset), x_(n->input(0)) {}

  Value *x() const { return x_; }
  Value *c(double v, const char *name) { return b_.scalar(t_, v, name); }
  Value *op(const char *type, std::vector<Value *> ins, const char *name) {
    return b_.op(type, ins, name);
  }
  std::vector<Node *> replaceWith(Value *y) { return b_.replaceWith(y); }
  /// Clip(v, 0, 1); its bounds are attributes before opset 11.
  Value *unitClip(Value *v) {
    if (opset_ < 11)
      return b_.op(
          "Clip", {v}, "clipped",
          {{"min", Attribute::ofFloat(0)}, {"max", Attribute::ofFloat(1)}});
    return op("Clip", {v, c(0, "zero"), c(1, "one")}, "clipped");
  }
  /// alpha * (Exp(Min(x, 0) / scale) - 1), the negative branch of Elu and
  /// Celu (scale 1: no Div).
  Value *expBranch(float alpha, float scale) {
    Value *neg = op("Min", {x_, c(0, "zero")}, "negative_part");
    if (scale != 1.0f)
      neg = op("Div", {neg, c(scale, "scale")}, "scaled");
    Value *em1 = op("Sub", {op("Exp", {neg}, "exp"), c(1, "one")}, "expm1");
    return op("Mul", {c(alpha, "alpha"), em1}, "negative_branch");
  }
  /// Where(x > 0, x, negative).
  Value *positiveOr(Value *negative) {
    Value *positive = op("Greater", {x_, c(0, "zero")}, "positive");
    return op("Where", {positive, x_, negative}, "selected");
  }
  /// |x| as Max(x, -x).
  Value *abs() {
    return op("Max", {x_, op("Neg", {x_}, "negated")}, "magnitude");
  }

private:
  DType t_;
  LoweringBuilder b_;
  int64_t opset_;
  Value *x_;
};

Value *lowered(Lowering &l, const Node &n) {
  const std::string &type = n.opType();
  if (type == "HardSigmoid") {
    Value *lin =
        l.op("Add",
             {l.op("Mul", {l.x(), l.c(floatAttr(n, "alpha", 0.2f), "alpha")},
                   "scaled"),
              l.c(floatAttr(n, "beta", 0.5f), "beta")},
             "shifted");
    return l.unitClip(lin);
  }
  if (type == "HardSwish") {
    Value *lin = l.op("Add",
                      {l.op("Mul", {l.x(), l.c(1.0 / 6.0, "sixth")}, "scaled"),
                       l.c(0.5, "half")},
                      "shifted");
    return l.op("Mul", {l.x(), l.unitClip(lin)}, "gated");
  }
  if (type == "Elu")
    return l.positiveOr(l.expBranch(floatAttr(n, "alpha", 1.0f), 1.0f));
  if (type == "Selu") {
    Value *elu = l.positiveOr(
        l.expBranch(floatAttr(n, "alpha", 1.67326319217681884765625f), 1.0f));
    return l.op(
        "Mul",
        {l.c(floatAttr(n, "gamma", 1.05070102214813232421875f), "gamma"), elu},
        "scaled_elu");
  }
  if (type == "Celu") {
    float alpha = floatAttr(n, "alpha", 1.0f);
    return l.positiveOr(l.expBranch(alpha, alpha));
  }
  if (type == "Softplus") {
    Value *tail = l.op(
        "Log",
        {l.op("Add",
              {l.c(1, "one"),
               l.op("Exp", {l.op("Neg", {l.abs()}, "minus_magnitude")}, "exp")},
              "one_plus_exp")},
        "log1p_exp");
    return l.op("Add", {l.op("Relu", {l.x()}, "positive_part"), tail},
                "softplus");
  }
  if (type == "Reciprocal") // IEEE 1 / x, the same bits as the op
    return l.op("Div", {l.c(1, "one"), l.x()}, "reciprocal");
  if (type == "Softsign")
    return l.op(
        "Div",
        {l.x(), l.op("Add", {l.c(1, "one"), l.abs()}, "one_plus_magnitude")},
        "softsign");
  if (type == "PRelu") {
    if (n.numInputs() != 2 || !n.input(1))
      errorAt(n) << "PRelu takes X and slope";
    Value *neg = l.op("Min", {l.x(), l.c(0, "zero")}, "negative_part");
    return l.op("Add",
                {l.op("Relu", {l.x()}, "positive_part"),
                 l.op("Mul", {n.input(1), neg}, "sloped")},
                "prelu");
  }
  errorAt(n) << "is not an activation mpc lowers";
  return nullptr;
}

} // namespace

std::vector<Node *> lowerActivation(Graph &g, Node *n, int64_t opset) {
  Lowering l(g, n, opset);
  return l.replaceWith(lowered(l, *n));
}

} // namespace mpc
