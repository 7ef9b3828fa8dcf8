// The reductions mpc lowers at import (reduce_lowering.h).
#include "passes/onnx/reduce_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

namespace mpc {
namespace {

/// The opset from which op takes its axes as an input.
int64_t axesInputSince(const std::string &op) {
  return op == "ReduceSum" ? 13 : 18;
}

/// The lowered node's reduction: its axes (an attribute or an input, as the
/// model's opset has it), keepdims and noop_with_empty_axes, re-emitted for
/// ReduceSum and ReduceMax in the form they take at that opset.
class Reduction {
public:
  Reduction(Graph &g, Node *n, int64_t opset)
      : t_(floatInputType(*n)), b_(g, n), node_(*n), opset_(opset),
        x_(n->input(0)) {
    if (opset >= axesInputSince(n->opType())) {
      axesInput_ = n->numInputs() > 1 ? n->input(1) : nullptr;
    } else if (const Attribute *a = n->attr("axes")) {
      axesAttr_ = a->ints;
      hasAxesAttr_ = true;
    }
  }

  Value *x() const { return x_; }
  Value *c(double v, const char *name) { return b_.scalar(t_, v, name); }
  Value *op(const char *type, std::vector<Value *> ins, const char *name) {
    return b_.op(type, ins, name);
  }

  /// type (ReduceSum or ReduceMax) of v over the node's axes; keepdims
  /// forced to 1 when `keep` is set, else the node's.
  Value *reduce(const char *type, Value *v, const char *name,
                bool keep = false) {
    Builder::Attrs attrs = {
        {"keepdims",
         Attribute::ofInt(keep ? 1 : node_.attrInt("keepdims", 1))}};
    if (const Attribute *noop = node_.attr("noop_with_empty_axes"))
      if (opset_ >= axesInputSince(type))
        attrs.emplace_back("noop_with_empty_axes", *noop);
    std::vector<Value *> ins = {v};
    if (opset_ >= axesInputSince(type)) {
      if (axesInput_)
        ins.push_back(axesInput_);
      else if (hasAxesAttr_)
        ins.push_back(b_.int64s(axesAttr_, std::string(name) + "_axes"));
    } else if (hasAxesAttr_) {
      attrs.emplace_back("axes", Attribute::ofInts(axesAttr_));
    }
    return b_.op(type, ins, name, attrs);
  }

  std::vector<Node *> replaceWith(Value *y) { return b_.replaceWith(y); }

private:
  DType t_;
  LoweringBuilder b_;
  const Node &node_;
  int64_t opset_;
  Value *x_;
  Value *axesInput_ = nullptr;
  std::vector<int64_t> axesAttr_;
  bool hasAxesAttr_ = false;
};

Value *lowered(Reduction &r, const Node &n) {
  const std::string &type = n.opType();
  auto squares = [&] {
    return r.reduce("ReduceSum", r.op("Pow", {r.x(), r.c(2, "two")}, "squares"),
                    "sum_squares");
  };
  if (type == "ReduceSumSquare")
    return squares();
  if (type == "ReduceL1")
    return r.reduce("ReduceSum", r.op("Abs", {r.x()}, "magnitudes"),
                    "sum_magnitudes");
  if (type == "ReduceL2") {
    Value *s = squares();
    Value *nonzero = r.op("Greater", {s, r.c(0, "zero")}, "nonzero");
    Value *safe = r.op("Where", {nonzero, s, r.c(1, "one")}, "safe");
    return r.op("Where",
                {nonzero, r.op("Sqrt", {safe}, "root"), r.c(0, "zero_norm")},
                "norm");
  }
  if (type == "ReduceLogSum")
    return r.op("Log", {r.reduce("ReduceSum", r.x(), "sum")}, "log_sum");
  if (type == "ReduceLogSumExp") {
    Value *m = r.reduce("ReduceMax", r.x(), "max_kept", true);
    Value *e = r.op("Exp", {r.op("Sub", {r.x(), m}, "shifted")}, "exp");
    Value *logSum =
        r.op("Log", {r.reduce("ReduceSum", e, "sum_exp")}, "log_sum_exp");
    return r.op("Add", {logSum, r.reduce("ReduceMax", r.x(), "max")},
                "log_sum_exp_max");
  }
  if (type == "ReduceMin")
    return r.op(
        "Neg",
        {r.reduce("ReduceMax", r.op("Neg", {r.x()}, "negated"), "max_negated")},
        "min");
  errorAt(n) << "is not a reduction mpc lowers";
  return nullptr;
}

} // namespace

std::vector<Node *> lowerReduction(Graph &g, Node *n, int64_t opset) {
  Reduction r(g, n, opset);
  return r.replaceWith(lowered(r, *n));
}

} // namespace mpc
