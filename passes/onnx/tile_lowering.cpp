// Tile lowered to Reshape/Expand/Reshape (tile_lowering.h).
#include "passes/onnx/tile_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

namespace mpc {

std::vector<Node *> lowerTile(Graph &g, Node *n, int64_t opset) {
  if (n->numInputs() != 2 || !n->input(0) || !n->input(1) ||
      n->numOutputs() != 1 || !n->output(0))
    errorAt(*n) << "Tile takes an input and repeats and has one output";
  Value *x = n->input(0);
  TensorPtr r = fixedAtImport(n->input(1), opset);
  if (!r || r->dtype != DType::I64)
    errorAt(*n) << "needs its repeats at compile time as int64, '"
                << n->input(1)->name() << "' is not";
  std::vector<int64_t> repeats = r->toInt64s();
  if (!x->hasShape || int64_t(repeats.size()) != x->rank() ||
      r->dims.size() != 1)
    errorAt(*n) << "needs one repeat per axis of its input ("
                << (x->hasShape ? std::to_string(x->rank()) : "unknown rank")
                << "), got " << repeats.size();
  std::vector<int64_t> split, expanded, merged;
  for (size_t i = 0; i < repeats.size(); ++i) {
    const Dim &d = x->dims[i];
    if (!d.isKnown())
      errorAt(*n) << "needs its input's dims at compile time (axis " << i
                  << " is not known)";
    int64_t k = repeats[i];
    // Past 2^31 copies (or elements) k * d could overflow; no model tiles so.
    if (k < 0 || k > (int64_t(1) << 31) || d.value > (int64_t(1) << 31))
      errorAt(*n) << "repeat " << k << " on axis " << i << " of " << d.value
                  << " is not supported (0 to 2^31)";
    if (k != 1) {
      split.push_back(1);
      expanded.push_back(k);
    }
    split.push_back(d.value);
    expanded.push_back(d.value);
    merged.push_back(k * d.value);
  }
  LoweringBuilder lb(g, n);
  Value *unit = lb.op("Reshape", {x, lb.int64s(split, "unit_axes")}, "unit");
  Value *copies =
      lb.op("Expand", {unit, lb.int64s(expanded, "copies_shape")}, "copies");
  return lb.replaceWith(
      lb.op("Reshape", {copies, lb.int64s(merged, "tiled_shape")}, "tiled"));
}

} // namespace mpc
