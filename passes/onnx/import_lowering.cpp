// The importer's lowerings, typed in order (import_lowering.h).
#include "passes/onnx/import_lowering.h"

#include "passes/onnx/activation_lowering.h"
#include "passes/onnx/depth_space_lowering.h"
#include "passes/onnx/einsum_lowering.h"
#include "passes/onnx/instance_norm_lowering.h"
#include "passes/onnx/reduce_lowering.h"
#include "passes/onnx/resize_lowering.h"
#include "passes/shape_inference.h"

#include <algorithm>
#include <vector>

namespace mpc {

bool isLoweredAtImport(const std::string &domain, const std::string &op) {
  return (domain.empty() || domain == "ai.onnx") &&
         (op == "InstanceNormalization" || op == "Resize" ||
          op == "DepthToSpace" || op == "SpaceToDepth" || op == "Einsum" ||
          isLoweredActivation(op) || isLoweredReduction(op));
}

std::vector<std::string> opsLoweredAtImport() {
  std::vector<std::string> ops = {"Celu",
                                  "Einsum",
                                  "DepthToSpace",
                                  "Elu",
                                  "HardSigmoid",
                                  "HardSwish",
                                  "InstanceNormalization",
                                  "PRelu",
                                  "ReduceL1",
                                  "ReduceL2",
                                  "ReduceLogSum",
                                  "ReduceLogSumExp",
                                  "ReduceMin",
                                  "ReduceSumSquare",
                                  "Resize",
                                  "Selu",
                                  "Softplus",
                                  "Softsign",
                                  "SpaceToDepth"};
  std::sort(ops.begin(), ops.end());
  return ops;
}

int lowerAtImport(Graph &g, int64_t opset) {
  std::vector<Node *> order = g.nodeList();
  bool any = false;
  for (const Node *n : order)
    any |= isLoweredAtImport(n->domain(), n->opType());
  if (!any)
    return 0;
  int lowered = 0;
  for (Node *n : order) {
    if (isLoweredAtImport(n->domain(), n->opType())) {
      std::vector<Node *> made;
      if (n->opType() == "InstanceNormalization")
        made = lowerInstanceNormalization(g, n, opset);
      else if (n->opType() == "Resize")
        made = lowerResize(g, n, opset);
      else if (n->opType() == "Einsum")
        made = lowerEinsum(g, n, opset);
      else if (n->opType() == "DepthToSpace" || n->opType() == "SpaceToDepth")
        made = lowerDepthSpace(g, n);
      else if (isLoweredReduction(n->opType()))
        made = lowerReduction(g, n, opset);
      else
        made = lowerActivation(g, n, opset);
      for (Node *m : made)
        inferNode(*m, opset);
      ++lowered;
    } else if (isSupportedOp(n->domain(), n->opType())) {
      inferNode(*n, opset);
    }
  }
  return lowered;
}

} // namespace mpc
