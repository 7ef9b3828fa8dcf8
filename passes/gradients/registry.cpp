// The one table of gradient rules: op type -> rule (and the inputs it never
// differentiates).
//
// autodiff reads only this table; an op missing here is reported as "no
// gradient rule" with the list below, so coverage is visible in one place.
// Every rule listed here is checked against finite differences in
// tests/unit/gradcheck_test.cpp.
#include "ir/mpc_ops.h"
#include "passes/gradients/gradient_rules.h"

#include <algorithm>
#include <unordered_map>

namespace mpc {
namespace {

const std::unordered_map<std::string, GradientRuleInfo> &ruleTable() {
  static const std::unordered_map<std::string, GradientRuleInfo> table = {
      // elementwise.cpp
      {"Add", {gradAdd, {}}},
      {"Sub", {gradSub, {}}},
      {"Mul", {gradMul, {}}},
      {"Div", {gradDiv, {}}},
      {"Neg", {gradNeg, {}}},
      {"Abs", {gradAbs, {}}},
      {"Sqrt", {gradSqrt, {}}},
      {"Exp", {gradExp, {}}},
      {"Log", {gradLog, {}}},
      {"Pow", {gradPow, {}}},
      {"Sin", {gradSin, {}}},
      {"Cos", {gradCos, {}}},
      {"Erf", {gradErf, {}}},
      {"Identity", {gradIdentity, {}}},
      {"Cast", {gradCast, {}}},
      {"CastLike", {gradCastLike, {1}}},
      {"Where", {gradWhere, {0}}},
      {"Clip", {gradClip, {1, 2}}},
      {"Max", {gradMaxMin, {}}},
      {"Min", {gradMaxMin, {}}},
      {"Sum", {gradSum, {}}},
      {"Trilu", {gradTrilu, {1}}},
      // Step functions: their derivative is 0 wherever it exists, and
      // PyTorch's floor, ceil and round pass a zero gradient.
      {"Floor", {nullptr, {0}}},
      {"Ceil", {nullptr, {0}}},
      {"Round", {nullptr, {0}}},
      {"Sign", {nullptr, {0}}},
      // activation.cpp
      {"Relu", {gradRelu, {}}},
      {"Tanh", {gradTanh, {}}},
      {"Sigmoid", {gradSigmoid, {}}},
      {"Gelu", {gradGelu, {}}},
      {"LeakyRelu", {gradLeakyRelu, {}}},
      {"Softmax", {gradSoftmax, {}}},
      {"LogSoftmax", {gradLogSoftmax, {}}},
      // reduction.cpp
      {"ReduceSum", {gradReduceSum, {1}}},
      {"ReduceMean", {gradReduceMean, {1}}},
      {"ReduceMax", {gradReduceMax, {1}}},
      {"CumSum", {gradCumSum, {1}}},
      // matmul.cpp
      {"Gemm", {gradGemm, {}}},
      {"MatMul", {gradMatMul, {}}},
      // conv_pool.cpp
      {"Conv", {gradConv, {}}},
      {"ConvTranspose", {gradConvTranspose, {}}},
      {"MaxPool", {gradMaxPool, {}}},
      {"AveragePool", {gradAveragePool, {}}},
      {"GlobalAveragePool", {gradGlobalAveragePool, {}}},
      // normalization.cpp: BatchNormalization's running mean/var (inputs 3,
      // 4) are state updated by the forward, never trained.
      {"LayerNormalization", {gradLayerNormalization, {}}},
      {"BatchNormalization", {gradBatchNormalization, {3, 4}}},
      // shape_ops.cpp
      {"Reshape", {gradReshapeLike, {1}}},
      {"Flatten", {gradReshapeLike, {}}},
      {"Squeeze", {gradReshapeLike, {1}}},
      {"Unsqueeze", {gradReshapeLike, {1}}},
      {"Transpose", {gradTranspose, {}}},
      {"Concat", {gradConcat, {}}},
      {"Slice", {gradSlice, {1, 2, 3, 4}}},
      {"Split", {gradSplit, {1}}},
      {"Expand", {gradExpand, {1}}},
      // gather_scatter.cpp
      {"Gather", {gradGather, {1}}},
      {"GatherElements", {gradGatherElements, {1}}},
      {"GatherND", {gradGatherND, {1}}},
      {"ScatterND", {gradScatterND, {1}}},
      {"ScatterElements", {gradScatterElements, {1}}},
      // selection.cpp: the values' gradient; K and the indices take none.
      // ArgMax and ArgMin have only an int64 output, so no gradient reaches
      // them.
      {"TopK", {gradTopK, {1}}},
      // loss.cpp
      {"SoftmaxCrossEntropyLoss", {gradSoftmaxCrossEntropyLoss, {1, 2}}},
      {"NegativeLogLikelihoodLoss", {gradNegativeLogLikelihoodLoss, {1, 2}}},
      // random.cpp: Dropout's rule. The random draws' output does not depend
      // on the input's values (its shape, or Bernoulli's probabilities
      // through a step function), so no gradient flows back through them,
      // as in PyTorch.
      {"Dropout", {gradDropout, {1, 2}}},
      {"RandomUniformLike", {nullptr, {0}}},
      {"RandomNormalLike", {nullptr, {0}}},
      {"Bernoulli", {nullptr, {0}}},
  };
  return table;
}

/// mpc ops that appear before autodiff: what fuse-rmsnorm makes of the RMS
/// normalisation arithmetic, what fuse-log-sigmoid makes of log(sigmoid),
/// and what fuse-gelu makes of the GELU arithmetic of opset < 20 exports.
const std::unordered_map<std::string, GradientRuleInfo> &mpcRuleTable() {
  static const std::unordered_map<std::string, GradientRuleInfo> table = {
      // activation.cpp: fuse-log-sigmoid's (passes/fuse_log_sigmoid.cpp)
      {"LogSigmoid", {gradLogSigmoid, {}}},
      // normalization.cpp: fuse-rmsnorm's (passes/fuse_rmsnorm.cpp)
      {"RMSNormalization", {gradRMSNormalization, {}}},
      // fused: fuse-gelu's, differentiated by Gelu's rule (activation.cpp)
      {"Gelu", {gradGelu, {}}},
      {"GeluTanh", {gradGelu, {}}},
  };
  return table;
}

} // namespace

const GradientRuleInfo *findGradientRule(const std::string &opType,
                                         const std::string &domain) {
  if (!domain.empty() && domain != "ai.onnx" && domain != kMpcDomain)
    return nullptr;
  const auto &table = domain == kMpcDomain ? mpcRuleTable() : ruleTable();
  auto it = table.find(opType);
  return it == table.end() ? nullptr : &it->second;
}

Node *prepareForwardNode(Graph &graph, Node *node, int64_t opset) {
  // isOp: a node of another op is told apart by its op's length alone.
  if (node->isOp("", "LayerNormalization"))
    return prepareLayerNormalizationForward(graph, node, opset);
  if (node->isOp("", "Dropout"))
    return prepareDropoutForward(graph, node, opset);
  if (node->isOp("", "SoftmaxCrossEntropyLoss"))
    return prepareSoftmaxCrossEntropyLossForward(graph, node, opset);
  return node;
}

std::vector<std::string> opsWithGradients() {
  std::vector<std::string> ops;
  for (const auto &kv : ruleTable())
    if (kv.second.rule) // not the random draws, which pass no gradient
      ops.push_back(kv.first);
  for (const auto &kv : mpcRuleTable())
    ops.push_back(std::string(kMpcDomain) + "." + kv.first);
  std::sort(ops.begin(), ops.end());
  return ops;
}

} // namespace mpc
