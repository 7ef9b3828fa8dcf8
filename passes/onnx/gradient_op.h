// ONNX's Gradient operator (ai.onnx.preview.training, opset 1), expanded.
//
// Gradient(xs..., zs...) <xs, zs, y> -> (dy/dxs...) names a differentiated
// subgraph by its tensors: y is a function of xs (differentiated) and zs (held
// constant). mpc has no Gradient kernel: the importer replaces each Gradient
// node by the backward subgraph autodiff builds for y (passes/autodiff.h), so
// every later pass and the runtime see ordinary ops. Forms mpc does not
// support are a one-line error naming the node.
#pragma once

#include "ir/graph.h"
#include "ir/mpc_ops.h"

#include <string>
#include <vector>

namespace mpc {

/// True for a Gradient node of ai.onnx.preview.training.
bool isGradientOp(const Node &n);
/// The graph's Gradient nodes, in order.
std::vector<Node *> gradientOps(const Graph &g);

/// A Gradient node's attributes after validation.
struct GradientOpSpec {
  std::string y;
  std::vector<std::string> xs, zs;
};

/// Reads and checks a Gradient node: xs and y given, its inputs are exactly
/// the tensors xs then zs name (evaluating at other values is not
/// supported), at most one output per xs. Errors name the node.
GradientOpSpec readGradientOp(const Node &n);

/// Types the graph for differentiation before any Gradient is expanded:
/// every supported node is inferred in order, and a Gradient's outputs are
/// typed like its xs (so what reads them is typed too).
void typeGraphWithGradientOps(Graph &g, int64_t opset);

/// Replaces every Gradient node of g by its backward subgraph; the outputs
/// keep their names (Identity of the gradient; zeros where an x does not
/// reach y). y must be a scalar float. Returns the number expanded.
int expandGradientOps(Graph &g, int64_t opset);

} // namespace mpc
