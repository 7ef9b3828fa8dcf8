// Shape rules of the selection ops: TopK, ArgMax and ArgMin (ONNX opsets
// 11/13: axis, keepdims, select_last_index; TopK's K an input).
#include "passes/shape_rules/rule_support.h"

namespace mpc::shape_rules {

namespace {

/// Input 0 numeric and of rank >= 1 (when known); the node's axis
/// normalised against it, or -1 when the rank is unknown.
int64_t selectedAxis(Ctx &c, int64_t dflt) {
  const Value *x = c.req(0);
  c.requireNumeric(0);
  int64_t axis = c.intAttr("axis", dflt);
  if (!x->hasShape)
    return -1;
  if (x->rank() == 0)
    fail([&] {
      errorAt(c.n) << "input " << typeText(x) << " must have rank >= 1";
    });
  return c.axis(axis, x->rank());
}

/// TopK: Values (X's dtype) and Indices (int64) of X's shape with K
/// elements along the axis; K is known when its input is a constant.
void inferTopK(Ctx &c) {
  const Value *x = c.req(0);
  c.req(1);
  c.requireDType(1, DType::I64);
  c.flagAttr("largest", true);
  c.flagAttr("sorted", true);
  int64_t a = selectedAxis(c, -1);
  std::optional<std::vector<int64_t>> k = c.constInts(1, "K");
  if (k && k->size() != 1)
    fail(
        [&] { errorAt(c.n) << "K must hold one value, got " << intsText(*k); });
  if (a < 0) {
    c.setUnranked(0, x->dtype);
    c.setUnranked(1, DType::I64);
    return;
  }
  Dims dims = x->dims;
  Dim &len = dims[size_t(a)];
  if (k) {
    int64_t kv = (*k)[0];
    if (kv < 0 || (len.isKnown() && kv > len.value))
      fail([&] {
        errorAt(c.n) << "K = " << kv << " is out of range for axis " << a
                     << " of " << typeText(x);
      });
    len = Dim(kv);
  } else {
    len = Dim();
  }
  c.setShaped(0, x->dtype, dims.data(), dims.size());
  c.setShaped(1, DType::I64, dims.data(), dims.size());
}

/// ArgMax, ArgMin: int64 of X's shape with the axis kept as 1 (keepdims)
/// or removed.
void inferArgExtremum(Ctx &c) {
  const Value *x = c.req(0);
  bool keep = c.flagAttr("keepdims", true);
  c.flagAttr("select_last_index", false);
  int64_t a = selectedAxis(c, 0);
  if (a < 0) {
    c.setUnranked(0, DType::I64);
    return;
  }
  if (x->dims[size_t(a)].isKnown() && x->dims[size_t(a)].value == 0)
    fail([&] {
      errorAt(c.n) << "axis " << a << " of " << typeText(x)
                   << " is empty: there is no extreme to index";
    });
  Dims dims = x->dims;
  if (keep)
    dims[size_t(a)] = Dim(1);
  else
    dims.erase(dims.begin() + a);
  c.setShaped(0, DType::I64, dims.data(), dims.size());
}

const OpRule kRules[] = {
    {"", "TopK", 2, 2, 1, 2, inferTopK},
    {"", "ArgMax", 1, 1, 1, 1, inferArgExtremum},
    {"", "ArgMin", 1, 1, 1, 1, inferArgExtremum},
};

} // namespace

RuleRows selectionRules() { return RuleRows(kRules); }

} // namespace mpc::shape_rules
