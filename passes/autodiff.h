// Reverse-mode differentiation of one scalar value, as a library call.
//
// The autodiff pass (passes/autodiff.cpp) differentiates the loss w.r.t. the
// trainable parameters; ONNX's Gradient operator (passes/onnx/gradient_op.h)
// differentiates any scalar w.r.t. any values. Both build the backward the
// same way, through buildBackward. The graph must be typed (infer-shapes):
// gradient rules read static ranks and shapes.
#pragma once

#include "passes/pass.h"

#include <string>
#include <unordered_set>
#include <vector>

namespace mpc {

/// What buildBackward added to the graph.
struct Backward {
  Value *loss = nullptr; ///< the differentiated value (after preparation)
  Value *seed = nullptr; ///< the dLoss = 1 initializer
  /// dLoss/dx per requested x (same order); nullptr where x does not reach
  /// the loss. Shared values are possible (an Add chain's operands).
  std::vector<Value *> grads;
  /// The requested values, looked up again after forward preparation.
  std::vector<Value *> xs;
  /// The nodes that existed before the backward was built.
  std::unordered_set<const Node *> forwardNodes;
  size_t nodesBefore = 0;
};

/// Appends the backward of the scalar `lossName` w.r.t. the values `xNames`
/// to g: checks the loss is a typed scalar float and every node on a path
/// has a gradient rule (errors name the node), seeds with 1 and runs the
/// rules in reverse order.
Backward buildBackward(Graph &g, const std::string &lossName,
                       const std::vector<std::string> &xNames, int64_t opset,
                       Statistics &stats);

} // namespace mpc
