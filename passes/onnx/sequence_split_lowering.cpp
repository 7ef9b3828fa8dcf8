// SplitToSequence and its SequenceAt readers lowered to Split
// (sequence_split_lowering.h).
#include "passes/onnx/sequence_split_lowering.h"

#include "passes/onnx/import_constants.h"
#include "passes/onnx/lowering_builder.h"
#include "support/diagnostics.h"

#include <map>
#include <string>

namespace mpc {
namespace {

/// The cap on pieces: a split into more is not a model's layer split (and
/// would make that many nodes).
constexpr int64_t kMaxPieces = 1 << 16;

/// The sizes of n's pieces along `axis` of x; `squeeze` is set when each
/// piece loses the axis (no split input and keepdims = 0).
std::vector<int64_t> pieceSizes(const Node &n, const Value &x, int64_t axis,
                                int64_t opset, bool &squeeze) {
  const Value *splitIn = n.numInputs() > 1 ? n.input(1) : nullptr;
  squeeze = !splitIn && n.attrInt("keepdims", 1) == 0;
  const Dim &dim = x.dims[size_t(axis)];
  std::vector<int64_t> sizes;
  if (splitIn) {
    TensorPtr s = fixedAtImport(splitIn, opset);
    if (!s || (s->dtype != DType::I64 && s->dtype != DType::I32))
      errorAt(n) << "needs its split at compile time as integers, '"
                 << splitIn->name() << "' is not";
    if (s->dims.size() == 1) {
      sizes = s->toInt64s();
      int64_t sum = 0;
      for (int64_t v : sizes) {
        if (v < 0)
          errorAt(n) << "split has a negative size " << v;
        sum += v;
      }
      if (dim.isKnown() && sum != dim.value)
        errorAt(n) << "split sizes sum to " << sum << ", but axis " << axis
                   << " has " << dim.value;
      if (sizes.empty() || int64_t(sizes.size()) > kMaxPieces)
        errorAt(n) << "splits into " << sizes.size() << " pieces; 1 to "
                   << kMaxPieces << " are supported";
      return sizes;
    }
    if (!s->dims.empty())
      errorAt(n) << "split must be a scalar or 1-D, got rank "
                 << s->dims.size();
    int64_t each = s->toInt64s()[0];
    if (each <= 0)
      errorAt(n) << "split must be positive, got " << each;
    if (!dim.isKnown())
      errorAt(n) << "needs the dim of axis " << axis
                 << " at compile time to split it into pieces of " << each;
    if (dim.value / each >= kMaxPieces)
      errorAt(n) << "splits " << dim.value << " into pieces of " << each
                 << ": more than " << kMaxPieces << " pieces";
    for (int64_t start = 0; start < dim.value; start += each)
      sizes.push_back(std::min(each, dim.value - start));
    if (sizes.empty())
      errorAt(n) << "splits an empty axis " << axis;
    return sizes;
  }
  if (!dim.isKnown())
    errorAt(n) << "needs the dim of axis " << axis
               << " at compile time to split it into pieces of 1";
  if (dim.value < 1 || dim.value > kMaxPieces)
    errorAt(n) << "splits axis " << axis << " of " << dim.value
               << " into pieces of 1; 1 to " << kMaxPieces
               << " pieces are supported";
  return std::vector<int64_t>(size_t(dim.value), 1);
}

/// The piece a SequenceAt reader takes: its position, which must be fixed
/// at import, made non-negative.
size_t piecePosition(const Node &at, size_t count, int64_t opset) {
  const Value *pos = at.numInputs() > 1 ? at.input(1) : nullptr;
  TensorPtr p = pos ? fixedAtImport(pos, opset) : nullptr;
  if (!p || p->numel() != 1 ||
      (p->dtype != DType::I64 && p->dtype != DType::I32))
    errorAt(at) << "needs its position at compile time as one integer";
  int64_t i = p->toInt64s()[0];
  if (i < -int64_t(count) || i >= int64_t(count))
    errorAt(at) << "position " << i << " is outside the sequence of " << count
                << " pieces";
  return size_t(i < 0 ? i + int64_t(count) : i);
}

} // namespace

std::vector<Node *> lowerSplitToSequence(Graph &g, Node *n, int64_t opset) {
  if (n->numInputs() < 1 || !n->input(0) || n->numOutputs() != 1 ||
      !n->output(0))
    errorAt(*n) << "SplitToSequence takes an input and has one output";
  Value *x = n->input(0), *seq = n->output(0);
  if (!x->hasShape)
    errorAt(*n) << "needs its input's rank at compile time";
  int64_t rank = x->rank(), axis = n->attrInt("axis", 0);
  if (axis < -rank || axis >= rank)
    errorAt(*n) << "axis " << axis << " is out of range for rank " << rank;
  if (axis < 0)
    axis += rank;
  if (seq->isGraphOutput())
    errorAt(*n) << "its sequence '" << seq->name()
                << "' is a graph output; mpc has no sequence values";
  // Every reader must be a SequenceAt; check them all before changing any.
  std::vector<Node *> readers;
  for (const Use &u : seq->uses()) {
    if (!u.user->isOp("", "SequenceAt") || u.index != 0)
      errorAt(*n) << "its sequence '" << seq->name() << "' is read by "
                  << describeNode(*u.user)
                  << "; only SequenceAt readers are supported";
    readers.push_back(u.user);
  }
  bool squeeze = false;
  std::vector<int64_t> sizes = pieceSizes(*n, *x, axis, opset, squeeze);
  std::vector<size_t> positions;
  for (const Node *at : readers)
    positions.push_back(piecePosition(*at, sizes.size(), opset));

  LoweringBuilder lb(g, n);
  Node *split = lb.node("Split", {x, lb.int64s(sizes, "sizes")}, sizes.size(),
                        "split", {{"axis", Attribute::ofInt(axis)}});
  std::map<size_t, Value *> pieces;
  for (size_t i = 0; i < readers.size(); ++i) {
    Value *&piece = pieces[positions[i]];
    if (!piece) {
      piece = split->output(positions[i]);
      if (squeeze)
        piece = lb.op("Squeeze", {piece, lb.int64s({axis}, "axis")},
                      "piece" + std::to_string(positions[i]));
    }
    Node *at = readers[i];
    at->setInput(0, piece);
    at->truncateInputs(1);
    at->setOp("Identity", "");
  }
  return lb.replaceOutputsWith({});
}

} // namespace mpc
