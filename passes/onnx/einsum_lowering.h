// ONNX's Einsum, lowered at import to ReduceSum, Transpose, Reshape and
// MatMul, which mpc has kernels, gradients and autocast policies for (the
// products run in fp16 under autocast, as PyTorch's einsum runs bmm).
//
// The operands are contracted left to right. For A and B: indices only one
// of them has and nothing later needs are summed out first (ReduceSum);
// then the indices both have split into batch (still needed: by the output
// or a later operand) and contracted (not needed), A is laid out [batch,
// A's own, contracted] and B [batch, contracted, B's own], each reshaped
// to 3-D, multiplied by one batched MatMul and reshaped back. The last
// result sums out what the output does not have and is transposed into the
// output's order. Transposes and Reshapes that would change nothing are
// left out.
//
// Taken: explicit and implicit outputs (implicit: the indices that occur
// once, in alphabetical order, after the ellipsis), "..." standing for the
// same number of dims in every operand, any number of operands. Refused,
// naming the node: an index repeated within one operand (a diagonal), an
// index whose sizes differ between operands, operand dims unknown at
// import.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, an Einsum node whose input types are known, in a graph of a
/// model that imports `opset`, by its lowering; returns the nodes it
/// inserted, in order.
std::vector<Node *> lowerEinsum(Graph &g, Node *n, int64_t opset);

} // namespace mpc
