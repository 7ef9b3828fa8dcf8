// ONNX's OneHot (F.one_hot's export), lowered at import to comparisons and
// a selection, which mpc has kernels for on both backends:
//
//   y = Where(Equal(u, r), on, Where(Equal(u, r - depth), on, off))
//
// with u the indices unsqueezed at `axis`, r the constant 0..depth-1 laid
// along that axis, and off, on = values[0], values[1]. The second Equal
// takes ONNX's negative indices (-depth..-1) without integer arithmetic
// at run time; indices out of range give a row of `off`. Floating indices
// are cast to int64 first, as ONNX specifies. depth must be computable at
// import (import_constants.h).
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a OneHot node whose input types are known, in a graph of a
/// model that imports `opset`, by its lowering; returns the nodes it
/// inserted, in order.
std::vector<Node *> lowerOneHot(Graph &g, Node *n, int64_t opset);

} // namespace mpc
