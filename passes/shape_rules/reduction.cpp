// Shape rules of the reductions: ReduceSum/Mean/Max/Prod (axes an attribute
// or, by opset, an input), CumSum's running sum, and the mpc backward ops
// that reduce or spread along axes: ReduceGrad, ReduceExtremumGrad and
// SumToShape/SumToShapeAs (a broadcast's gradient summed back to its
// input's shape).
#include "passes/shape_rules/rule_support.h"

#include "ir/mpc_ops.h"

#include <algorithm>

namespace mpc::shape_rules {

namespace {

/// The opset from which a reduction takes axes as an input.
int64_t axesInputOpset(const std::string &op) {
  return op == "ReduceSum" ? 13 : 18;
}

void inferReduce(Ctx &c) {
  Value *x = c.req(0);
  if (c.n.opType() != "ReduceMax") // ReduceMax takes bool from opset 20
    c.requireNumeric(0);
  int64_t since = axesInputOpset(c.n.opType());
  bool keepDims = c.flagAttr("keepdims", true);
  std::optional<std::vector<int64_t>> axes;
  bool noop = false;
  if (c.opset >= since) {
    if (c.n.hasAttr("axes"))
      fail([&] {
        errorAt(c.n) << "'axes' is an input since opset " << since
                     << ", not an attribute (model opset " << c.opset << ")";
      });
    noop = c.flagAttr("noop_with_empty_axes", false);
    axes = std::vector<int64_t>{};
    if (c.opt(1))
      axes = c.constInts(1, "axes");
  } else {
    if (c.n.numInputs() > 1)
      fail([&] {
        errorAt(c.n) << "takes 'axes' as an attribute before opset " << since
                     << ", not as an input (model opset " << c.opset << ")";
      });
    axes = c.intsAttr("axes");
  }
  if (!x->hasShape) {
    c.set(0, unranked(x->dtype));
    return;
  }
  if (!axes) {
    // Which axes is only known at run time.
    c.set(0, keepDims ? shaped(x->dtype, Dims(x->dims.size(), Dim()))
                      : unranked(x->dtype));
    return;
  }
  if (axes->empty()) {
    if (noop) {
      c.setLike(0, x);
      return;
    }
    for (int64_t i = 0; i < x->rank(); ++i)
      axes->push_back(i);
  }
  std::vector<int64_t> norm = c.axes(*axes, x->rank());
  Dims out;
  for (int64_t i = 0; i < x->rank(); ++i) {
    bool reduced = std::find(norm.begin(), norm.end(), i) != norm.end();
    if (!reduced)
      out.push_back(x->dims[size_t(i)]);
    else if (keepDims)
      out.push_back(Dim(1));
  }
  c.set(0, shaped(x->dtype, std::move(out)));
}

/// CumSum(x, axis): x's type; axis an int32/int64 scalar.
void inferCumSum(Ctx &c) {
  Value *x = c.req(0);
  c.requireNumeric(0);
  const Value *axis = c.req(1);
  if (axis->dtype != DType::Undefined && axis->dtype != DType::I64 &&
      axis->dtype != DType::I32)
    fail([&] {
      errorAt(c.n) << "axis must be int32 or int64, got " << typeText(axis);
    });
  if (axis->hasShape && axis->rank() != 0 &&
      !(axis->rank() == 1 && axis->dims[0].isKnown() &&
        axis->dims[0].value == 1))
    fail([&] {
      errorAt(c.n) << "axis (" << c.inputText(1) << ") must be a scalar, got "
                   << typeText(axis);
    });
  if (x->hasShape && x->rank() == 0)
    fail([&] { errorAt(c.n) << "x must have rank >= 1"; });
  c.setLike(0, x);
}

void inferReduceGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *x = c.req(1);
  c.flagAttr("keepdims", true);
  c.flagAttr("mean", false);
  if (c.opt(2))
    c.requireIndex(2, "axes");
  c.setShapeOf(0, dy->dtype, x);
}

void inferReduceExtremumGrad(Ctx &c) {
  Value *dy = c.req(0);
  Value *x = c.req(1);
  c.req(2);
  c.requireFloat(0);
  c.sameDType({1, 2});
  requireSameShape(c, 0, 2);
  c.flagAttr("keepdims", true);
  if (c.opt(3))
    c.requireIndex(3, "axes");
  c.setShapeOf(0, dy->dtype, x);
}

void inferSumToShape(Ctx &c) {
  Value *dy = c.req(0);
  Value *x = c.req(1);
  if (dy->hasShape && x->hasShape) {
    // X must broadcast one way onto dY's shape.
    bool ok = x->rank() <= dy->rank();
    size_t offset = ok ? dy->dims.size() - x->dims.size() : 0;
    for (size_t i = 0; ok && i < x->dims.size(); ++i)
      ok = x->dims[i] == Dim(1) ||
           !dimsConflict(x->dims[i], dy->dims[offset + i]);
    if (!ok)
      fail([&] {
        errorAt(c.n) << "shape " << dimsToString(x->dims)
                     << " does not broadcast to " << dimsToString(dy->dims);
      });
  }
  c.setShapeOf(0, dy->dtype, x);
}

void inferSumToShapeAs(Ctx &c) {
  inferSumToShape(c);
  Value *dy = c.req(0);
  Value *x = c.req(1);
  // dY's elements are widened to X's dtype: it must hold them exactly.
  if (dy->dtype != DType::Undefined && x->dtype != DType::Undefined &&
      dy->dtype != x->dtype && !widensExactly(dy->dtype, x->dtype))
    fail([&] {
      errorAt(c.n) << "X (" << dtypeName(x->dtype)
                   << ") must be a float type at least as wide as dY ("
                   << dtypeName(dy->dtype) << ")";
    });
  c.setShapeOf(0, x->dtype, x);
}

const OpRule kRules[] = {
    {"", "ReduceMax", 1, 2, 1, 1, inferReduce},
    {"", "ReduceMean", 1, 2, 1, 1, inferReduce},
    {"", "ReduceProd", 1, 2, 1, 1, inferReduce},
    {"", "ReduceSum", 1, 2, 1, 1, inferReduce},
    {"", "CumSum", 2, 2, 1, 1, inferCumSum},
    {kMpcDomain, "ReduceGrad", 2, 3, 1, 1, inferReduceGrad},
    {kMpcDomain, "ReduceExtremumGrad", 3, 4, 1, 1, inferReduceExtremumGrad},
    {kMpcDomain, "SumToShape", 2, 2, 1, 1, inferSumToShape},
    {kMpcDomain, "SumToShapeAs", 2, 2, 1, 1, inferSumToShapeAs},
};

} // namespace

RuleRows reductionRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
