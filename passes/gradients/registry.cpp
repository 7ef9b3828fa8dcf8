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
      {"Relu", {gradRelu, {}}},
      {"Sqrt", {gradSqrt, {}}},
      {"Exp", {gradExp, {}}},
      {"Log", {gradLog, {}}},
      {"Pow", {gradPow, {}}},
      {"Tanh", {gradTanh, {}}},
      {"Sin", {gradSin, {}}},
      {"Cos", {gradCos, {}}},
      {"Sigmoid", {gradSigmoid, {}}},
      {"Erf", {gradErf, {}}},
      {"Identity", {gradIdentity, {}}},
      {"Cast", {gradCast, {}}},
      // matmul.cpp
      {"Gemm", {gradGemm, {}}},
      {"MatMul", {gradMatMul, {}}},
      // shape.cpp
      {"Reshape", {gradReshapeLike, {1}}},
      {"Flatten", {gradReshapeLike, {}}},
      {"Squeeze", {gradReshapeLike, {1}}},
      {"Unsqueeze", {gradReshapeLike, {1}}},
      {"Transpose", {gradTranspose, {}}},
      {"Concat", {gradConcat, {}}},
      {"Trilu", {gradTrilu, {1}}},
      // softmax.cpp
      {"Softmax", {gradSoftmax, {}}},
      {"LogSoftmax", {gradLogSoftmax, {}}},
      // loss.cpp
      {"SoftmaxCrossEntropyLoss", {gradSoftmaxCrossEntropyLoss, {1, 2}}},
      {"NegativeLogLikelihoodLoss", {gradNegativeLogLikelihoodLoss, {1, 2}}},
      // reduce.cpp
      {"ReduceSum", {gradReduceSum, {1}}},
      {"ReduceMean", {gradReduceMean, {1}}},
      {"CumSum", {gradCumSum, {1}}},
      // conv.cpp, pool.cpp, batch_norm.cpp: running mean/var (inputs 3, 4)
      // are state updated by the forward, never trained.
      {"Conv", {gradConv, {}}},
      {"ConvTranspose", {gradConvTranspose, {}}},
      {"MaxPool", {gradMaxPool, {}}},
      {"AveragePool", {gradAveragePool, {}}},
      {"GlobalAveragePool", {gradGlobalAveragePool, {}}},
      {"BatchNormalization", {gradBatchNormalization, {3, 4}}},
      // transformer.cpp
      {"LayerNormalization", {gradLayerNormalization, {}}},
      {"Gather", {gradGather, {1}}},
      {"Slice", {gradSlice, {1, 2, 3, 4}}},
      {"Split", {gradSplit, {1}}},
      {"Where", {gradWhere, {0}}},
      {"Expand", {gradExpand, {1}}},
      {"Gelu", {gradGelu, {}}},
      {"LeakyRelu", {gradLeakyRelu, {}}},
      {"Clip", {gradClip, {1, 2}}},
      {"Max", {gradMaxMin, {}}},
      {"Min", {gradMaxMin, {}}},
      {"Sum", {gradSum, {}}},
      {"ReduceMax", {gradReduceMax, {1}}},
      {"CastLike", {gradCastLike, {1}}},
      {"Dropout", {gradDropout, {1, 2}}},
      // gather_elements.cpp
      {"GatherElements", {gradGatherElements, {1}}},
      // scatter_nd.cpp
      {"GatherND", {gradGatherND, {1}}},
      {"ScatterND", {gradScatterND, {1}}},
      {"ScatterElements", {gradScatterElements, {1}}},
      // topk.cpp: the values' gradient; K and the indices take none.
      // ArgMax and ArgMin have only an int64 output, so no gradient reaches
      // them.
      {"TopK", {gradTopK, {1}}},
      // Random draws: the output does not depend on the input's values
      // (its shape, or Bernoulli's probabilities through a step function),
      // so no gradient flows back through them, as in PyTorch.
      {"RandomUniformLike", {nullptr, {0}}},
      {"RandomNormalLike", {nullptr, {0}}},
      {"Bernoulli", {nullptr, {0}}},
      // Step functions: their derivative is 0 wherever it exists, and
      // PyTorch's floor, ceil and round pass a zero gradient.
      {"Floor", {nullptr, {0}}},
      {"Ceil", {nullptr, {0}}},
      {"Round", {nullptr, {0}}},
      {"Sign", {nullptr, {0}}},
  };
  return table;
}

/// mpc ops that appear before autodiff: what fuse-rmsnorm makes of the RMS
/// normalisation arithmetic, and what fuse-gelu makes of the GELU
/// arithmetic of opset < 20 exports.
const std::unordered_map<std::string, GradientRuleInfo> &mpcRuleTable() {
  static const std::unordered_map<std::string, GradientRuleInfo> table = {
      {"Gelu", {gradGelu, {}}},
      {"GeluTanh", {gradGelu, {}}},
      // fuse-rmsnorm's (passes/fuse_rmsnorm.cpp)
      {"RMSNormalization", {gradRMSNormalization, {}}},
      // fuse-log-sigmoid's (passes/fuse_log_sigmoid.cpp)
      {"LogSigmoid", {gradLogSigmoid, {}}},
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
