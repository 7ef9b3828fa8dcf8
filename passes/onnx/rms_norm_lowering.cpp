// RMSNormalization lowered to ReduceMean/Sqrt/Div arithmetic
// (rms_norm_lowering.h).
#include "passes/onnx/rms_norm_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

namespace mpc {

std::vector<Node *> lowerRMSNormalization(Graph &g, Node *n, int64_t) {
  if (n->numInputs() != 2 || !n->input(0) || !n->input(1) ||
      n->numOutputs() != 1 || !n->output(0))
    errorAt(*n) << "RMSNormalization takes X and scale and has one output";
  Value *x = n->input(0), *scale = n->input(1);
  DType t = floatInputType(*n);
  if (!x->hasShape)
    errorAt(*n) << "needs X's rank at compile time";
  int64_t rank = x->rank(), axis = n->attrInt("axis", -1);
  if (rank < 1 || axis < -rank || axis >= rank)
    errorAt(*n) << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  int64_t stash = n->attrInt("stash_type", 1);
  if (stash != 1)
    errorAt(*n) << "stash_type " << stash
                << " is not supported (1, fp32, is: the statistics of an "
                   "fp16/bf16 X are computed in fp32)";
  float epsilon = n->attrFloat("epsilon", 1e-5f);
  std::vector<int64_t> axes;
  for (int64_t a = axis; a < rank; ++a)
    axes.push_back(a);

  LoweringBuilder lb(g, n);
  bool widen = t != DType::F32 && t != DType::F64;
  DType s = widen ? DType::F32 : t;
  Value *xs = widen ? lb.op("Cast", {x}, "x_stash",
                            {{"to", Attribute::ofInt(toOnnxDataType(s))}})
                    : x;
  Value *squares = lb.op("Mul", {xs, xs}, "squares");
  Value *meanSquare = lb.op("ReduceMean", {squares, lb.int64s(axes, "axes")},
                            "mean_square", {{"keepdims", Attribute::ofInt(1)}});
  Value *rms = lb.op(
      "Sqrt",
      {lb.op("Add", {meanSquare, lb.scalar(s, epsilon, "epsilon")}, "var_eps")},
      "rms");
  Value *normalized = lb.op("Div", {xs, rms}, "normalized");
  if (widen)
    normalized = lb.op("Cast", {normalized}, "normalized_x_type",
                       {{"to", Attribute::ofInt(toOnnxDataType(t))}});
  return lb.replaceWith(lb.op("Mul", {normalized, scale}, "scaled"));
}

} // namespace mpc
