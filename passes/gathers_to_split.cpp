// gathers-to-split: a tensor taken apart by one constant Gather per index
// of an axis becomes one Split.
//
// torch.onnx writes nn.MultiheadAttention's packed projection (BERT, ViT,
// nn.TransformerEncoderLayer) as
//   qkv = Reshape(...) of [3, seq, batch, d];
//   q = Gather(qkv, 0, axis 0); k = Gather(qkv, 1, axis 0); v = Gather(qkv, 2)
// Each Gather's gradient is an mpc.GatherGrad: a zero-filled tensor of
// qkv's whole shape with one third written, and the three are then added,
// so the backward writes qkv's bytes six times and reads them four to build
// one gradient. A Split's gradient is one Concat of the pieces, so
//
//   Gather(X, i, axis) for every i in [0, n), n = X's dim on axis
//     ->  Split(X, axis, split = [1] * n), then per Gather
//         Squeeze(piece i, axis)   (a 0-d index; a 1-element 1-D index
//                                   reads the piece itself)
//
// the same values (a Gather with one index copies the same slab as the
// piece), each Gather's output keeping its name. Matched only when X's dim on
// axis is known and the Gathers' constant indices (negative ones counted
// from the end) name each position exactly once; other readers of X are
// left as they are. Runs after infer-shapes and fold-constants, before
// autodiff, on the main graph and on a training algorithm the model has.
#include "passes/fusion_rewrite.h"
#include "passes/pass.h"
#include "passes/shape_inference.h"

