// ONNX's reductions that mpc has no kernel for, lowered at import to
// ReduceSum and ReduceMax, which it has kernels and gradients for:
//
//   ReduceSumSquare(x) = ReduceSum(Pow(x, 2))
//   ReduceL1(x)        = ReduceSum(Abs(x))
//   ReduceL2(x)        = Where(s > 0, Sqrt(Where(s > 0, s, 1)), 0),
//                        s = ReduceSumSquare(x)
//   ReduceLogSum(x)    = Log(ReduceSum(x))
//   ReduceLogSumExp(x) = Log(ReduceSum(Exp(x - m))) + m,  m = ReduceMax(x)
//   ReduceMin(x)       = -ReduceMax(-x)
//
// each with the node's axes, keepdims and noop_with_empty_axes, in the
// form each target takes at the model's opset (axes an attribute before
// opset 13 for ReduceSum and 18 for ReduceMax, an input from then on). The
// squares are a Pow, which autocast keeps in fp32 like the reductions
// themselves, so an fp16 input's squares cannot overflow. ReduceL2's Wheres
// keep its value 0 at 0 and its gradient there 0, not NaN (the gradient of
// F.normalize of a zero vector, whose export clips the norm). These are what
// F.normalize and torch.norm, torch.logsumexp and torch.amin export as.
#pragma once

#include "ir/graph.h"

#include <string>
#include <vector>

namespace mpc {

/// Replaces n, one of the reductions above whose input types are known, in
/// a graph of a model that imports `opset`, by its lowering; returns the
/// nodes it inserted, in order.
std::vector<Node *> lowerReduction(Graph &g, Node *n, int64_t opset);

} // namespace mpc
