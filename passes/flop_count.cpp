// FLOP counts per node and per step (passes/flop_count.h): what the memory
// report puts next to the memory that recomputation saves.
#include "passes/flop_count.h"

#include "ir/mpc_ops.h"
#include "ir/step_metadata.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace mpc {
namespace {

/// Elements of a value (saturated), or -1 when its dims are not concrete.
int64_t elements(const Value *v) {
  if (!v || !v->hasShape)
    return -1;
  auto dims = concreteDims(v->dims);
  if (!dims)
    return -1;
  int64_t n = 1;
  for (int64_t d : *dims)
    n = saturatingMul(n, d);
  return n;
}

/// Dim `i` of v (negative: from the end), or -1.
int64_t dim(const Value *v, int64_t i) {
  if (!v || !v->hasShape)
    return -1;
  int64_t r = v->rank();
  if (i < 0)
    i += r;
  if (i < 0 || i >= r || !v->dims[size_t(i)].isKnown())
    return -1;
  return v->dims[size_t(i)].value;
}

/// Ops that move, view or make bytes without arithmetic.
bool movesOnly(const Node &n) {
  static const std::unordered_set<std::string> ops = {
      "Reshape",  "Transpose", "Squeeze",      "Unsqueeze",   "Flatten",
      "Identity", "Shape",     "Size",         "Constant",    "ConstantOfShape",
      "Expand",   "Gather",    "Slice",        "Concat",      "Split",
      "Pad",      "Tile",      "GatherND",     "ScatterND",   "GatherElements",
      "Range",    "EyeLike",   "DepthToSpace", "SpaceToDepth"};
  return n.domain().empty() && ops.count(n.opType());
}

} // namespace

int64_t nodeFlops(const Node &n) {
  if (movesOnly(n))
    return 0;
  const Value *a = n.numInputs() > 0 ? n.input(0) : nullptr;
  const Value *b = n.numInputs() > 1 ? n.input(1) : nullptr;
  const Value *y = n.numOutputs() > 0 ? n.output(0) : nullptr;
  int64_t out = elements(y);
  bool onnx = n.domain().empty();
  if ((onnx && n.opType() == "MatMul") || n.isOp(kMpcDomain, "FusedMatMul")) {
    // K: the contracted dim of A (its second to last when transposed).
    bool transA = n.attrInt("transA", 0) != 0;
    int64_t k = a && a->rank() == 1 ? dim(a, 0) : dim(a, transA ? -2 : -1);
    return out < 0 || k < 0 ? 0 : saturatingMul(saturatingMul(2, out), k);
  }
  if (onnx && n.opType() == "Gemm") {
    int64_t k = dim(a, n.attrInt("transA", 0) ? 0 : 1);
    bool bias = n.numInputs() > 2 && n.input(2);
    return out < 0 || k < 0
               ? 0
               : saturatingAdd(saturatingMul(saturatingMul(2, out), k),
                               bias ? out : 0);
  }
  if (onnx && n.opType() == "Conv") {
    // Each output element: a dot product over the weight's Cin/group x kernel.
    int64_t w = elements(b), cout = dim(b, 0);
    return out < 0 || w < 0 || cout <= 0
               ? 0
               : saturatingMul(saturatingMul(2, out), w / cout);
  }
  if ((onnx && n.opType() == "ConvTranspose") ||
      n.isOp(kMpcDomain, "ConvGradInput")) {
    // Each element of the first input meets W's elements / W's first dim.
    int64_t x = elements(a), w = elements(b), w0 = dim(b, 0);
    return x < 0 || w < 0 || w0 <= 0
               ? 0
               : saturatingMul(saturatingMul(2, x), w / w0);
  }
  if (n.isOp(kMpcDomain, "ConvGradWeight")) {
    // dW's elements, each summed over the first input's elements per
    // channel (its dim 1, which is dW's dim 0).
    int64_t x = elements(a), c = dim(y, 0);
    return out < 0 || x < 0 || c <= 0
               ? 0
               : saturatingMul(saturatingMul(2, out), x / c);
  }
  int64_t most = 0;
  for (const Value *v : n.inputs())
    most = std::max(most, elements(v));
  for (const Value *v : n.outputs())
    most = std::max(most, elements(v));
  return most;
}

std::string recomputeNodeName(const Node &original) {
  return original.name() + "_recompute";
}

StepFlops countStepFlops(const Model &model) {
  StepFlops f;
  const Graph &g = model.training ? *model.training->algorithm : *model.graph;
  std::vector<Node *> nodes = g.nodeList();
  size_t lossAt = nodes.size();
  if (model.training) {
    const std::string *loss = readMeta(model, meta::kLoss);
    const Value *l = loss ? g.findValue(*loss) : nullptr;
    for (size_t i = 0; l && l->producer() && i < nodes.size(); ++i)
      if (nodes[i] == l->producer())
        lossAt = i;
  }
  // A backward node named after a forward node of its op with the suffix
  // --recompute gives its copies (and a uniquing tail) is a recomputation.
  std::unordered_map<std::string, const Node *> forward;
  for (size_t i = 0; i <= lossAt && i < nodes.size(); ++i)
    forward.emplace(nodes[i]->name(), nodes[i]);
  auto isCopy = [&](const Node &n) {
    size_t at = n.name().rfind("_recompute");
    if (at == std::string::npos)
      return false;
    auto it = forward.find(n.name().substr(0, at));
    return it != forward.end() && it->second->opType() == n.opType() &&
           it->second->domain() == n.domain();
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    int64_t flops = nodeFlops(*nodes[i]);
    if (i <= lossAt)
      f.forward = saturatingAdd(f.forward, flops);
    else if (isCopy(*nodes[i]))
      f.recompute = saturatingAdd(f.recompute, flops);
    else
      f.backward = saturatingAdd(f.backward, flops);
  }
  return f;
}

} // namespace mpc