#include <map>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace mpc {
namespace {

/// The most pieces a match splits into (the pattern is a packed
/// projection's handful; a wider Split is left to the Gathers).
constexpr int64_t kMaxPieces = 64;

/// One Gather of the match: the node, the position it reads, and whether
/// its index is 0-d (the axis dropped: a Squeeze follows the piece).
struct Take {
  Node *gather;
  int64_t position;
  bool dropsAxis;
};

/// The axis a Gather reads, normalised against `rank`, or nullopt.
std::optional<int64_t> gatherAxis(const Node &n, int64_t rank) {
  int64_t axis = n.attrInt("axis", 0);
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return std::nullopt;
  return axis;
}

/// n as a Take of a dim of `len` along `axis`: a Gather of one constant
/// index (0-d, or 1-D of one element), else nullopt.
std::optional<Take> takeOf(Node &n, const Value &x, int64_t axis, int64_t len) {
  if (!n.isOp("", "Gather") || n.numInputs() != 2 || n.numOutputs() != 1 ||
      n.input(0) != &x || !n.output(0) || n.output(0)->isGraphOutput())
    return std::nullopt;
  std::optional<int64_t> a = gatherAxis(n, int64_t(x.dims.size()));
  if (!a || *a != axis)
    return std::nullopt;
  // An integer initializer of the model is a constant here as it is to
  // shape inference (a Reshape's shape): no optimizer writes integers.
  const Value *idx = n.input(1);
  if (!idx || idx->isGraphInput())
    return std::nullopt;
  TensorPtr t = constantValue(*idx);
  if (!t || t->numel() != 1 || t->dims.size() > 1 ||
      (t->dtype != DType::I64 && t->dtype != DType::I32))
    return std::nullopt;
  int64_t i = t->toInt64s()[0];
  if (i < 0)
    i += len;
  if (i < 0 || i >= len)
    return std::nullopt;
  return Take{&n, i, t->dims.empty()};
}

/// The Gathers of `first`'s input along its axis, one per position, when
/// they cover every position exactly once; else empty.
std::vector<Take> matchAt(Node &first) {
  if (!first.isOp("", "Gather") || first.numInputs() != 2)
    return {};
  Value *x = first.input(0);
  if (!x || !x->hasShape || x->dims.empty())
    return {};
  std::optional<int64_t> axis = gatherAxis(first, int64_t(x->dims.size()));
  if (!axis || !x->dims[size_t(*axis)].isKnown())
    return {};
  int64_t len = x->dims[size_t(*axis)].value;
  if (len < 2 || len > kMaxPieces)
    return {};
  std::map<int64_t, Take> byPosition;
  for (const Use &u : x->uses()) {
    std::optional<Take> t = takeOf(*u.user, *x, *axis, len);
    if (!t)
      continue;
    if (!byPosition.emplace(t->position, *t).second)
      return {}; // a position read twice: Split has one piece for it
  }
  if (int64_t(byPosition.size()) != len)
    return {};
  std::vector<Take> takes;
  for (auto &[position, t] : byPosition)
    takes.push_back(t);
  return takes;
}

/// Whether `first` (the earliest Gather of its tensor) is one of the takes:
/// a tensor whose first Gather reads an index that is not constant keeps
/// its Gathers.
bool isTaken(const Node &first, const std::vector<Take> &takes) {
  for (const Take &t : takes)
    if (t.gather == &first)
      return true;
  return false;
}

void rewrite(Graph &g, Node &first, const std::vector<Take> &takes,
             int64_t opset, std::unordered_set<Node *> &removed) {
  Value *x = first.input(0);
  int64_t axis = *gatherAxis(first, int64_t(x->dims.size()));
  int64_t len = int64_t(takes.size());
  std::string name = first.name();
  std::string prefix = name.substr(0, name.rfind('/') + 1);
  std::vector<int64_t> ones(size_t(len), 1);
  std::vector<Value *> splitInputs = {x};
  if (opset >= 13)
    splitInputs.push_back(g.addInitializer(prefix + "split_sizes",
                                           Tensor::fromInt64s({len}, ones)));
  Node *split = g.createNode("Split", splitInputs, size_t(len),
                             prefix + "Split", "", &first);
  split->setAttr("axis", Attribute::ofInt(axis));
  if (opset < 13)
    split->setAttr("split", Attribute::ofInts(ones));
  Dims pieceDims = x->dims;
  pieceDims[size_t(axis)] = Dim(1);
  for (size_t i = 0; i < size_t(len); ++i)
    split->output(i)->setType(x->dtype, pieceDims);
  Value *axes = nullptr;
  for (const Take &t : takes) {
    Node *gather = t.gather;
    Value *out = gather->output(0);
    std::string outName = out->name();
    Value *piece = split->output(size_t(t.position));
    Value *replacement = piece;
    if (t.dropsAxis) {
      std::vector<Value *> in = {piece};
      if (opset >= 13) {
        if (!axes)
          axes = g.addInitializer(prefix + "split_axis",
                                  Tensor::fromInt64s({1}, {axis}));
        in.push_back(axes);
      }
      Node *sq = g.createNode("Squeeze", in, 1, gather->name(), "", gather);
      if (opset < 13)
        sq->setAttr("axes", Attribute::ofInts({axis}));
      sq->output(0)->copyTypeFrom(*out);
      replacement = sq->output(0);
    }
    Value *index = gather->input(1);
    g.replaceAllUsesWith(out, replacement);
    g.removeNode(gather);
    removed.insert(gather);
    g.renameValue(replacement, outName);
    removeUnreadConstants(g, {index}, removed);
  }
}

} // namespace

void runGathersToSplit(Model &model, PassContext &ctx) {
  int64_t opset = model.opsetVersion("");
  // Each tensor's readers are looked at once, from its first Gather in the
  // graph's order (fuseEachGraph's walk): a tensor with many Gathers that do
  // not match costs one walk, not one per Gather, and the Split goes before
  // that first Gather, so before every reader of a piece.
  std::unordered_set<const Value *> seen;
  fuseEachGraph(model, ctx,
                [&](Graph &g, Node &n, std::unordered_set<Node *> &removed) {
                  if (!n.isOp("", "Gather") || n.numInputs() < 1 ||
                      !seen.insert(n.input(0)).second)
                    return false;
                  std::vector<Take> takes = matchAt(n);
                  if (takes.empty() || !isTaken(n, takes))
                    return false;
                  rewrite(g, n, takes, opset, removed);
                  ++ctx.stats["gathers-to-split"];
                  return true;
                });
}

} // namespace mpc
