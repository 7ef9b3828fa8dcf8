// OneHot lowered to Equal and Where (onehot_lowering.h).
#include "passes/onnx/onehot_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <cmath>

namespace mpc {

std::vector<Node *> lowerOneHot(Graph &g, Node *n, int64_t opset) {
  if (n->numInputs() != 3 || !n->input(0) || !n->input(1) || !n->input(2) ||
      n->numOutputs() != 1 || !n->output(0))
    errorAt(*n) << "OneHot takes indices, depth and values and has one output";
  Value *indices = n->input(0), *values = n->input(2);
  if (!indices->hasShape)
    errorAt(*n) << "needs the rank of its indices at import";
  TensorPtr depthValue = importTimeValue(*n->input(1), opset);
  if (!depthValue || depthValue->numel() != 1)
    errorAt(*n) << "needs its depth at compile time (a constant scalar)";
  double d = depthValue->getAsDouble(0);
  if (!(d >= 1 && d <= double(int64_t(1) << 20)))
    errorAt(*n) << "depth " << d << " is not between 1 and 2^20";
  int64_t depth = int64_t(std::floor(d));
  int64_t rank = indices->rank() + 1;
  int64_t axis = n->attrInt("axis", -1);
  if (axis < -rank || axis >= rank)
    errorAt(*n) << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;

  LoweringBuilder b(g, n);
  if (isFloating(indices->dtype))
    indices = b.op("Cast", {indices}, "as_int64",
                   {{"to", Attribute::ofInt(toOnnxDataType(DType::I64))}});
  DType it = indices->dtype == DType::Undefined ? DType::I64 : indices->dtype;
  Value *u;
  if (opset >= 13)
    u = b.op("Unsqueeze", {indices, b.int64s({axis}, "axis")}, "unsqueezed");
  else
    u = b.op("Unsqueeze", {indices}, "unsqueezed",
             {{"axes", Attribute::ofInts({axis})}});
  // 0..depth-1 (and -depth..-1) along `axis`: [depth, 1, ..., 1].
  std::vector<int64_t> rdims = {depth};
  for (int64_t i = axis + 1; i < rank; ++i)
    rdims.push_back(1);
  Tensor pos(it, rdims), neg(it, rdims);
  for (int64_t i = 0; i < depth; ++i) {
    pos.setFromDouble(i, double(i));
    neg.setFromDouble(i, double(i - depth));
  }
  Value *isPos =
      b.op("Equal", {u, b.constant(std::move(pos), "positions")}, "hit");
  Value *isNeg =
      b.op("Equal", {u, b.constant(std::move(neg), "negative_positions")},
           "hit_from_end");
  auto pick = [&](int64_t i, const char *part) {
    return b.op("Gather",
                {values, b.constant(Tensor::fromInt64s({}, {i}), part)},
                std::string(part) + "_value", {{"axis", Attribute::ofInt(0)}});
  };
  Value *off = pick(0, "off"), *on = pick(1, "on");
  Value *inner = b.op("Where", {isNeg, on, off}, "from_end");
  return b.replaceWith(b.op("Where", {isPos, on, inner}, "one_hot"));
}

} // namespace mpc
