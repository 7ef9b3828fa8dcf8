// InstanceNormalization lowered to LayerNormalization and an affine
// (instance_norm_lowering.h).
#include "passes/onnx/instance_norm_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "passes/shape_inference.h"
#include "support/diagnostics.h"

#include <vector>

namespace mpc {
namespace {

/// Whether v is a Constant node's value (or a constant initializer that is
/// not state) whose every element equals `value`.
bool isConstantFill(const Value *v, double value) {
  if (!v || (v->isInitializer() && v->isState))
    return false;
  TensorPtr t = constantValue(*v);
  if (!t || !isFloating(t->dtype))
    return false;
  for (int64_t i = 0; i < t->numel(); ++i)
    if (t->getAsDouble(i) != value)
      return false;
  return true;
}

/// The element type the unit scale must have: the scale's, else X's, else
/// fp32 (LayerNormalization's type check names the node if it is wrong).
DType floatTypeOf(const Node &n) {
  for (size_t i : {size_t(1), size_t(0)}) {
    const Value *v = n.input(i);
    if (!v)
      continue;
    if (TensorPtr t = constantValue(*v))
      return t->dtype;
    if (v->dtype != DType::Undefined)
      return v->dtype;
  }
  return DType::F32;
}

/// (x - mean) / sqrt(var + epsilon) over axis 2 of x3, in the ops of any
/// opset: LayerNormalization is an ONNX op only from opset 17. ReduceMean
/// takes its axes as an attribute below opset 18.
Value *normalizeInArithmetic(LoweringBuilder &b, Value *x3, float epsilon,
                             DType t) {
  Builder::Attrs axis2 = {{"axes", Attribute::ofInts({2})},
                          {"keepdims", Attribute::ofInt(1)}};
  Value *mean = b.op("ReduceMean", {x3}, "mean", axis2);
  Value *centered = b.op("Sub", {x3, mean}, "centered");
  Value *squares = b.op("Mul", {centered, centered}, "centered_squares");
  Value *var = b.op("ReduceMean", {squares}, "variance", axis2);
  Value *eps = b.constant(Tensor::scalar(t, epsilon), "epsilon");
  Value *stddev = b.op("Sqrt", {b.op("Add", {var, eps}, "var_eps")}, "stddev");
  return b.op("Div", {centered, stddev}, "normalized");
}

} // namespace

std::vector<Node *> lowerInstanceNormalization(Graph &g, Node *n,
                                               int64_t opset) {
  if (n->numInputs() != 3 || !n->input(0) || !n->input(1) || !n->input(2) ||
      n->numOutputs() != 1 || !n->output(0))
    errorAt(*n) << "InstanceNormalization takes input, scale and B and has "
                   "one output";
  Value *x = n->input(0), *scale = n->input(1), *bias = n->input(2);
  const Attribute *eps = n->attr("epsilon");
  float epsilon = eps ? eps->f : 1e-5f;
  DType t = floatTypeOf(*n);

  // X's dims when the import knows them all: the shapes below are then
  // constants (and every value keeps a static type before fold-constants);
  // otherwise they are computed from Shape(X).
  std::vector<int64_t> dims;
  bool known = x->hasShape && x->rank() >= 2;
  for (size_t d = 0; known && d < x->dims.size(); ++d) {
    known = x->dims[d].isKnown();
    if (known)
      dims.push_back(x->dims[d].value);
  }
  int64_t length = 1;
  for (size_t d = 2; known && d < dims.size(); ++d)
    length *= dims[d];

  LoweringBuilder b(g, n);
  Value *x3 = b.op("Reshape", {x, b.int64s({0, 0, -1}, "rows_shape")}, "rows");
  Value *y3 = nullptr;
  if (opset < 17) {
    y3 = normalizeInArithmetic(b, x3, epsilon, t);
  } else {
    Value *len = known ? b.int64s({length}, "length")
                       : b.op("Slice",
                              {b.op("Shape", {x3}, "rows_dims"),
                               b.int64s({2}, "two"), b.int64s({3}, "three")},
                              "length");
    Tensor one(t, {1});
    one.setFromDouble(0, 1.0);
    Value *ones = b.op("ConstantOfShape", {len}, "unit_scale",
                       {{"value", Attribute::ofTensor(std::move(one))}});
    y3 = b.op("LayerNormalization", {x3, ones}, "normalized",
              {{"axis", Attribute::ofInt(2)},
               {"epsilon", Attribute::ofFloat(epsilon)}});
  }
  Value *column = b.int64s({-1, 1}, "column");
  if (!isConstantFill(scale, 1.0))
    y3 = b.op("Mul", {y3, b.op("Reshape", {scale, column}, "scale_col")},
              "scaled");
  if (!isConstantFill(bias, 0.0))
    y3 = b.op("Add", {y3, b.op("Reshape", {bias, column}, "bias_col")},
              "shifted");
  Value *y = b.op(
      "Reshape",
      {y3, known ? b.int64s(dims, "dims") : b.op("Shape", {x}, "dims")}, "out");
  return b.replaceWith(y);
}

} // namespace mpc
