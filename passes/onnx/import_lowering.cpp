// The lower-onnx pass: the importer's lowerings, typed in order
// (import_lowering.h).
#include "passes/onnx/import_lowering.h"

#include "passes/onnx/activation_lowering.h"
#include "passes/onnx/attention_lowering.h"
#include "passes/onnx/depth_space_lowering.h"
#include "passes/onnx/einsum_lowering.h"
#include "passes/onnx/import_constants.h"
#include "passes/onnx/instance_norm_lowering.h"
#include "passes/onnx/onehot_lowering.h"
#include "passes/onnx/pad_lowering.h"
#include "passes/onnx/reduce_lowering.h"
#include "passes/onnx/resize_lowering.h"
#include "passes/onnx/rms_norm_lowering.h"
#include "passes/onnx/rnn_lowering.h"
#include "passes/onnx/sequence_split_lowering.h"
#include "passes/onnx/tile_lowering.h"
#include "passes/shape_inference.h"

#include <algorithm>
#include <map>
#include <vector>

namespace mpc {

namespace {

using Lowering = std::vector<Node *> (*)(Graph &, Node *, int64_t);

std::vector<Node *> depthSpace(Graph &g, Node *n, int64_t) {
  return lowerDepthSpace(g, n);
}

/// Every op the importer lowers, and the function that lowers it: the one
/// list both isLoweredAtImport and opsLoweredAtImport read.
const std::map<std::string, Lowering> &lowerings() {
  static const std::map<std::string, Lowering> table = [] {
    std::map<std::string, Lowering> t = {
        {"InstanceNormalization", lowerInstanceNormalization},
        {"Resize", lowerResize},
        {"DepthToSpace", depthSpace},
        {"SpaceToDepth", depthSpace},
        {"Einsum", lowerEinsum},
        {"OneHot", lowerOneHot},
        {"Pad", lowerPad},
        {"LSTM", lowerRecurrent},
        {"GRU", lowerRecurrent},
        {"RNN", lowerRecurrent},
        {"SplitToSequence", lowerSplitToSequence},
        {"RMSNormalization", lowerRMSNormalization},
        {"Tile", lowerTile},
        {"Attention", lowerAttention}};
    for (const char *op : {"HardSigmoid", "HardSwish", "Elu", "Selu", "Celu",
                           "Softplus", "Softsign", "PRelu", "Reciprocal"})
      t.emplace(op, lowerActivation);
    for (const char *op : {"ReduceSumSquare", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp", "ReduceMin"})
      t.emplace(op, lowerReduction);
    return t;
  }();
  return table;
}

/// The inputs of n that give an output's shape (Reshape's shape, Slice's
/// starts...): where inference leaves n's dims unknown, these may still be
/// computable at import.
std::vector<size_t> shapeInputs(const Node &n) {
  if (!n.domain().empty())
    return {};
  const std::string &op = n.opType();
  if (op == "Reshape" || op == "Expand" || op == "Tile" || op == "Unsqueeze" ||
      op == "Squeeze")
    return {1};
  if (op == "ConstantOfShape")
    return {0};
  if (op == "Slice")
    return {1, 2, 3, 4};
  return {};
}

/// After inference left an output of n without static dims: each shape
/// input that import_constants can compute (F.pad's and Swin's shape
/// arithmetic over Shape of a value whose dims are known) becomes an
/// initializer holding that value, and n is inferred again, so the nodes
/// after it, and the lowerings that need their dims, see them. fold-
/// constants would make the same initializers later; the computing nodes
/// left without a reader go at cleanup.
void typeFromImportValues(Graph &g, Node &n, int64_t opset) {
  bool unknown = false;
  for (const Value *o : n.outputs())
    if (o && (!o->hasShape ||
              std::any_of(o->dims.begin(), o->dims.end(),
                          [](const Dim &d) { return !d.isKnown(); })))
      unknown = true;
  if (!unknown)
    return;
  bool changed = false;
  for (size_t i : shapeInputs(n)) {
    Value *in = i < n.numInputs() ? n.input(i) : nullptr;
    if (!in || in->isInitializer() || !in->producer() ||
        in->producer()->opType() == "Constant")
      continue;
    if (TensorPtr v = importTimeValue(*in, opset)) {
      n.setInput(i, g.addInitializer(in->name() + "/at_import", v));
      changed = true;
    }
  }
  if (changed)
    inferNode(n, opset);
}

} // namespace

bool isLoweredAtImport(const std::string &domain, const std::string &op) {
  return (domain.empty() || domain == "ai.onnx") && lowerings().count(op);
}

std::vector<std::string> opsLoweredAtImport() {
  std::vector<std::string> ops;
  for (const auto &kv : lowerings())
    ops.push_back(kv.first); // std::map: sorted
  return ops;
}

int lowerAtImport(Graph &g, int64_t opset,
                  std::map<std::string, int64_t> *perOp) {
  std::vector<Node *> order = g.nodeList();
  bool any = false;
  for (const Node *n : order)
    any |= isLoweredAtImport(n->domain(), n->opType());
  if (!any)
    return 0;
  int lowered = 0;
  for (Node *n : order) {
    if (isLoweredAtImport(n->domain(), n->opType())) {
      if (perOp) // before n is replaced
        ++(*perOp)[n->opType()];
      std::vector<Node *> made = lowerings().at(n->opType())(g, n, opset);
      for (Node *m : made)
        inferNode(*m, opset);
      ++lowered;
    } else if (isSupportedOp(n->domain(), n->opType())) {
      inferNode(*n, opset);
      typeFromImportValues(g, *n, opset);
    }
  }
  return lowered;
}

void runLowerOnnx(Model &model, PassContext &ctx) {
  std::map<std::string, int64_t> perOp;
  int lowered = lowerAtImport(*model.graph, model.opsetVersion(""), &perOp);
  if (lowered == 0) {
    // No statistics rows either: --stats of a model with nothing to lower
    // reads as before.
    ctx.changedNothing = true;
    return;
  }
  ctx.stats["nodes-lowered"] = lowered;
  for (const auto &[op, count] : perOp)
    ctx.stats[op] = count;
}

} // namespace mpc
