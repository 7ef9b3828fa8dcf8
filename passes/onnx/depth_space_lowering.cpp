// DepthToSpace and SpaceToDepth lowered to Reshape/Transpose/Reshape
// (depth_space_lowering.h).
#include "passes/onnx/depth_space_lowering.h"

#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

namespace mpc {

std::vector<Node *> lowerDepthSpace(Graph &g, Node *n) {
  if (n->numInputs() != 1 || !n->input(0) || n->numOutputs() != 1 ||
      !n->output(0))
    errorAt(*n) << n->opType() << " takes one input and has one output";
  const Value *x = n->input(0);
  bool toSpace = n->opType() == "DepthToSpace";
  int64_t b = n->attrInt("blocksize", 0);
  // Past 2^15 the block's square (and H*b) could overflow; no model has one.
  if (b <= 0 || b > (int64_t(1) << 15))
    errorAt(*n) << "needs a blocksize between 1 and 32768, got " << b;
  if (!x->hasShape || x->rank() != 4)
    errorAt(*n) << "takes a 4-D input of known rank";
  for (size_t d = 1; d < 4; ++d)
    if (!x->dims[d].isKnown())
      errorAt(*n) << "needs its input's C, H and W at compile time";
  int64_t c = x->dims[1].value, h = x->dims[2].value, w = x->dims[3].value;
  if (c > (int64_t(1) << 31) || h > (int64_t(1) << 31) ||
      w > (int64_t(1) << 31))
    errorAt(*n) << "C " << c << ", H " << h << " or W " << w << " is too large";
  std::vector<int64_t> split, perm, merged;
  if (toSpace) {
    if (c % (b * b))
      errorAt(*n) << "channels " << c << " are not a multiple of blocksize^2 "
                  << b * b;
    std::string mode = n->attrString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD")
      errorAt(*n) << "mode must be DCR or CRD, got '" << mode << "'";
    if (mode == "DCR") {
      split = {0, b, b, c / (b * b), h, w};
      perm = {0, 3, 4, 1, 5, 2};
    } else {
      split = {0, c / (b * b), b, b, h, w};
      perm = {0, 1, 4, 2, 5, 3};
    }
    merged = {0, c / (b * b), h * b, w * b};
  } else {
    if (h % b || w % b)
      errorAt(*n) << "H " << h << " and W " << w
                  << " are not multiples of blocksize " << b;
    split = {0, c, h / b, b, w / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    merged = {0, c * b * b, h / b, w / b};
  }
  LoweringBuilder lb(g, n);
  Value *blocks = lb.op(
      "Reshape", {n->input(0), lb.int64s(split, "blocks_shape")}, "blocks");
  Value *moved = lb.op("Transpose", {blocks}, "moved",
                       {{"perm", Attribute::ofInts(perm)}});
  return lb.replaceWith(
      lb.op("Reshape", {moved, lb.int64s(merged, "merged_shape")}, "merged"));
}

} // namespace mpc
