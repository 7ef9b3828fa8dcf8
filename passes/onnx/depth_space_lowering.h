// ONNX's DepthToSpace and SpaceToDepth (torch's pixel_shuffle and
// pixel_unshuffle), lowered at import to Reshape, Transpose, Reshape, which
// mpc has kernels and gradients for. For X [N, C, H, W] and block b:
//
//   DepthToSpace DCR: Reshape [N, b, b, C/b^2, H, W], Transpose
//                     [0, 3, 4, 1, 5, 2], Reshape [N, C/b^2, H*b, W*b]
//   DepthToSpace CRD: Reshape [N, C/b^2, b, b, H, W], Transpose
//                     [0, 1, 4, 2, 5, 3], Reshape [N, C/b^2, H*b, W*b]
//   SpaceToDepth:     Reshape [N, C, H/b, b, W/b, b], Transpose
//                     [0, 3, 5, 1, 2, 4], Reshape [N, C*b^2, H/b, W/b]
//
// as ONNX defines them. C, H and W must be known at import; N may be
// symbolic (the Reshapes copy it with a 0).
#pragma once

#include "ir/graph.h"

#include <vector>

namespace mpc {

/// Replaces n, a DepthToSpace or SpaceToDepth node whose input type is
/// known, by its lowering; returns the nodes it inserted, in order.
std::vector<Node *> lowerDepthSpace(Graph &g, Node *n);

} // namespace mpc
