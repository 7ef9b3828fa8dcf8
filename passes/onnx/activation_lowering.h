// ONNX's activations that mpc has no kernel for, lowered at import to the
// ops it trains (their kernels, gradients and autocast policies):
//
//   HardSigmoid<alpha, beta>(x) = Clip(alpha * x + beta, 0, 1)
//   HardSwish(x)                = x * HardSigmoid<1/6, 1/2>(x)
//   Elu<alpha>(x)               = Where(x > 0, x, alpha * (Exp(Min(x, 0)) - 1))
//   Selu<alpha, gamma>(x)       = gamma * Elu<alpha>(x)
//   Celu<alpha>(x)              = Where(x > 0, x, alpha * (Exp(Min(x, 0) /
//   alpha) - 1)) Softplus(x)                 = Relu(x) + Log(1 + Exp(-|x|))
//   Softsign(x)                 = x / (1 + |x|)
//   PRelu(x, slope)             = Relu(x) + slope * Min(x, 0)
//   Reciprocal(x)               = 1 / x
//
// with |x| = Max(x, -x), whose gradient at 0 is 0 as PyTorch's is. Exp
// reads Min(x, 0) and -|x|, never a large positive value, so neither the
// unselected branch of a Where nor its gradient overflows. These are what
// torch.nn's Hardsigmoid, Hardswish, ELU, SELU, CELU, Softplus (and Mish,
// x * tanh(softplus(x))), Softsign and PReLU export as; the dynamo exporter
// writes torch.rsqrt as Reciprocal(Sqrt(x)). The constants take
// x's element type, which the importer has inferred by then; the lowered
// nodes are named after the node and its output keeps its name.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace mpc {

/// Replaces n, one of the activations above whose input types are known,
/// in a graph of a model that imports `opset`, by its lowering; returns the
/// nodes it inserted, in order.
std::vector<Node *> lowerActivation(Graph &g, Node *n, int64_t opset);

} // namespace mpc
