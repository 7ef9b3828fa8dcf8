// ONNX's Pad lowered at import, one padded axis at a time, to ops mpc has
// kernels and gradients for:
//
//   constant: Concat(Expand(value, block), x, Expand(value, block), axis),
//             a Slice first where a pad is negative (a crop); the value
//             blocks are broadcasts of one scalar, never a large constant,
//             and the gradient is Concat's (slices of dY);
//   reflect, edge, wrap: Gather(x, src, axis), src[j] the source index of
//             output position j (mirrored without repeating the border,
//             clamped, or modulo the length), computed here; the gradient
//             is GatherGrad's scatter-add.
//
// This is what F.pad and the padding of torchvision's Swin export
// (constant), and what reflection/replication padding layers export. pads
// (and axes, opset 18+; constant_value) must be computable at import
// (import_constants.h); reflect, edge and wrap need the padded axes' dims
// at compile time, constant mode only the rank. Opsets before 11 take pads
// and value as attributes.
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a Pad node whose input types are known, in a graph of a
/// model that imports `opset`, by its lowering; returns the nodes it
/// inserted, in order.
std::vector<Node *> lowerPad(Graph &g, Node *n, int64_t opset);

} // namespace mpc
