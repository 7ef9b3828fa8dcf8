// Helpers the gradient rules of several op categories share: the forward
// node's name hint and normalised axis, a forward node given the optional
// outputs its backward reads (normalization.cpp, random.cpp), and the common
// tail of the unary rules (elementwise.cpp, activation.cpp).
#pragma once

#include "passes/gradients/gradient_rules.h"

#include <string>
#include <vector>

namespace mpc {

/// The name GradientContext gives backward nodes a prefix from.
std::string nodeHint(const Node &n);

/// The forward node with outputs 0..count-1 all present: appended when the
/// node's existing slots are all filled, else the node is replaced by one
/// that has them (outputs cannot be added in the middle), keeping the names
/// of the outputs it had. New outputs are named "<node>_<suffix>".
Node *withOutputs(Graph &g, Node *node, int64_t opset, size_t count,
                  const std::vector<std::string> &suffixes);

/// The forward's axis attribute normalised against x's rank.
int64_t normalizedAxis(GradientContext &ctx, const Value &x, int64_t dflt);

/// dY * (d output / d input 0) for unary ops where that derivative is
/// `deriv`: the common tail of the unary rules.
void setUnaryGrad(GradientContext &ctx, Value *deriv);

} // namespace mpc
